// Shape: a small inline vector of dimension sizes (or strides), no heap allocation.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "rosetta/core/check.h"
#include "rosetta/core/lifetime.h"

namespace rosetta {

class Shape {
 public:
  static constexpr int kMaxDims = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.begin(), dims.end()); }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t& operator[](int i) { return d_[i]; }
  int64_t operator[](int i) const { return d_[i]; }
  // Negative indices count from the back: back(-1) is the last dimension.
  int64_t back(int i = -1) const { return d_[n_ + i]; }
  const int64_t* begin() const ROSETTA_LIFETIMEBOUND { return d_.data(); }
  const int64_t* end() const ROSETTA_LIFETIMEBOUND { return d_.data() + n_; }
  int64_t* begin() ROSETTA_LIFETIMEBOUND { return d_.data(); }
  int64_t* end() ROSETTA_LIFETIMEBOUND { return d_.data() + n_; }

  void push_back(int64_t v) {
    ROSETTA_CHECK(n_ < kMaxDims, "Shape: more than ", kMaxDims, " dimensions");
    d_[n_++] = v;
  }
  void insert(int pos, int64_t v);
  void erase(int pos);
  void resize(int n, int64_t fill = 1);
  Shape resize_copy(int n, int64_t fill = 1) const {
    Shape s = *this;
    s.resize(n, fill);
    return s;
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < n_; ++i) n *= d_[i];
    return n;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  std::string str() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.n_ != b.n_) return false;
    for (int i = 0; i < a.n_; ++i)
      if (a.d_[i] != b.d_[i]) return false;
    return true;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.str(); }

 private:
  template <class It>
  void assign(It b, It e) {
    for (; b != e; ++b) push_back(*b);
  }
  std::array<int64_t, kMaxDims> d_{};
  int n_ = 0;
};

// Row-major (C-contiguous) strides of a shape.
Shape contiguous_strides(const Shape& shape);
// NumPy broadcasting of two shapes; throws with both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Normalises a possibly negative axis against `ndim`; throws when out of range.
int normalize_axis(int axis, int ndim);

}  // namespace rosetta
