// Internal: iteration over strided N-d views. Each operand is (pointer, strides) over a common
// shape; the innermost axis runs as a tight loop, outer rows are split across OpenMP threads
// when the view is large.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "rosetta/core/shape.h"

namespace rosetta::detail {

// Element count above which elementwise loops go parallel (~100 us of single-thread work).
// Every parallel region ends in a barrier: ~2 us on an idle machine, but when another process
// holds a core a barrier can wait for a whole scheduler slice, so small ops stay serial.
constexpr int64_t kParallelGrain = 1 << 18;

// Calls row(r, offsets, inner_strides, inner) for each row of `shape` (all axes but the last),
// where offsets[k] is the element offset of the row's first element in operand k.
template <int N, class RowFn>
void for_each_row(const Shape& shape, const std::array<const Shape*, N>& strides, RowFn&& row) {
  const int nd = shape.size();
  std::array<int64_t, N> inner_st{};
  if (nd == 0) {
    std::array<int64_t, N> off{};
    row(off, inner_st, int64_t(1));
    return;
  }
  const int64_t numel = shape.numel();
  if (numel == 0) return;
  const int64_t inner = shape[nd - 1];
  const int64_t rows = numel / inner;
  for (int k = 0; k < N; ++k) inner_st[k] = (*strides[k])[nd - 1];
  auto do_row = [&](int64_t r) {
    std::array<int64_t, N> off{};
    int64_t rem = r;
    for (int d = nd - 2; d >= 0; --d) {
      const int64_t i = rem % shape[d];
      rem /= shape[d];
      for (int k = 0; k < N; ++k) off[k] += i * (*strides[k])[d];
    }
    row(off, inner_st, inner);
  };
  if (numel >= kParallelGrain && rows > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) do_row(r);
  } else {
    for (int64_t r = 0; r < rows; ++r) do_row(r);
  }
}

template <class A, class F>
void for_each_strided1(const Shape& shape, A* a, const Shape& sa, F&& f) {
  for_each_row<1>(shape, {&sa}, [&](auto off, auto st, int64_t n) {
    A* pa = a + off[0];
    for (int64_t j = 0; j < n; ++j) f(pa + j * st[0]);
  });
}

template <class A, class B, class F>
void for_each_strided2(const Shape& shape, A* a, const Shape& sa, B* b, const Shape& sb, F&& f) {
  for_each_row<2>(shape, {&sa, &sb}, [&](auto off, auto st, int64_t n) {
    A* pa = a + off[0];
    B* pb = b + off[1];
    for (int64_t j = 0; j < n; ++j) f(pa + j * st[0], pb + j * st[1]);
  });
}

template <class A, class B, class C, class F>
void for_each_strided3(const Shape& shape, A* a, const Shape& sa, B* b, const Shape& sb, C* c,
                       const Shape& sc, F&& f) {
  for_each_row<3>(shape, {&sa, &sb, &sc}, [&](auto off, auto st, int64_t n) {
    A* pa = a + off[0];
    B* pb = b + off[1];
    C* pc = c + off[2];
    for (int64_t j = 0; j < n; ++j) f(pa + j * st[0], pb + j * st[1], pc + j * st[2]);
  });
}

template <class A, class B, class C, class D, class F>
void for_each_strided4(const Shape& shape, A* a, const Shape& sa, B* b, const Shape& sb, C* c,
                       const Shape& sc, D* d, const Shape& sd, F&& f) {
  for_each_row<4>(shape, {&sa, &sb, &sc, &sd}, [&](auto off, auto st, int64_t n) {
    A* pa = a + off[0];
    B* pb = b + off[1];
    C* pc = c + off[2];
    D* pd = d + off[3];
    for (int64_t j = 0; j < n; ++j) f(pa + j * st[0], pb + j * st[1], pc + j * st[2], pd + j * st[3]);
  });
}

}  // namespace rosetta::detail

#include <type_traits>

namespace rosetta::detail {

// Runs f(begin, end) over [0, n) split into one contiguous chunk per OpenMP thread when n is
// at least `grain`, otherwise inline on the calling thread (also inside a parallel region, such
// as a replica's thread: see train/replicas.h). A functor taking a third argument also gets the
// chunk's slot in [0, omp_get_max_threads()), for per-chunk scratch; omp_get_thread_num() is
// no such index, since inline on a replica's thread it is that thread's number.
template <class F>
void parallel_for(int64_t n, F&& f, int64_t grain = kParallelGrain) {
  auto call = [&f](int64_t b, int64_t e, int slot) {
    if constexpr (std::is_invocable_v<F&, int64_t, int64_t, int>) f(b, e, slot);
    else f(b, e);
  };
  if (n < grain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    call(int64_t(0), n, 0);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t b = n * t / nt, e = n * (t + 1) / nt;
    if (b < e) call(b, e, int(t));
  }
}

// Same, for loops over rows that each cost `cost_per_row` elements of work.
template <class F>
void parallel_rows(int64_t rows, int64_t cost_per_row, F&& f) {
  parallel_for(rows, f, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(cost_per_row, 1)));
}

}  // namespace rosetta::detail

#include <vector>

namespace rosetta::detail {

// For the naive references: visits every index of `shape` in row-major order.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t n = 0; n < shape.numel(); ++n) {
    f(idx);
    for (int d = shape.size() - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// The index into a tensor of shape `s` that is broadcast to the shape `idx` indexes.
inline std::vector<int64_t> bcast_index(const std::vector<int64_t>& idx, const Shape& s) {
  std::vector<int64_t> r(s.size());
  const size_t lead = idx.size() - s.size();
  for (int d = 0; d < s.size(); ++d) r[d] = s[d] == 1 ? 0 : idx[lead + d];
  return r;
}

}  // namespace rosetta::detail
