// int8 products for decoding (core/src/kernels/int8*) against float64 references, on the shape
// classes a Transformer decodes with, and the precision switch around them.
//
// The scheme is documented (cpu.h, kernels/int8_kernel.h): row i of A by sa_i = max_k |a_ik| / 127, column
// j of the weight B by sb_j = max_k |b_kj| / 127, values rounded to the nearest integer step,
// sums exact. So each operand is off by at most half a step, and an element by at most
//   sum_k (|a_ik| sb_j / 2 + |b_kj| sa_i / 2 + sa_i sb_j / 4)
// plus the fp32 rounding of the scaled result; operands that are already on the grid (integers,
// each row and column reaching 127) must come out exact.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>

#include "rosetta/core/cpu.h"
#include "kernels/int8_kernel.h"
#include "rosetta/core/ops.h"
#include "rosetta/core/random.h"

using namespace rosetta;

namespace {

// What the messages say an int8 kernel needs at least (cpu.cpp).
#if defined(__aarch64__)
constexpr const char* kInt8Needs = "DOTPROD at least";
#else
constexpr const char* kInt8Needs = "AVX2 at least";
#endif

bool skipped_without_int8() {
  if (int8_supported()) return false;
  WARN("skipped: no int8 kernel runs on this CPU (it needs " + std::string(kInt8Needs) + ") (" + cpu_isa_name() + ")");
  return true;
}

// The weights' range of the int8 kernel this process runs: 127, or 63 on AVX2 (int8_kernel.h).
double weight_range() { return double(detail::int8_kernel()->w_max); }

// y = x @ op(W) + bias through matmul_bias_into, inside a PackedWeightsScope when `scoped`; W is
// [N, K] (a Linear's weight, used transposed) or [K, N].
Tensor product(const Tensor& x, const Tensor& w, bool w_is_out_in, const Tensor& bias, bool scoped = true) {
  const Tensor b = w_is_out_in ? w.transpose(0, 1) : w;
  Tensor y = Tensor::empty({x.shape()[0], b.shape()[1]});
  if (scoped) {
    const PackedWeightsScope scope;
    matmul_bias_into(y, x, b, bias);
  } else {
    matmul_bias_into(y, x, b, bias);
  }
  return y;
}

// Checks y = x @ b (+ bias) within the quantization bound above; returns the largest error seen
// relative to its bound.
double check_int8(const Tensor& y, const Tensor& x, const Tensor& b, const Tensor& bias) {
  const int64_t M = x.shape()[0], K = x.shape()[1], N = b.shape()[1];
  const std::vector<double> xv = x.contiguous().to_vector<double>(), bv = b.contiguous().to_vector<double>(),
                            got = y.contiguous().to_vector<double>();
  const std::vector<double> bias_v = bias.defined() ? bias.to_vector<double>() : std::vector<double>(size_t(N), 0.0);
  std::vector<double> sa(size_t(M), 0.0), sb(size_t(N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) sa[i] = std::max(sa[i], std::abs(xv[i * K + k]) / 127);
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < K; ++k) sb[j] = std::max(sb[j], std::abs(bv[k * N + j]) / weight_range());
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double exact = bias_v[j], bound = 0, mag = std::abs(bias_v[j]);
      for (int64_t k = 0; k < K; ++k) {
        const double a = xv[i * K + k], w = bv[k * N + j];
        exact += a * w;
        mag += std::abs(a * w);
        bound += std::abs(a) * sb[j] / 2 + std::abs(w) * sa[i] / 2 + sa[i] * sb[j] / 4;
      }
      bound += 1e-6 * (mag + bound) + 1e-30;  // fp32 scaling and the bias's addition
      const double err = std::abs(got[i * N + j] - exact);
      if (err > bound)
        FAIL("element (" << i << ", " << j << ") of " << M << " x " << N << " x " << K << ": " << got[i * N + j]
                         << " against " << exact << ", bound " << bound);
      worst = std::max(worst, err / bound);
    }
  return worst;
}

}  // namespace

TEST_CASE("int8 products: the shapes of decoding, within the quantization bound", "[int8]") {
  if (skipped_without_int8()) return;
  const MatmulPrecisionScope int8(Precision::int8);
  Generator g(11);
  // rows: a beam of one sentence, a tail panel, full panels; columns: projections, feed-forward,
  // an odd vocabulary; K: d_model, ff, and sizes that are not multiples of 4.
  const std::vector<std::array<int64_t, 3>> shapes{{4, 256, 256},  {1, 64, 64},    {7, 1024, 256}, {33, 256, 1024},
                                                   {128, 5003, 256}, {12, 37, 13}, {9, 48, 255},   {40, 96, 3}};
  double worst = 0;
  for (const auto& [M, N, K] : shapes) {
    for (bool out_in : {true, false}) {
      CAPTURE(M, N, K, out_in);
      const Tensor x = g.normal({M, K}, 0.0, 1.0), bias = g.normal({N}, 0.0, 1.0);
      const Tensor w = out_in ? g.normal({N, K}, 0.0, 0.05) : g.normal({K, N}, 0.0, 0.05);
      const Tensor y = product(x, w, out_in, bias);
      worst = std::max(worst, check_int8(y, x, out_in ? w.transpose(0, 1) : w, bias));
      // Without a bias too (and a relu-like input: every value >= 0).
      const Tensor xr = unary(UnaryOp::abs, x);
      worst = std::max(worst, check_int8(product(xr, w, out_in, Tensor()), xr, out_in ? w.transpose(0, 1) : w, Tensor()));
    }
  }
  // The products really were quantized: fp32 would sit ~1e-6 of the bound.
  CHECK(worst > 0.01);
}

