// Finite-difference checks of every differentiable op, in float64, with the non-uniform
// upstream gradient of L = mean((y + 1)^2). Tolerances: atol 1e-7, rtol 1e-5 unless noted.
// Each check runs both ways: leaves with gradients of their own (fresh tensors, beta 0), and
// leaves bound to a flat gradient buffer holding nonzero values (written in place, beta 1);
// each also backward twice through a retained graph (see gradcheck.h).
#include <cmath>
#include <limits>
#include <string>

#include "rosetta/autograd/autograd.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/internal/fused.h"
#include "support.h"

using namespace rosetta;

namespace {

Generator gen(2024);

Tensor randn(const Shape& s, double mean = 0, double std = 1) {
  return gen.normal(s, mean, std, DType::f64);
}
Tensor positive(const Shape& s) { return gen.uniform(s, 0.5, 2.0, DType::f64); }

void check(const std::function<Var(const std::vector<Var>&)>& f, const std::vector<Tensor>& in,
           GradcheckOptions opt = {}) {
  // Gradients of their own, then bound buffers added to, then stale buffers written over.
  for (int mode = 0; mode < 3; ++mode) {
    const GradcheckResult r = gradcheck(f, in, opt.grad_buffers(mode > 0).stale_buffers(mode == 2));
    INFO(r.message << " (worst " << r.worst << ")");
    REQUIRE(r.ok);
  }
}

// Broadcasting patterns for binary ops: (a, b) shapes.
const std::vector<std::pair<Shape, Shape>> kBroadcast{
    {{2, 3}, {2, 3}}, {{2, 3}, {3}},       {{2, 3}, {2, 1}},    {{2, 1}, {1, 3}},
    {{2, 3, 4}, {3, 1}}, {{3}, {}},        {{}, {2, 2}},        {{1, 3, 1}, {2, 1, 4}}};

}  // namespace

TEST_CASE("gradcheck: add, sub, mul, div with broadcasting", "[gradcheck]") {
  for (const auto& [sa, sb] : kBroadcast) {
    INFO("shapes " << sa << " " << sb);
    const Tensor a = randn(sa), b = positive(sb);
    check([](auto& v) { return add(v[0], v[1]); }, {a, b});
    check([](auto& v) { return sub(v[0], v[1]); }, {a, b});
    check([](auto& v) { return mul(v[0], v[1]); }, {a, b});
    check([](auto& v) { return div(v[0], v[1]); }, {a, b});
    check([](auto& v) { return div(v[1], v[0] * v[0] + 1.0); }, {a, b});
  }
}

TEST_CASE("gradcheck: pow and scalar ops", "[gradcheck]") {
  for (const auto& [sa, sb] : kBroadcast) {
    INFO("shapes " << sa << " " << sb);
    check([](auto& v) { return pow(v[0], v[1]); }, {positive(sa), randn(sb)});
  }
  const Tensor x = randn({3, 4});
  check([](auto& v) { return neg(v[0]); }, {x});
  check([](auto& v) { return add_scalar(v[0], 2.5); }, {x});
  check([](auto& v) { return mul_scalar(v[0], -1.5); }, {x});
  check([](auto& v) { return v[0] / 4.0 - 1.0; }, {x});
  check([](auto& v) { return pow_scalar(v[0], 3.0); }, {x});
  check([](auto& v) { return pow_scalar(v[0], -0.5); }, {positive({3, 4})});
  check([](auto& v) { return square(v[0]); }, {x});
}

TEST_CASE("gradcheck: unary maps", "[gradcheck]") {
  const Tensor x = randn({3, 5});
  const Tensor p = positive({3, 5});
  check([](auto& v) { return exp(v[0]); }, {x});
  check([](auto& v) { return log(v[0]); }, {p});
  check([](auto& v) { return sqrt(v[0]); }, {p});
  check([](auto& v) { return tanh(v[0]); }, {x});
  check([](auto& v) { return sigmoid(v[0]); }, {x});
  check([](auto& v) { return gelu(v[0]); }, {x});
  // relu is not differentiable at 0: keep inputs away from it.
  Tensor r = randn({3, 5});
  auto* d = r.data<double>();
  for (int i = 0; i < 15; ++i) d[i] = d[i] >= 0 ? d[i] + 0.1 : d[i] - 0.1;
  check([](auto& v) { return relu(v[0]); }, {r});
}

