// The packing of the bf16 products' operands (bf16_kernel.h): B's slivers for every kernel, A's
// panels for the AVX-512 kernel (the AMX kernel's A: pack_a_amx, bf16_amx.cpp). Packing rounds
// fp32 to bf16 (nearest even, VCVTNE2PS2BF16) and pads odd k, short panels and short slivers
// with zeros.
#include <cstring>
#include <type_traits>

#include "bf16_kernel.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12, of its own AVX-512 intrinsics
#endif

#if defined(__x86_64__)

namespace rosetta::detail::bf16 {

// The loops follow the source: a k-major X is read row by row across all panels (two rows per k
// pair), a j-major one panel by panel, 16 columns x 32 k at a time through a 16 x 16 word
// transpose.
template <class T>
ROSETTA_BF16_TARGET void pack_block(bool k_major, const T* src, int64_t ld, int64_t kc, int64_t w, int W,
                                    uint32_t* out, float* sums, int64_t ks, uint16_t* rounded, int64_t ldr) {
  const int64_t kp = (kc + 1) / 2, panels = (w + W - 1) / W;
  if (ks < kp) ks = kp;
  for (int64_t q = 0; q < panels && ks > kp; ++q)
    std::memset(out + (q * ks + kp) * W, 0, size_t((ks - kp) * W) * sizeof(uint32_t));
  if (k_major) {
    for (int64_t p = 0; p < kp; ++p) {
      const T* r0 = src + (2 * p) * ld;
      const bool odd_tail = 2 * p + 1 >= kc;
      for (int64_t q = 0; q < panels; ++q)
        for (int j0 = 0; j0 < W; j0 += 16) {
          const int64_t j = q * W + j0, wj = std::clamp<int64_t>(w - j, 0, 16);
          const __mmask16 load = first_lanes(wj), own = first_lanes(W - j0);
          if constexpr (std::is_same_v<T, uint16_t>) {
            if (!sums) {  // bf16 already: the two rows' values interleaved as they are
              const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(load, r0 + j));
              const __m512i hi = odd_tail ? _mm512_setzero_si512()
                                          : _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(load, r0 + ld + j));
              _mm512_mask_storeu_epi32(out + q * ks * W + p * W + j0, own, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
              continue;
            }
          }
          const __m512 lo = load16(load, r0 + j);
          const __m512 hi = odd_tail ? _mm512_setzero_ps() : load16(load, r0 + ld + j);
          _mm512_mask_storeu_epi32(out + q * ks * W + p * W + j0, own, pair_words(lo, hi));
          if (sums) {  // this panel's columns only (a load may reach into the next panel's)
            const __mmask16 mine = load & own;
            _mm512_mask_storeu_ps(sums + j, mine,
                                  _mm512_add_ps(_mm512_maskz_loadu_ps(mine, sums + j), _mm512_add_ps(lo, hi)));
          }
        }
    }
    return;
  }
  for (int64_t q = 0; q < panels; ++q)
    for (int j0 = 0; j0 < W; j0 += 16) {
      // valid columns here, and only this panel's (a 12-wide panel reads 12 rows, not 16)
      const int64_t jq = q * W + j0, wj = std::clamp<int64_t>(std::min<int64_t>(w - jq, W - j0), 0, 16);
      const __mmask16 store = first_lanes(W - j0);
      uint32_t* panel = out + q * ks * W;
      for (int64_t p0 = 0; p0 < kp; p0 += 16) {  // 16 pairs = 32 k of 16 columns
        const int64_t k0 = 2 * p0, nk = std::min<int64_t>(32, kc - k0);
        const __mmask16 lo_mask = first_lanes(nk), hi_mask = first_lanes(std::max<int64_t>(nk - 16, 0));
        __m512i r[16];
        for (int j = 0; j < 16; ++j) {
          if (j >= wj) {
            r[j] = _mm512_setzero_si512();
            continue;
          }
          const T* row = src + (jq + j) * ld + k0;
          if constexpr (std::is_same_v<T, uint16_t>) {  // bf16 already: the words as they are
            r[j] = _mm512_maskz_loadu_epi16(first_halves(nk), row);
            continue;
          }
          const __m512 lo = load16(lo_mask, row);
          const __m512 hi = load16(hi_mask, row + 16);
          r[j] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // words: pairs p0 .. p0+15 of column j
          if (rounded) _mm512_mask_storeu_epi16(rounded + (jq + j) * ldr + k0, first_halves(nk), r[j]);
        }
        transpose16(r);  // r[t]: pair p0+t of the 16 columns
        const int64_t np = std::min<int64_t>(16, kp - p0);
        for (int t = 0; t < np; ++t) _mm512_mask_storeu_epi32(panel + (p0 + t) * W + j0, store, r[t]);
      }
    }
}
template void pack_block<float>(bool, const float*, int64_t, int64_t, int64_t, int, uint32_t*, float*, int64_t,
                                uint16_t*, int64_t);
template void pack_block<uint16_t>(bool, const uint16_t*, int64_t, int64_t, int64_t, int, uint32_t*, float*, int64_t,
                                   uint16_t*, int64_t);

}  // namespace rosetta::detail::bf16

#endif
