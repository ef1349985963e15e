// fp32 products by weights packed once (core/src/kernels/f32*, decoding on AVX-512, AVX2 or NEON;
// ctest runs these again with ROSETTA_PACKED_F32=avx2, the AVX2 kernel on an AVX-512 CPU)
// against float64: each element within fp32 summation of the exact product,
// |c - ref| <= (K + 2) 2^-23 sum_k |a_ik b_kj| (+ the bias's rounding), on any number of threads.
#include <omp.h>

#include <array>
#include <catch2/catch.hpp>
#include <cmath>

#include "rosetta/core/cpu.h"
#include "rosetta/core/ops.h"
#include "rosetta/core/random.h"

using namespace rosetta;

namespace {

std::vector<float> packed_linear(const Tensor& x, const Tensor& b, const Tensor& bias) {
  Tensor y = Tensor::empty({x.shape()[0], b.shape()[1]});
  const PackedWeightsScope scope;
  matmul_bias_into(y, x, b, bias);
  return y.to_vector<float>();
}

}  // namespace

TEST_CASE("fp32 products by packed weights: decoding's shapes against float64, on any threads", "[packed]") {
  if (PackedWeightsScope::fp32_kernel_isa().empty()) {
    WARN("skipped: no AVX2 and FMA, no NEON (" + cpu_isa_name() + "): packed fp32 products use OpenBLAS");
    return;
  }
  INFO("the " + PackedWeightsScope::fp32_kernel_isa() + " kernel");
  CHECK_THAT(kernels_summary(), Catch::Contains("fp32 decoding: rosetta " + PackedWeightsScope::fp32_kernel_isa() + " kernel"));
  const MatmulPrecisionScope fp32(Precision::fp32);
  Generator g(17);
  // K past one 512 block (1100), tail panels of every height (AVX-512's 12 and 4 rows, AVX2's and
  // NEON's 6, 4 and 2, NEON's 1), odd N and K, a last sliver cut in either of its halves (5003, 37, 57).
  const std::vector<std::array<int64_t, 3>> shapes{{4, 256, 256},   {1, 64, 64},  {13, 1024, 256}, {33, 256, 1100},
                                                   {128, 5003, 256}, {12, 37, 13}, {5, 48, 1},      {7, 57, 300}};
  const int threads = omp_get_max_threads();
  for (const auto& [M, N, K] : shapes) {
    for (bool out_in : {true, false}) {
      CAPTURE(M, N, K, out_in);
      const Tensor x = g.normal({M, K}, 0.0, 1.0), bias = g.normal({N}, 0.0, 1.0);
      const Tensor w = out_in ? g.normal({N, K}, 0.0, 0.1) : g.normal({K, N}, 0.0, 0.1);
      const Tensor b = out_in ? w.transpose(0, 1) : w;
      const std::vector<float> got = packed_linear(x, b, bias);
      const std::vector<double> exact =
          add(matmul(x.to(DType::f64), b.to(DType::f64)), bias.to(DType::f64)).contiguous().to_vector<double>();
      const std::vector<double> mag = add(matmul(unary(UnaryOp::abs, x.to(DType::f64)), unary(UnaryOp::abs, b.to(DType::f64))),
                                          unary(UnaryOp::abs, bias.to(DType::f64)))
                                          .contiguous()
                                          .to_vector<double>();
      for (size_t i = 0; i < got.size(); ++i)
        REQUIRE(std::abs(double(got[i]) - exact[i]) <= double(K + 2) * std::ldexp(1.0, -23) * mag[i] + 1e-30);
      // Each element is summed by one thread in one order: the same on one thread.
      omp_set_num_threads(1);
      const std::vector<float> one = packed_linear(x, b, bias);
      omp_set_num_threads(threads);
      CHECK(one == got);
      // Without a bias.
      const std::vector<float> nb = packed_linear(x, b, Tensor());
      const std::vector<double> exact_nb = matmul(x.to(DType::f64), b.to(DType::f64)).contiguous().to_vector<double>();
      for (size_t i = 0; i < nb.size(); ++i)
        REQUIRE(std::abs(double(nb[i]) - exact_nb[i]) <= double(K + 2) * std::ldexp(1.0, -23) * mag[i] + 1e-30);
    }
  }
}

TEST_CASE("fp32 packed weights follow the weights they were packed from", "[packed]") {
  const MatmulPrecisionScope fp32(Precision::fp32);
  Generator g(19);
  const Tensor x = g.normal({20, 40}, 0.0, 1.0), bias = g.normal({24}, 0.0, 1.0);
  Tensor W = g.normal({24, 40}, 0.0, 0.1);
  const PackedWeightsScope scope;
  auto linear = [&](const Tensor& w) {
    Tensor y = Tensor::empty({20, 24});
    matmul_bias_into(y, x, w.transpose(0, 1), bias);
    return y.to_vector<float>();
  };
  const std::vector<float> first = linear(W);
  CHECK(linear(W) == first);
  scale_(W, -1.0);  // written in place: packed again
  const std::vector<float> flipped = linear(W);
  const std::vector<float> b = bias.to_vector<float>();
  for (size_t i = 0; i < first.size(); ++i)
    REQUIRE(flipped[i] - b[i % 24] == Approx(-(first[i] - b[i % 24])).epsilon(1e-5).margin(1e-5));
}
