// Optimizers against PyTorch 1.13 trajectories (tests/golden/optim_trajectories.safetensors:
// fixed gradients fed for 25 steps), flat-buffer mechanics, state resume, clipping, schedules.
#include <omp.h>

#include <cmath>
#include <limits>
#include <map>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/optim/optim.h"
#include "support.h"

using namespace rosetta;
using namespace rosetta::optim;

namespace {

const SafeTensors& trajectories() {
  static const SafeTensors st =
      load_safetensors(std::string(ROSETTA_TEST_DATA) + "/golden/optim_trajectories.safetensors");
  return st;
}

const Tensor& need(const std::string& name) {
  const Tensor* t = trajectories().find(name);
  INFO("golden tensor " << name);
  REQUIRE(t != nullptr);
  return *t;
}

double meta(const std::string& key) { return std::stod(trajectories().metadata.at(key)); }

const std::vector<std::string> kParams{"w", "b", "m"};

std::vector<Var> initial_params() {
  std::vector<Var> ps;
  for (const auto& n : kParams) ps.emplace_back(need("init." + n).clone(), true);
  return ps;
}

std::unique_ptr<Optimizer> make(const std::string& run, std::vector<Var> ps) {
  const std::string type = trajectories().metadata.at(run + ".optimizer");
  if (type == "SGD") {
    SGDOptions o;
    o.lr = meta(run + ".lr");
    o.momentum = meta(run + ".momentum");
    o.dampening = meta(run + ".dampening");
    o.weight_decay = meta(run + ".weight_decay");
    o.nesterov = trajectories().metadata.at(run + ".nesterov") == "true";
    return std::make_unique<SGD>(std::move(ps), o);
  }
  AdamOptions o;
  o.lr = meta(run + ".lr");
  o.beta1 = meta(run + ".beta1");
  o.beta2 = meta(run + ".beta2");
  o.eps = meta(run + ".eps");
  o.weight_decay = meta(run + ".weight_decay");
  o.decoupled = type == "AdamW";
  return std::make_unique<Adam>(std::move(ps), o);
}

// Feeds step k's golden gradients into the parameters' gradient buffers.
void feed_grads(std::vector<Var>& ps, int k) {
  for (size_t i = 0; i < ps.size(); ++i) {
    Tensor g = ps[i].grad();
    g.copy_(need("step" + std::to_string(k) + ".grad." + kParams[i]));
  }
}

// Relative error of each parameter tensor after step k, max |ours - torch| / max |torch|, the
// worst over the parameters. (Per element, values that cancel to near zero would turn
// last-bit differences into large ratios: PyTorch's vectorised kernels use fused multiply-adds,
// we do not, and such a value, e.g. 3.9e-4 after 1 - 1 cancellation, differs by 6e-9.)
double worst_rel(const std::vector<Var>& ps, const std::string& run, int k) {
  double worst = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto ours = ps[i].data().to_vector<double>();
    const auto ref = need(run + ".step" + std::to_string(k) + "." + kParams[i]).to_vector<double>();
    double num = 0, den = 0;
    for (size_t j = 0; j < ours.size(); ++j) {
      num = std::max(num, std::abs(ours[j] - ref[j]));
      den = std::max(den, std::abs(ref[j]));
    }
    worst = std::max(worst, num / den);
  }
  return worst;
}

}  // namespace

TEST_CASE("optimizer trajectories equal PyTorch's", "[optim]") {
  for (const std::string run : {"sgd", "sgd_momentum", "sgd_nesterov", "adam", "adam_l2", "adamw"}) {
    std::vector<Var> ps = initial_params();
    auto opt = make(run, ps);
    for (int k = 1; k <= 25; ++k) {
      opt->zero_grad();
      feed_grads(ps, k);
      opt->step();
      const double err = worst_rel(ps, run, k);
      INFO(run << " step " << k << " relative error " << err);
      REQUIRE(err <= 1e-6);
    }
    REQUIRE(opt->steps() == 25);
  }
}

TEST_CASE("Adam under the Noam schedule equals PyTorch's LambdaLR run", "[optim]") {
  const std::string run = "adam_noam";
  NoamSchedule noam(meta(run + ".noam_factor"), int64_t(meta(run + ".noam_d_model")),
                    int64_t(meta(run + ".noam_warmup")));
  const auto lrs = need(run + ".lr").to_vector<double>();
  std::vector<Var> ps = initial_params();
  auto opt = make(run, ps);
  for (int k = 1; k <= 25; ++k) {
    REQUIRE_THAT(noam.lr(k), Catch::Matchers::WithinRel(lrs[k - 1], 1e-12));
    opt->set_lr(noam.lr(k) * meta(run + ".lr"));
    opt->zero_grad();
    feed_grads(ps, k);
    opt->step();
    INFO("step " << k);
    REQUIRE(worst_rel(ps, run, k) <= 1e-6);
  }
}

