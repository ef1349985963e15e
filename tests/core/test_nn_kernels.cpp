// The nn kernels against their naive references (rosetta::ref) and finite differences:
// softmax and log_softmax, cross-entropy, index_select, a decoding step's attention, layer norm,
// and kernels called inside a parallel region.
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

TEST_CASE("softmax and log_softmax match the reference, with masked rows", "[core]") {
  Generator g(18);
  for (const Shape& s : random_shapes(g, 6)) {
    const Tensor x = g.normal(s, 0, 3);
    for (const Tensor& in : layouts(x)) {
      INFO("shape " << s);
      REQUIRE_THAT(softmax(in), AllClose(ref::softmax(in), 1e-5, 1e-7));
      REQUIRE_THAT(log_softmax(in), AllClose(ref::log_softmax(in), 1e-5, 1e-6));
    }
  }
  // Large logits are stable; -inf entries get probability 0; fully masked rows give zeros.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_vector(std::vector<float>{1000, 1001, -inf, -inf, -inf, -inf, 0, -inf, 3},
                                       {3, 3});
  const auto sm = softmax(x).to_vector<float>();
  REQUIRE_THAT(sm[0], Catch::Matchers::WithinRel(1 / (1 + std::exp(1.0f)), 1e-5f));
  REQUIRE(sm[2] == 0);
  for (int j = 3; j < 6; ++j) REQUIRE(sm[j] == 0);
  REQUIRE(sm[7] == 0);
  const auto ls = log_softmax(x).to_vector<float>();
  for (int j = 3; j < 6; ++j) REQUIRE(ls[j] == 0);
  REQUIRE(std::isinf(ls[7]));
  for (float v : sm) REQUIRE_FALSE(std::isnan(v));
  REQUIRE_THAT(softmax(x), AllClose(ref::softmax(x)));
}

TEST_CASE("softmax backward kernels match finite differences", "[core]") {
  Generator g(19);
  const Tensor x = g.normal({3, 5}, 0, 1, DType::f64), dy = g.normal({3, 5}, 0, 1, DType::f64);
  for (bool log : {false, true}) {
    auto f = [&](const Tensor& in) { return log ? log_softmax(in) : softmax(in); };
    const Tensor dx = Tensor::empty(x.shape(), DType::f64);
    if (log) log_softmax_backward(f(x), dy, {dx});
    else softmax_backward(f(x), dy, {dx});
    const double eps = 1e-6;
    auto xd = x.to_vector<double>();
    std::vector<double> num(xd.size());
    for (size_t i = 0; i < xd.size(); ++i) {
      auto p = xd, m = xd;
      p[i] += eps;
      m[i] -= eps;
      const double fp = sum_all(mul(f(Tensor::from_vector(p, x.shape())), dy)).item();
      const double fm = sum_all(mul(f(Tensor::from_vector(m, x.shape())), dy)).item();
      num[i] = (fp - fm) / (2 * eps);
    }
    REQUIRE_THAT(dx, AllClose(Tensor::from_vector(num, x.shape()), 1e-6, 1e-8));
  }
}

