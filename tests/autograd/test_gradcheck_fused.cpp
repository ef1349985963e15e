// Finite-difference checks (gradcheck_support.h) of the fused ops of training and of their
// equality with the ops they fuse, to the bit where they must be: relu_dropout and the linear
// layers around it, linear layers under bf16, dropout_add, linear_cross_entropy, the masked
// softmax and the scaled matmul.
#include <cmath>
#include <limits>
#include <string>

#include "gradcheck_support.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/internal/fused.h"


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

TEST_CASE("gradcheck: linear_cross_entropy is cross_entropy of linear, fused only under bf16", "[gradcheck]") {
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{3, 0, 1, 4, 0, 2}, {2, 3});
  check([&](auto& v) { return linear_cross_entropy(v[0], v[1], v[2], targets, 0.1, 0); },
        {randn({2, 3, 4}), randn({5, 4}), randn({5})});
  check([&](auto& v) { return linear_cross_entropy(v[0], v[1], Var(), targets, 0.0, -1); },
        {randn({2, 3, 4}), randn({5, 4})});
  // In float32 products, the two ops to the bit, on every architecture: there the op is not fused,
  // it runs the two ops themselves (asserted below), so no order of sums, FMA contraction or BLAS
  // kernel can differ between the two sides; a difference would be state carried between calls.
  // Under bf16 (where the CPU has it) the fused op at the model's sizes: the same loss, gradients
  // within bf16 rounding (tests/core/test_bf16.cpp bounds them), and the weight's gradient added to
  // by a second use (tied to an embedding).
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
      REQUIRE_FALSE(linear_cross_entropy_fusable(x.reshape({256, 96}), w, b));
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
