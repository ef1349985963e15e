// int8 products on AVX2, and on AVX-VNNI (int8_kernel.h): the 256-bit kernels of CPUs without
// AVX512_VNNI (AMD Zen 2 and 3, Intel Haswell to Skylake client: AVX2; Intel Alder Lake and
// later client cores, AMD Zen 5: AVX-VNNI).
//
// AVX2 has no int8 dot product summed in int32. VPMADDUBSW multiplies a's unsigned bytes by b's
// signed ones and adds each adjacent pair into a *saturating* int16; VPMADDWD by ones then adds
// the int16 pairs into int32 lanes: the four products of a word, as VPDPBUSD sums them. A pair
// of 8-bit activations (up to 255 shifted) and 8-bit weights (up to 127) could reach
// 2 x 255 x 127 = 64,770 and saturate, so this kernel takes its weights packed to 7 bits
// (Int8Kernel::w_max 63): a pair at most 2 x 255 x 63 = 32,130 < 32,767, and every int16 and
// int32 sum is exact, as oneDNN and CTranslate2 do on AVX2. (7-bit activations instead lost
// more: on a Ding model's 1,059 test sentences, beam 4, fp32 6.95 BLEU, 7-bit weights 6.94,
// 7-bit activations 6.76.)
//
// AVX-VNNI's VPDPBUSD (VEX, 256-bit) sums the four products of a word straight into int32, as
// AVX512_VNNI's does on 16 lanes: 8-bit weights, as the AVX-512 kernel. The
// same loops run with AVX512_VNNI's 256-bit form (EVEX, AVX512VL) as "AVX-VNNI (modelled)", the
// same arithmetic with another encoding: how the tests reach these loops on a CPU with AVX-512
// and without AVX-VNNI.
//
// The micro-kernel keeps a 4 x 16 tile of C in eight YMM accumulators (a sliver of 32 columns
// in two halves): for every quad p it loads the half-sliver's two vectors of row p and
// broadcasts each row's word p.
//
// The vector code carries target attributes, so the file compiles whatever -march is; each
// kernel runs only where its runs_on says the CPU has its instructions (dispatch.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common.h"
#include "int8_kernel.h"
#include "rosetta/core/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace rosetta::detail {

namespace {

constexpr int NV = 2;          // 8-lane vectors across a micro-tile
constexpr int NH = 8 * NV;     // its columns: half a sliver
constexpr int MR = 4;          // its rows (8 accumulators)

enum class Dot { maddubs, vnni_vex, vnni_evex };

bool runs_avx2(const CpuFeatures& f) { return f.avx2 && f.fma; }
bool runs_avx_vnni(const CpuFeatures& f) { return f.avx2 && f.fma && f.avx_vnni; }
bool runs_avx_vnni_model(const CpuFeatures& f) { return f.avx2 && f.avx512f && f.avx512vl && f.avx512_vnni; }

#if defined(__x86_64__)

#define ROSETTA_AVX2 __attribute__((target("avx2,fma")))

// Rows of A as unsigned bytes q + 128, q = round-to-nearest-even(a * (127 / max |a|)), scale
// max |a| / 127 (int8_kernel.h).
ROSETTA_AVX2 void quantize_rows(int64_t M, int64_t Mp, int64_t K, int64_t kp, const float* a, int64_t lda, uint8_t* out,
                                float* scale) {
  constexpr int QMAX = 127, shift = 128;
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i vshift = _mm256_set1_epi32(shift);
  for (int64_t i = 0; i < M; ++i) {
    const float* r = a + i * lda;
    __m256 mx = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) mx = _mm256_max_ps(mx, _mm256_and_ps(absmask, _mm256_loadu_ps(r + k)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    float amax = _mm_cvtss_f32(m4);
    for (; k < K; ++k) amax = std::max(amax, std::fabs(r[k]));
    const bool usable = amax > 0 && std::isfinite(amax);
    scale[i] = usable ? amax / float(QMAX) : 0.0f;
    const float inv = usable ? float(QMAX) / amax : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    uint8_t* o = out + i * kp;
    k = 0;
    for (; k + 8 <= K; k += 8) {
      const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(r + k), vinv)), vshift);
      const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));  // 8 x u16
      const __m128i b = _mm_packus_epi16(w, w);                                                      // 8 x u8 twice
      _mm_storel_epi64(reinterpret_cast<__m128i*>(o + k), b);
    }
    for (; k < K; ++k) o[k] = uint8_t(int(std::nearbyint(r[k] * inv)) + shift);
    for (; k < kp; ++k) o[k] = uint8_t(shift);
  }
  if (Mp > M) std::memset(out + M * kp, shift, size_t((Mp - M) * kp));
  for (int64_t i = M; i < Mp; ++i) scale[i] = 0.0f;
}