TEST_CASE("gradcheck: matmul and batched matmul with broadcasting", "[gradcheck]") {
  const std::vector<std::pair<Shape, Shape>> shapes{
      {{3, 4}, {4, 2}},       {{2, 3, 4}, {4, 5}},    {{2, 3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {3, 4, 2}}, {{3, 4}, {2, 4, 2}}, {{1, 4}, {4, 1}}};
  for (const auto& [sa, sb] : shapes) {
    INFO("shapes " << sa << " " << sb);
    check([](auto& v) { return matmul(v[0], v[1]); }, {randn(sa), randn(sb)});
  }
  // Transposed operands (BLAS flags) and the same operand on both sides.
  check([](auto& v) { return matmul(transpose(v[0], 0, 1), v[1]); }, {randn({4, 3}), randn({4, 2})});
  check([](auto& v) { return matmul(v[0], transpose(v[0], 0, 1)); }, {randn({3, 4})});
  // Attention-shaped: [B, H, T, D] @ [B, H, D, T] from permuted views.
  check([](auto& v) {
    return matmul(permute(v[0], {0, 2, 1, 3}), permute(v[1], {0, 2, 3, 1}));
  }, {randn({2, 3, 2, 4}), randn({2, 3, 2, 4})});
  // The heads laid out as [B, T, H, D] (memory order {0, 2, 1, 3}), merged by a view.
  check([](auto& v) {
    const Var ctx = matmul(v[0], permute(v[1], {0, 2, 1, 3}), 0.5, {0, 2, 1, 3});
    return reshape(permute(ctx, {0, 2, 1, 3}), {2, 3, -1});
  }, {randn({2, 2, 3, 4}), randn({2, 4, 2, 5})});
}

TEST_CASE("gradcheck: linear (fused GEMM + bias)", "[gradcheck]") {
  check([](auto& v) { return linear(v[0], v[1], v[2]); }, {randn({5, 3}), randn({4, 3}), randn({4})});
  check([](auto& v) { return linear(v[0], v[1], v[2]); },
        {randn({2, 3, 3}), randn({4, 3}), randn({4})});
  check([](auto& v) { return linear(v[0], v[1], Var()); }, {randn({2, 3}), randn({4, 3})});
}

TEST_CASE("gradcheck: reductions", "[gradcheck]") {
  const Tensor x = randn({3, 4, 2});
  check([](auto& v) { return sum(v[0]); }, {x});
  check([](auto& v) { return mean(v[0]); }, {x});
  for (int axis = 0; axis < 3; ++axis)
    for (bool keep : {false, true}) {
      INFO("axis " << axis << " keepdim " << keep);
      check([=](auto& v) { return sum(v[0], axis, keep); }, {x});
      check([=](auto& v) { return mean(v[0], axis, keep); }, {x});
      check([=](auto& v) { return max(v[0], axis, keep); }, {x});
    }
}

TEST_CASE("gradcheck: movement ops", "[gradcheck]") {
  const Tensor x = randn({2, 3, 4});
  check([](auto& v) { return reshape(v[0], {6, 4}); }, {x});
  check([](auto& v) { return reshape(transpose(v[0], 0, 2), {-1}); }, {x});
  check([](auto& v) { return transpose(v[0], 1, 2); }, {x});
  check([](auto& v) { return permute(v[0], {2, 0, 1}); }, {x});
  check([](auto& v) { return slice(v[0], 2, 1, 4, 2); }, {x});
  check([](auto& v) { return narrow(v[0], 1, 1, 2); }, {x});
  check([](auto& v) { return select(v[0], 0, 1); }, {x});
  check([](auto& v) { return expand(v[0], {2, 3, 4}); }, {randn({3, 1})});
  check([](auto& v) { return expand(v[0], {2, 3, 4}); }, {randn({1, 1, 4})});
  check([](auto& v) { return squeeze(unsqueeze(v[0], 1), 1); }, {x});
  check([](auto& v) { return contiguous(transpose(v[0], 0, 1)); }, {x});
  check([](auto& v) { return cat({v[0], v[1], v[0]}, 1); }, {x, randn({2, 2, 4})});
  check([](auto& v) { return cat({v[0], v[1]}, 0); }, {randn({1, 3}), randn({2, 3})});
}

TEST_CASE("gradcheck: where and masked_fill, every mask case", "[gradcheck]") {
  const Tensor cond = Tensor::from_vector(std::vector<int32_t>{1, 0, 0, 1, 1, 0}, {2, 3});
  check([&](auto& v) { return where(cond, v[0], v[1]); }, {randn({2, 3}), randn({2, 3})});
  check([&](auto& v) { return where(cond, v[0], v[1]); }, {randn({3}), randn({2, 1})});
  const std::vector<Tensor> masks{
      Tensor::zeros({2, 3}, DType::i32),                                             // none
      Tensor::from_vector(std::vector<int32_t>{0, 1, 1}, {1, 3}),                    // key padding
      Tensor::from_vector(std::vector<int32_t>{0, 1, 0, 0, 0, 1}, {2, 3}),           // mixed
      Tensor::ones({2, 3}, DType::i32),                                              // all
  };
  for (const Tensor& m : masks) {
    INFO("mask " << m.str());
    check([&](auto& v) { return masked_fill(v[0], m, 0.0); }, {randn({2, 3})});
    check([&](auto& v) { return masked_fill(v[0], m, 5.0) * v[0]; }, {randn({2, 3})});
  }
}

TEST_CASE("gradcheck: softmax and log_softmax, with masks", "[gradcheck]") {
  const Tensor x = randn({3, 5}, 0, 2);
  check([](auto& v) { return softmax(v[0]); }, {x});
  check([](auto& v) { return log_softmax(v[0]); }, {x});
  check([](auto& v) { return softmax(v[0]); }, {randn({2, 2, 4})});
  const double inf = std::numeric_limits<double>::infinity();
  // Causal mask, key padding mask, both combined, and a fully masked row.
  const Tensor causal = Tensor::from_vector(
      std::vector<int32_t>{0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}, {4, 4});
  const Tensor keypad = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 1}, {1, 4});
  const Tensor fully = Tensor::from_vector(
      std::vector<int32_t>{0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1}, {4, 4});
  for (const Tensor& m : {causal, keypad, fully}) {
    INFO("mask " << m.str());
    check([&](auto& v) { return softmax(masked_fill(v[0], m, -inf)); }, {randn({2, 4, 4})});
  }
  // The fully masked row gives zeros and no NaN in the gradient.
  Var s(randn({4, 4}), true);
  Var p = softmax(masked_fill(s, fully, -inf));
  REQUIRE(p.data().at({1, 2}) == 0);
  sum(p * p).backward();
  for (double g : s.grad().to_vector<double>()) REQUIRE_FALSE(std::isnan(g));
}

