// Internal: how backward kernels write a gradient into a GradOut (out = beta * out + gradient).
#pragma once

#include <type_traits>

#include "rosetta/core/ops.h"

namespace rosetta::detail {

inline void check_grad_out(const GradOut& dst, const Shape& shape, DType dtype, const char* op) {
  ROSETTA_CHECK(dst.out.shape() == shape && dst.out.dtype() == dtype && dst.out.is_contiguous(), op,
                ": gradient destination ", dst.out.shape(), " ", dtype_name(dst.out.dtype()),
                " must be a contiguous ", shape, " ", dtype_name(dtype));
}

// Calls f(std::bool_constant<(beta != 0)>): a kernel's loops then read `out` only when they add
// to it (with beta 0 it may hold garbage, even NaN, and 0 * NaN is NaN).
template <class F>
decltype(auto) with_beta(double beta, F&& f) {
  if (beta == 0) return f(std::false_type{});
  return f(std::true_type{});
}

// out <- r, or beta * out + r. With beta 1 this is out + r rounded as if r had been written to a
// temporary and added (add_): the same bits as before kernels wrote in place. `r + 0` keeps GCC
// from fusing the last multiply of r with the addition (an FMA rounds once, a temporary twice):
// without -ffast-math it cannot drop the + 0 (-0 + 0 is +0), so the product it fuses is r's own.
template <bool Acc, class T>
inline void put(T& out, T beta, T r) {
  if constexpr (Acc) out = beta * out + (r + T(0));
  else out = r;
}

// For a gradient computed at the broadcast shape `full` but wanted at dst's (an operand that was
// broadcast in the forward pass): write(GradOut) gets dst itself when the shapes agree, else a
// temporary of shape `full`, which is then summed into dst.
template <class W>
void write_reduced(const GradOut& dst, const Shape& full, W&& write) {
  if (dst.out.shape() == full) return write(dst);
  const GradOut whole{Tensor::empty(full, dst.out.dtype()), 0.0};
  write(whole);
  expand_backward(whole.out, dst);
}

}  // namespace rosetta::detail
