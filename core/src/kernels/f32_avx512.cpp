// fp32 products by packed weights on AVX-512 (f32_kernel.h): a 12 x 32 tile of C in 24 ZMM
// accumulators, two sliver vectors and a broadcast per k (12 x 2 FMAs).
//
// The vector code carries a target attribute, so the file compiles whatever -march is; it runs
// only where f32_avx512.runs_on the CPU (dispatch.cpp).
#include <algorithm>

#include "common.h"
#include "f32_kernel.h"
#include "rosetta/core/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define ROSETTA_F32_TARGET __attribute__((target("avx512f,fma")))
#endif

namespace rosetta::detail {

namespace {

constexpr int NV = 2;           // 16-lane vectors across a micro-tile
constexpr int NR = kF32Cols;    // its columns
constexpr int MR = 12;          // its rows (24 accumulators); a last panel of <= 4 rows uses 4
constexpr int64_t KC = kF32BlockK;

bool runs_on(const CpuFeatures& f) { return f.avx512f && f.fma; }

#if defined(__x86_64__)

// C tile (m x n of R x NR) = A rows [kc] . B sliver block (+ bias when `bias`, + C when `add`).
template <int R>
ROSETTA_F32_TARGET void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* b, const float* bias,
                                     bool add, float* c, int64_t ldc, int m, int n) {
  __m512 acc[R][NV];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const float* rows[R];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) rows[i] = a + std::min(i, m - 1) * lda;  // rows past m repeat the last
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(b + k * NR + 16 * v);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(rows[i][k]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    if (i >= m) break;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __mmask16 k = first_lanes(n - 16 * v);
      if (!k) break;
      float* ci = c + i * ldc + 16 * v;
      __m512 r = acc[i][v];
      if (add) r = _mm512_add_ps(_mm512_maskz_loadu_ps(k, ci), r);
      else if (bias) r = _mm512_add_ps(_mm512_maskz_loadu_ps(k, bias + 16 * v), r);
      _mm512_mask_storeu_ps(ci, k, r);
    }
  }
}

// C[m0:m1, n0:n1] on the calling thread (n0 a multiple of NR).
ROSETTA_F32_TARGET void compute(const F32Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t K = g.b->K;
  for (int64_t j = n0; j < n1; j += NR) {
    const float* sliver = g.b->w + j * K;  // (j / NR) * K * NR
    const int n = int(std::min<int64_t>(NR, n1 - j));
    const float* bias = g.bias ? g.bias + j : nullptr;
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc);
      for (int64_t i = m0; i < m1; i += MR) {
        const int m = int(std::min<int64_t>(MR, m1 - i));
        const float* a = g.a + i * g.lda + pc;
        float* c = g.c + i * g.ldc + j;
        if (m <= 4)
          micro_kernel<4>(kc, a, g.lda, sliver + pc * NR, bias, pc > 0, c, g.ldc, m, n);
        else
          micro_kernel<MR>(kc, a, g.lda, sliver + pc * NR, bias, pc > 0, c, g.ldc, m, n);
      }
    }
  }
}

#else  // not x86-64: never runs there
void compute(const F32Problem&, int64_t, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

const F32Kernel f32_avx512{"AVX-512", MR, runs_on, compute};

}  // namespace rosetta::detail