TEST_CASE("gradcheck: layer_norm", "[gradcheck]") {
  check([](auto& v) { return layer_norm(v[0], v[1], v[2], 1e-5); },
        {randn({3, 6}, 1, 2), randn({6}, 1, 0.5), randn({6})});
  check([](auto& v) { return layer_norm(v[0], v[1], v[2], 1e-5); },
        {randn({2, 3, 4}), randn({4}, 1, 0.5), randn({4})});
}

TEST_CASE("gradcheck: dropout (seeded) and its eval identity", "[gradcheck]") {
  check([](auto& v) {
    Generator g(7);  // same mask on every call
    return dropout(v[0], 0.3, g, true);
  }, {randn({4, 5})});
  Generator g(1);
  Var x(randn({10}), true);
  REQUIRE(dropout(x, 0.3, g, false).same(x));
  const Var y = dropout(x, 0.5, g, true);
  for (int i = 0; i < 10; ++i) {
    const double v = y.data().at({i});
    REQUIRE((v == 0 || std::abs(v - 2 * x.data().at({i})) < 1e-12));
  }
}

// Element by element, == (so +0 equals -0), float32.
static bool equal_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  for (int64_t i = 0; i < ca.numel(); ++i)
    if (!(ca.data<float>()[i] == cb.data<float>()[i])) return false;
  return true;
}

TEST_CASE("gradcheck: relu_dropout equals dropout(relu(x)), values and gradients", "[gradcheck]") {
  // Away from relu's kink, as for relu.
  Tensor r = randn({6, 7});
  for (int64_t i = 0; i < r.numel(); ++i) {
    double& v = r.data<double>()[i];
    if (std::abs(v) < 0.1) v = v < 0 ? -0.1 : 0.1;
  }
  check([](auto& v) {
    Generator g(7);
    return relu_dropout(v[0], 0.3, g, true);
  }, {r});
  // Against the two ops it replaces, bit for bit, in float32 (the training dtype).
  const Tensor x32 = r.to(DType::f32);
  const Tensor w = randn({6, 7}).to(DType::f32);
  for (const double p : {0.0, 0.1, 0.5}) {
    for (const bool training : {true, false}) {
      INFO("p " << p << " training " << training);
      Generator ga(3), gb(3);
      Var xa(x32, true), xb(x32, true);
      const Var fused = relu_dropout(xa, p, ga, training);
      const Var composed = dropout(relu(xb), p, gb, training);
      REQUIRE(ga.counter() == gb.counter());
      REQUIRE(equal_values(fused.data(), composed.data()));
      sum(fused * Var(w)).backward();
      sum(composed * Var(w)).backward();
      REQUIRE(equal_values(xa.grad(), xb.grad()));
    }
  }
}

