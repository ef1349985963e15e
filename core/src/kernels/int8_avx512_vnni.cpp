// int8 products on AVX512_VNNI (int8_kernel.h).
//
// The instruction: VPDPBUSD acc, a, b adds a[4l]*b[4l] + ... + a[4l+3]*b[4l+3] to the int32 lane
// l of acc, a's bytes unsigned and b's signed (16 lanes, 64 products per instruction: four times
// what one fp32 FMA does). No sum can overflow: |acc| <= 4 * 255 * 127 per instruction, 2^31 only
// past K of 66,000. The micro-kernel keeps an 8 x 32 tile of C in registers: for every quad p it
// loads the sliver's two vectors of row p and broadcasts each row's word p. Slivers outermost,
// so each stays in L1 while A's rows (a few KiB each) stream from L2. No cache blocking of K: the
// model's K (<= 4096) makes slivers of at most 128 KiB.
//
// The vector code carries a target attribute, so the file compiles whatever -march is; it runs
// only where int8_avx512_vnni.runs_on the CPU (dispatch.cpp).
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
#define ROSETTA_INT8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#endif

namespace rosetta::detail {

namespace {

constexpr int NV = 2;          // 16-lane vectors across a micro-tile
constexpr int NR = kInt8Cols;  // its columns
constexpr int MR = 8;          // its rows (16 accumulators); a last panel of <= 4 rows uses 4

bool runs_on(const CpuFeatures& f) { return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_vnni; }

#if defined(__x86_64__)

ROSETTA_INT8_TARGET void quantize_rows(int64_t M, int64_t Mp, int64_t K, int64_t kp, const float* a, int64_t lda,
                                       uint8_t* out, float* scale) {
  const __m512i shift = _mm512_set1_epi32(128);
  for (int64_t i = 0; i < M; ++i) {
    const float* r = a + i * lda;
    __m512 mx = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(first_lanes(K - k), r + k)));
    const float amax = _mm512_reduce_max_ps(mx);
    const bool usable = amax > 0 && std::isfinite(amax);
    scale[i] = usable ? amax / 127.0f : 0.0f;
    const __m512 inv = _mm512_set1_ps(usable ? 127.0f / amax : 0.0f);
    uint8_t* o = out + i * kp;
    for (int64_t k = 0; k < kp; k += 16) {
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(first_lanes(K - k), r + k), inv);
      const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), shift);  // nearest even: in [1, 255]
      _mm_mask_storeu_epi8(o + k, first_lanes(kp - k), _mm512_cvtusepi32_epi8(q));
    }
  }
  if (Mp > M) std::memset(out + M * kp, 128, size_t((Mp - M) * kp));
  for (int64_t i = M; i < Mp; ++i) scale[i] = 0.0f;
}

// C tile (m x n of R x NR) from R rows of quantized A (rows kp bytes apart) and a B sliver.
template <int R>
ROSETTA_INT8_TARGET void micro_kernel(int64_t kq, const uint8_t* a, int64_t kp, const int8_t* b, const float* sa,
                                      const float* sb, const int32_t* comp, const float* bias, float* c,
                                      int64_t ldc, int m, int n) {
  __m512i acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_si512();
  for (int64_t p = 0; p < kq; ++p) {
    __m512i bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_si512(b + p * 4 * NR + 64 * v);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      int32_t word;
      std::memcpy(&word, a + i * kp + 4 * p, 4);
      const __m512i av = _mm512_set1_epi32(word);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], av, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    if (i >= m) break;
    const __m512 si = _mm512_set1_ps(sa[i]);
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __mmask16 k = first_lanes(n - 16 * v);
      if (!k) break;
      const __m512i exact = _mm512_sub_epi32(acc[i][v], _mm512_load_si512(comp + 16 * v));
      __m512 r = _mm512_mul_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(si, _mm512_load_ps(sb + 16 * v)));
      if (bias) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(k, bias + 16 * v));
      _mm512_mask_storeu_ps(c + i * ldc + 16 * v, k, r);
    }
  }
}

// C[m0:m1, n0:n1] on the calling thread (m0 and n0 multiples of MR and NR).
ROSETTA_INT8_TARGET void compute(const Int8Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t kq = g.kp / 4;
  for (int64_t j = n0; j < n1; j += NR) {
    const int8_t* sliver = g.b->q + j * g.kp;  // kq x NR words per sliver
    const int n = int(std::min<int64_t>(NR, n1 - j));
    const float* bias = g.bias ? g.bias + j : nullptr;
    for (int64_t i = m0; i < m1; i += MR) {
      const int m = int(std::min<int64_t>(MR, m1 - i));
      const uint8_t* a = g.a + i * g.kp;
      float* c = g.c + i * g.ldc + j;
      if (m <= 4)
        micro_kernel<4>(kq, a, g.kp, sliver, g.sa + i, g.b->scale + j, g.b->comp + j, bias, c, g.ldc, m, n);
      else
        micro_kernel<MR>(kq, a, g.kp, sliver, g.sa + i, g.b->scale + j, g.b->comp + j, bias, c, g.ldc, m, n);
    }
  }
}

#else  // not x86-64: never runs there
void quantize_rows(int64_t, int64_t, int64_t, int64_t, const float*, int64_t, uint8_t*, float*) {}
void compute(const Int8Problem&, int64_t, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

const Int8Kernel int8_avx512_vnni{"AVX512_VNNI", MR, 127, runs_on, quantize_rows, compute};

}  // namespace rosetta::detail
