// What the ARM64 int8 kernels (int8_neon_dot.cpp: SDOT; int8_i8mm.cpp: SMMLA) share: the
// quantization of a row of A to signed bytes. Their products are signed by signed, so A is stored
// as q itself, not q + 128 as for x86's unsigned-by-signed products, and no comp is taken off
// (int8_kernel.h).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__aarch64__)
#include <arm_neon.h>

namespace rosetta::detail::neon {

// Row r of K values to kp signed bytes at q (zeros past K); returns its scale. As the reference
// (reference.h): scale = max |a| / 127 and q = round-to-nearest-even(a * (127 / max |a|)), in
// fp32; scale 0 and q 0 where max |a| is 0 or not finite (FMAX carries a NaN into the max).
inline float quantize_row(int64_t K, int64_t kp, const float* r, int8_t* q) {
  float32x4_t mx = vdupq_n_f32(0.0f);
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) mx = vmaxq_f32(mx, vabsq_f32(vld1q_f32(r + k)));
  if (k < K) {  // the last values, padded with zeros
    float tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t t = k; t < K; ++t) tail[t - k] = r[t];
    mx = vmaxq_f32(mx, vabsq_f32(vld1q_f32(tail)));
  }
  const float amax = vmaxvq_f32(mx);
  const bool usable = amax > 0 && std::isfinite(amax);
  const float inv = usable ? 127.0f / amax : 0.0f;
  const float32x4_t vinv = vdupq_n_f32(inv);
  k = 0;
  for (; k + 8 <= K; k += 8) {
    // FCVTNS rounds to nearest even; |a * inv| <= 127 (plus rounding), saturated to int8 anyway.
    const int32x4_t lo = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(r + k), vinv));
    const int32x4_t hi = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(r + k + 4), vinv));
    vst1_s8(q + k, vqmovn_s16(vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi))));
  }
  for (; k < K; ++k) q[k] = int8_t(std::fmin(127.0f, std::fmax(-127.0f, std::nearbyint(r[k] * inv))));
  for (; k < kp; ++k) q[k] = 0;
  if (!usable)
    for (k = 0; k < K; ++k) q[k] = 0;  // inv 0 already gives 0, but NaN * 0 does not
  return usable ? amax / 127.0f : 0.0f;
}

}  // namespace rosetta::detail::neon

#endif
