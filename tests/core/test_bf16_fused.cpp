// The fused ops of bf16 training (rosetta/core/internal/fused.h) against the unfused ops they
// stand for, to the bit or within bf16 rounding: a linear layer's parameter gradients and a
// relu's input gradient, inputs kept in bf16 (Bf16Matrix), the relu and dropout applied as the
// product is stored, and the output layer fused with its cross-entropy. References and bounds:
// bf16_checks.h.
#include <omp.h>

#include "bf16_checks.h"
#include "rosetta/core/internal/fused.h"

using namespace rosetta;
using rosetta::test::check_product;
using rosetta::test::randn;
using rosetta::test::rounded_bf16;
using rosetta::test::skipped_without_bf16;

TEST_CASE("a linear layer's weight and bias gradients in one pass: the bias summed as dy is packed", "[bf16]") {
  if (skipped_without_bf16()) return;
  Generator g(5);
  const int threads = get_num_threads();
  // {rows, in, out}: C split over rows of dW (out >= in) or over its columns (out < in: one
  // thread sums), K over one or more packed blocks of k (512 for the AVX-512 kernel, 2048 for
  // AMX tiles: 1250 is three of the first, 4500 three of the second), out not a multiple of the
  // micro-tile; on AMX tiles, {1000, 2048, 40}'s columns in four panels of B (k <= 1024: 1 MiB
  // each), the sums taken in the first.
  for (const auto& [rows, in, out] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1250, 256, 1024}, {1000, 2048, 40}, {1100, 64, 37}, {40, 256, 5000}, {4500, 48, 70}}) {
    INFO("linear " << rows << " x " << in << " -> " << out);
    const Tensor x = randn(g, {rows, in}), dy = randn(g, {rows, out}), dw0 = randn(g, {out, in}),
                 db0 = randn(g, {out});
    // float64 column sums of dy, and the fp32 summation bound on them.
    const std::vector<double> want = sum(dy.to(DType::f64), 0, false).to_vector<double>(),
                              scale = sum(unary(UnaryOp::abs, dy.to(DType::f64)), 0, false).to_vector<double>();
    std::vector<std::vector<float>> db_by_threads;
    for (const int t : {1, std::max(2, threads)}) {
      set_num_threads(t);
      for (const double beta : {0.0, 0.5}) {
        const MatmulPrecisionScope bf16(Precision::bf16);
        Tensor dw = dw0.clone(), db = beta == 0 ? Tensor::full({out}, std::nan("")) : db0.clone();
        linear_param_grads(dy, x, {dw, beta}, {db, beta});
        check_product(dw, dy.transpose(0, 1), x, 1.0, beta, dw0);
        const std::vector<float> got = db.to_vector<float>(), before = db0.to_vector<float>();
        for (int64_t j = 0; j < out; ++j) {
          const double w = want[j] + beta * before[j];
          if (std::abs(got[j] - w) > double(rows) * std::ldexp(1.0, -23) * scale[j] + 1e-6 * std::abs(w))
            FAIL("bias gradient " << j << ": " << got[j] << " against " << w);
        }
        if (beta == 0) db_by_threads.push_back(got);
      }
    }
    set_num_threads(threads);
    CHECK(db_by_threads[0] == db_by_threads[1]);  // each sum is one thread's, in one order
    // fp32 products: exactly a GEMM and a column sum, as before; no weight gradient: the sum alone.
    const MatmulPrecisionScope fp32(Precision::fp32);
    Tensor dw = dw0.clone(), db = db0.clone(), dw_ref = dw0.clone(), db_ref = db0.clone();
    linear_param_grads(dy, x, {dw, 1.0}, {db, 1.0});
    matmul_into(dw_ref, dy.transpose(0, 1), x, 1.0, 1.0);
    expand_backward(dy, {db_ref, 1.0});
    CHECK(dw.to_vector<float>() == dw_ref.to_vector<float>());
    CHECK(db.to_vector<float>() == db_ref.to_vector<float>());
    const MatmulPrecisionScope bf16(Precision::bf16);
    Tensor only = Tensor::empty({out});
    linear_param_grads(dy, x, {}, {only, 0.0});
    expand_backward(dy, {db_ref, 0.0});
    CHECK(only.to_vector<float>() == db_ref.to_vector<float>());
  }
  CHECK_THROWS_WITH(linear_param_grads(Tensor::zeros({4, 3}), Tensor::zeros({5, 2}), {}, {}),
                    Catch::Contains("linear_param_grads: dy [4, 3] and x [5, 2]"));
}

