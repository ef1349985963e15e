// Every fast kernel against its naive reference (rosetta::ref), on random shapes, contiguous
// and non-contiguous inputs, and every broadcasting pattern: elementwise ops, reductions, matmul
// and dropout (the nn ops: test_nn_kernels.cpp; the GEMM micro-kernels: test_gemm_kernels.cpp).
#include <omp.h>

#include <cmath>
#include <limits>

#include "kernel_inputs.h"

using namespace rosetta;
using rosetta::test::AllClose;
using rosetta::test::layouts;
using rosetta::test::non_contiguous;
using rosetta::test::random_shapes;
using rosetta::test::transposed_layout;

TEST_CASE("unary kernels match the reference", "[core]") {
  Generator g(11);
  const std::vector<UnaryOp> ops{UnaryOp::neg,     UnaryOp::exp,  UnaryOp::log,
                                 UnaryOp::sqrt,    UnaryOp::tanh, UnaryOp::sigmoid,
                                 UnaryOp::relu,    UnaryOp::gelu, UnaryOp::abs,
                                 UnaryOp::square,  UnaryOp::reciprocal};
  for (const Shape& s : random_shapes(g, 6)) {
    const Tensor x = g.uniform(s, 0.1, 2.0);  // positive, so log/sqrt/reciprocal are defined
    const Tensor xs = g.normal(s);
    for (UnaryOp op : ops) {
      const bool pos = op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::reciprocal;
      for (const Tensor& in : layouts(pos ? x : xs)) {
        INFO("op " << int(op) << " shape " << s);
        REQUIRE_THAT(unary(op, in), AllClose(ref::unary(op, in), 1e-5, 1e-6));
        const Tensor d = in.to(DType::f64);
        REQUIRE_THAT(unary(op, d), AllClose(ref::unary(op, d), 1e-12, 1e-12));
      }
    }
  }
}

// float GELU is computed from erfc without branches (core/src/vecmath.h): within a few ulp of
// the exact value and derivative, also in the lower tail, where x (1 + erf(x / sqrt 2)) / 2
// in float cancels (gelu(-6) would be off by 100%).
TEST_CASE("float GELU and its derivative are accurate in both tails", "[core]") {
  std::vector<float> xs;
  for (float x = -12.0f; x <= 12.0f; x += 0.01f) xs.push_back(x);
  const Tensor x = Tensor::from_vector(xs);
  const Tensor ones = Tensor::ones({int64_t(xs.size())});
  const std::vector<float> y = unary(UnaryOp::gelu, x).to_vector<float>();
  const Tensor grad = Tensor::empty({int64_t(xs.size())});
  unary_backward(UnaryOp::gelu, x, Tensor(), ones, {grad});
  const std::vector<float> dx = grad.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i], cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    INFO("x = " << v);
    CHECK_THAT(y[i], Catch::Matchers::WithinRel(v * cdf, 1e-6));
    // The derivative crosses zero near -0.75: bound the error by its terms' size instead.
    CHECK_THAT(dx[i],
               Catch::Matchers::WithinAbs(cdf + v * pdf, 1e-6 * (cdf + std::fabs(v) * pdf)));
  }
}

