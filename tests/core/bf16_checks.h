// What the bf16 tests (test_bf16.cpp, test_bf16_fused.cpp) share: the reference checks of a
// bf16 product, random inputs, and the skip where the CPU has no bf16 products.
//
// Two references per product. Against the exact float64 product of the fp32 operands, an
// element may be off by the rounding of both operands to bf16 (8 significant bits: up to 2^-8
// relative each) plus fp32 summation: |c - ref| <= (2^-7 + 2^-16 + K 2^-23) sum_k |a_ik b_kj|.
// Against the float64 product of the operands rounded to bf16 first (what the kernel
// multiplies), only fp32 summation is left: |c - ref| <= K 2^-23 sum_k |a_ik b_kj|, which
// catches any element packed or stored wrong.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/reference.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/ops.h"
#include "rosetta/core/random.h"

namespace rosetta::test {

// t with each value rounded to bf16 (nearest even), as the bf16 kernels round their operands.
inline Tensor rounded_bf16(const Tensor& t) {
  std::vector<float> v = t.contiguous().to_vector<float>();
  for (float& x : v) x = detail::reference::round_bf16(x);
  return Tensor::from_vector(v, t.shape());
}

// Checks c (fp32, [..., M, N]) = alpha * a @ b + beta * c0 against both references.
inline void check_product(const Tensor& c, const Tensor& a, const Tensor& b, double alpha = 1.0, double beta = 0.0,
                          const Tensor& c0 = Tensor()) {
  const int64_t K = a.shape().back();
  Tensor exact = matmul(a.to(DType::f64), b.to(DType::f64));
  Tensor of_bf16 = matmul(rounded_bf16(a).to(DType::f64), rounded_bf16(b).to(DType::f64));
  Tensor scale = matmul(unary(UnaryOp::abs, a.to(DType::f64)), unary(UnaryOp::abs, b.to(DType::f64)));
  const std::vector<double> e = exact.contiguous().to_vector<double>(), r = of_bf16.contiguous().to_vector<double>(),
                            s = scale.contiguous().to_vector<double>(), got = c.contiguous().to_vector<double>();
  const std::vector<double> before = c0.defined() ? c0.contiguous().to_vector<double>() : std::vector<double>(got.size(), 0);
  const double summation = double(K) * std::ldexp(1.0, -23);
  double worst_rounding = 0;  // largest error against the exact product, relative to its bound's scale
  for (size_t i = 0; i < got.size(); ++i) {
    const double sc = std::abs(alpha) * s[i];
    const double want = alpha * e[i] + beta * before[i], want_bf16 = alpha * r[i] + beta * before[i];
    const double slack = 1e-6 * std::abs(beta * before[i]) + 1e-30;
    if (std::abs(got[i] - want) > (std::ldexp(1.0, -7) + std::ldexp(1.0, -16) + summation) * sc + slack ||
        std::abs(got[i] - want_bf16) > summation * sc + slack)
      FAIL("element " << i << " of " << c.shape() << ": " << got[i] << " against " << want << " (bf16 operands: "
                      << want_bf16 << ", scale " << sc << ")");
    if (sc > 0) worst_rounding = std::max(worst_rounding, std::abs(got[i] - want) / sc);
  }
  // The product really was computed from bf16 operands: fp32 alone would be ~1e-7 off.
  if (got.size() >= 64) CHECK(worst_rounding > 1e-4);
}

inline Tensor randn(Generator& g, const Shape& s) { return g.normal(s, 0.0, 1.0); }

// The instructions the bf16 products need, as rosetta's messages name them.
#if defined(__aarch64__)
constexpr const char* kBf16Instructions = "BFMMLA";
#else
constexpr const char* kBf16Instructions = "AVX512_BF16";
#endif

// True (with a note) where the CPU has no bf16 dot products (AVX512_BF16; ARM64: BFMMLA): the bf16
// products cannot run.
inline bool skipped_without_bf16() {
  if (bf16_supported()) return false;
  WARN("skipped: this CPU has no " + std::string(kBf16Instructions) + " (" + cpu_isa_name() + ")");
  return true;
}

}  // namespace rosetta::test