// The dot product of a word's four pairs, added to each int32 lane. VPDPBUSD is written in
// assembly, so that the loops carry only the AVX2 target (the compiler may then use nothing of
// AVX-VNNI or AVX-512 elsewhere in them): {vex} is AVX-VNNI's encoding, {evex} AVX512_VNNI's.
template <Dot D>
ROSETTA_AVX2 inline __m256i dot(__m256i acc, __m256i a, __m256i b, __m256i ones) {
  if constexpr (D == Dot::maddubs) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  } else if constexpr (D == Dot::vnni_vex) {
    asm("%{vex%} vpdpbusd %[b], %[a], %[acc]" : [acc] "+x"(acc) : [a] "x"(a), [b] "x"(b));
    return acc;
  } else {
    asm("%{evex%} vpdpbusd %[b], %[a], %[acc]" : [acc] "+x"(acc) : [a] "x"(a), [b] "x"(b));
    return acc;
  }
}

// C tile (m x n of R x NH) from R rows of quantized A (rows kp bytes apart) and half a sliver
// (its rows kInt8Cols words apart).
template <Dot D, int R>
ROSETTA_AVX2 inline void micro_kernel(int64_t kq, const uint8_t* a, int64_t kp, const int8_t* b, const float* sa,
                                      const float* sb, const int32_t* comp, const float* bias, float* c, int64_t ldc,
                                      int m, int n) {
  __m256i acc[R][NV];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t p = 0; p < kq; ++p) {
    __m256i bv[NV];
    for (int v = 0; v < NV; ++v)
      bv[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + p * 4 * kInt8Cols + 32 * v));
    for (int i = 0; i < R; ++i) {
      int32_t word;
      std::memcpy(&word, a + i * kp + 4 * p, 4);
      const __m256i av = _mm256_set1_epi32(word);
      for (int v = 0; v < NV; ++v) acc[i][v] = dot<D>(acc[i][v], av, bv[v], ones);
    }
  }
  for (int i = 0; i < R && i < m; ++i) {
    const __m256 si = _mm256_set1_ps(sa[i]);
    for (int v = 0; v < NV; ++v) {
      const int cols = std::min(8, n - 8 * v);
      if (cols <= 0) break;
      const __m256i shift = _mm256_load_si256(reinterpret_cast<const __m256i*>(comp + 8 * v));
      const __m256i exact = _mm256_sub_epi32(acc[i][v], shift);
      __m256 r = _mm256_mul_ps(_mm256_cvtepi32_ps(exact), _mm256_mul_ps(si, _mm256_load_ps(sb + 8 * v)));
      float* out = c + i * ldc + 8 * v;
      if (cols == 8) {
        if (bias) r = _mm256_add_ps(r, _mm256_loadu_ps(bias + 8 * v));
        _mm256_storeu_ps(out, r);
      } else {
        alignas(32) float t[8];
        _mm256_store_ps(t, r);
        for (int j = 0; j < cols; ++j) out[j] = bias ? t[j] + bias[8 * v + j] : t[j];
      }
    }
  }
}

// C[m0:m1, n0:n1] on the calling thread (m0 and n0 multiples of MR and kInt8Cols).
template <Dot D>
ROSETTA_AVX2 void compute_on(const Int8Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t kq = g.kp / 4;
  for (int64_t j0 = n0; j0 < n1; j0 += kInt8Cols) {
    const int8_t* sliver = g.b->q + j0 * g.kp;  // kq x kInt8Cols words
    for (int64_t h = 0; h < kInt8Cols && j0 + h < n1; h += NH) {
      const int64_t j = j0 + h;
      const int n = int(std::min<int64_t>(NH, n1 - j));
      const float* bias = g.bias ? g.bias + j : nullptr;
      for (int64_t i = m0; i < m1; i += MR) {
        const int m = int(std::min<int64_t>(MR, m1 - i));
        micro_kernel<D, MR>(kq, g.a + i * g.kp, g.kp, sliver + 4 * h, g.sa + i, g.b->scale + j, g.b->comp + j, bias,
                            g.c + i * g.ldc + j, g.ldc, m, n);
      }
    }
  }
}

void compute_avx2(const Int8Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  compute_on<Dot::maddubs>(g, m0, m1, n0, n1);
}
void compute_avx_vnni(const Int8Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  compute_on<Dot::vnni_vex>(g, m0, m1, n0, n1);
}
void compute_avx_vnni_model(const Int8Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  compute_on<Dot::vnni_evex>(g, m0, m1, n0, n1);
}

#else  // not x86-64: never runs there
void quantize_rows(int64_t, int64_t, int64_t, int64_t, const float*, int64_t, uint8_t*, float*) {}
void compute_avx2(const Int8Problem&, int64_t, int64_t, int64_t, int64_t) {}
void compute_avx_vnni(const Int8Problem&, int64_t, int64_t, int64_t, int64_t) {}
void compute_avx_vnni_model(const Int8Problem&, int64_t, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

const Int8Kernel int8_avx2{"AVX2", MR, 63, runs_avx2, quantize_rows, compute_avx2};
const Int8Kernel int8_avx_vnni{"AVX-VNNI", MR, 127, runs_avx_vnni, quantize_rows, compute_avx_vnni};
const Int8Kernel int8_avx_vnni_model{"AVX-VNNI (modelled)", MR, 127, runs_avx_vnni_model, quantize_rows,
                                     compute_avx_vnni_model};

}  // namespace rosetta::detail