TEST_CASE("binary kernels broadcast like NumPy", "[core]") {
  Generator g(12);
  // (a, b) shape pairs covering each broadcasting pattern.
  const std::vector<std::pair<Shape, Shape>> pairs{
      {{3, 4}, {3, 4}},        // same shape
      {{3, 4}, {4}},           // trailing vector (bias)
      {{3, 4}, {3, 1}},        // column
      {{3, 1}, {1, 4}},        // outer product
      {{2, 3, 4}, {3, 1}},     // missing leading dim + size-1
      {{1, 3, 1}, {2, 1, 4}},  // both sides broadcast
      {{5}, {}},               // scalar
      {{}, {2, 2}},            // scalar on the left
      {{2, 1, 3, 1}, {4, 1, 5}},
      {{300, 200}, {200}},     // large, crosses the parallel grain
      {{300, 200}, {300, 200}},
  };
  const std::vector<BinaryOp> ops{BinaryOp::add, BinaryOp::sub,     BinaryOp::mul, BinaryOp::div,
                                  BinaryOp::pow, BinaryOp::maximum, BinaryOp::minimum};
  for (const auto& [sa, sb] : pairs) {
    const Tensor a = g.uniform(sa, 0.5, 2.0), b = g.uniform(sb, 0.5, 2.0);
    for (BinaryOp op : ops) {
      const std::vector<Tensor> la = a.dim() > 0 ? layouts(a) : std::vector<Tensor>{a};
      for (const Tensor& x : la) {
        INFO("op " << int(op) << " shapes " << sa << " " << sb);
        REQUIRE_THAT(binary(op, x, b), AllClose(ref::binary(op, x, b), 1e-5, 1e-6));
        REQUIRE_THAT(binary(op, b, x), AllClose(ref::binary(op, b, x), 1e-5, 1e-6));
      }
    }
  }
  REQUIRE_THROWS_AS(add(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)), Error);
}

TEST_CASE("scalar and in-place elementwise ops", "[core]") {
  Generator g(13);
  const Tensor x = g.normal({5, 7});
  REQUIRE_THAT(affine(x, 2.0, -1.0),
               AllClose(ref::binary(BinaryOp::add, ref::binary(BinaryOp::mul, x, Tensor::scalar(2)),
                                    Tensor::scalar(-1))));
  const Tensor p = g.uniform({5, 7}, 0.5, 2);
  REQUIRE_THAT(pow_scalar(p, 1.5), AllClose(ref::binary(BinaryOp::pow, p, Tensor::scalar(1.5))));
  REQUIRE_THAT(pow_scalar(non_contiguous(p), 2.0), AllClose(ref::unary(UnaryOp::square, p)));

  Tensor acc = x.clone();
  const Tensor row = g.normal({7});
  add_(acc, row, 0.5);
  REQUIRE_THAT(acc, AllClose(ref::binary(BinaryOp::add, x,
                                         ref::binary(BinaryOp::mul, row, Tensor::scalar(0.5)))));
  Tensor nc = non_contiguous(x);
  add_(nc, x);
  REQUIRE_THAT(nc, AllClose(affine(x, 2, 0)));
  scale_(nc, 0.25);
  REQUIRE_THAT(nc, AllClose(affine(x, 0.5, 0)));
}

TEST_CASE("where, masked_fill and cat", "[core]") {
  const Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::full({3}, -1.0);
  const Tensor cond = Tensor::from_vector(std::vector<int32_t>{1, 0, 1}, {1, 3});
  REQUIRE(where(cond, a, b).to_vector<float>() == std::vector<float>{1, -1, 3, 4, -1, 6});
  const Tensor mask = Tensor::from_vector(std::vector<int32_t>{0, 1}, {2, 1});
  const Tensor mf = masked_fill(a, mask, -INFINITY);
  REQUIRE(mf.at({0, 2}) == 3);
  REQUIRE(std::isinf(mf.at({1, 0})));
  REQUIRE_THROWS_AS(masked_fill(a, Tensor::zeros({2, 1}), 0), Error);

  const Tensor c = cat({a, a.narrow(1, 0, 1), non_contiguous(a)}, 1);
  REQUIRE(c.shape() == Shape{2, 7});
  REQUIRE(c.to_vector<float>() ==
          std::vector<float>{1, 2, 3, 1, 1, 2, 3, 4, 5, 6, 4, 4, 5, 6});
  REQUIRE(cat({a, a}, 0).shape() == Shape{4, 3});
  REQUIRE_THROWS_WITH(cat({a, Tensor::zeros({3, 3})}, 1), Catch::Contains("[2, 3]"));
}

