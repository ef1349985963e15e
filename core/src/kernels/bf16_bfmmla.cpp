// The bf16 micro-kernel on aarch64's BF16 extension (Armv8.6, optional from Armv8.2): BFMMLA
// (vbfmmlaq_f32) adds a 2 x 4 by 4 x 2 bf16 product to a 2 x 2 block of fp32 sums, 16
// multiply-adds an instruction. The packing, blocking and epilogue around it: bf16_arm.cpp.
//
// For every quad of k the micro-kernel loads the B sliver's NR / 2 blocks (two columns of four
// k each) and, for each pair of the MR rows, the A panel's block, and accumulates C's MR x NR tile
// as (MR / 2) x (NR / 2) blocks of 2 x 2 in registers:
//   acc[r][c] += A[2r .. 2r+1][4q .. 4q+3] . B[4q .. 4q+3][2c .. 2c+1]
// then stores the tile through its epilogue, a row at a time. Products of bf16 are exact in
// fp32; BFMMLA adds each row's pairs of products in turn (Arm's BFDotAdd: round to odd, denormals
// flushed, whatever FPCR says), within fp32 summation's bound of the exact sum.
//
// The file compiles on any -march (the kernel carries a target attribute) and runs only where
// runs_on finds BF16 in the hardware capabilities Linux reports.
#include "bf16_kernel.h"
#include "rosetta/core/cpu.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace rosetta::detail {

namespace {
bool runs_on(const CpuFeatures& f) { return f.neon && f.bf16; }
}  // namespace

const Bf16Kernel bf16_bfmmla{"BFMMLA", false, false, runs_on};

#if defined(__aarch64__)

namespace bf16::arm {

namespace {
// The tile (m x n of MR x NR, m <= 2 * Pairs): only the panel's first Pairs pairs of rows are
// multiplied (a panel's blocks are laid out for MR rows whatever Pairs is), so a short panel
// (decoding's products have a row or a few) costs what its rows need.
template <int Pairs>
ROSETTA_BF16_ARM_TARGET void micro_kernel(int64_t ks, const uint32_t* a, const uint32_t* b, int m, int n,
                                          const TileEpilogue& ep) {
  static_assert(Pairs >= 1 && 2 * Pairs <= MR);
  constexpr int NB = NR / 2;  // blocks of two columns
  float32x4_t acc[Pairs][NB];
#pragma GCC unroll 4
  for (int r = 0; r < Pairs; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NB; ++c) acc[r][c] = vdupq_n_f32(0.0f);
  for (int64_t q = 0; q < ks / 2; ++q) {
    bfloat16x8_t bv[NB];
#pragma GCC unroll 4
    for (int c = 0; c < NB; ++c) bv[c] = vreinterpretq_bf16_u32(vld1q_u32(b + q * 2 * NR + 4 * c));
#pragma GCC unroll 4
    for (int r = 0; r < Pairs; ++r) {
      const bfloat16x8_t av = vreinterpretq_bf16_u32(vld1q_u32(a + q * 2 * MR + 4 * r));
#pragma GCC unroll 4
      for (int c = 0; c < NB; ++c) acc[r][c] = vbfmmlaq_f32(acc[r][c], av, bv[c]);
    }
  }
  // acc[r][c] holds rows 2r, 2r + 1 of columns 2c, 2c + 1: its low half the first row's.
  for (int r = 0; r < Pairs && 2 * r < m; ++r) {
    float rows[2][NR];
#pragma GCC unroll 4
    for (int c = 0; c < NB; ++c) {
      vst1_f32(rows[0] + 2 * c, vget_low_f32(acc[r][c]));
      vst1_f32(rows[1] + 2 * c, vget_high_f32(acc[r][c]));
    }
    ep.store(rows[0], 2 * r, n);
    if (2 * r + 1 < m) ep.store(rows[1], 2 * r + 1, n);
  }
}
}  // namespace

void bfmmla_tile(int64_t ks, const uint32_t* a, const uint32_t* b, int m, int n, const TileEpilogue& ep) {
  if (m <= 2) micro_kernel<1>(ks, a, b, m, n, ep);
  else if (m <= 4) micro_kernel<2>(ks, a, b, m, n, ep);
  else micro_kernel<MR / 2>(ks, a, b, m, n, ep);
}

}  // namespace bf16::arm

#endif  // __aarch64__

}  // namespace rosetta::detail