TEST_CASE("parameters and gradients live in flat buffers", "[optim]") {
  Generator g(1);
  Var a(g.normal({3, 4}), true), b(g.normal({5}), true);
  const Tensor a0 = a.data().clone();
  Adam opt({a, b}, AdamOptions{});
  REQUIRE(opt.numel() == 17);
  REQUIRE(a.data().same_storage(opt.flat_params()));
  REQUIRE(b.grad().same_storage(opt.flat_grads()));
  REQUIRE_THAT(a.data(), rosetta::test::AllClose(a0, 0, 0));
  // Backward writes straight into the flat gradient buffer.
  sum(a * 2.0).backward();
  REQUIRE(opt.flat_grads().at({0}) == 2);
  REQUIRE(opt.flat_grads().at({12}) == 0);
  opt.zero_grad();
  REQUIRE(sum_all(opt.flat_grads()).item() == 0);
  REQUIRE_THROWS_WITH(SGD({a, a}, SGDOptions{}), Catch::Contains("listed twice"));
  REQUIRE_THROWS_WITH(SGD({Var(g.normal({2}), false)}, SGDOptions{}), Catch::Contains("require a gradient"));
  REQUIRE_THROWS_AS(opt.set_lr(-1), Error);
  REQUIRE_THROWS_AS(opt.set_lr(NAN), Error);
}

TEST_CASE("zero_grad_lazily: gradients written over, the ones no gradient reached read as zero", "[optim]") {
  Generator g(2);
  const Tensor a0 = g.normal({3, 4}), b0 = g.normal({5});
  auto trained = [&](bool lazily) {
    Var a(a0.clone(), true), b(b0.clone(), true);
    Adam opt({a, b}, AdamOptions{});
    for (int k = 1; k <= 3; ++k) {
      (sum(a * double(k)) + sum(b) * 0.5).backward();  // both
      opt.step();
      Tensor held = opt.flat_grads();  // a handle on the buffer, which zero_grad_lazily leaves
      if (lazily) {
        opt.zero_grad_lazily();
        held.copy_(Tensor::full({opt.numel()}, std::numeric_limits<float>::quiet_NaN()));
      } else {
        opt.zero_grad();
      }
      sum(square(a)).backward();  // a alone: b's gradient is zero
      const Tensor grads = opt.flat_grads();
      REQUIRE(grads.narrow(0, 12, 5).to_vector<float>() == std::vector<float>(5, 0.0f));
      REQUIRE(grads.narrow(0, 0, 12).to_vector<float>() == affine(a.data(), 2, 0).to_vector<float>());
      opt.step();
      if (lazily) opt.zero_grad_lazily();
      else opt.zero_grad();
    }
    return std::vector<float>(opt.flat_params().to_vector<float>());
  };
  REQUIRE(trained(true) == trained(false));
}

TEST_CASE("optimizer state restores an exact continuation", "[optim]") {
  auto run = [](int stop_at, bool resume) {
    std::vector<Var> ps = initial_params();
    auto opt = make("adamw", ps);
    for (int k = 1; k <= stop_at; ++k) {
      opt->zero_grad();
      feed_grads(ps, k);
      opt->step();
    }
    if (!resume) return ps;
    // Save, rebuild from scratch, load, continue.
    const std::string bytes = [&] {
      NamedTensors all = opt->state_tensors();
      for (size_t i = 0; i < ps.size(); ++i) all.emplace_back("param." + kParams[i], ps[i].data());
      return serialize_safetensors(all, opt->state_metadata());
    }();
    const SafeTensors st = parse_safetensors(bytes, "state");
    std::vector<Var> ps2;
    for (const auto& n : kParams) ps2.emplace_back(st.find("param." + n)->clone(), true);
    auto opt2 = make("adamw", ps2);
    opt2->load_state([&](const std::string& n) { return st.find(n); }, st.metadata);
    REQUIRE(opt2->steps() == stop_at);
    for (int k = stop_at + 1; k <= 25; ++k) {
      opt2->zero_grad();
      feed_grads(ps2, k);
      opt2->step();
    }
    return ps2;
  };
  const auto straight = run(25, false);
  const auto resumed = run(11, true);
  for (size_t i = 0; i < straight.size(); ++i)
    REQUIRE(straight[i].data().to_vector<float>() == resumed[i].data().to_vector<float>());

  // Loading state of another optimizer or size is refused with a clear message.
  std::vector<Var> ps = initial_params();
  auto sgd = make("sgd_momentum", ps);
  auto meta_sgd = sgd->state_metadata();
  std::vector<Var> qs = initial_params();
  auto adam = make("adam", qs);
  REQUIRE_THROWS_WITH(adam->load_state([](const std::string&) { return nullptr; }, meta_sgd),
                      Catch::Contains("'sgd'") && Catch::Contains("'adam'"));
  auto meta_adam = adam->state_metadata();
  REQUIRE_THROWS_WITH(adam->load_state([](const std::string&) { return nullptr; }, meta_adam),
                      Catch::Contains("optim.exp_avg"));
}