TEST_CASE("reductions match the reference", "[core]") {
  Generator g(14);
  for (const Shape& s : random_shapes(g, 8)) {
    const Tensor x = g.normal(s);
    for (const Tensor& in : layouts(x)) {
      for (int axis = 0; axis < s.size(); ++axis) {
        for (bool keep : {false, true}) {
          INFO("shape " << s << " axis " << axis << " keepdim " << keep);
          REQUIRE_THAT(sum(in, axis, keep), AllClose(ref::sum(in, axis, keep), 1e-5, 1e-5));
          REQUIRE_THAT(max(in, axis, keep), AllClose(ref::max(in, axis, keep)));
          REQUIRE(argmax(in, axis, keep).to_vector<int32_t>() ==
                  ref::argmax(in, axis, keep).to_vector<int32_t>());
          REQUIRE_THAT(mean(in, axis, keep),
                       AllClose(affine(ref::sum(in, axis, keep), 1.0 / double(s[axis]), 0), 1e-5,
                                1e-6));
        }
      }
    }
  }
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 5, 5, -2}, {2, 2});
  REQUIRE(sum_all(x).item() == 9);
  REQUIRE(mean_all(x).item() == 2.25);
  REQUIRE(argmax(x, 1).to_vector<int32_t>() == std::vector<int32_t>{1, 0});  // first maximum
  REQUIRE(sum(x, {0, 1}).item() == 9);
  REQUIRE(sum(x, {0}, true).shape() == Shape{1, 2});
}

TEST_CASE("sums over a leading or middle axis add each column's terms in order, on any thread count", "[core]") {
  // The bits of a linear layer's fp32 bias gradient: every output is double(x[0]) + double(x[1])
  // + ... in row order, rounded once, however the columns are split between threads.
  Generator g(16);
  const int saved = omp_get_max_threads();
  for (const Shape& s : {Shape{300, 1}, Shape{300, 7}, Shape{513, 2500}, Shape{3, 257, 40}, Shape{2, 5, 1030}}) {
    const Tensor x = g.normal(s);
    const int64_t outer = s.size() == 3 ? s[0] : 1, n = s[s.size() - 2], inner = s[s.size() - 1];
    std::vector<float> want(size_t(outer * inner)), want_acc(want.size());
    const Tensor prior = g.normal({outer * inner});
    const std::vector<float> px = x.to_vector<float>(), pp = prior.to_vector<float>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double a = 0;
        for (int64_t j = 0; j < n; ++j) a += double(px[size_t((o * n + j) * inner + i)]);
        const size_t at = size_t(o * inner + i);
        want[at] = float(a);
        want_acc[at] = 0.5f * pp[at] + (-2.0f * float(a) + 0.0f);
      }
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      INFO("shape " << s << ", " << threads << " threads");
      const Tensor got = sum(x, int(s.size()) - 2, false);
      const bool same = got.to_vector<float>() == want;  // not REQUIRE(a == b): Catch prints both
      REQUIRE(same);
      if (outer == 1) {  // expand_backward into [inner] with alpha -2 and beta 0.5
        Tensor out = prior.clone();
        expand_backward(x, {out, 0.5}, -2.0);
        const bool same_acc = out.to_vector<float>() == want_acc;
        REQUIRE(same_acc);
      }
    }
  }
  omp_set_num_threads(saved);
}

