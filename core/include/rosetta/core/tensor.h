// Tensor: a strided view (shape, strides, offset, dtype) onto shared Storage.
//
// Copying a Tensor copies the view, not the data: views made by view/transpose/narrow/expand
// share storage with their source. Element types: f32 (training), f64 (gradient checks),
// i32 (token ids). The core knows nothing of gradients: see autograd/ for that.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rosetta/core/check.h"
#include "rosetta/core/lifetime.h"
#include "rosetta/core/shape.h"
#include "rosetta/core/storage.h"

namespace rosetta {

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor: defined() is false

  // --- creation (contiguous, freshly allocated) ---
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  // A fresh tensor of `shape` whose axes lie in memory in `order`, outermost first (as
  // torch.empty_permuted): order {0, 2, 1, 3} of a [B, H, T, D] shape stores it as
  // [B, T, H, D], so that permute({0, 2, 1, 3}) of the result is contiguous.
  static Tensor empty_permuted(const Shape& shape, const std::vector<int>& order,
                               DType dtype = DType::f32);
  // A fresh tensor shaped as `t`, its axes in t's memory order when t is dense (a permutation
  // of a contiguous layout, such as a transposed or permuted view), else contiguous.
  static Tensor empty_like(const Tensor& t);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor scalar(double value, DType dtype = DType::f32);
  // 0, 1, ..., n-1
  static Tensor arange(int64_t n, DType dtype = DType::f32);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{int64_t(values.size())});
  }

  // --- properties ---
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const ROSETTA_LIFETIMEBOUND { return shape_; }
  const Shape& strides() const ROSETTA_LIFETIMEBOUND { return strides_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  int dim() const { return shape_.size(); }
  int64_t size(int axis) const;  // negative axes count from the back
  int64_t numel() const { return shape_.numel(); }
  bool is_contiguous() const;
  // No gaps and no overlaps: a permutation of a contiguous layout (a transposed or permuted
  // view of a contiguous tensor), `order` receiving its axes from outermost to innermost.
  bool is_dense(std::vector<int>* order = nullptr) const;
  bool same_storage(const Tensor& o) const { return storage_ == o.storage_; }
  const std::shared_ptr<Storage>& storage() const ROSETTA_LIFETIMEBOUND { return storage_; }
  uint64_t version() const { return storage_ ? storage_->version() : 0; }
  uint64_t storage_id() const { return storage_ ? storage_->id() : 0; }  // Storage::id()
  void bump_version() const {
    if (storage_) storage_->bump_version();
  }

  // Pointer to the first element of the view (checked against the dtype).
  template <class T>
  T* data() const ROSETTA_LIFETIMEBOUND;

  // --- views (no copy) ---
  // Same elements, new shape; one dimension may be -1. Throws unless the view's memory layout
  // allows it (use reshape() to copy when needed).
  Tensor view(const Shape& shape) const;
  // view() when possible, otherwise a contiguous copy.
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int a, int b) const;
  Tensor permute(const std::vector<int>& order) const;
  // Elements [start, start+length) along `axis`.
  Tensor narrow(int axis, int64_t start, int64_t length) const;
  // Python-style slice [start, stop) with step > 0 along `axis`; negative bounds count back.
  Tensor slice(int axis, int64_t start, int64_t stop, int64_t step = 1) const;
  // Index `i` along `axis`, removing that axis.
  Tensor select(int axis, int64_t i) const;
  // Broadcast to `shape` (size-1 or missing leading dims become stride 0).
  Tensor expand(const Shape& shape) const;
  Tensor unsqueeze(int axis) const;
  Tensor squeeze(int axis) const;
  Tensor flatten() const { return reshape({numel()}); }

  // --- copies ---
  Tensor contiguous() const;  // this if already contiguous, else a packed copy
  Tensor clone() const;       // always a packed copy
  Tensor to(DType dtype) const;

  // --- in-place (bump the storage version) ---
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  // Copies src (broadcast to this shape, any dtype) into this view.
  Tensor& copy_(const Tensor& src) ROSETTA_LIFETIMEBOUND;

  // --- element access (slow; for tests and small tensors) ---
  double item() const;  // requires exactly one element
  double at(const std::vector<int64_t>& index) const;
  template <class T>
  std::vector<T> to_vector() const;
  std::string str() const;  // shape, dtype and (for small tensors) the values

 private:
  Tensor(std::shared_ptr<Storage> s, Shape shape, Shape strides, int64_t offset, DType dt)
      : storage_(std::move(s)), shape_(shape), strides_(strides), offset_(offset), dtype_(dt) {}
  Tensor with_view(const Shape& shape, const Shape& strides, int64_t offset) const {
    return Tensor(storage_, shape, strides, offset, dtype_);
  }

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;  // in elements
  int64_t offset_ = 0;  // in elements
  DType dtype_ = DType::f32;
};

template <class T>
T* Tensor::data() const ROSETTA_LIFETIMEBOUND {
  ROSETTA_CHECK(defined(), "data(): undefined tensor");
  ROSETTA_CHECK(dtype_ == dtype_of<T>(), "data(): tensor is ", dtype_name(dtype_), ", asked for ",
                dtype_name(dtype_of<T>()));
  return static_cast<T*>(storage_->data()) + offset_;
}

// Calls `fn` with a value of the floating type matching `dtype` (float or double), e.g.
//   dispatch_float(t.dtype(), [&](auto tag) { using T = decltype(tag); kernel<T>(...); });
template <class Fn>
decltype(auto) dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    default: ROSETTA_FAIL("expected a floating tensor (F32 or F64), got ", dtype_name(dtype));
  }
}

// Threads for OpenMP loops and OpenBLAS (one shared OpenMP pool). 0 leaves the default.
void set_num_threads(int n);
int get_num_threads();
// Threads that a large bf16 matrix product may use when it is called inside a parallel region
// on this thread, such as a model replica's (train/replicas.h): 1 by default. Needs nested
// OpenMP (omp_set_max_active_levels(2)); OpenBLAS's fp32 products stay on one thread there.
void set_nested_gemm_threads(int n);
int nested_gemm_threads();
// Which OpenBLAS kernel set is active, e.g. "Haswell" or "SkylakeX".
std::string blas_core_name();

}  // namespace rosetta