TEST_CASE("the cross-entropy loss has the same bits on every call, whatever the thread count", "[core]") {
  Generator g(21);
  const int64_t N = 2000, V = 1000;  // above the parallel grain
  // In double: a float loss would round most last-bit differences of its double sum away.
  const Tensor logits = g.normal({N, V}, 0, 2).to(DType::f64), targets = g.randint({N}, 0, int32_t(V));
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3, 7}) {
    omp_set_num_threads(threads);
    const double first = cross_entropy_forward(logits, targets, 0.1, -1).loss.item();
    bool same = true;
    for (int k = 0; k < 20; ++k) same = same && cross_entropy_forward(logits, targets, 0.1, -1).loss.item() == first;
    INFO(threads << " threads");
    REQUIRE(same);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("fused cross-entropy matches the reference", "[core]") {
  Generator g(20);
  const int64_t N = 37, V = 11;
  const Tensor logits = g.normal({N, V}, 0, 2);
  Tensor targets = g.randint({N}, 0, int32_t(V));
  targets.data<int32_t>()[3] = 0;  // ignore_index rows
  targets.data<int32_t>()[8] = 0;
  for (double eps : {0.0, 0.1}) {
    const CrossEntropyResult r = cross_entropy_forward(logits, targets, eps, 0);
    const Tensor expect = ref::cross_entropy(logits, targets, eps, 0);
    REQUIRE_THAT(r.loss.item(), Catch::Matchers::WithinRel(expect.item(), 1e-5));
    int64_t nonpad = 0;
    for (int32_t t : targets.to_vector<int32_t>()) nonpad += t != 0;
    REQUIRE(r.count == nonpad);

    // Backward against finite differences of the reference in double.
    const Tensor ld = logits.to(DType::f64);
    const CrossEntropyResult rd = cross_entropy_forward(ld, targets, eps, 0);
    const Tensor dx = Tensor::empty(ld.shape(), DType::f64);
    cross_entropy_backward(ld, targets, rd.lse, eps, 0, rd.count, 1.0, {dx});
    auto base = ld.to_vector<double>();
    for (int64_t idx : {int64_t(0), int64_t(3 * V + 2), int64_t(20 * V + 7), N * V - 1}) {
      auto p = base, m = base;
      p[idx] += 1e-6;
      m[idx] -= 1e-6;
      const double num = (ref::cross_entropy(Tensor::from_vector(p, ld.shape()), targets, eps, 0).item() -
                          ref::cross_entropy(Tensor::from_vector(m, ld.shape()), targets, eps, 0).item()) /
                         2e-6;
      REQUIRE_THAT(dx.to_vector<double>()[idx], Catch::Matchers::WithinAbs(num, 1e-7));
    }
  }
  REQUIRE_THROWS_WITH(cross_entropy_forward(logits, Tensor::full({N}, 11, DType::i32), 0, -1),
                      Catch::Contains("target 11"));
  // All rows ignored: loss 0, no NaN.
  REQUIRE(cross_entropy_forward(logits, Tensor::zeros({N}, DType::i32), 0, 0).loss.item() == 0);
}

TEST_CASE("index_select, its backward and gather_last", "[core]") {
  Generator g(21);
  const Tensor table = g.normal({10, 6});
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{3, 0, 3, 9, 1, 3}, {2, 3});
  for (const Tensor& t : layouts(table))
    REQUIRE_THAT(index_select(t, ids), AllClose(ref::index_select(table, ids)));
  REQUIRE(index_select(table, ids).shape() == Shape{2, 3, 6});
  REQUIRE_THROWS_WITH(index_select(table, Tensor::from_vector(std::vector<int32_t>{10})),
                      Catch::Contains("id 10"));

  const Tensor grad = Tensor::full({10, 6}, NAN);  // beta 0: overwritten unread
  const Tensor src = Tensor::ones({2, 3, 6});
  index_select_backward(ids, src, {grad}, /*skip_id=*/1);
  REQUIRE(grad.at({3, 2}) == 3);  // id 3 appears three times: contributions add up
  REQUIRE(grad.at({1, 0}) == 0);  // skipped (padding id)
  REQUIRE(grad.at({9, 5}) == 1);
  REQUIRE(grad.at({2, 0}) == 0);

  const Tensor x = g.normal({4, 5});
  const Tensor idx = Tensor::from_vector(std::vector<int32_t>{4, 0, 2, 2});
  const auto got = gather_last(x, idx).to_vector<float>();
  for (int i = 0; i < 4; ++i) REQUIRE(got[i] == float(x.at({i, idx.at({i}) > 0 ? int64_t(idx.at({i})) : 0})));
}

TEST_CASE("attend_gathered is softmax attention over the rows its index names", "[core]") {
  Generator g(23);
  // Small (inline) and large (split over threads) batches; an index viewed with a row stride
  // (the decoder's [B, max_len] table, narrowed), hidden positions, and a row hiding all.
  for (const int64_t R : {int64_t(3), int64_t(200)}) {
    const int64_t H = 2, Dh = 8, N = 11, n = 6, width = 9;
    const Tensor q = g.normal({R, H, Dh}), keys = g.normal({N, H, Dh}), values = g.normal({N, H, Dh});
    std::vector<int32_t> idx(size_t(R * width));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t p = 0; p < width; ++p)
        idx[size_t(r * width + p)] = r == 1 ? -1 : int32_t(g.next_below(N + 1)) - 1;  // -1: hidden
    const Tensor index = Tensor::from_vector(idx, {R, width}).narrow(1, 0, n);
    const double scale = 0.35;
    Tensor weights;
    const Tensor out = attend_gathered(q, keys, values, index, scale, &weights);
    REQUIRE(out.shape() == Shape{R, H, Dh});
    REQUIRE(weights.shape() == Shape{R, H, n});
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> e(size_t(n), 0.0);
        double m = -INFINITY, sum = 0;
        for (int64_t p = 0; p < n; ++p) {
          const int32_t j = idx[size_t(r * width + p)];
          if (j < 0) continue;
          double dot = 0;
          for (int64_t d = 0; d < Dh; ++d) dot += double(q.at({r, h, d})) * double(keys.at({j, h, d}));
          e[size_t(p)] = dot * scale;
          m = std::max(m, e[size_t(p)]);
        }
        for (int64_t p = 0; p < n; ++p) {
          e[size_t(p)] = idx[size_t(r * width + p)] < 0 ? 0.0 : std::exp(e[size_t(p)] - m);
          sum += e[size_t(p)];
        }
        for (int64_t d = 0; d < Dh; ++d) {
          double want = 0;
          for (int64_t p = 0; p < n; ++p)
            if (idx[size_t(r * width + p)] >= 0) want += e[size_t(p)] / sum * double(values.at({idx[size_t(r * width + p)], h, d}));
          INFO("row " << r << " head " << h << " dim " << d);
          REQUIRE(std::abs(double(out.at({r, h, d})) - want) < 1e-5);  // 0 where every position is hidden
        }
        for (int64_t p = 0; p < n; ++p)
          REQUIRE(std::abs(double(weights.at({r, h, p})) - (sum > 0 ? e[size_t(p)] / sum : 0.0)) < 1e-6);
      }
  }
  const Tensor q = g.normal({1, 1, 4}), kv = g.normal({3, 1, 4});
  REQUIRE_THROWS_WITH(attend_gathered(q, kv, kv, Tensor::from_vector(std::vector<int32_t>{0, 3}, {1, 2}), 1.0),
                      Catch::Contains("index 3"));
  REQUIRE_THROWS_WITH(attend_gathered(q, kv, g.normal({3, 1, 5}), Tensor::from_vector(std::vector<int32_t>{0}, {1, 1}), 1.0),
                      Catch::Contains("keys and values"));
}