TEST_CASE("ordered_sum adds the threads' partial sums in thread order, over schedule(static)'s chunks", "[core]") {
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3, 5, 8}) {
    omp_set_num_threads(threads);
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000), int64_t(1003)}) {
      INFO(threads << " threads, n " << n);
      // Partials whose sum depends on the order they are added in: 1e16 absorbs 1 unless the 1
      // comes first.
      std::vector<std::pair<int64_t, int64_t>> chunks(size_t(threads), {-1, -1});
      const double got = detail::ordered_sum(n, true, [&](int64_t b, int64_t e) {
        chunks[size_t(omp_get_thread_num())] = {b, e};
        return omp_get_thread_num() % 2 == 0 ? 1.0 : (omp_get_thread_num() == 1 ? 1e16 : -1e16);
      });
      // schedule(static): thread t takes q + 1 items if t < n % T, else q, in thread order.
      const int64_t q = n / threads, r = n % threads;
      double want = 0;
      int64_t at = 0;
      for (int t = 0; t < threads; ++t) {
        const int64_t len = q + (t < r ? 1 : 0);
        if (len == 0) continue;
        REQUIRE(chunks[size_t(t)] == std::pair<int64_t, int64_t>{at, at + len});
        at += len;
        want += t % 2 == 0 ? 1.0 : (t == 1 ? 1e16 : -1e16);
      }
      REQUIRE(at == n);
      REQUIRE(got == want);
    }
    // Not parallel: one call over everything.
    int calls = 0;
    REQUIRE(detail::ordered_sum(10, false, [&](int64_t b, int64_t e) { ++calls; return double(e - b); }) == 10.0);
    REQUIRE(calls == 1);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("sum_to reverses broadcasting", "[core]") {
  Generator g(15);
  const Tensor x = g.normal({2, 3, 4});
  REQUIRE_THAT(sum_to(x, {4}), AllClose(ref::sum(ref::sum(x, 0, false), 0, false)));
  REQUIRE_THAT(sum_to(x, {3, 1}), AllClose(ref::sum(ref::sum(x, 0, false), 1, true)));
  REQUIRE_THAT(sum_to(x, {1, 3, 4}), AllClose(ref::sum(x, 0, true)));
  REQUIRE_THAT(sum_to(x, {}), AllClose(Tensor::scalar(sum_all(x).item()), 1e-5, 1e-5));
  REQUIRE_THROWS_AS(sum_to(x, {5}), Error);
}

TEST_CASE("matmul matches the reference for every layout", "[core]") {
  Generator g(16);
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases{
      {{3, 4}, {4, 5}},
      {{1, 4}, {4, 1}},
      {{5, 1}, {1, 3}},
      {{2, 3, 4}, {4, 5}},        // batched @ matrix: folds into one GEMM
      {{2, 3, 4}, {2, 4, 5}},     // batched
      {{2, 1, 3, 4}, {3, 4, 2}},  // broadcast batch
      {{3, 4}, {2, 4, 6}},        // matrix @ batched
      {{4, 2, 3, 5}, {4, 2, 5, 3}},
      {{130, 140}, {140, 150}},   // large enough for threaded BLAS
      {{3, 0}, {0, 2}},           // empty K
  };
  for (const auto& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      const Tensor a = g.normal(c.a, 0, 1, dt), b = g.normal(c.b, 0, 1, dt);
      const Tensor expect = ref::matmul(a, b);
      const double tol = dt == DType::f32 ? 1e-4 : 1e-10;
      for (const Tensor& la : layouts(a))
        for (const Tensor& lb : layouts(b)) {
          INFO("shapes " << c.a << " x " << c.b << " dtype " << dtype_name(dt));
          REQUIRE_THAT(matmul(la, lb), AllClose(expect, tol, tol));
        }
    }
  }
  // Transposed views go to BLAS as flags: a.T @ b.T without copying either operand.
  const Tensor a = g.normal({6, 4}), b = g.normal({5, 6});
  REQUIRE_THAT(matmul(a.transpose(0, 1), b.transpose(0, 1)),
               AllClose(ref::matmul(a.transpose(0, 1), b.transpose(0, 1)), 1e-4, 1e-4));
  // A permuted attention-style view: [B, H, T, D] from [B, T, H, D].
  const Tensor q = g.normal({2, 5, 3, 4}).permute({0, 2, 1, 3});
  const Tensor k = g.normal({2, 5, 3, 4}).permute({0, 2, 3, 1});
  REQUIRE_THAT(matmul(q, k), AllClose(ref::matmul(q, k), 1e-4, 1e-4));
}

TEST_CASE("matmul_into accumulates with beta", "[core]") {
  Generator g(17);
  const Tensor a = g.normal({3, 4}), b = g.normal({4, 5});
  Tensor out = g.normal({3, 5});
  const Tensor before = out.clone();
  matmul_into(out, a, b, 2.0, 1.0);
  REQUIRE_THAT(out, AllClose(add(before, affine(ref::matmul(a, b), 2.0, 0)), 1e-4, 1e-4));
  Tensor wrong = Tensor::zeros({3, 4});
  REQUIRE_THROWS_AS(matmul_into(wrong, a, b), Error);
}

