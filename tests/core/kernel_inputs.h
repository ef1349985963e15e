// Inputs for the kernel tests against their naive references (test_kernels.cpp,
// test_nn_kernels.cpp): random shapes, and each input in several layouts.
#pragma once

#include <vector>

#include "support.h"

namespace rosetta::test {

// Random shapes of 1-4 dims with sizes 1..7, plus one large shape to cross the OpenMP grain.
inline std::vector<Shape> random_shapes(Generator& g, int n) {
  std::vector<Shape> out;
  for (int i = 0; i < n; ++i) {
    Shape s;
    const int nd = 1 + int(g.next_below(4));
    for (int d = 0; d < nd; ++d) s.push_back(1 + int64_t(g.next_below(7)));
    out.push_back(s);
  }
  out.push_back(Shape{70, 600});
  return out;
}

// Input variants: contiguous, strided slice, and (for >= 2-D) a transposed layout.
inline std::vector<Tensor> layouts(const Tensor& t) {
  std::vector<Tensor> v{t, non_contiguous(t)};
  if (t.dim() >= 2) v.push_back(transposed_layout(t));
  return v;
}

}  // namespace rosetta::test
