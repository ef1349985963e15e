// The finite-difference check of the autograd tests (test_gradcheck.cpp,
// test_gradcheck_fused.cpp): in float64, with the non-uniform upstream gradient of
// L = mean((y + 1)^2). Tolerances: atol 1e-7, rtol 1e-5 unless noted. Each check runs both ways:
// leaves with gradients of their own (fresh tensors, beta 0), and leaves bound to a flat gradient
// buffer holding nonzero values (written in place, beta 1); each also backward twice through a
// retained graph (see gradcheck.h).
#pragma once

#include <functional>
#include <vector>

#include "rosetta/autograd/autograd.h"
#include "support.h"

namespace {

using namespace rosetta;

// One generator for the inputs of all checks of a test program.
Generator gen(2024);

inline Tensor randn(const Shape& s, double mean = 0, double std = 1) {
  return gen.normal(s, mean, std, DType::f64);
}
inline Tensor positive(const Shape& s) { return gen.uniform(s, 0.5, 2.0, DType::f64); }

inline void check(const std::function<Var(const std::vector<Var>&)>& f, const std::vector<Tensor>& in,
                  GradcheckOptions opt = {}) {
  // Gradients of their own, then bound buffers added to, then stale buffers written over.
  for (int mode = 0; mode < 3; ++mode) {
    const GradcheckResult r = gradcheck(f, in, opt.grad_buffers(mode > 0).stale_buffers(mode == 2));
    INFO(r.message << " (worst " << r.worst << ")");
    REQUIRE(r.ok);
  }
}

}  // namespace
