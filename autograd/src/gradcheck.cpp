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

// Binds the leaves' gradients to one flat buffer filled with nonzero values; returns them. Stale:
// filled with NaN and counted as zero (nothing to return).
std::vector<Tensor> bind_buffers(std::vector<Var>& vars, bool stale) {
  int64_t total = 0;
  for (const Var& v : vars) total += v.numel();
  Tensor flat = Tensor::empty({total}, DType::f64);
  std::vector<Tensor> initial;
  int64_t at = 0;
  for (Var& v : vars) {
    v.bind_grad_buffer(flat.narrow(0, at, v.numel()).view(v.shape()));
    at += v.numel();
  }
  double* p = flat.data<double>();
  for (int64_t i = 0; i < total; ++i) p[i] = stale ? NAN : 0.75 - 0.25 * double(i % 7);  // never all zero
  for (const Var& v : vars) {
    if (stale) v.zero_grad_lazily();
    initial.push_back(stale ? Tensor() : v.grad().clone());
  }
  return initial;
}

// What backward has added to each leaf's gradient since `initial` (undefined: nothing yet).
std::vector<std::vector<double>> gradients(const std::vector<Var>& vars,
                                           const std::vector<Tensor>& initial) {
  std::vector<std::vector<double>> out;
  for (size_t k = 0; k < vars.size(); ++k) {
    const Tensor& g = vars[k].grad();
    Tensor added = g.defined() ? g : Tensor::zeros(vars[k].shape(), DType::f64);
    if (initial[k].defined()) added = sub(added, initial[k]);
    out.push_back(added.to_vector<double>());
  }
  return out;
}
}  // namespace

GradcheckResult gradcheck(const std::function<Var(const std::vector<Var>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  std::vector<Tensor> base;
  for (const Tensor& t : inputs) base.push_back(t.to(DType::f64).clone());

  // Analytic: backward with upstream dL/dy = 2 (y + 1) / n, twice; the second pass adds to the
  // first's gradients.
  std::vector<Var> vars;
  for (const Tensor& t : base) vars.emplace_back(t.clone(), true);
  std::vector<Tensor> initial(vars.size());
  if (opt.buffers) initial = bind_buffers(vars, opt.stale);
  const Var y = f(vars);
  ROSETTA_CHECK(y.dtype() == DType::f64, "gradcheck: f must compute in float64");
  const double scale = 2.0 / double(std::max<int64_t>(y.numel(), 1));
  const Tensor upstream = affine(y.data(), scale, scale);
  y.backward(upstream, /*retain_graph=*/true);
  const auto first = gradients(vars, initial);
  y.backward(upstream);
  auto second = gradients(vars, initial);
  for (size_t k = 0; k < vars.size(); ++k)
    for (size_t i = 0; i < second[k].size(); ++i) second[k][i] -= first[k][i];

  GradcheckResult res;
  for (size_t k = 0; k < base.size(); ++k) {
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
      for (int pass = 0; pass < 2; ++pass) {
        const double a = (pass == 0 ? first : second)[k][size_t(i)];
        const double err = std::abs(a - numeric) / (opt.atol + opt.rtol * std::abs(numeric));
        if (!(err <= res.worst) || std::isnan(err)) {
          res.worst = std::isnan(err) ? INFINITY : err;
          std::ostringstream os;
          os << "input " << k << " " << base[k].shape() << " element " << i << ": analytic " << a
             << ", numeric " << numeric << " (" << (pass == 0 ? "first" : "second")
             << " backward" << (!opt.buffers ? "" : opt.stale ? ", over stale gradient buffers" : ", into gradient buffers")
             << ")";
          res.message = os.str();
        }
      }
    }
  }
  res.ok = res.worst <= 1.0;
  return res;
}

}  // namespace rosetta