TEST_CASE("gradient clipping by global norm", "[optim]") {
  Var a(Tensor::zeros({2}), true), b(Tensor::zeros({1}), true);
  SGD opt({a, b}, SGDOptions{});
  Tensor ga = a.grad(), gb = b.grad();
  ga.copy_(Tensor::from_vector(std::vector<float>{3, 0}));
  gb.copy_(Tensor::from_vector(std::vector<float>{4}));
  REQUIRE_THAT(grad_norm(opt), Catch::Matchers::WithinRel(5.0, 1e-12));
  const double before = clip_grad_norm(opt, 1.0);
  REQUIRE_THAT(before, Catch::Matchers::WithinRel(5.0, 1e-12));
  REQUIRE_THAT(grad_norm(opt), Catch::Matchers::WithinRel(1.0, 1e-5));
  REQUIRE_THAT(a.grad().at({0}), Catch::Matchers::WithinRel(0.6, 1e-5));
  // Below the threshold nothing changes; a non-finite norm is reported, not applied.
  REQUIRE_THAT(clip_grad_norm(opt, 10.0), Catch::Matchers::WithinRel(1.0, 1e-5));
  gb.fill_(INFINITY);
  REQUIRE(std::isinf(clip_grad_norm(opt, 1.0)));
  REQUIRE_THAT(a.grad().at({0}), Catch::Matchers::WithinRel(0.6, 1e-5));
}

TEST_CASE("the gradient norm has the same bits on every call, whatever the thread count", "[optim]") {
  // With a reduction clause the threads' sums were added in the order they finished: on 3 threads
  // two runs of the same training logged norms that differed in their last digits.
  Generator g(5);
  Var a(Tensor::zeros({300001}), true);
  SGD opt({a}, SGDOptions{});
  Tensor ga = a.grad();
  ga.copy_(g.normal({300001}));
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3, 5, 16}) {
    omp_set_num_threads(threads);
    const double first = grad_norm(opt);
    bool same = true;
    for (int k = 0; k < 50; ++k) same = same && grad_norm(opt) == first;
    INFO(threads << " threads");
    REQUIRE(same);
    REQUIRE_THAT(first, Catch::Matchers::WithinRel(std::sqrt(double(sum_all(mul(a.grad(), a.grad())).item())), 1e-5));
  }
  omp_set_num_threads(saved);
}

TEST_CASE("learning-rate schedules", "[optim]") {
  NoamSchedule noam(2.0, 64, 4);
  REQUIRE_THAT(noam.lr(4), Catch::Matchers::WithinRel(2.0 / 8 * 0.5, 1e-12));  // peak at warmup
  REQUIRE(noam.lr(3) < noam.lr(4));
  REQUIRE(noam.lr(5) < noam.lr(4));
  InverseSqrtSchedule isq(1e-3, 100);
  REQUIRE_THAT(isq.lr(50), Catch::Matchers::WithinRel(5e-4, 1e-12));
  REQUIRE_THAT(isq.lr(100), Catch::Matchers::WithinRel(1e-3, 1e-12));
  REQUIRE_THAT(isq.lr(400), Catch::Matchers::WithinRel(5e-4, 1e-12));
  CosineSchedule cos(1e-3, 10, 110, 1e-5);
  REQUIRE_THAT(cos.lr(10), Catch::Matchers::WithinRel(1e-3, 1e-12));
  REQUIRE_THAT(cos.lr(60), Catch::Matchers::WithinRel(1e-5 + 0.5 * (1e-3 - 1e-5), 1e-12));
  REQUIRE_THAT(cos.lr(110), Catch::Matchers::WithinRel(1e-5, 1e-12));
  REQUIRE_THAT(cos.lr(500), Catch::Matchers::WithinRel(1e-5, 1e-12));
  ConstantSchedule c(0.5);
  REQUIRE(c.lr(1) == 0.5);
  REQUIRE(c.lr(1000) == 0.5);
  REQUIRE_THROWS_WITH(make_schedule("warmup-linear", 1, 1, 1, 1), Catch::Contains("warmup-linear"));
  REQUIRE_THROWS_AS(CosineSchedule(1e-3, 10, 5), Error);
  REQUIRE_THROWS_AS(noam.lr(0), Error);
}
