// int8 products on ARM64's DotProd extension (Armv8.2 SDOT; int8_kernel.h).
//
// The instruction: SDOT acc, b, a[l] adds b[4c]*a[4l] + ... + b[4c+3]*a[4l+3] to the int32 lane c
// of acc, both operands signed bytes (4 lanes, 16 products per instruction: four times what one
// fp32 FMLA does). So A is quantized to signed bytes (int8_neon.h) and no comp is taken off: the
// sums are the exact int32 sums of the reference. A word of the shared packing (pack_b_int8: 4
// k-consecutive bytes of a column) is one lane's group, a vector of a sliver's row 4 columns. The
// micro-kernel keeps an 8 x 8 tile of C in 16 registers: for every 4 quads p it loads each row's
// 16 bytes once, and for each p the sliver's two vectors of row p, taking A's quad p by lane (the
// by-element form of SDOT). No sum can overflow: |acc| <= 4 * 127 * 127 per instruction.
//
// The vector code carries a target attribute, so the file compiles in a plain Armv8-A build; it
// runs only where int8_neon_dot.runs_on the CPU (dispatch.cpp). Elsewhere it never runs.
#include <algorithm>
#include <cstring>

#include "common.h"
#include "int8_kernel.h"
#include "int8_neon.h"
#include "rosetta/core/cpu.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#define ROSETTA_SDOT_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

namespace rosetta::detail {

namespace {

constexpr int NR = kInt8Cols;  // columns of a sliver
constexpr int MR = 8;          // the tile's rows (16 accumulators); shorter last panels use fewer
constexpr int NC = 8;          // the tile's columns: a quarter of a sliver, two vectors

bool runs_on(const CpuFeatures& f) { return f.neon && f.dotprod; }

#if defined(__aarch64__)

void quantize_rows(int64_t M, int64_t Mp, int64_t K, int64_t kp, const float* a, int64_t lda, uint8_t* out,
                   float* scale) {
  for (int64_t i = 0; i < M; ++i)
    scale[i] = neon::quantize_row(K, kp, a + i * lda, reinterpret_cast<int8_t*>(out + i * kp));
  if (Mp > M) std::memset(out + M * kp, 0, size_t((Mp - M) * kp));  // signed zeros, not 128
  for (int64_t i = M; i < Mp; ++i) scale[i] = 0.0f;
}

// Quad L of the 4 in av[i] times row L of the 4 rows of the sliver at b, into acc.
template <int R, int L>
ROSETTA_SDOT_TARGET inline void quad(int32x4_t (&acc)[R][2], const int8x16_t (&av)[R], const int8_t* b) {
  const int8x16_t b0 = vld1q_s8(b + L * 4 * NR), b1 = vld1q_s8(b + L * 4 * NR + 16);
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    acc[i][0] = vdotq_laneq_s32(acc[i][0], b0, av[i], L);
    acc[i][1] = vdotq_laneq_s32(acc[i][1], b1, av[i], L);
  }
}

// C tile (m x n of R x NC) from R rows of quantized A (rows kp bytes apart) and NC columns of a
// sliver (b: their first word of row 0; rows 4 * NR bytes apart).
template <int R>
ROSETTA_SDOT_TARGET void micro_kernel(int64_t kq, const int8_t* a, int64_t kp, const int8_t* b, const float* sa,
                                      const float* sb, const float* bias, float* c, int64_t ldc, int m, int n) {
  int32x4_t acc[R][2];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = vdupq_n_s32(0);
  for (int64_t p = 0; p < kq; p += 4) {  // kq is a multiple of 16 (kInt8KStep)
    int8x16_t av[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) av[i] = vld1q_s8(a + i * kp + 4 * p);
    const int8_t* bp = b + p * 4 * NR;
    quad<R, 0>(acc, av, bp);
    quad<R, 1>(acc, av, bp);
    quad<R, 2>(acc, av, bp);
    quad<R, 3>(acc, av, bp);
  }
  for (int i = 0; i < m; ++i) {
    const float32x4_t si = vdupq_n_f32(sa[i]);
    float r[NC];
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      float32x4_t x = vmulq_f32(vcvtq_f32_s32(acc[i][v]), vmulq_f32(si, vld1q_f32(sb + 4 * v)));
      if (bias && n == NC) {
        __asm__("" : "+w"(x));  // rounded before the bias is added, as on x86: GCC cannot fuse the two
        x = vaddq_f32(x, vld1q_f32(bias + 4 * v));
      }
      vst1q_f32(r + 4 * v, x);
    }
    float* ci = c + i * ldc;
    if (n == NC) std::memcpy(ci, r, sizeof r);
    else  // a short last quarter: nothing past n is read or written
      for (int j = 0; j < n; ++j) ci[j] = bias ? r[j] + bias[j] : r[j];
  }
}

// The tile of R rows for m of them (m <= MR; A has rows to MR, of zeros past M).
ROSETTA_SDOT_TARGET void micro_tile(int m, int64_t kq, const int8_t* a, int64_t kp, const int8_t* b, const float* sa,
                                    const float* sb, const float* bias, float* c, int64_t ldc, int n) {
  switch (m) {
    case 1: return micro_kernel<1>(kq, a, kp, b, sa, sb, bias, c, ldc, m, n);
    case 2: return micro_kernel<2>(kq, a, kp, b, sa, sb, bias, c, ldc, m, n);
    case 3:
    case 4: return micro_kernel<4>(kq, a, kp, b, sa, sb, bias, c, ldc, m, n);
    default: return micro_kernel<MR>(kq, a, kp, b, sa, sb, bias, c, ldc, m, n);
  }
}

// C[m0:m1, n0:n1] on the calling thread (m0 and n0 multiples of MR and NR).
ROSETTA_SDOT_TARGET void compute(const Int8Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t kq = g.kp / 4;
  const int8_t* qa = reinterpret_cast<const int8_t*>(g.a);
  for (int64_t j = n0; j < n1; j += NR) {
    const int8_t* sliver = g.b->q + j * g.kp;  // kq x NR words per sliver
    for (int64_t h = 0; h < NR && j + h < n1; h += NC) {
      const int n = int(std::min<int64_t>(NC, n1 - j - h));
      const float* bias = g.bias ? g.bias + j + h : nullptr;
      for (int64_t i = m0; i < m1; i += MR) {
        const int m = int(std::min<int64_t>(MR, m1 - i));
        micro_tile(m, kq, qa + i * g.kp, g.kp, sliver + 4 * h, g.sa + i, g.b->scale + j + h, bias,
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

const Int8Kernel int8_neon_dot{"DOTPROD", MR, 127, runs_on, quantize_rows, compute};

}  // namespace rosetta::detail
