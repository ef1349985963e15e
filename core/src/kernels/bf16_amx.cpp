// The bf16 micro-kernel on AMX tiles (Sapphire Rapids and later Xeons; bf16_kernel.h), and the
// packing of A it reads.
//
// The instruction: TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a 16-pair x 16 tile of B into
// a 16 x 16 fp32 tile of C, 8,192 multiply-adds per instruction. The kernel keeps a 32 x 32 block
// of C in four tiles (two A tiles, two B tiles per step of 32 k), then stores it through the same
// epilogue as the AVX-512 kernel. Linux hands the 8 KiB tile state only to processes that ask
// (runs_on asks, once per process: dispatch.cpp). ROSETTA_AMX=model runs this path with the
// tile products in plain code (bf16_amx_model.cpp), on any CPU with AVX512_BF16.
#include <chrono>
#include <type_traits>

#include "amx.h"
#include "bf16_kernel.h"
#include "rosetta/core/cpu.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12, of its own AVX-512 intrinsics
#endif

namespace rosetta::detail {

namespace {
bool runs_on(const CpuFeatures& f) {
  return bf16_avx512.runs_on(f) && f.amx_tile && f.amx_bf16 && amx::tile_state_granted();
}
}  // namespace

const Bf16Kernel bf16_amx{"AMX", true, false, runs_on};

#if defined(__x86_64__)

namespace bf16 {

template <class T>
ROSETTA_AMX_TARGET void pack_a_amx(bool ta, const T* src, int64_t ld, int64_t kc, int64_t mc, int64_t ks,
                                   uint32_t* out, float* sums, uint16_t* rounded, int64_t ldr) {
  const int64_t rows = round_up(mc, AMR);
  if (!ta) {
    for (int64_t i = 0; i < rows; ++i) {
      uint32_t* row = out + (i - i % AMR) * ks + amx_a_word(i % AMR, 0);
      if (i >= mc) {
        for (int64_t p0 = 0; p0 < ks; p0 += 16) _mm512_storeu_si512(row + p0 * AMR, _mm512_setzero_si512());
        continue;
      }
      for (int64_t p0 = 0; p0 < ks; p0 += 16) {
        const int64_t nk = std::clamp<int64_t>(kc - 2 * p0, 0, 32);
        if constexpr (std::is_same_v<T, uint16_t>) {  // bf16 already: a row's pairs are its values
          _mm512_storeu_si512(row + p0 * AMR, _mm512_maskz_loadu_epi16(first_halves(nk), src + i * ld + 2 * p0));
          continue;
        }
        const __m512 lo = load16(first_lanes(nk), src + i * ld + 2 * p0);
        const __m512 hi = load16(first_lanes(nk - 16), src + i * ld + 2 * p0 + 16);
        const __m512i words = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        _mm512_storeu_si512(row + p0 * AMR, words);
        if (rounded) _mm512_mask_storeu_epi16(rounded + i * ldr + 2 * p0, first_halves(nk), words);
      }
    }
    return;
  }
  // k outer: the 32 source rows of a step of 16 pairs are read along their length, 64 bytes of
  // each for one 16 rows of A after the other, rather than 64 bytes of all kc source rows for
  // each 16 rows of A (~3% of a bf16 training step, whose dW products read the output layer's
  // gradient this way). sums[i] adds its k in the same order either way.
  for (int64_t p0 = 0; p0 < ks; p0 += 16)
    for (int64_t i0 = 0; i0 < rows; i0 += 16) {
      const __mmask16 load = first_lanes(mc - i0);
      __m512i r[16];
      for (int t = 0; t < 16; ++t) {
        const int64_t k = 2 * (p0 + t);
        const __m512 lo = k < kc ? load16(load, src + k * ld + i0) : _mm512_setzero_ps();
        const __m512 hi = k + 1 < kc ? load16(load, src + (k + 1) * ld + i0) : _mm512_setzero_ps();
        if (sums && load && k < kc)
          _mm512_mask_storeu_ps(sums + i0, load,
                                _mm512_add_ps(_mm512_maskz_loadu_ps(load, sums + i0), _mm512_add_ps(lo, hi)));
        r[t] = pair_words(lo, hi);  // pair p0 + t of rows i0 .. i0 + 15
      }
      transpose16(r);  // r[i]: pairs p0 .. p0 + 15 of row i0 + i
      uint32_t* tile = out + (i0 - i0 % AMR) * ks + amx_a_word(i0 % AMR, p0);
      for (int i = 0; i < 16; ++i) _mm512_storeu_si512(tile + i * 16, r[i]);
    }
}
template void pack_a_amx<float>(bool, const float*, int64_t, int64_t, int64_t, int64_t, uint32_t*, float*, uint16_t*,
                                int64_t);
template void pack_a_amx<uint16_t>(bool, const uint16_t*, int64_t, int64_t, int64_t, int64_t, uint32_t*, float*,
                                   uint16_t*, int64_t);

namespace {

// Prefetches the NR floats of each of `rows` rows ld apart (two cache lines a row).
ROSETTA_BF16_TARGET inline void prefetch_rows(const float* p, int64_t ld, int rows) {
  for (int r = 0; r < rows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(p + r * ld), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + r * ld + 16), _MM_HINT_T0);
  }
}

// Prefetches the bf16 output of a tile's `rows` rows (one cache line each).
ROSETTA_BF16_TARGET inline void prefetch_rows16(const Out16& o, int rows) {
  for (int r = 0; r < rows; ++r)
    _mm_prefetch(reinterpret_cast<const char*>(o.rd->out + (o.row + r) * o.rd->ld + o.col), _MM_HINT_T0);
}

// acc (AMR x NR, rows NR apart) = A panel (AMR rows of ks pairs) . B sliver (ks pairs x NR), on
// the tiles amx::configure_tiles() set up (amx.h): 0-3 C (16 x 16 fp32), 4-5 A (16 rows x 16
// pairs), 6-7 B (16 pairs x 16 columns).
ROSETTA_AMX_TARGET void amx_kernel(int64_t ks, const uint32_t* a, const uint32_t* b, float* acc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  constexpr int64_t a_stride = 16 * sizeof(uint32_t), b_stride = NR * sizeof(uint32_t);
  for (int64_t p = 0; p < ks; p += 16) {
    ROSETTA_TILE_LOADD(4, a + amx_a_word(0, p), a_stride);
    ROSETTA_TILE_LOADD(5, a + amx_a_word(16, p), a_stride);
    ROSETTA_TILE_LOADD(6, b + p * NR, b_stride);
    ROSETTA_TILE_LOADD(7, b + p * NR + 16, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc, b_stride);
  _tile_stored(1, acc + 16, b_stride);
  _tile_stored(2, acc + 16 * NR, b_stride);
  _tile_stored(3, acc + 16 * NR + 16, b_stride);
}

// The tile (m x n of AMR x NR) from acc, through the epilogue.
ROSETTA_BF16_TARGET void store_amx_tile(const float* acc, int m, int n, const TileEpilogue& ep) {
  for (int i = 0; i < m; ++i)
    for (int v = 0; v < NV; ++v) {
      const __mmask16 k = first_lanes(n - 16 * v);
      if (!k) break;
      ep.store(_mm512_loadu_ps(acc + i * NR + 16 * v), i, 16 * v, k);
    }
}

}  // namespace

ROSETTA_AMX_TARGET void amx_tile(int64_t ks, const uint32_t* a, const uint32_t* b, int m, int n,
                                 const TileEpilogue& ep, bool modelled) {
  alignas(64) float acc[AMR * NR];
  // The epilogue writes the C tile (and reads it where beta != 0: gradients added to, blocks of
  // k after the first) and reads the gate tile: their lines are fetched while the tiles
  // multiply. A bf16 training step's products mostly write C where it is not in cache; on a
  // 2-core Xeon with AMX this took ~2% off the small preset's step for C read and the gate, and
  // ~2% more for C written. (The same for the bf16 output of a relu and dropout epilogue.)
  if (ep.c) prefetch_rows(ep.c, ep.ldc, m);
  else prefetch_rows16(ep.out16, m);
  if (ep.gate) ep.gate.prefetch(m);
  if (modelled) amx_kernel_model(ks, a, b, acc);
  else amx_kernel(ks, a, b, acc);
  store_amx_tile(acc, m, n, ep);
}

}  // namespace bf16

ROSETTA_AMX_TARGET double time_amx_dots(int64_t iters) {
  if (iters <= 0) return 0;
  alignas(64) uint16_t ones[16 * 32];  // bf16 0.25: normal numbers, no special cases
  std::fill(ones, ones + 16 * 32, uint16_t(0x3E80));
  amx::configure_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  ROSETTA_TILE_LOADD(4, ones, 64);
  ROSETTA_TILE_LOADD(5, ones, 64);
  ROSETTA_TILE_LOADD(6, ones, 64);
  ROSETTA_TILE_LOADD(7, ones, 64);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  amx::release_tiles();
  return dt;
}

#else  // not x86-64: never runs there
double time_amx_dots(int64_t) { return 0; }
#endif

}  // namespace rosetta::detail
