// fp32 products by packed weights on AVX2 and FMA, for CPUs without AVX-512 (Zen 3, Haswell to
// Alder Lake; f32_kernel.h): the same packing read by a 6 x 16 tile of 8-lane vectors (12
// accumulators, two sliver vectors and a broadcast: 15 of the 16 YMM registers, the shape of
// OpenBLAS's own Haswell kernel), over each sliver's two halves in turn. It sums each element in
// the AVX-512 kernel's order, so the two give the same bits. ROSETTA_PACKED_F32=avx2 runs it on
// an AVX-512 CPU too (dispatch.h).
//
// The vector code carries a target attribute, so the file compiles whatever -march is; it runs
// only where f32_avx2.runs_on the CPU (dispatch.cpp).
#include <algorithm>

#include "common.h"
#include "f32_kernel.h"
#include "rosetta/core/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define ROSETTA_F32_AVX2_TARGET __attribute__((target("avx2,fma")))
#endif

namespace rosetta::detail {

namespace {

constexpr int NR = kF32Cols;  // columns of a sliver
constexpr int64_t KC = kF32BlockK;
constexpr int MR2 = 6;        // the tile's rows (12 accumulators of 8 lanes); last panels 4 or 2
constexpr int NH = 16;        // the tile's columns: half a sliver

bool runs_on(const CpuFeatures& f) { return f.avx2 && f.fma; }

#if defined(__x86_64__)

// The first n of 8 lanes, as AVX2's masked loads and stores take them (a lane's sign bit).
ROSETTA_F32_AVX2_TARGET inline __m256i first_lanes8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(std::clamp(n, 0, 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// C tile (m x n of R x NH) = A rows [kc] . half a sliver block (b: its first column; rows of NR
// floats) (+ bias when `bias`, + C when `add`).
template <int R>
ROSETTA_F32_AVX2_TARGET void micro_kernel_avx2(int64_t kc, const float* a, int64_t lda, const float* b,
                                               const float* bias, bool add, float* c, int64_t ldc, int m, int n) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  const float* rows[R];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) rows[i] = a + std::min(i, m - 1) * lda;  // rows past m repeat the last
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b + k * NR), b1 = _mm256_load_ps(b + k * NR + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(rows[i] + k);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    if (i >= m) break;
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const int left = n - 8 * v;
      if (left <= 0) break;
      float* ci = c + i * ldc + 8 * v;
      __m256 r = acc[i][v];
      if (left >= 8) {
        if (add) r = _mm256_add_ps(_mm256_loadu_ps(ci), r);
        else if (bias) r = _mm256_add_ps(_mm256_loadu_ps(bias + 8 * v), r);
        _mm256_storeu_ps(ci, r);
      } else {
        const __m256i mask = first_lanes8(left);
        if (add) r = _mm256_add_ps(_mm256_maskload_ps(ci, mask), r);
        else if (bias) r = _mm256_add_ps(_mm256_maskload_ps(bias + 8 * v, mask), r);
        _mm256_maskstore_ps(ci, mask, r);
      }
    }
  }
}

// C[m0:m1, n0:n1] on the calling thread (n0 a multiple of NR).
ROSETTA_F32_AVX2_TARGET void compute_avx2(const F32Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t K = g.b->K;
  for (int64_t j = n0; j < n1; j += NR) {
    const float* sliver = g.b->w + j * K;  // (j / NR) * K * NR
    for (int h = 0; h < NR / NH && j + h * NH < n1; ++h) {
      const int n = int(std::min<int64_t>(NH, n1 - j - h * NH));
      const float* bias = g.bias ? g.bias + j + h * NH : nullptr;
      for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = std::min(KC, K - pc);
        const float* b = sliver + pc * NR + h * NH;
        for (int64_t i = m0; i < m1; i += MR2) {
          const int m = int(std::min<int64_t>(MR2, m1 - i));
          const float* a = g.a + i * g.lda + pc;
          float* c = g.c + i * g.ldc + j + h * NH;
          if (m <= 2)
            micro_kernel_avx2<2>(kc, a, g.lda, b, bias, pc > 0, c, g.ldc, m, n);
          else if (m <= 4)
            micro_kernel_avx2<4>(kc, a, g.lda, b, bias, pc > 0, c, g.ldc, m, n);
          else
            micro_kernel_avx2<MR2>(kc, a, g.lda, b, bias, pc > 0, c, g.ldc, m, n);
        }
      }
    }
  }
}

#else  // not x86-64: never runs there
void compute_avx2(const F32Problem&, int64_t, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

const F32Kernel f32_avx2{"AVX2", MR2, runs_on, compute_avx2};

}  // namespace rosetta::detail