TEST_CASE("gradcheck: relu_dropout_linear equals linear(relu_dropout(h)), values and gradients", "[gradcheck]") {
  // Away from relu's kink, as for relu.
  Tensor r = randn({6, 5});
  for (int64_t i = 0; i < r.numel(); ++i) {
    double& v = r.data<double>()[i];
    if (std::abs(v) < 0.1) v = v < 0 ? -0.1 : 0.1;
  }
  for (const bool training : {true, false}) {
    check([training](auto& v) {
      Generator g(7);
      return relu_dropout_linear(v[0], 0.3, g, training, v[1], v[2]);
    }, {r, randn({4, 5}), randn({4})});
  }
  // Against the ops it replaces, bit for bit, in float32 products (fp32 precision).
  const Tensor h32 = r.reshape({2, 3, 5}).to(DType::f32), w32 = randn({4, 5}).to(DType::f32),
               b32 = randn({4}).to(DType::f32), up = randn({2, 3, 4}).to(DType::f32);
  const MatmulPrecisionScope fp32(Precision::fp32);
  for (const double p : {0.0, 0.1, 0.5}) {
    for (const bool training : {true, false}) {
      INFO("p " << p << " training " << training);
      Generator ga(3), gb(3);
      Var ha(h32, true), hb(h32, true), wa(w32, true), wb(w32, true), ba(b32, true), bb(b32, true);
      const Var fused = relu_dropout_linear(ha, p, ga, training, wa, ba);
      const Var composed = linear(relu_dropout(hb, p, gb, training), wb, bb);
      REQUIRE(ga.counter() == gb.counter());
      REQUIRE(equal_values(fused.data(), composed.data()));
      sum(fused * Var(up)).backward();
      sum(composed * Var(up)).backward();
      REQUIRE(equal_values(ha.grad(), hb.grad()));
      REQUIRE(equal_values(wa.grad(), wb.grad()));
      REQUIRE(equal_values(ba.grad(), bb.grad()));
    }
  }
  Generator g(1);
  CHECK_THROWS_WITH(relu_dropout_linear(Var(h32), 0.1, g, true, Var(Tensor::zeros({4, 6})), Var()),
                    Catch::Contains("relu_dropout_linear: input [2, 3, 5] does not match weight [4, 6]"));
}

