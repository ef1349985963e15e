#include "rosetta/autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "rosetta/core/ops.h"

namespace rosetta {

namespace {
// L = mean((y + 1)^2), computed without autograd.
double objective(const Tensor& y) {
  const Tensor t = affine(y, 1, 1);
  return mean_all(mul(t, t)).item();
}
}  // namespace

GradcheckResult gradcheck(const std::function<Var(const std::vector<Var>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  std::vector<Tensor> base;
  for (const Tensor& t : inputs) base.push_back(t.to(DType::f64).clone());

  // Analytic: backward with upstream dL/dy = 2 (y + 1) / n.
  std::vector<Var> vars;
  for (const Tensor& t : base) vars.emplace_back(t.clone(), true);
  const Var y = f(vars);
  ROSETTA_CHECK(y.dtype() == DType::f64, "gradcheck: f must compute in float64");
  y.backward(affine(y.data(), 2.0 / double(std::max<int64_t>(y.numel(), 1)),
                    2.0 / double(std::max<int64_t>(y.numel(), 1))));

  GradcheckResult res;
  for (size_t k = 0; k < base.size(); ++k) {
    const Tensor analytic = vars[k].grad().defined() ? vars[k].grad()
                                                     : Tensor::zeros(base[k].shape(), DType::f64);
    const auto a = analytic.to_vector<double>();
    double* p = base[k].data<double>();
    for (int64_t i = 0; i < base[k].numel(); ++i) {
      const double orig = p[i];
      auto eval = [&](double v) {
        p[i] = v;
        std::vector<Var> in;
        for (const Tensor& t : base) in.emplace_back(t.clone(), false);
        NoGradGuard ng;
        return objective(f(in).data());
      };
      const double numeric = (eval(orig + opt.eps) - eval(orig - opt.eps)) / (2 * opt.eps);
      p[i] = orig;
      const double err = std::abs(a[i] - numeric) / (opt.atol + opt.rtol * std::abs(numeric));
      if (!(err <= res.worst) || std::isnan(err)) {
        res.worst = std::isnan(err) ? INFINITY : err;
        std::ostringstream os;
        os << "input " << k << " " << base[k].shape() << " element " << i << ": analytic "
           << a[i] << ", numeric " << numeric;
        res.message = os.str();
      }
    }
  }
  res.ok = res.worst <= 1.0;
  return res;
}

}  // namespace rosetta
