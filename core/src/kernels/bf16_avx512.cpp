// The bf16 micro-kernel on AVX512_BF16 (bf16_kernel.h), in the manner of BLIS and llamafile's
// tinyBLAS: one register-blocked tile, the packing and cache blocking around it (bf16_gemm.cpp).
//
// The instruction: VDPBF16PS acc, a, b adds a[2l] * b[2l] + a[2l+1] * b[2l+1] to the fp32 lane
// l of acc (16 lanes, 32 bf16 products per instruction: twice what one fp32 FMA does). For every
// k pair p the micro-kernel loads NV vectors of the B sliver's row p and, for each of the MR
// rows, broadcasts the A panel's word [p][i] and accumulates into C's MR x NR tile in registers:
//   acc[i][v] += dot2(bcast(A[p][i]), B[p][16v .. 16v+15])
// then stores the tile through its epilogue.
#include "bf16_kernel.h"
#include "rosetta/core/cpu.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12, of its own AVX-512 intrinsics
#endif

namespace rosetta::detail {

namespace {
bool runs_on(const CpuFeatures& f) { return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16; }
}  // namespace

const Bf16Kernel bf16_avx512{"AVX512_BF16", false, false, runs_on};

#if defined(__x86_64__)

namespace bf16 {

namespace {
// The tile (m x n of MR x NR, m <= Rows): only the panel's first Rows rows are multiplied (a
// panel's rows are MR words apart whatever Rows is), so a short panel (the last of 32 rows has
// 8; decoding's products have a few) costs what its rows need.
template <int Rows>
ROSETTA_BF16_TARGET void micro_kernel(int64_t kp, const uint32_t* a, const uint32_t* b, int m, int n,
                                      const TileEpilogue& epilogue) {
  static_assert(Rows >= 1 && Rows <= MR);
  const TileEpilogue ep = epilogue;  // a copy: C's stores cannot change it
  __m512 acc[Rows][NV];
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + p * NR + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < Rows; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(a[p * MR + i]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i) {
    if (i >= m) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 k = first_lanes(n - 16 * v);
      if (!k) break;
      ep.store(acc[i][v], i, 16 * v, k);
    }
  }
}
}  // namespace

void avx512_tile(int64_t kp, const uint32_t* a, const uint32_t* b, int m, int n, const TileEpilogue& ep) {
  if (m <= 4) micro_kernel<4>(kp, a, b, m, n, ep);
  else if (m <= 8) micro_kernel<8>(kp, a, b, m, n, ep);
  else micro_kernel<MR>(kp, a, b, m, n, ep);
}

}  // namespace bf16

#endif

}  // namespace rosetta::detail