TEST_CASE("under bf16, linear layers keep their inputs in bf16: the fp32 inputs' values and gradients", "[gradcheck]") {
  if (!bf16_supported()) return;
  // What the layers computed when they kept fp32 inputs: the core products of the fp32 values,
  // which round them to bf16 as they pack them, exactly as the kept inputs are rounded.
  Generator gen(11);
  const Tensor x = gen.normal({2, 40, 64}, 0.0, 1.0), w1 = gen.normal({96, 64}, 0.0, 0.1),
               w2 = gen.normal({64, 96}, 0.0, 0.1), w3 = gen.normal({64, 64}, 0.0, 0.1), b1 = gen.normal({96}, 0.0, 1.0), b2 = gen.normal({64}, 0.0, 1.0),
               up = gen.normal({2, 40, 64}, 0.0, 1.0);
  const MatmulPrecisionScope bf16(Precision::bf16);
  const Tensor x2 = x.reshape({80, 64}), up2 = up.reshape({80, 64});
  for (const bool training : {true, false}) {
    INFO("training " << training);
    Generator g(3), g_ref(3);
    Var xv(x, true), w1v(w1, true), w2v(w2, true), b1v(b1, true), b2v(b2, true);
    // x read twice (the second linear reuses the first's bf16 copy), h by the fused relu layer.
    const Var h = linear(xv, w1v, b1v), y = relu_dropout_linear(h, 0.2, g, training, w2v, b2v);
    const Var out = y + linear(xv, Var(w3, true), Var());
    sum(out * Var(up)).backward();

    Tensor h_ref = Tensor::empty({80, 96}), y_ref = Tensor::empty({80, 64}), z_ref = Tensor::empty({80, 64});
    matmul_bias_into(h_ref, x2, w1.transpose(0, 1), b1);
    const uint64_t seed = g_ref.seed(), offset = training ? g_ref.reserve(80 * 96) : 0;
    const Tensor a = training ? relu_dropout(h_ref, 0.2, seed, offset) : unary(UnaryOp::relu, h_ref);
    matmul_bias_into(y_ref, a, w2.transpose(0, 1), b2);
    matmul_into(z_ref, x2, w3.transpose(0, 1));
    REQUIRE(equal_values(h.data().reshape({80, 96}), h_ref));
    REQUIRE(equal_values(out.data().reshape({80, 64}), add(y_ref, z_ref)));
    Tensor dh = Tensor::empty({80, 96}), dw2 = Tensor::empty({64, 96}), db2 = Tensor::empty({64}),
           dw1 = Tensor::empty({96, 64}), db1 = Tensor::empty({96});
    relu_linear_input_grad(up2, w2, a, training ? 1.0 / 0.8 : 1.0, {dh, 0.0});
    linear_param_grads(up2, a, {dw2, 0.0}, {db2, 0.0});
    linear_param_grads(dh, x2, {dw1, 0.0}, {db1, 0.0});
    CHECK(equal_values(w2v.grad(), dw2));
    CHECK(equal_values(b2v.grad(), db2));
    CHECK(equal_values(w1v.grad(), dw1));
    CHECK(equal_values(b1v.grad(), db1));
    Tensor dx = Tensor::empty({80, 64});
    matmul_into(dx, dh, w1);
    matmul_into(dx, up2, w3, 1.0, 1.0);
    CHECK(equal_values(xv.grad().reshape({80, 64}), dx));
  }
  // An input written in place between two layers is kept anew, not taken from the first.
  Tensor xs = x.clone();
  Var xv(xs, true), w1v(w1, true);
  const Var first = linear(xv, w1v, Var());
  scale_(xs, 2.0);
  const Var second = linear(xv, w1v, Var());
  Tensor want = Tensor::empty({80, 96});
  matmul_bias_into(want, xs.reshape({80, 64}), w1.transpose(0, 1), Tensor());
  CHECK(equal_values(second.data().reshape({80, 96}), want));
  CHECK(!equal_values(first.data(), second.data()));
}

TEST_CASE("linear_relu_dropout_linear: relu_dropout_linear(linear(...))'s values, gradients and draws, to the bit", "[gradcheck]") {
  Generator gen(13);
  const Tensor x = gen.normal({2, 40, 64}, 0.0, 1.0), w1 = gen.normal({96, 64}, 0.0, 0.1),
               w2 = gen.normal({64, 96}, 0.0, 0.1), b1 = gen.normal({96}, 0.0, 1.0), b2 = gen.normal({64}, 0.0, 1.0),
               up = gen.normal({2, 40, 64}, 0.0, 1.0);
  // bf16 (the hidden layer written by the first product, where the CPU has bf16 products) and
  // fp32 (the two ops themselves); with and without biases; x with and without a gradient.
  for (const Precision precision : {Precision::bf16, Precision::fp32}) {
    if (precision == Precision::bf16 && !bf16_supported()) continue;
    const MatmulPrecisionScope scope(precision);
    for (const bool training : {true, false})
      for (const bool biases : {true, false})
        for (const bool x_grad : {true, false}) {
          INFO("bf16 " << (precision == Precision::bf16) << " training " << training << " biases " << biases
                       << " x_grad " << x_grad);
          Generator ga(3), gb(3);
          Var xa(x, x_grad), xb(x, x_grad), w1a(w1, true), w1b(w1, true), w2a(w2, true), w2b(w2, true);
          Var b1a = biases ? Var(b1, true) : Var(), b1b = biases ? Var(b1, true) : Var(),
              b2a = biases ? Var(b2, true) : Var(), b2b = biases ? Var(b2, true) : Var();
          const Var fused = linear_relu_dropout_linear(xa, w1a, b1a, 0.2, ga, training, w2a, b2a);
          const Var composed = relu_dropout_linear(linear(xb, w1b, b1b), 0.2, gb, training, w2b, b2b);
          REQUIRE(ga.counter() == gb.counter());
          // One op where it writes the hidden layer in bf16; the two ops' own otherwise.
          CHECK(std::string(fused.meta()->grad_fn->name) ==
                (precision == Precision::bf16 ? "linear_relu_dropout_linear" : "relu_dropout_linear"));
          REQUIRE(fused.shape() == composed.shape());
          REQUIRE(equal_values(fused.data(), composed.data()));
          sum(fused * Var(up)).backward();
          sum(composed * Var(up)).backward();
          CHECK(equal_values(w1a.grad(), w1b.grad()));
          CHECK(equal_values(w2a.grad(), w2b.grad()));
          if (biases) {
            CHECK(equal_values(b1a.grad(), b1b.grad()));
            CHECK(equal_values(b2a.grad(), b2b.grad()));
          }
          if (x_grad) CHECK(equal_values(xa.grad(), xb.grad()));
        }
  }
  Generator g(1);
  CHECK_THROWS_WITH(linear_relu_dropout_linear(Var(x), Var(w1), Var(), 0.1, g, true, Var(Tensor::zeros({64, 95})), Var()),
                    Catch::Contains("linear_relu_dropout_linear: input [2, 40, 96] does not match weight [64, 95]"));
  CHECK_THROWS_WITH(linear_relu_dropout_linear(Var(x), Var(w1), Var(), 1.5, g, true, Var(w2), Var()),
                    Catch::Contains("probability 1.5"));
}

