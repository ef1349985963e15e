// Internal: elementwise math that vectorises. vexp(float) is a branch-free Cephes-style
// exp (max error ~2 ulp, exp of anything below -87.3 is 0, so exp(-inf) is exactly 0);
// double keeps std::exp for gradient checks.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

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

}  // namespace rosetta::detail
