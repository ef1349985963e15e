// int8 products on AMX tiles (Sapphire Rapids and later Xeons; int8_kernel.h), and the same
// loops with the tile products in plain code, "AMX-INT8 (modelled)", which the tests run on any
// CPU with AVX512_VNNI.
//
// The instruction: TDPBUSD multiplies a 16 x 64 tile of unsigned bytes (A: 16 rows, 64 k) by a
// 16 x 64 tile of signed bytes (B: 16 quads of k, 16 columns, a quad's four bytes side by side)
// into a 16 x 16 tile of int32 sums, 16,384 multiply-adds per instruction. The packed weights'
// sliver is already B's tile layout: row p of a sliver holds quad p of its 32 columns, so its
// first and second 64 bytes are the two B tiles of a block, 128 bytes apart. A's quantized rows
// (kp bytes apart, kp a multiple of 64: kInt8KStep) are A's tiles as they lie. The kernel keeps
// a 32 x 32 block of C in four tiles (16 rows: two), then scales it back through the AVX-512
// epilogue of the AVX512_VNNI kernel's arithmetic. Every sum is exact in int32 (K < 66,000), so
// tiles, the model and the reference agree bit for bit.
#include <algorithm>
#include <cstring>

#include "amx.h"  // the tile configuration (all 16 rows of 64 bytes), the tile loads
#include "common.h"
#include "int8_kernel.h"
#include "rosetta/core/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define ROSETTA_INT8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define ROSETTA_AMX_INT8_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16,fma,amx-tile,amx-int8")))
#endif

namespace rosetta::detail {

namespace {

constexpr int MR = 16;  // rows of a tile: A is padded to, and C split among threads in, these
constexpr int NR = kInt8Cols;

bool runs_model(const CpuFeatures& f) { return int8_avx512_vnni.runs_on(f); }

bool runs_amx(const CpuFeatures& f) {
  return runs_model(f) && f.avx512_bf16 && f.amx_tile && f.amx_int8 && amx::tile_state_granted();
}

#if defined(__x86_64__)

// acc (rows x NR int32, rows NR apart; rows 16 or 32) = A (rows x kp bytes) . the sliver.
ROSETTA_AMX_INT8_TARGET void tile_products(int rows, int64_t kp, const uint8_t* a, const int8_t* b, int32_t* acc) {
  constexpr int64_t b_stride = NR * 4;
  _tile_zero(0);
  _tile_zero(1);
  if (rows > 16) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k = 0; k < kp; k += 64) {
    ROSETTA_TILE_LOADD(4, a + k, kp);
    ROSETTA_TILE_LOADD(6, b + k * NR, b_stride);  // quads k / 4 .. + 15, columns 0-15
    ROSETTA_TILE_LOADD(7, b + k * NR + 64, b_stride);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    if (rows > 16) {
      ROSETTA_TILE_LOADD(5, a + 16 * kp + k, kp);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
  }
  _tile_stored(0, acc, b_stride);
  _tile_stored(1, acc + 16, b_stride);
  if (rows > 16) {
    _tile_stored(2, acc + 16 * NR, b_stride);
    _tile_stored(3, acc + 16 * NR + 16, b_stride);
  }
}

// The same sums in plain code, from the same bytes (TDPBUSD's four products of a quad are exact).
void tile_products_model(int rows, int64_t kp, const uint8_t* a, const int8_t* b, int32_t* acc) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < NR; ++j) {
      int32_t s = 0;
      for (int64_t k = 0; k < kp; ++k) s += int32_t(a[i * kp + k]) * int32_t(b[(k / 4) * 4 * NR + j * 4 + k % 4]);
      acc[i * NR + j] = s;
    }
}

// C (m x n of rows x NR) from the block's int32 sums, as the AVX512_VNNI kernel scales them.
ROSETTA_INT8_TARGET void store_block(const int32_t* acc, int m, int n, const float* sa, const float* sb,
                                     const int32_t* comp, const float* bias, float* c, int64_t ldc) {
  for (int i = 0; i < m; ++i) {
    const __m512 si = _mm512_set1_ps(sa[i]);
    for (int v = 0; v < NR / 16; ++v) {
      const __mmask16 k = first_lanes(n - 16 * v);
      if (!k) break;
      const __m512i exact = _mm512_sub_epi32(_mm512_load_si512(acc + i * NR + 16 * v), _mm512_load_si512(comp + 16 * v));
      __m512 r = _mm512_mul_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(si, _mm512_load_ps(sb + 16 * v)));
      if (bias) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(k, bias + 16 * v));
      _mm512_mask_storeu_ps(c + i * ldc + 16 * v, k, r);
    }
  }
}

// C[m0:m1, n0:n1] on the calling thread (m0 and n0 multiples of MR and NR).
template <bool Modelled>
void compute(const Int8Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  alignas(64) int32_t acc[2 * MR * NR];
  if constexpr (!Modelled) amx::configure_tiles();
  for (int64_t j = n0; j < n1; j += NR) {
    const int8_t* sliver = g.b->q + j * g.kp;
    const int n = int(std::min<int64_t>(NR, n1 - j));
    const float* bias = g.bias ? g.bias + j : nullptr;
    for (int64_t i = m0; i < m1; i += 2 * MR) {
      const int m = int(std::min<int64_t>(2 * MR, m1 - i)), rows = m > MR ? 2 * MR : MR;
      if constexpr (Modelled) tile_products_model(rows, g.kp, g.a + i * g.kp, sliver, acc);
      else tile_products(rows, g.kp, g.a + i * g.kp, sliver, acc);
      store_block(acc, m, n, g.sa + i, g.b->scale + j, g.b->comp + j, bias, g.c + i * g.ldc + j, g.ldc);
    }
  }
  if constexpr (!Modelled) amx::release_tiles();
}

#else  // not x86-64: never runs there
template <bool>
void compute(const Int8Problem&, int64_t, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

namespace {
// A quantized as the AVX512_VNNI kernel quantizes it (8-bit, shifted by 128).
void quantize_rows(int64_t M, int64_t Mp, int64_t K, int64_t kp, const float* a, int64_t lda, uint8_t* out,
                   float* scale) {
  int8_avx512_vnni.quantize_rows(M, Mp, K, kp, a, lda, out, scale);
}
}  // namespace

const Int8Kernel int8_amx{"AMX-INT8", MR, 127, runs_amx, quantize_rows, compute<false>};
const Int8Kernel int8_amx_model{"AMX-INT8 (modelled)", MR, 127, runs_model, quantize_rows, compute<true>};

}  // namespace rosetta::detail
