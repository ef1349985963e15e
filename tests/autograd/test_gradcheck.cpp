// Finite-difference checks (gradcheck_support.h) of every differentiable op, in float64. The
// fused ops of training: test_gradcheck_fused.cpp.
#include <cmath>
#include <limits>
#include <string>

#include "gradcheck_support.h"

using namespace rosetta;

namespace {

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
