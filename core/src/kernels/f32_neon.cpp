// fp32 products by packed weights on ARM64's NEON (Advanced SIMD; f32_kernel.h): the same packing
// read by a 6 x 16 tile of 4-lane vectors (24 accumulators, four sliver vectors and A's values
// taken one at a time by FMLA's by-element form: 29 of the 32 V registers), over each sliver's two
// halves in turn. Each element is summed in the x86 kernels' order (k ascending in blocks of
// kF32BlockK, one fused multiply-add per k), so every fp32 kernel gives the same bits.
//
// NEON is part of every Armv8-A CPU (the base of an aarch64 build), so the file needs no target
// attribute; on another architecture it compiles to a kernel that never runs (runs_on is false).
#include <algorithm>

#include "common.h"
#include "f32_kernel.h"
#include "rosetta/core/cpu.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace rosetta::detail {

namespace {

constexpr int NR = kF32Cols;  // columns of a sliver
constexpr int64_t KC = kF32BlockK;
constexpr int MR = 6;         // the tile's rows (24 accumulators); shorter last panels use fewer
constexpr int NH = 16;        // the tile's columns: half a sliver, four vectors

bool runs_on(const CpuFeatures& f) { return f.neon; }

#if defined(__aarch64__)

// C tile (m x n of R x NH) = A rows [kc] . half a sliver block (b: its first column; rows of NR
// floats) (+ bias when `bias`, + C when `add`).
template <int R>
void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* b, const float* bias, bool add, float* c,
                  int64_t ldc, int m, int n) {
  float32x4_t acc[R][4];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[i][v] = vdupq_n_f32(0.0f);
  const float* rows[R];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) rows[i] = a + std::min(i, m - 1) * lda;  // rows past m repeat the last
  for (int64_t k = 0; k < kc; ++k) {
    float32x4_t bv[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) bv[v] = vld1q_f32(b + k * NR + 4 * v);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const float ai = rows[i][k];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[i][v] = vfmaq_n_f32(acc[i][v], bv[v], ai);
    }
  }
  for (int i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    if (n == NH) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        float32x4_t r = acc[i][v];
        if (add) r = vaddq_f32(vld1q_f32(ci + 4 * v), r);
        else if (bias) r = vaddq_f32(vld1q_f32(bias + 4 * v), r);
        vst1q_f32(ci + 4 * v, r);
      }
    } else {  // a short last half: through a buffer, so nothing past n is read or written
      float r[NH];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) vst1q_f32(r + 4 * v, acc[i][v]);
      for (int j = 0; j < n; ++j) ci[j] = add ? ci[j] + r[j] : bias ? bias[j] + r[j] : r[j];
    }
  }
}

// The tile of R rows for m of them (m <= MR).
void micro_tile(int m, int64_t kc, const float* a, int64_t lda, const float* b, const float* bias, bool add, float* c,
                int64_t ldc, int n) {
  switch (m) {
    case 1: return micro_kernel<1>(kc, a, lda, b, bias, add, c, ldc, m, n);
    case 2: return micro_kernel<2>(kc, a, lda, b, bias, add, c, ldc, m, n);
    case 3:
    case 4: return micro_kernel<4>(kc, a, lda, b, bias, add, c, ldc, m, n);
    default: return micro_kernel<MR>(kc, a, lda, b, bias, add, c, ldc, m, n);
  }
}

// C[m0:m1, n0:n1] on the calling thread (n0 a multiple of NR).
void compute(const F32Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t K = g.b->K;
  for (int64_t j = n0; j < n1; j += NR) {
    const float* sliver = g.b->w + j * K;  // (j / NR) * K * NR
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc);
      for (int64_t h = 0; h < NR && j + h < n1; h += NH) {
        const int n = int(std::min<int64_t>(NH, n1 - j - h));
        const float* bias = g.bias ? g.bias + j + h : nullptr;
        for (int64_t i = m0; i < m1; i += MR) {
          const int m = int(std::min<int64_t>(MR, m1 - i));
          micro_tile(m, kc, g.a + i * g.lda + pc, g.lda, sliver + pc * NR + h, bias, pc > 0, g.c + i * g.ldc + j + h,
                     g.ldc, n);
        }
      }
    }
  }
}

#else  // not aarch64: never runs there
void compute(const F32Problem&, int64_t, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

const F32Kernel f32_neon{"NEON", MR, runs_on, compute};

}  // namespace rosetta::detail