TEST_CASE("relu's input gradient through a linear layer: masked and scaled as the product is stored", "[bf16]") {
  if (skipped_without_bf16()) return;
  Generator g(9);
  // {rows, out, in} of dx = dy @ W [rows, out] x [out, in]: a feed-forward layer's relu (in 1024),
  // K over several packed blocks (1100: three of the AVX-512 kernel's 512, 2300: two of the AMX
  // tiles' 2048), sizes off the micro-tile.
  for (const auto& [rows, out, in] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1250, 256, 1024}, {300, 1100, 70}, {37, 64, 333}, {90, 2300, 40}}) {
    INFO("dy " << rows << " x " << out << ", W " << out << " x " << in);
    const Tensor dy = randn(g, {rows, out}), W = randn(g, {out, in});
    Tensor y = unary(UnaryOp::relu, randn(g, {rows, in}));  // a relu's output: half zeros
    y.data<float>()[1] = std::nanf("");                      // NaN is not > 0: no gradient there
    const double scale = 1.0 / 0.8;
    const MatmulPrecisionScope bf16(Precision::bf16);
    Tensor dx = Tensor::full({rows, in}, std::nan(""));
    relu_linear_input_grad(dy, W, y, scale, {dx, 0.0});
    // Where y > 0: the bf16 product times the scale; elsewhere exactly 0.
    Tensor dense = Tensor::empty({rows, in});
    matmul_into(dense, dy, W, scale, 0.0);
    const std::vector<float> got = dx.to_vector<float>(), want = dense.to_vector<float>(), ys = y.to_vector<float>();
    int64_t gated = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (ys[i] > 0) {
        if (got[i] != want[i]) FAIL("element " << i << ": " << got[i] << " against " << want[i]);
      } else {
        if (got[i] != 0.0f) FAIL("element " << i << " (y " << ys[i] << "): " << got[i] << " against 0");
        ++gated;
      }
    }
    CHECK(gated > int64_t(got.size()) / 3);
    // Accumulating (beta 1) and fp32 products: matmul then unary_backward, as before, to the bit.
    const Tensor dx0 = randn(g, {rows, in});
    Tensor acc = dx0.clone(), ref = dx0.clone();
    relu_linear_input_grad(dy, W, y, scale, {acc, 1.0});
    unary_backward(UnaryOp::relu, y, Tensor(), matmul(dy, W), {ref, 1.0}, scale);
    CHECK(acc.to_vector<float>() == ref.to_vector<float>());
    const MatmulPrecisionScope fp32(Precision::fp32);
    Tensor f = Tensor::empty({rows, in}), fref = Tensor::empty({rows, in});
    relu_linear_input_grad(dy, W, y, scale, {f, 0.0});
    unary_backward(UnaryOp::relu, y, Tensor(), matmul(dy, W), {fref, 0.0}, scale);
    CHECK(f.to_vector<float>() == fref.to_vector<float>());
  }
  CHECK_THROWS_WITH(relu_linear_input_grad(Tensor::zeros({4, 3}), Tensor::zeros({3, 5}), Tensor::zeros({4, 6}), 1.0,
                                           {Tensor::zeros({4, 6}), 0.0}),
                    Catch::Contains("relu_linear_input_grad: dy [4, 3], weight [3, 5] and y [4, 6]"));
}

