// Internal: elementwise math that vectorises. vexp(float) is a branch-free Cephes-style
// exp (max error ~2 ulp, exp of anything below -87.3 is 0, so exp(-inf) is exactly 0);
// normal_cdf_pdf(float) is built on it. The double versions keep <cmath> for gradient checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// For a function of elementwise loops (no reductions, so no change of summation order) that GCC
// may vectorise with 512-bit registers where the build's CPU has them: its tuning for Intel and
// AMD cores prefers 256-bit ones. noinline: inlined into a caller, the loops would take the
// caller's preference. A build without AVX-512 (or another compiler) vectorises as before.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ROSETTA_WIDE_VECTORS __attribute__((target("prefer-vector-width=512"), noinline))
#else
#define ROSETTA_WIDE_VECTORS
#endif

namespace rosetta::detail {

inline float vexp(float x) {
  const float hi = 88.37626f, lo = -87.33654f;
  const float xc = x > hi ? hi : (x < lo ? lo : x);
  // n = round(x / ln 2), r = x - n ln 2 (in two parts for accuracy)
  // Round to nearest by the 1.5 * 2^23 trick (vectorises, unlike nearbyint).
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // p * 2^n through the exponent bits
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < lo ? 0.0f : p * scale;
}

inline double vexp(double x) { return std::exp(x); }

// The standard normal's cdf Phi(x) and density phi(x), for GELU, without branches (glibc's
// erff is a scalar call). Phi(x) = erfc(-x / sqrt 2) / 2, and erfc(z) for z >= 0 is Numerical
// Recipes' erfcc, t exp(-z^2 + P(t)) with t = 1 / (1 + z / 2), relative error < 1.2e-7: the
// lower tail keeps its digits, where 0.5 * (1 + erf) cancels to nothing. exp(-x^2 / 2) is
// shared by both and corrected for the rounding of x^2 (its FMA residual), which would
// otherwise cost |x|^2 ulp. Within ~8 ulp of the exact GELU and its derivative wherever they
// are normal floats.
inline void normal_cdf_pdf(float x, float& cdf, float& pdf) {
  const float a = std::min(std::fabs(x), 16.0f);  // Phi(16) is 1 in float; keeps inf finite
  const float t = 1.0f / (1.0f + 0.35355339f * a);  // z / 2 = a / (2 sqrt 2)
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  const float a2 = a * a;
  const float g = vexp(-0.5f * a2) * (1.0f - 0.5f * std::fma(a, a, -a2));  // exp(-x^2 / 2)
  const float half_erfc = 0.5f * t * g * vexp(p);                          // Phi(-|x|)
  cdf = x < 0.0f ? half_erfc : 1.0f - half_erfc;
  pdf = 0.39894228f * g;
}

inline void normal_cdf_pdf(double x, double& cdf, double& pdf) {
  cdf = 0.5 * std::erfc(-x * 0.70710678118654752440);
  pdf = 0.39894228040143267794 * std::exp(-0.5 * x * x);
}

}  // namespace rosetta::detail