TEST_CASE("gradcheck: dropout_add equals residual + dropout(x), values and gradients", "[gradcheck]") {
  check([](auto& v) {
    Generator g(7);
    return dropout_add(v[0], v[1], 0.3, g, true);
  }, {randn({6, 7}), randn({6, 7})});
  // Against the two ops it replaces, bit for bit, in float32 (the training dtype).
  const Tensor r32 = randn({6, 7}).to(DType::f32), x32 = randn({6, 7}).to(DType::f32),
               w = randn({6, 7}).to(DType::f32);
  for (const double p : {0.0, 0.1, 0.5}) {
    for (const bool training : {true, false}) {
      INFO("p " << p << " training " << training);
      Generator ga(3), gb(3);
      Var ra(r32, true), rb(r32, true), xa(x32, true), xb(x32, true);
      const Var fused = dropout_add(ra, xa, p, ga, training);
      const Var composed = rb + dropout(xb, p, gb, training);
      REQUIRE(ga.counter() == gb.counter());
      REQUIRE(equal_values(fused.data(), composed.data()));
      sum(fused * Var(w)).backward();
      sum(composed * Var(w)).backward();
      REQUIRE(equal_values(ra.grad(), rb.grad()));
      REQUIRE(equal_values(xa.grad(), xb.grad()));
    }
  }
  Generator g(1);
  CHECK_THROWS_WITH(dropout_add(Var(r32), Var(Tensor::zeros({6, 6})), 0.1, g, true),
                    Catch::Contains("dropout_add: residual [6, 7] and [6, 6] differ"));
}

TEST_CASE("gradcheck: embedding with and without padding index", "[gradcheck]") {
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{2, 0, 2, 4, 1, 0}, {2, 3});
  check([&](auto& v) { return embedding(v[0], ids); }, {randn({5, 3})});
  // With padding_idx 0, row 0 gets no gradient (the check's numeric side sees that row used,
  // so compare the padded case directly).
  Var w(randn({5, 3}), true);
  sum(embedding(w, ids, 0) * 2.0).backward();
  for (int d = 0; d < 3; ++d) {
    REQUIRE(w.grad().at({0, d}) == 0);
    REQUIRE(w.grad().at({2, d}) == 4);  // id 2 used twice, times 2
    REQUIRE(w.grad().at({3, d}) == 0);
  }
}

TEST_CASE("gradcheck: cross_entropy with label smoothing and ignore index", "[gradcheck]") {
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{3, 0, 1, 4, 0, 2}, {2, 3});
  for (double eps : {0.0, 0.1}) {
    for (int32_t ignore : {-1, 0}) {
      INFO("smoothing " << eps << " ignore " << ignore);
      check([&](auto& v) { return cross_entropy(v[0], targets, eps, ignore); },
            {randn({2, 3, 5}, 0, 2)});
    }
  }
}