TEST_CASE("layer norm forward and backward", "[core]") {
  Generator g(22);
  for (const Shape& s : {Shape{4, 8}, Shape{2, 3, 16}, Shape{300, 256}}) {
    const Tensor x = g.normal(s, 1, 2), gamma = g.normal({s.back()}), beta = g.normal({s.back()});
    for (const Tensor& in : layouts(x)) {
      const LayerNormResult r = layer_norm_forward(in, gamma, beta, 1e-5);
      REQUIRE_THAT(r.y, AllClose(ref::layer_norm(x, gamma, beta, 1e-5), 1e-4, 1e-5));
    }
  }
  // Backward against finite differences in double of sum(y * w).
  const Tensor x = g.normal({3, 5}, 0, 1, DType::f64), gamma = g.normal({5}, 1, 0.5, DType::f64),
               beta = g.normal({5}, 0, 1, DType::f64), w = g.normal({3, 5}, 0, 1, DType::f64);
  const LayerNormResult r = layer_norm_forward(x, gamma, beta, 1e-5);
  const Tensor dx = Tensor::empty({3, 5}, DType::f64), dgamma = Tensor::empty({5}, DType::f64),
               dbeta = Tensor::ones({5}, DType::f64);
  layer_norm_backward(w, x, r.mean, r.rstd, gamma, {dx}, {dgamma}, {dbeta, 1.0});
  auto objective = [&](const Tensor& xx, const Tensor& gg, const Tensor& bb) {
    return sum_all(mul(ref::layer_norm(xx, gg, bb, 1e-5), w)).item();
  };
  auto numgrad = [&](const Tensor& t, auto&& f) {
    auto v = t.to_vector<double>();
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      auto p = v, m = v;
      p[i] += 1e-6;
      m[i] -= 1e-6;
      out[i] = (f(Tensor::from_vector(p, t.shape())) - f(Tensor::from_vector(m, t.shape()))) / 2e-6;
    }
    return Tensor::from_vector(out, t.shape());
  };
  REQUIRE_THAT(dx, AllClose(numgrad(x, [&](const Tensor& t) { return objective(t, gamma, beta); }),
                            1e-6, 1e-7));
  REQUIRE_THAT(dgamma, AllClose(numgrad(gamma, [&](const Tensor& t) { return objective(x, t, beta); }),
                                1e-6, 1e-7));
  // dbeta accumulated onto its initial ones.
  REQUIRE_THAT(dbeta, AllClose(affine(numgrad(beta, [&](const Tensor& t) { return objective(x, gamma, t); }),
                                      1, 1),
                               1e-6, 1e-7));
}

// Kernels called from inside a parallel region (one thread per model replica, train/replicas.h)
// run inline on that thread; their per-chunk scratch must not be indexed by its thread number.
TEST_CASE("kernels called on the threads of a parallel region match the serial call", "[core]") {
  Generator g(8);
  const int64_t N = 4096, D = 64;  // above the parallel grain: would split when called serially
  const Tensor x = g.normal({N, D}), dy = g.normal({N, D}), gamma = g.normal({D}), beta = g.normal({D});
  const LayerNormResult r = layer_norm_forward(x, gamma, beta, 1e-5);
  const Tensor dx = Tensor::empty({N, D}), dgamma = Tensor::empty({D}), dbeta = Tensor::empty({D});
  layer_norm_backward(dy, x, r.mean, r.rstd, gamma, {dx}, {dgamma}, {dbeta});
  const int threads = 4;
  std::vector<Tensor> dxs(threads), dgammas(threads), dbetas(threads), sums(threads);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    dxs[size_t(t)] = Tensor::empty({N, D});
    dgammas[size_t(t)] = Tensor::empty({D});
    dbetas[size_t(t)] = Tensor::empty({D});
    layer_norm_backward(dy, x, r.mean, r.rstd, gamma, {dxs[size_t(t)]}, {dgammas[size_t(t)]},
                        {dbetas[size_t(t)]});
    sums[size_t(t)] = sum(x, 0);
  }
  for (int t = 0; t < threads; ++t) {
    REQUIRE_THAT(dxs[size_t(t)], AllClose(dx, 1e-6, 1e-6));
    REQUIRE_THAT(dgammas[size_t(t)], AllClose(dgamma, 1e-5, 1e-5));
    REQUIRE_THAT(dbetas[size_t(t)], AllClose(dbeta, 1e-5, 1e-5));
    REQUIRE_THAT(sums[size_t(t)], AllClose(sum(x, 0), 1e-5, 1e-5));
  }
}