TEST_CASE("inputs kept in bf16 (Bf16Matrix) give the products of the fp32 inputs, to the bit", "[bf16]") {
  if (skipped_without_bf16()) return;
  Generator g(31);
  const int threads = get_num_threads();
  // {rows, in, out}: the small preset's feed-forward layer (C split over rows), an odd input
  // width (a row's last word half padding) off every tile, k over two AMX blocks of 2048 (A
  // rounded block by block), and more outputs than rows and than one panel of B (C split over
  // columns: only the first columns' thread writes the rounded input).
  for (const auto& [r, i, o] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1250, 256, 1024}, {37, 333, 70}, {40, 2300, 96}, {64, 48, 9000}}) {
    const int64_t rows = r, in = i, out = o;  // not bindings: lambdas below capture them
    INFO("linear " << rows << " x " << in << " -> " << out);
    const Tensor x = randn(g, {rows, in + 3}).narrow(1, 0, in);  // rows in + 3 apart
    const Tensor w = g.normal({out, in}, 0.0, 0.1), b = randn(g, {out}), dy = randn(g, {rows, out});
    const Tensor h = randn(g, {rows, in}), dyr = randn(g, {rows, out});
    const uint64_t offset = (uint64_t(1) << 32) - 1000;  // the counter's high half changes inside
    for (const int t : {1, std::max(2, threads)}) {
      set_num_threads(t);
      const MatmulPrecisionScope bf16(Precision::bf16);
      REQUIRE(bf16_linear(rows, w));
      Tensor want = Tensor::empty({rows, out});
      matmul_bias_into(want, x, w.transpose(0, 1), b);
      Bf16Matrix x16;
      const Tensor y = linear_keeping_bf16(x, w, b, x16);
      CHECK(y.to_vector<float>() == want.to_vector<float>());
      REQUIRE(x16.rows() == rows);
      CHECK(x16.to_f32().to_vector<float>() == rounded_bf16(x).to_vector<float>());
      if (in % 2) {  // the pad half-word of every row is 0
        const std::vector<int32_t> words = x16.words.to_vector<int32_t>();
        for (int64_t row = 0; row < rows; ++row)
          if (uint32_t(words[size_t(row * ((in + 1) / 2) + in / 2)]) >> 16) FAIL("row " << row << "'s pad is not 0");
      }
      CHECK(linear_bf16(x16, w, b).to_vector<float>() == want.to_vector<float>());
      {
        SharedPackedWeights packed;
        packed.pack({w});
        const SharedPackedWeights::Use use(packed);
        Bf16Matrix again;
        CHECK(linear_keeping_bf16(x, w, Tensor(), again).to_vector<float>() ==
              linear_bf16(x16, w, Tensor()).to_vector<float>());
        CHECK(again.words.to_vector<int32_t>() == x16.words.to_vector<int32_t>());
      }
      // The weight's and bias's gradients: added to (beta 0.5) or fresh, with and without the bias.
      for (const double beta : {0.0, 0.5}) {
        const Tensor dw0 = randn(g, {out, in}), db0 = randn(g, {out});
        Tensor dw = dw0.clone(), db = db0.clone(), dw_ref = dw0.clone(), db_ref = db0.clone();
        linear_param_grads(dy, x16, {dw, beta}, {db, beta});
        linear_param_grads(dy, x, {dw_ref, beta}, {db_ref, beta});
        CHECK(dw.to_vector<float>() == dw_ref.to_vector<float>());
        CHECK(db.to_vector<float>() == db_ref.to_vector<float>());
        linear_param_grads(dy, x16, {dw, beta}, {});
        linear_param_grads(dy, x, {dw_ref, beta}, {});
        CHECK(dw.to_vector<float>() == dw_ref.to_vector<float>());
      }
      // relu (p 0) and relu with dropout straight into bf16, and relu's input gradient gated by it.
      for (const double p : {0.0, 0.25}) {
        const Tensor a = p > 0 ? relu_dropout(h, p, 77, offset) : unary(UnaryOp::relu, h);
        const Bf16Matrix a16 = relu_dropout_bf16(h, p, 77, offset);
        CHECK(a16.to_f32().to_vector<float>() == rounded_bf16(a).to_vector<float>());
        const double scale = 1.0 / (1.0 - p);
        for (const double beta : {0.0, 1.0}) {
          const Tensor dx0 = randn(g, {rows, in});
          Tensor dx = dx0.clone(), dx_ref = dx0.clone();
          relu_linear_input_grad(dyr, w, a16, scale, {dx, beta});
          relu_linear_input_grad(dyr, w, a, scale, {dx_ref, beta});
          CHECK(dx.to_vector<float>() == dx_ref.to_vector<float>());
        }
      }
    }
    set_num_threads(threads);
    // Outside bf16 precision the kept input is widened: fp32 products of its bf16 values.
    Bf16Matrix x16;
    {
      const MatmulPrecisionScope bf16(Precision::bf16);
      linear_keeping_bf16(x, w, b, x16);
    }
    const MatmulPrecisionScope fp32(Precision::fp32);
    CHECK(!bf16_linear(rows, w));
    Tensor dw = Tensor::empty({out, in}), db = Tensor::empty({out}), dw_ref = Tensor::empty({out, in}),
           db_ref = Tensor::empty({out});
    linear_param_grads(dy, x16, {dw, 0.0}, {db, 0.0});
    linear_param_grads(dy, x16.to_f32(), {dw_ref, 0.0}, {db_ref, 0.0});
    CHECK(dw.to_vector<float>() == dw_ref.to_vector<float>());
    CHECK(db.to_vector<float>() == db_ref.to_vector<float>());
    CHECK_THROWS_WITH(linear_keeping_bf16(x, w, b, x16), Catch::Contains("under bf16 products"));
  }
  const MatmulPrecisionScope bf16(Precision::bf16);
  Bf16Matrix kept;
  CHECK_THROWS_WITH(linear_keeping_bf16(Tensor::zeros({64, 32}), Tensor::zeros({64, 48}), Tensor(), kept),
                    Catch::Contains("linear_keeping_bf16: x [64, 32] and weight [64, 48]"));
  CHECK_THROWS_WITH(relu_dropout_bf16(Tensor::zeros({4, 4}), 1.0, 1, 0), Catch::Contains("probability 1"));
  CHECK_THROWS_WITH(linear_param_grads(Tensor::zeros({4, 3}), Bf16Matrix(), {}, {}),
                    Catch::Contains("linear_param_grads: not a Bf16Matrix"));
}