TEST_CASE("gradcheck: linear_cross_entropy is cross_entropy of linear, fused only under bf16", "[gradcheck]") {
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{3, 0, 1, 4, 0, 2}, {2, 3});
  check([&](auto& v) { return linear_cross_entropy(v[0], v[1], v[2], targets, 0.1, 0); },
        {randn({2, 3, 4}), randn({5, 4}), randn({5})});
  check([&](auto& v) { return linear_cross_entropy(v[0], v[1], Var(), targets, 0.0, -1); },
        {randn({2, 3, 4}), randn({5, 4})});
  // In float32 products, the two ops to the bit; under bf16 (where the CPU has it) the fused op
  // at the model's sizes: the same loss, gradients within bf16 rounding (tests/core/test_bf16.cpp
  // bounds them), and the weight's gradient added to by a second use (tied to an embedding).
  Generator g(5);
  const Tensor x = g.normal({4, 64, 96}, 0.0, 1.0), w = g.normal({500, 96}, 0.0, 0.1), b = g.normal({500}, 0.0, 1.0);
  std::vector<int32_t> t(256);
  for (size_t i = 0; i < t.size(); ++i) t[i] = int32_t((i * 37) % 500);
  const Tensor tt = Tensor::from_vector(t, {4, 64});
  for (const Precision p : {Precision::fp32, Precision::bf16}) {
    if (p == Precision::bf16 && !bf16_supported()) continue;
    INFO(precision_name(p));
    const MatmulPrecisionScope scope(p);
    Var xa(x, true), xb(x, true), wa(w, true), wb(w, true), ba(b, true), bb(b, true);
    const Var fused = linear_cross_entropy(xa, wa, ba, tt, 0.1, 0) + sum(wa * 0.5);
    const Var composed = cross_entropy(linear(xb, wb, bb), tt, 0.1, 0) + sum(wb * 0.5);
    fused.backward();
    composed.backward();
    if (p == Precision::fp32) {
      REQUIRE(equal_values(fused.data(), composed.data()));
      REQUIRE(equal_values(xa.grad(), xb.grad()));
      REQUIRE(equal_values(wa.grad(), wb.grad()));
      REQUIRE(equal_values(ba.grad(), bb.grad()));
    } else {
      CHECK(fused.item() == Approx(composed.item()).epsilon(1e-6));
      for (const auto& [got, want] : {std::pair{xa.grad(), xb.grad()}, {wa.grad(), wb.grad()}, {ba.grad(), bb.grad()}}) {
        const std::vector<float> gv = got.to_vector<float>(), wv = want.to_vector<float>();
        double scale = 0, worst = 0;
        for (size_t i = 0; i < gv.size(); ++i) {
          scale = std::max(scale, std::abs(double(wv[i])));
          worst = std::max(worst, std::abs(double(gv[i]) - wv[i]));
        }
        CHECK(worst <= 0.02 * scale);
      }
      CHECK(!equal_values(xa.grad(), xb.grad()));  // the fused op really ran
    }
  }
  CHECK_THROWS_WITH(linear_cross_entropy(Var(x), Var(w), Var(b), Tensor::zeros({4, 63}, DType::i32)),
                    Catch::Contains("linear_cross_entropy: targets [4, 63] do not match input [4, 64, 96]"));
}

TEST_CASE("gradcheck: diamond graph and tied weights", "[gradcheck]") {
  // x is used by two branches that meet again.
  check([](auto& v) {
    Var a = tanh(v[0]);
    Var b = a * v[0];
    Var c = exp(a) + b;
    return c * a;
  }, {randn({3, 3})});
  // Tied embedding / output projection: the same weight is used twice.
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, 3, 0}, {3});
  check([&](auto& v) {
    Var h = embedding(v[0], ids);  // [3, D]
    return linear(tanh(h), v[0], Var());  // logits against the same table
  }, {randn({4, 3})});
}

// y = x^2 whose backward writes `factor` * dy * x into its destination, through the contract
// (add = true) or over it, ignoring beta (add = false).
Var custom_square(const Var& x, double factor, bool add) {
  Var out(rosetta::mul(x.data(), x.data()));
  record(out, "custom_square", {&x}, [x = x.data(), factor, add](const Tensor& dy, Node& n) {
    GradDest d = n.grad_dest(0);
    if (add) expand_backward(rosetta::mul(dy, x), d, factor);
    else d.out.copy_(affine(rosetta::mul(dy, x), factor, 0));
    d.commit();
  });
  return out;
}