TEST_CASE("int8 products: operands on the int8 grid come out exact, zero rows and columns give the bias",
          "[int8]") {
  if (skipped_without_int8()) return;
  const MatmulPrecisionScope int8(Precision::int8);
  Generator g(5);
  const int64_t M = 10, N = 35, K = 70;
  // Integers in [-q, q] (x: 127, b: the kernel's weight range), each row of x and each column of
  // b reaching q (scale exactly 1; with a power-of-two factor the scales stay exact too).
  auto grid = [&](int64_t r, int64_t c, bool rows, float step) {
    const double q = rows ? 127.0 : weight_range();
    std::vector<float> v = g.uniform({r, c}, -q, q).to_vector<float>();
    for (float& e : v) e = std::nearbyint(e);
    for (int64_t i = 0; i < (rows ? r : c); ++i) v[size_t(rows ? i * c + (i % c) : (i % r) * c + i)] = float(q);
    for (float& e : v) e *= step;
    return Tensor::from_vector(v, {r, c});
  };
  const Tensor x = grid(M, K, true, 0.25f), b = grid(K, N, false, 0.5f);
  std::vector<float> xv = x.to_vector<float>();
  for (int64_t k = 0; k < K; ++k) xv[size_t(3 * K + k)] = 0.0f;  // a zero row
  const Tensor xz = Tensor::from_vector(xv, {M, K});
  std::vector<float> bv = b.to_vector<float>();
  for (int64_t k = 0; k < K; ++k) bv[size_t(k * N + 6)] = 0.0f;  // a zero column
  const Tensor bz = Tensor::from_vector(bv, {K, N}), bias = g.normal({N}, 0.0, 1.0);
  const std::vector<float> got = product(xz, bz, false, bias).to_vector<float>();
  const std::vector<double> want = add(matmul(xz.to(DType::f64), bz.to(DType::f64)), bias.to(DType::f64)).to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(double(got[i]) == Approx(want[i]).epsilon(1e-6).margin(1e-6));
  for (int64_t j = 0; j < N; ++j) CHECK(got[size_t(3 * N + j)] == bias.to_vector<float>()[size_t(j)]);
}

TEST_CASE("int8 runs only inside a PackedWeightsScope and follows the weights it quantized", "[int8]") {
  if (skipped_without_int8()) return;
  Generator g(3);
  const Tensor x = g.normal({16, 64}, 0.0, 1.0), bias = g.normal({48}, 0.0, 1.0);
  Tensor W = g.normal({48, 64}, 0.0, 0.1);
  const std::vector<float> fp32 = product(x, W, true, bias, /*scoped=*/false).to_vector<float>();
  const MatmulPrecisionScope int8(Precision::int8);
  // Outside a scope (training, a loss on a batch): fp32, bit for bit.
  CHECK(product(x, W, true, bias, false).to_vector<float>() == fp32);
  const PackedWeightsScope scope;
  auto linear = [&](const Tensor& w) {
    Tensor y = Tensor::empty({16, 48});
    matmul_bias_into(y, x, w.transpose(0, 1), bias);
    return y.to_vector<float>();
  };
  const std::vector<float> q = linear(W);
  CHECK(q != fp32);
  CHECK(linear(W) == q);  // the same quantized weights, reused
  scale_(W, 2.0);         // written in place: quantized again
  const std::vector<float> doubled = linear(W);
  for (size_t i = 0; i < q.size(); ++i) {
    const float b = bias.to_vector<float>()[i % 48];
    REQUIRE(doubled[i] - b == Approx(2.0 * (q[i] - b)).epsilon(1e-5).margin(1e-5));
  }
  // Back at fp32, the same scope multiplies in fp32 (tests/core/test_packed_f32.cpp).
  const MatmulPrecisionScope fp32_scope(Precision::fp32);
  const std::vector<float> f = linear(W), want = product(x, W, true, bias, false).to_vector<float>();
  for (size_t i = 0; i < f.size(); ++i) REQUIRE(f[i] == Approx(want[i]).epsilon(1e-5).margin(1e-5));
}

TEST_CASE("int8 is chosen only when asked and only where an int8 kernel runs", "[int8]") {
  std::string note = "stale";
  CHECK(parse_precision("int8") == Precision::int8);
  CHECK(std::string(precision_name(Precision::int8)) == "int8");
  const Precision p = resolve_precision("int8", &note);
  if (int8_supported()) {
    CHECK(p == Precision::int8);
    CHECK(note.empty());
    const MatmulPrecisionScope int8(Precision::int8);
    CHECK(matmul_precision() == Precision::int8);
  } else {
    CHECK(p == Precision::fp32);
    CHECK_THAT(note, Catch::Contains(kInt8Needs) && Catch::Contains("fp32") && Catch::Contains(cpu_isa_name()));
    CHECK_THROWS_WITH(set_matmul_precision(Precision::int8), Catch::Contains(kInt8Needs));
  }
  CHECK(matmul_precision() == Precision::fp32);
  CHECK(resolve_precision("auto") != Precision::int8);  // auto never changes results this way
}
