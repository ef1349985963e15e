// int8 products on ARM64's I8MM extension (Armv8.6 SMMLA; int8_kernel.h).
//
// The instruction: SMMLA acc, a, b adds a 2 x 8 block of A (two rows of 8 k, signed bytes) times
// a 8 x 2 block of B (two columns of 8 k, each column's 8 bytes together) to a 2 x 2 block of
// int32 sums (acc's lanes r0c0, r0c1, r1c0, r1c1): 32 products per instruction, twice SDOT's.
// Signed by signed, as SDOT (int8_neon.h): A holds q itself and no comp is taken off.
//
// Layouts. A is quantized in pairs of rows, 8 bytes of each in turn: pair r's octet o (k 8o to
// 8o + 7) is the 16 bytes at a + 2r kp + 16 o, row 2r's then row 2r + 1's, one load per operand.
// B keeps the shared packing (pack_b_int8: a sliver's row p holds each column's 4 bytes of k 4p
// to 4p + 3): a column's octet o is its words of rows 2o and 2o + 1, so two loads of 4 columns
// (rows 2o and 2o + 1) and their interleave by 32-bit words (ZIP1, ZIP2) give the operands of
// columns (0, 1) and (2, 3). The micro-kernel keeps an 8 x 8 tile of C in 16 registers of 2 x 2
// blocks; per octet, 4 loads of A, 4 loads and 4 interleaves of B, 16 SMMLA.
//
// The vector code carries a target attribute, so the file compiles in a plain Armv8-A build; it
// runs only where int8_i8mm.runs_on the CPU (dispatch.cpp). Elsewhere it never runs.
#include <algorithm>
#include <cstring>

#include "common.h"
#include "int8_kernel.h"
#include "int8_neon.h"
#include "rosetta/core/cpu.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#define ROSETTA_I8MM_TARGET __attribute__((target("arch=armv8.2-a+i8mm")))
#endif