TEST_CASE("gradcheck: an input used twice by one op", "[gradcheck]") {
  // The second operand's gradient arrives while the first one's is there already.
  check([](auto& v) { return v[0] * v[0]; }, {randn({3, 4})});
  check([](auto& v) { return v[0] / v[0] + pow(v[0], v[0]); }, {positive({3, 4})});
  check([](auto& v) { return matmul(v[0], v[0]); }, {randn({3, 3})});
  // Gain and bias tied: one op writes both destinations before committing either.
  check([](auto& v) { return layer_norm(v[0], v[1], v[1], 1e-5); }, {randn({3, 4}), randn({4}, 1, 0.5)});
  check([](auto& v) { return where(Tensor::from_vector(std::vector<int32_t>{1, 0, 1}), v[0], v[0] * 3.0); },
        {randn({2, 3})});
}

TEST_CASE("gradcheck catches a wrong backward", "[gradcheck]") {
  // A backward that forgets the factor 2.
  for (bool buffers : {false, true}) {
    const GradcheckResult r = gradcheck([](auto& v) { return custom_square(v[0], 1.0, true); }, {randn({3})},
                                        GradcheckOptions().grad_buffers(buffers));
    REQUIRE_FALSE(r.ok);
    REQUIRE_THAT(r.message, Catch::Contains("analytic"));
  }
  REQUIRE(gradcheck([](auto& v) { return custom_square(v[0], 2.0, true); }, {randn({3})}).ok);
}

TEST_CASE("gradcheck catches a backward that overwrites its destination", "[gradcheck]") {
  auto overwriting = [](auto& v) { return custom_square(v[0], 2.0, false); };
  // Into a buffer that held something: what it held is lost.
  const GradcheckResult bound = gradcheck(overwriting, {randn({3})}, GradcheckOptions().grad_buffers(true));
  REQUIRE_FALSE(bound.ok);
  REQUIRE_THAT(bound.message, Catch::Contains("into gradient buffers"));
  // Into a gradient of its own: right the first time, lost at the second backward.
  const GradcheckResult own = gradcheck(overwriting, {randn({3})});
  REQUIRE_FALSE(own.ok);
  REQUIRE_THAT(own.message, Catch::Contains("second backward"));
}

TEST_CASE("gradcheck catches a backward that adds where it was to write over", "[gradcheck]") {
  // Adds to its destination whatever its beta says: right into a buffer that counts (beta 1),
  // NaN over a stale one (beta 0: to be written over).
  auto adding = [](auto& v) {
    Var out(rosetta::mul(v[0].data(), v[0].data()));
    record(out, "adding_square", {&v[0]}, [x = v[0].data()](const Tensor& dy, Node& n) {
      GradDest d = n.grad_dest(0);
      add_(d.out, affine(rosetta::mul(dy, x), 2.0, 0));
      d.commit();
    });
    return out;
  };
  REQUIRE(gradcheck(adding, {randn({3})}, GradcheckOptions().grad_buffers(true)).ok);
  const GradcheckResult stale =
      gradcheck(adding, {randn({3})}, GradcheckOptions().grad_buffers(true).stale_buffers(true));
  REQUIRE_FALSE(stale.ok);
  REQUIRE_THAT(stale.message, Catch::Contains("over stale gradient buffers"));
}

TEST_CASE("gradcheck: fused masked softmax and scaled matmul", "[gradcheck]") {
  const Tensor causal = Tensor::from_vector(
      std::vector<int32_t>{0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}, {1, 4, 4});
  const Tensor fully = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1}, {2, 1, 4});
  for (const Tensor& m : {causal, fully}) {
    INFO("mask " << m.str());
    check([&](auto& v) { return softmax(v[0], m); }, {randn({2, 4, 4})});
  }
  // Equal to the composed masked_fill + softmax, including fully masked rows.
  const Tensor x = randn({2, 4, 4});
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE_THAT(rosetta::softmax(x, fully),
               rosetta::test::AllClose(rosetta::softmax(rosetta::masked_fill(x, fully, -inf)), 1e-12, 1e-14));
  check([](auto& v) { return matmul(v[0], v[1], 0.25); }, {randn({2, 3, 4}), randn({2, 4, 5})});
  check([](auto& v) { return matmul(v[0], v[1], -2.0); }, {randn({3, 4}), randn({4, 2})});
  check([](auto& v) { return matmul(v[0], v[1], 0.5); }, {randn({2, 3, 4}), randn({4, 2})});
}