// Attention writes its heads [B, H, T, D] straight into a [B, T, H, D] buffer: the output's
// batch strides are free, each matrix must be row-major.
TEST_CASE("matmul_into writes into a permuted output", "[core]") {
  Generator g(27);
  const Tensor p = g.normal({2, 3, 5, 4}), v = g.normal({2, 3, 4, 6});
  const Tensor expect = ref::matmul(p, v);
  Tensor merged = Tensor::full({2, 5, 3, 6}, 7.0);
  Tensor heads = merged.permute({0, 2, 1, 3});
  matmul_into(heads, p, v);
  REQUIRE_THAT(heads, AllClose(expect, 1e-4, 1e-4));
  REQUIRE_THAT(merged.permute({0, 2, 1, 3}), AllClose(expect, 1e-4, 1e-4));
  // Through the folded path (a batched a times a matrix) and with beta accumulating.
  const Tensor x = g.normal({5, 2, 4}), w = g.normal({4, 6});
  Tensor wide = Tensor::zeros({2, 5, 6});
  Tensor out = wide.permute({1, 0, 2});
  matmul_into(out, x, w, 1.0, 1.0);
  REQUIRE_THAT(out, AllClose(ref::matmul(x, w), 1e-4, 1e-4));
  // Column-major matrices are refused rather than written wrong.
  Tensor columns = Tensor::zeros({2, 3, 6, 5}).transpose(-1, -2);
  REQUIRE_THROWS_AS(matmul_into(columns, p, v), Error);
}

TEST_CASE("dropout kernel: reproducible mask, right rate and scale", "[core]") {
  const Tensor x = Tensor::ones({200000});
  const Tensor a = dropout(x, 0.3, 42, 1000), b = dropout(x, 0.3, 42, 1000);
  REQUIRE(a.to_vector<float>() == b.to_vector<float>());
  const auto v = a.to_vector<float>();
  double kept = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    REQUIRE((v[i] == 0 || std::abs(v[i] - 1 / 0.7f) < 1e-6));
    REQUIRE((v[i] != 0) == dropout_keep(42, 1000 + i, 0.3));
    kept += v[i] != 0;
  }
  REQUIRE_THAT(kept / double(v.size()), Catch::Matchers::WithinAbs(0.7, 0.005));
  // Another offset or seed gives another mask; neighbouring elements are not correlated.
  REQUIRE(dropout(x, 0.3, 42, 1001).to_vector<float>() != v);
  REQUIRE(dropout(x, 0.3, 43, 1000).to_vector<float>() != v);
  double both = 0;
  for (size_t i = 0; i + 1 < v.size(); ++i) both += v[i] != 0 && v[i + 1] != 0;
  REQUIRE_THAT(both / double(v.size() - 1), Catch::Matchers::WithinAbs(0.49, 0.006));
  // p = 0 keeps everything; counters past 2^32 still work.
  REQUIRE(dropout(x, 0.0, 1, 0).to_vector<float>() == x.to_vector<float>());
  const auto far = dropout(Tensor::ones({1000}), 0.5, 9, (uint64_t(1) << 32) - 500).to_vector<float>();
  double far_kept = 0;
  for (float f : far) far_kept += f != 0;
  for (size_t i = 0; i < far.size(); ++i)  // the counter's high word changes at 500
    REQUIRE((far[i] != 0) == dropout_keep(9, (uint64_t(1) << 32) - 500 + i, 0.5));
  REQUIRE_THAT(far_kept / 1000, Catch::Matchers::WithinAbs(0.5, 0.06));
  // relu_dropout is dropout of relu's output (negative values, zeros and NaN included), in fp32
  // and fp64.
  Generator g(3);
  Tensor h = g.normal({4099}, 0.0, 1.0);
  h.data<float>()[5] = 0.0f;
  h.data<float>()[6] = std::nanf("");
  for (const DType t : {DType::f32, DType::f64}) {
    const Tensor ht = h.to(t);
    const Tensor fused = relu_dropout(ht, 0.2, 77, 123), plain = dropout(unary(UnaryOp::relu, ht), 0.2, 77, 123);
    REQUIRE(fused.to_vector<double>() == plain.to_vector<double>());
  }
}