namespace {
// The first row and column where two bf16 matrices of the same shape differ, or "" (a message
// for a failed check that does not print millions of values).
std::string first_difference(const Bf16Matrix& a, const Bf16Matrix& b) {
  if (a.rows() != b.rows() || a.cols != b.cols) return "shapes differ";
  for (int64_t i = 0; i < a.rows(); ++i)
    for (int64_t j = 0; j < a.cols; ++j)
      if (a.data()[i * a.ld() + j] != b.data()[i * b.ld() + j]) return "row " + std::to_string(i) + ", column " + std::to_string(j);
  return "";
}
}  // namespace

TEST_CASE("a linear layer's product through relu and dropout straight into bf16: relu_dropout_bf16 of it, to the bit", "[bf16]") {
  if (skipped_without_bf16()) return;
  Generator g(41);
  const int threads = get_num_threads();
  // {rows, in, out}: the small preset's feed-forward layer (C split over rows), an odd output
  // width (a row's last word half padding) and odd input width off every tile, and more outputs
  // than rows and than one panel of B (C split over columns; two panels on AMX tiles).
  for (const auto& [r, i, o] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1250, 256, 1024}, {37, 333, 71}, {64, 48, 9000}}) {
    const int64_t rows = r, in = i, out = o;
    INFO("linear " << rows << " x " << in << " -> " << out);
    const Tensor x = randn(g, {rows, in + 3}).narrow(1, 0, in);  // rows in + 3 apart
    const Tensor w = g.normal({out, in}, 0.0, 0.1), b = randn(g, {out});
    // The counter's high half changes inside: 1,000 is not a multiple of 16 (mid-vector).
    const uint64_t offset = (uint64_t(1) << 32) - 1000;
    for (const int t : {1, std::max(2, threads)}) {
      set_num_threads(t);
      const MatmulPrecisionScope bf16(Precision::bf16);
      REQUIRE(linear_relu_dropout_fusable(x, w));
      for (const double p : {0.0, 0.25})
        for (const bool with_bias : {true, false}) {
          INFO("threads " << t << " p " << p << " bias " << with_bias);
          const Tensor bias = with_bias ? b : Tensor();
          Bf16Matrix x16, x16_ref;
          const Bf16Matrix a = linear_relu_dropout_bf16(x, w, bias, p, 77, offset, x16);
          const Bf16Matrix want = relu_dropout_bf16(linear_keeping_bf16(x, w, bias, x16_ref), p, 77, offset);
          CHECK(first_difference(a, want) == "");
          CHECK(first_difference(x16, x16_ref) == "");
          SharedPackedWeights packed;  // the weight packed once for the replicas
          packed.pack({w});
          const SharedPackedWeights::Use use(packed);
          Bf16Matrix again;
          CHECK(first_difference(linear_relu_dropout_bf16(x, w, bias, p, 77, offset, again), want) == "");
        }
    }
    set_num_threads(threads);
  }
  const MatmulPrecisionScope bf16(Precision::bf16);
  Bf16Matrix kept;
  // K beyond one block of k of either kernel (512 on AVX512_BF16, 2048 on AMX tiles): not fused.
  CHECK(!linear_relu_dropout_fusable(Tensor::zeros({64, 2300}), Tensor::zeros({64, 2300})));
  CHECK_THROWS_WITH(linear_relu_dropout_bf16(Tensor::zeros({64, 2300}), Tensor::zeros({64, 2300}), Tensor(), 0.1, 1, 0, kept),
                    Catch::Contains("linear_relu_dropout_bf16: x [64, 2300] and weight [64, 2300]"));
  CHECK_THROWS_WITH(linear_relu_dropout_bf16(Tensor::zeros({64, 64}), Tensor::zeros({64, 64}), Tensor(), 1.0, 1, 0, kept),
                    Catch::Contains("probability 1"));
  CHECK_THROWS_WITH(linear_relu_dropout_bf16(Tensor::zeros({64, 64}), Tensor::zeros({64, 64}), Tensor::zeros({3}), 0.1, 1, 0, kept),
                    Catch::Contains("bias [3] does not match weight [64, 64]"));
  const MatmulPrecisionScope fp32(Precision::fp32);
  CHECK(!linear_relu_dropout_fusable(Tensor::zeros({64, 64}), Tensor::zeros({64, 64})));
}