namespace rosetta::detail {

namespace {

constexpr int NR = kInt8Cols;  // columns of a sliver
constexpr int MR = 8;          // the tile's rows, in 4 pairs; shorter last panels use fewer pairs
constexpr int NC = 8;          // the tile's columns, in 4 pairs: a quarter of a sliver

bool runs_on(const CpuFeatures& f) { return f.neon && f.i8mm; }

#if defined(__aarch64__)

// Rows of A as signed bytes in pairs of rows (above); rows [M, Mp) zeros (Mp is even).
void quantize_rows(int64_t M, int64_t Mp, int64_t K, int64_t kp, const float* a, int64_t lda, uint8_t* out,
                   float* scale) {
  static thread_local Scratch<int8_t> row;
  int8_t* q = row.get(size_t(kp));
  int8_t* pairs = reinterpret_cast<int8_t*>(out);
  const int64_t zeros_from = (M / 2) * 2 * kp;  // the pair of an odd last row, and every pair after
  std::memset(pairs + zeros_from, 0, size_t(Mp * kp - zeros_from));
  for (int64_t i = 0; i < M; ++i) {
    scale[i] = neon::quantize_row(K, kp, a + i * lda, q);
    int8_t* dst = pairs + (i / 2) * 2 * kp + (i % 2) * 8;
    for (int64_t o = 0; o < kp / 8; ++o) std::memcpy(dst + 16 * o, q + 8 * o, 8);
  }
  for (int64_t i = M; i < Mp; ++i) scale[i] = 0.0f;
}

// C tile (m x n of 2P x NC) from P pairs of rows of quantized A (pairs 2 kp bytes apart) and NC
// columns of a sliver (b: their first word of row 0; rows 4 * NR bytes apart).
template <int P>
ROSETTA_I8MM_TARGET void micro_kernel(int64_t octets, const int8_t* a, int64_t kp, const int8_t* b, const float* sa,
                                      const float* sb, const float* bias, float* c, int64_t ldc, int m, int n) {
  int32x4_t acc[P][4];
#pragma GCC unroll 4
  for (int r = 0; r < P; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) acc[r][q] = vdupq_n_s32(0);
  for (int64_t o = 0; o < octets; ++o) {
    const int8_t* row0 = b + 2 * o * 4 * NR;  // sliver rows 2o and 2o + 1
    const int32x4_t lo0 = vreinterpretq_s32_s8(vld1q_s8(row0)), hi0 = vreinterpretq_s32_s8(vld1q_s8(row0 + 16));
    const int32x4_t lo1 = vreinterpretq_s32_s8(vld1q_s8(row0 + 4 * NR)),
                    hi1 = vreinterpretq_s32_s8(vld1q_s8(row0 + 4 * NR + 16));
    const int8x16_t bq[4] = {vreinterpretq_s8_s32(vzip1q_s32(lo0, lo1)), vreinterpretq_s8_s32(vzip2q_s32(lo0, lo1)),
                             vreinterpretq_s8_s32(vzip1q_s32(hi0, hi1)), vreinterpretq_s8_s32(vzip2q_s32(hi0, hi1))};
#pragma GCC unroll 4
    for (int r = 0; r < P; ++r) {
      const int8x16_t av = vld1q_s8(a + r * 2 * kp + 16 * o);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) acc[r][q] = vmmlaq_s32(acc[r][q], av, bq[q]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < P; ++r)
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {  // rows 2r and 2r + 1: each block's first or second half
      const int i = 2 * r + half;
      if (i >= m) return;
      const float32x4_t si = vdupq_n_f32(sa[i]);
      float out[NC];
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {  // columns 4v to 4v + 3: the row's halves of two 2 x 2 blocks
        const int64x2_t x0 = vreinterpretq_s64_s32(acc[r][2 * v]), x1 = vreinterpretq_s64_s32(acc[r][2 * v + 1]);
        const int32x4_t sums = vreinterpretq_s32_s64(half ? vzip2q_s64(x0, x1) : vzip1q_s64(x0, x1));
        float32x4_t x = vmulq_f32(vcvtq_f32_s32(sums), vmulq_f32(si, vld1q_f32(sb + 4 * v)));
        if (bias && n == NC) {
          __asm__("" : "+w"(x));  // rounded before the bias is added, as on x86: GCC cannot fuse the two
          x = vaddq_f32(x, vld1q_f32(bias + 4 * v));
        }
        vst1q_f32(out + 4 * v, x);
      }
      float* ci = c + i * ldc;
      if (n == NC) std::memcpy(ci, out, sizeof out);
      else  // a short last quarter: nothing past n is read or written
        for (int j = 0; j < n; ++j) ci[j] = bias ? out[j] + bias[j] : out[j];
    }
}

// The tile of the pairs that hold m rows (m <= MR; A has rows to MR, of zeros past M).
ROSETTA_I8MM_TARGET void micro_tile(int m, int64_t octets, const int8_t* a, int64_t kp, const int8_t* b,
                                    const float* sa, const float* sb, const float* bias, float* c, int64_t ldc, int n) {
  switch ((m + 1) / 2) {
    case 1: return micro_kernel<1>(octets, a, kp, b, sa, sb, bias, c, ldc, m, n);
    case 2: return micro_kernel<2>(octets, a, kp, b, sa, sb, bias, c, ldc, m, n);
    default: return micro_kernel<4>(octets, a, kp, b, sa, sb, bias, c, ldc, m, n);
  }
}

// C[m0:m1, n0:n1] on the calling thread (m0 and n0 multiples of MR and NR).
ROSETTA_I8MM_TARGET void compute(const Int8Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int8_t* qa = reinterpret_cast<const int8_t*>(g.a);
  for (int64_t j = n0; j < n1; j += NR) {
    const int8_t* sliver = g.b->q + j * g.kp;  // kp / 4 x NR words per sliver
    for (int64_t h = 0; h < NR && j + h < n1; h += NC) {
      const int n = int(std::min<int64_t>(NC, n1 - j - h));
      const float* bias = g.bias ? g.bias + j + h : nullptr;
      for (int64_t i = m0; i < m1; i += MR) {  // row i's pair starts at i kp (i even)
        const int m = int(std::min<int64_t>(MR, m1 - i));
        micro_tile(m, g.kp / 8, qa + i * g.kp, g.kp, sliver + 4 * h, g.sa + i, g.b->scale + j + h, bias,
                   g.c + i * g.ldc + j + h, g.ldc, n);
      }
    }
  }
}

#else  // not aarch64: never runs there
void quantize_rows(int64_t, int64_t, int64_t, int64_t, const float*, int64_t, uint8_t*, float*) {}
void compute(const Int8Problem&, int64_t, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

const Int8Kernel int8_i8mm{"I8MM", MR, 127, runs_on, quantize_rows, compute};

}  // namespace rosetta::detail
