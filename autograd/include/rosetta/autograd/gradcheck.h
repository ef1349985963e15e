// gradcheck: compares analytic gradients with central finite differences in float64.
//
// The checked scalar is L = mean((f(x) + 1)^2), so the upstream gradient reaching f is
// 2 (f(x) + 1) / n: non-uniform, unlike a plain sum. Backward runs twice through the graph
// (retained, then released), and each pass's contribution is checked: the second one adds to
// the gradients the first left, so a backward that overwrites its destination fails.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "rosetta/autograd/var.h"
#include "rosetta/core/lifetime.h"

namespace rosetta {

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step
  double atol = 1e-7;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-5;
  // Bind the leaves' gradients to slices of one flat buffer, as an optimizer does, filled with
  // nonzero values beforehand: the ops then add into the buffers in place (beta 1), and a
  // gradient that overwrites or drops what a buffer held shows.
  bool buffers = false;
  // With buffers: NaN in them instead, counted as zero (Var::zero_grad_lazily), so the first
  // backward must write over them (a gradient added to what they held shows as NaN).
  bool stale = false;
  ROSETTA_SETTER(GradcheckOptions, step, double, eps)
  ROSETTA_SETTER(GradcheckOptions, abs_tol, double, atol)
  ROSETTA_SETTER(GradcheckOptions, rel_tol, double, rtol)
  ROSETTA_SETTER(GradcheckOptions, grad_buffers, bool, buffers)
  ROSETTA_SETTER(GradcheckOptions, stale_buffers, bool, stale)
};

struct GradcheckResult {
  bool ok = true;
  double worst = 0;     // largest |error| / (atol + rtol |numeric|): ok when <= 1
  std::string message;  // where the worst element is, with both values
};

// f maps the inputs (float64 leaves requiring a gradient) to an output; it must be
// deterministic. Inputs are converted to float64.
GradcheckResult gradcheck(const std::function<Var(const std::vector<Var>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opt = {});

}  // namespace rosetta