TEST_CASE("the output layer fused with its cross-entropy: the same loss, gradients within bf16 rounding", "[bf16]") {
  if (skipped_without_bf16()) return;
  Generator g(23);
  // {rows, K, V}: row blocks of the forward (128) with a short last one, an odd vocabulary (the
  // gradient's rows padded to whole words) off the micro-tile, and the small preset's shape.
  for (const auto& [rows, k, v] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {300, 64, 1001}, {37, 200, 96}, {1024, 256, 8000}}) {
    const int64_t N = rows, K = k, V = v;  // not bindings: lambdas below capture them
    for (const double smoothing : {0.0, 0.1}) {
      INFO("x " << N << " x " << K << ", w " << V << " x " << K << ", smoothing " << smoothing);
      const Tensor x = randn(g, {N, K}), w = g.normal({V, K}, 0.0, 0.1), bias = randn(g, {V});
      std::vector<int32_t> t(size_t(N), 0);
      for (int64_t i = 0; i < N; ++i) t[size_t(i)] = i % 7 == 3 ? -1 : int32_t((i * 7919) % V);  // some ignored
      const Tensor targets = Tensor::from_vector(t);
      const double up = 1.5;  // the loss's own gradient
      const MatmulPrecisionScope bf16(Precision::bf16);
      REQUIRE(linear_cross_entropy_fusable(x, w, bias));
      // The two ops it fuses, on the same bf16 logits: the reference loss and logits' gradient.
      Tensor logits = Tensor::empty({N, V});
      matmul_bias_into(logits, x, w.transpose(0, 1), bias);
      const CrossEntropyResult ce = cross_entropy_forward(logits, targets, smoothing, -1);
      Tensor dlogits = Tensor::empty({N, V});
      cross_entropy_backward(logits, targets, ce.lse, smoothing, -1, ce.count, up, {dlogits, 0.0});

      const LinearCrossEntropyResult r = linear_cross_entropy_forward(x, w, bias, targets, smoothing, -1);
      CHECK(r.count == ce.count);
      CHECK(r.loss.item() == Approx(ce.loss.item()).epsilon(1e-6));
      const Tensor dx0 = randn(g, {N, K});
      Tensor dx = dx0.clone(), dw = Tensor::full({V, K}, std::nan("")), db = Tensor::full({V}, std::nan(""));
      linear_cross_entropy_backward(r, w, up, {dx, 1.0}, {dw, 0.0}, {db, 0.0});

      // Against float64 products of the reference gradient: off by rounding the gradient and
      // the other operand to bf16 (2^-8 relative each), fp32 sums, and the gradient's own fp32
      // rounding (its softmax divides where the reference subtracts a log: ~1e-6 relative).
      const Tensor d64 = dlogits.to(DType::f64), ad = unary(UnaryOp::abs, d64);
      const auto check = [&](const Tensor& got, const Tensor& want, const Tensor& scale, int64_t k, const char* what) {
        const std::vector<double> gv = got.to_vector<double>(), wv = want.contiguous().to_vector<double>(),
                                  sv = scale.contiguous().to_vector<double>();
        double worst = 0;
        for (size_t i = 0; i < gv.size(); ++i) {
          const double bound = (std::ldexp(1.0, -7) + 1e-5 + double(k) * std::ldexp(1.0, -23)) * sv[i] + 1e-6 * std::abs(wv[i]);
          if (!(std::abs(gv[i] - wv[i]) <= bound))
            FAIL(what << " element " << i << ": " << gv[i] << " against " << wv[i] << " (scale " << sv[i] << ")");
          if (sv[i] > 0) worst = std::max(worst, std::abs(gv[i] - wv[i]) / sv[i]);
        }
        CHECK(worst > 1e-5);  // bf16 products indeed: fp32 would be ~1e-7 off
      };
      check(dx.to(DType::f64), add(dx0.to(DType::f64), matmul(d64, w.to(DType::f64))),
            matmul(ad, unary(UnaryOp::abs, w.to(DType::f64))), V, "dx");
      check(dw.to(DType::f64), matmul(d64.transpose(0, 1), x.to(DType::f64)),
            matmul(ad.transpose(0, 1), unary(UnaryOp::abs, x.to(DType::f64))), N, "dw");
      // The bias gradient is summed in fp32 before rounding: fp32 summation only.
      const std::vector<double> want = sum(d64, 0).to_vector<double>(), scale = sum(ad, 0).to_vector<double>();
      const std::vector<float> got = db.to_vector<float>();
      for (int64_t j = 0; j < V; ++j)
        if (!(std::abs(got[size_t(j)] - want[size_t(j)]) <= (double(N) * std::ldexp(1.0, -23) + 1e-5) * scale[size_t(j)] + 1e-9))
          FAIL("bias gradient " << j << ": " << got[size_t(j)] << " against " << want[size_t(j)]);

      // The same bits on one thread and on several, and from the replicas' shared packing.
      const auto all = [&] {
        const LinearCrossEntropyResult q = linear_cross_entropy_forward(x, w, bias, targets, smoothing, -1);
        Tensor a = Tensor::empty({N, K}), b = Tensor::empty({V, K}), c = Tensor::empty({V});
        linear_cross_entropy_backward(q, w, up, {a, 0.0}, {b, 0.0}, {c, 0.0});
        std::vector<float> v = q.loss.to_vector<float>();
        for (const Tensor& o : {a, b, c})
          for (float e : o.to_vector<float>()) v.push_back(e);
        return v;
      };
      const int threads = get_num_threads();
      set_num_threads(1);
      const std::vector<float> one = all();
      set_num_threads(std::max(2, threads));
      CHECK(all() == one);
      set_num_threads(threads);
      SharedPackedWeights packed;
      packed.pack({w});
      const SharedPackedWeights::Use use(packed);
      CHECK(all() == one);
    }
  }
  const MatmulPrecisionScope bf16(Precision::bf16);
  CHECK(!linear_cross_entropy_fusable(Tensor::zeros({64, 64}), Tensor::zeros({64, 32}), Tensor()));
  CHECK(!linear_cross_entropy_fusable(Tensor::zeros({64, 64}).transpose(0, 1), Tensor::zeros({64, 64}), Tensor()));
  CHECK_THROWS_WITH(linear_cross_entropy_forward(Tensor::zeros({64, 64}), Tensor::zeros({64, 64}), Tensor(),
                                                 Tensor::zeros({64}, DType::i32).narrow(0, 0, 60), 0.0, -1),
                    Catch::Contains("cross_entropy: targets must be I32 [64]"));
  CHECK_THROWS_WITH(linear_cross_entropy_forward(Tensor::zeros({64, 64}), Tensor::zeros({64, 64}), Tensor(),
                                                 Tensor::full({64}, 64.0, DType::i32), 0.0, -1),
                    Catch::Contains("cross_entropy: target 64 at row 0 outside [0, 64)"));
  const MatmulPrecisionScope fp32(Precision::fp32);
  CHECK(!linear_cross_entropy_fusable(Tensor::zeros({64, 64}), Tensor::zeros({64, 64}), Tensor()));
}
