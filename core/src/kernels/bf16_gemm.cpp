// bf16 GEMM on AVX512_BF16, in the manner of BLIS and llamafile's tinyBLAS: one register-blocked
// micro-kernel, packing and cache blocking around it.
//
// The instruction: VDPBF16PS acc, a, b adds a[2l] * b[2l] + a[2l+1] * b[2l+1] to the fp32 lane
// l of acc (16 lanes, 32 bf16 products per instruction: twice what one fp32 FMA does). So both
// operands are packed as 32-bit words holding two bf16 values of consecutive k:
//   A panel (MR rows):    word [p][i] = (A[i, 2p], A[i, 2p+1])      p over k pairs
//   B sliver (NR cols):   word [p][j] = (B[2p, j], B[2p+1, j])
// and the micro-kernel, for every k pair p, loads NR/16 vectors of B's row p and, for each of the
// MR rows, broadcasts A's word [p][i] and accumulates into C's MR x NR tile in registers:
//   acc[i][v] += dot2(bcast(A[p][i]), B[p][16v .. 16v+15])
// Packing rounds fp32 to bf16 (nearest even, VCVTNE2PS2BF16) and pads odd k, short panels and
// short slivers with zeros. Loops, outermost first: N by NC, K by KC (B panel of KC x NC packed
// once), M by MC (A block packed once), then slivers and panels: the B sliver stays in L1 while
// the panels of the A block stream from L2.
//
// On a CPU with AMX (Sapphire Rapids and later Xeons) the same packing feeds tiles instead:
// TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a 16-pair x 16 tile of B into a 16 x 16 fp32
// tile of C, 8,192 multiply-adds per instruction. B's sliver rows are already the tile's rows
// (a row of 16 words per k pair); A is packed as the tiles' rows instead ([p / 16][i][p % 16]:
// 16 k pairs of each row of a 32-row panel, one tile after the other), and k pairs are padded to
// a multiple of 16 (one tile's depth). The AMX micro-kernel keeps a 32 x 32 block of C in four
// tiles (two A tiles, two B tiles per step of 32 k), then stores it through the same epilogue as
// the AVX-512 one. Where k is short (K <= 1024) the loops over panels and slivers swap (compute).
//
// Everything that uses AVX-512 or AMX instructions carries a target attribute below, so the file
// compiles whatever -march is, and runs only where gemm_bf16_available() / gemm_bf16_amx()
// (cpuid, and the OS's grant of the tile state) say so.
#include "bf16.h"

#include "common.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "rosetta/core/cpu.h"
#include "rosetta/core/ops.h"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__)
#include <immintrin.h>
// GCC 12 warns of the undefined vectors inside its own AVX-512 intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define ROSETTA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define ROSETTA_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,amx-tile,amx-bf16")))
#endif

namespace rosetta::detail {

bool gemm_bf16_available() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16;
}

namespace {
enum class AmxMode { off, tiles, model };

AmxMode amx_mode() {
  static const AmxMode mode = [] {
    if (!gemm_bf16_available()) return AmxMode::off;
    const char* env = std::getenv("ROSETTA_AMX");
    const std::string choice = env ? env : "";
    if (choice == "0" || choice == "off") return AmxMode::off;
    if (choice == "model") return AmxMode::model;
    const CpuFeatures& f = cpu_features();
    if (!f.amx_tile || !f.amx_bf16) return AmxMode::off;
#if defined(__linux__) && defined(__x86_64__)
    // Linux hands out the 8 KiB tile state only to processes that ask (kernel 5.16 and later).
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0 ? AmxMode::tiles : AmxMode::off;
#else
    return AmxMode::off;
#endif
  }();
  return mode;
}
}  // namespace

bool gemm_bf16_amx() { return amx_mode() != AmxMode::off; }

bool gemm_bf16_amx_modelled() { return amx_mode() == AmxMode::model; }

PackedB::~PackedB() { std::free(words); }

#if defined(__x86_64__)

namespace {

// Measured on a Zen 4 (bench/gemm_bench.cpp): 12 x 32 beat 8 x 48 and 14 x 32 by 0-10% on the
// model's shapes (16 x 16, which packs A without padding: small preset +1.8%, base -2.4%); KC 512 beat 256 by ~5% where K >= 1024; MC within noise; an NC that holds a
// whole vocabulary (A packed once for the output layer) gave the small preset +2%.
constexpr int MR = 12;           // rows of the micro-tile (24 accumulators + 2 B vectors)
constexpr int NV = 2;            // 16-lane vectors across it
constexpr int NR = 16 * NV;      // columns of the micro-tile
constexpr int64_t KC = 512;      // k per packed block (even): a B sliver of 32 KiB
constexpr int64_t MC = 16 * MR;  // rows of an A block (192 KiB at KC)
constexpr int64_t NC = 256 * NR;  // columns of a B panel (up to 8 MiB per thread at KC)

// 16 words (lo[l], hi[l]) in bf16, lo in the low half.
ROSETTA_BF16_TARGET inline __m512i pair_words(__m512 lo, __m512 hi) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                              23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

// Transposes the 16 x 16 matrix of 32-bit words held one row per register.
ROSETTA_BF16_TARGET inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
  }
}

// The first n of 32 16-bit lanes (none for n <= 0, all for n >= 32).
inline __mmask32 first_halves(int64_t n) {
  return n >= 32 ? __mmask32(0xFFFFFFFFu) : n <= 0 ? __mmask32(0) : __mmask32((1u << n) - 1);
}

// 16 fp32 values from src (those of mask k, zero elsewhere): fp32 as they are, or bf16 (the
// upper half of an fp32) widened exactly, so that packing a bf16 source rounds nothing.
ROSETTA_BF16_TARGET inline __m512 load16(__mmask16 k, const float* src) { return _mm512_maskz_loadu_ps(k, src); }
ROSETTA_BF16_TARGET inline __m512 load16(__mmask16 k, const uint16_t* src) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, src)), 16));
}

// Packs X (kc x w, element (k, j)) as panels of W columns, panel q at out + q * ks * W holding
// words [p][j] (a row of W words per k pair), zero past kc and w. ks, the pairs a panel holds,
// is kp = ceil(kc / 2) unless given larger (the AMX kernels': a multiple of 16; zero past kp).
// X is k-major (element at src[k * ld + j]) or j-major (src[j * ld + k]). The loops follow the source: a k-major X is
// read row by row across all panels (two rows per k pair), a j-major one panel by panel,
// 16 columns x 32 k at a time through a 16 x 16 word transpose. With `sums` (k-major X only),
// sums[j] += the kc fp32 values of column j, as they are read. X is fp32 or bf16 (T: uint16_t).
// With `rounded` (j-major fp32 X only), X's values as packed: rounded[j * ldr + k] in bf16.
template <class T>
ROSETTA_BF16_TARGET void pack_block(bool k_major, const T* src, int64_t ld, int64_t kc, int64_t w, int W,
                                    uint32_t* out, float* sums = nullptr, int64_t ks = 0, uint16_t* rounded = nullptr,
                                    int64_t ldr = 0) {
  const int64_t kp = (kc + 1) / 2, panels = (w + W - 1) / W;
  if (ks < kp) ks = kp;
  for (int64_t q = 0; q < panels && ks > kp; ++q)
    std::memset(out + (q * ks + kp) * W, 0, size_t((ks - kp) * W) * sizeof(uint32_t));
  if (k_major) {
    for (int64_t p = 0; p < kp; ++p) {
      const T* r0 = src + (2 * p) * ld;
      const bool odd_tail = 2 * p + 1 >= kc;
      for (int64_t q = 0; q < panels; ++q)
        for (int j0 = 0; j0 < W; j0 += 16) {
          const int64_t j = q * W + j0, wj = std::clamp<int64_t>(w - j, 0, 16);
          const __mmask16 load = first_lanes(wj), own = first_lanes(W - j0);
          if constexpr (std::is_same_v<T, uint16_t>) {
            if (!sums) {  // bf16 already: the two rows' values interleaved as they are
              const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(load, r0 + j));
              const __m512i hi = odd_tail ? _mm512_setzero_si512()
                                          : _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(load, r0 + ld + j));
              _mm512_mask_storeu_epi32(out + q * ks * W + p * W + j0, own, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
              continue;
            }
          }
          const __m512 lo = load16(load, r0 + j);
          const __m512 hi = odd_tail ? _mm512_setzero_ps() : load16(load, r0 + ld + j);
          _mm512_mask_storeu_epi32(out + q * ks * W + p * W + j0, own, pair_words(lo, hi));
          if (sums) {  // this panel's columns only (a load may reach into the next panel's)
            const __mmask16 mine = load & own;
            _mm512_mask_storeu_ps(sums + j, mine,
                                  _mm512_add_ps(_mm512_maskz_loadu_ps(mine, sums + j), _mm512_add_ps(lo, hi)));
          }
        }
    }
    return;
  }
  for (int64_t q = 0; q < panels; ++q)
    for (int j0 = 0; j0 < W; j0 += 16) {
      // valid columns here, and only this panel's (a 12-wide panel reads 12 rows, not 16)
      const int64_t jq = q * W + j0, wj = std::clamp<int64_t>(std::min<int64_t>(w - jq, W - j0), 0, 16);
      const __mmask16 store = first_lanes(W - j0);
      uint32_t* panel = out + q * ks * W;
      for (int64_t p0 = 0; p0 < kp; p0 += 16) {  // 16 pairs = 32 k of 16 columns
        const int64_t k0 = 2 * p0, nk = std::min<int64_t>(32, kc - k0);
        const __mmask16 lo_mask = first_lanes(nk), hi_mask = first_lanes(std::max<int64_t>(nk - 16, 0));
        __m512i r[16];
        for (int j = 0; j < 16; ++j) {
          if (j >= wj) {
            r[j] = _mm512_setzero_si512();
            continue;
          }
          const T* row = src + (jq + j) * ld + k0;
          if constexpr (std::is_same_v<T, uint16_t>) {  // bf16 already: the words as they are
            r[j] = _mm512_maskz_loadu_epi16(first_halves(nk), row);
            continue;
          }
          const __m512 lo = load16(lo_mask, row);
          const __m512 hi = load16(hi_mask, row + 16);
          r[j] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // words: pairs p0 .. p0+15 of column j
          if (rounded) _mm512_mask_storeu_epi16(rounded + (jq + j) * ldr + k0, first_halves(nk), r[j]);
        }
        transpose16(r);  // r[t]: pair p0+t of the 16 columns
        const int64_t np = std::min<int64_t>(16, kp - p0);
        for (int t = 0; t < np; ++t) _mm512_mask_storeu_epi32(panel + (p0 + t) * W + j0, store, r[t]);
      }
    }
}

// A product's gate: C is 0 wherever it is not > 0. fp32 or bf16 values (f or h), rows ld apart;
// none where both are null.
struct Gate {
  const float* f = nullptr;
  const uint16_t* h = nullptr;
  int64_t ld = 0;
  explicit operator bool() const { return f || h; }
  Gate at(int64_t i, int64_t j) const {
    if (!*this) return {};
    return {f ? f + i * ld + j : nullptr, h ? h + i * ld + j : nullptr, ld};
  }
  // Prefetches the gate of rows x NR values from here (see compute).
  void prefetch(int rows) const {
    for (int r = 0; r < rows; ++r) {
      const char* p = f ? reinterpret_cast<const char*>(f + r * ld) : reinterpret_cast<const char*>(h + r * ld);
      _mm_prefetch(p, _MM_HINT_T0);
      if (f) _mm_prefetch(p + 64, _MM_HINT_T0);
    }
  }
};

// Stores the fp32 sums of one row's 16 lanes (the first of `k`) at ci: alpha * acc (+ bias)
// (+ beta * ci), then 0 wherever the gate (when given, at this row's lanes) is not > 0.
ROSETTA_BF16_TARGET inline void store_lanes(__m512 acc, float* ci, __mmask16 k, float alpha, float beta,
                                            const float* bias, const Gate& gate) {
  __m512 r = _mm512_mul_ps(_mm512_set1_ps(alpha), acc);
  if (bias) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(k, bias));
  if (beta != 0.0f) r = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(k, ci), r);
  if (gate) {
    const __m512 gv = gate.f ? _mm512_maskz_loadu_ps(k, gate.f) : load16(k, gate.h);
    r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(gv, _mm512_setzero_ps(), _CMP_GT_OQ), r);
  }
  _mm512_mask_storeu_ps(ci, k, r);
}

// Where a tile's product goes instead of C (Bf16Gemm::relu_dropout): the output and the tile's
// first row and column in the M x N product (the dropout's counters count its elements).
struct Out16 {
  const ReluDropout16* rd = nullptr;
  int64_t N = 0, row = 0, col = 0;
  explicit operator bool() const { return rd != nullptr; }
};

// MurmurHash3's finaliser on 16 lanes (fmix32).
ROSETTA_BF16_TARGET inline __m512i fmix32_lanes(__m512i h) {
  h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int(0x85ebca6bu)));
  h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 13));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int(0xc2b2ae35u)));
  return _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
}

// Row i, columns j .. j + 15 (the first of k) of a tile's product: alpha * acc (+ bias), through
// the relu and the dropout of o, in bf16. The dropout's hash of element n = offset + row * N +
// col, as dropout_hash computes it (lanes past a multiple of 2^32 take the next high word).
ROSETTA_BF16_TARGET inline void store_relu_dropout(__m512 acc, const Out16& o, int i, int j, __mmask16 k,
                                                   float alpha, const float* bias) {
  __m512 r = _mm512_mul_ps(_mm512_set1_ps(alpha), acc);
  if (bias) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(k, bias));
  const ReluDropout16& rd = *o.rd;
  const uint64_t c0 = rd.offset + uint64_t((o.row + i) * o.N + o.col + j);
  const __m512i lo0 = _mm512_set1_epi32(int(uint32_t(c0)));
  const __m512i lo = _mm512_add_epi32(lo0, _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
  const __mmask16 wrapped = _mm512_cmplt_epu32_mask(lo, lo0);
  const __m512i hi = _mm512_mask_blend_epi32(wrapped, _mm512_set1_epi32(int(fmix32(uint32_t(c0 >> 32) ^ rd.key))),
                                             _mm512_set1_epi32(int(fmix32(uint32_t((c0 >> 32) + 1) ^ rd.key))));
  const __m512i h = fmix32_lanes(_mm512_xor_si512(_mm512_mullo_epi32(lo, _mm512_set1_epi32(int(0x9E3779B1u))), hi));
  const __mmask16 keep = _mm512_cmpge_epu32_mask(h, _mm512_set1_epi32(int(rd.threshold)));
  const __m512 relu = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, _mm512_setzero_ps(), _CMP_GT_OQ), r);
  const __m512 v = _mm512_mul_ps(relu, _mm512_maskz_mov_ps(keep, _mm512_set1_ps(rd.scale)));
  _mm256_mask_storeu_epi16(rd.out + (o.row + i) * rd.ld + o.col + j, k, (__m256i)_mm512_cvtneps_pbh(v));
}

// C tile (m x n of MR x NR, m <= Rows) = alpha * A_panel . B_sliver (+ bias, a row of n added
// to every row, when given) + beta * C tile, over kp pairs; 0 where the gate tile (when given)
// is not > 0. Only the panel's first Rows rows are multiplied (a panel's rows are
// MR words apart whatever Rows is), so a short panel (the last of 32 rows has 8; decoding's
// products have a few) costs what its rows need.
template <int Rows>
ROSETTA_BF16_TARGET void micro_kernel(int64_t kp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc,
                                      int m, int n, float alpha, float beta, const float* bias, const Gate& gate,
                                      const Out16& out16) {
  static_assert(Rows >= 1 && Rows <= MR);
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
      if (out16) store_relu_dropout(acc[i][v], out16, i, 16 * v, k, alpha, bias ? bias + 16 * v : nullptr);
      else store_lanes(acc[i][v], c + i * ldc + 16 * v, k, alpha, beta, bias ? bias + 16 * v : nullptr, gate.at(i, 16 * v));
    }
  }
}

// ------------------------------------------------------------------ AMX
constexpr int AMR = 32;  // rows of the AMX micro-tile: two A tiles of 16 rows
// k per packed block on AMX tiles. Longer than KC: a 32 x 32 block of C costs its four tile
// stores and an epilogue whatever k is, and every block of k after the first reads C again. On a
// 2-core Xeon with AMX (the small preset's bf16 training step, medians of alternating runs),
// 2048 beat 512 by ~3% and 1024 and 4096 by ~1%.
constexpr int64_t KC_AMX = 2048;
// Where a block of k has at most kAmxRowsFirstPairs pairs (K <= 1024), compute() takes C's
// blocks row panel by row panel, over B panels of kAmxBPanelBytes (its columns: this over k pairs
// x 4 bytes, in whole slivers, at most NC): what L2 keeps while the panels of A take their turn.
// 1,024 pairs (the weight gradients of up to 2,048 tokens too) and 512 KiB measured the same.
constexpr int64_t kAmxBPanelBytes = int64_t(1) << 20;
constexpr int64_t kAmxRowsFirstPairs = 512;

// Tiles 0-3: C (16 x 16 fp32); 4-5: A (16 rows x 16 pairs); 6-7: B (16 pairs x 16 columns). All
// 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

ROSETTA_AMX_TARGET void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

// Where word (i, p) of an A panel (AMR rows of ks pairs) lies: tile by tile, each the panel's AMR
// rows of 16 pairs, row-major (a tile load reads 16 consecutive rows of 64 bytes: one sequential
// run per step of the kernel, not 32 rows ks words apart).
constexpr int64_t amx_a_word(int64_t i, int64_t p) { return (p & ~int64_t(15)) * AMR + i * 16 + (p & 15); }

// Packs op(A) rows [0, mc) x k [0, kc) as panels of AMR rows: word (i, p), the bf16 pair
// (A[i, 2p], A[i, 2p+1]), at out + q * AMR * ks + amx_a_word(i - q * AMR, p) (panel q, rows
// q * AMR ..), zero past kc and for rows mc .. round_up(mc, AMR). A is row-major (src[i * ld + k]) or, with ta, k-major
// (src[k * ld + i], read 16 rows x 32 k at a time through a 16 x 16 word transpose). With `sums`
// (ta only), sums[i] += the kc fp32 values of row i, as they are read. A is fp32 or bf16. With
// `rounded` (row-major fp32 A only), A's values as packed: rounded[i * ldr + k] in bf16.
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
// the tiles configure_tiles() set up.
ROSETTA_AMX_TARGET void amx_kernel(int64_t ks, const uint32_t* a, const uint32_t* b, float* acc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  constexpr int64_t a_stride = 16 * sizeof(uint32_t), b_stride = NR * sizeof(uint32_t);
  for (int64_t p = 0; p < ks; p += 16) {
    _tile_loadd(4, a + amx_a_word(0, p), a_stride);
    _tile_loadd(5, a + amx_a_word(16, p), a_stride);
    _tile_loadd(6, b + p * NR, b_stride);
    _tile_loadd(7, b + p * NR + 16, b_stride);
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

// What amx_kernel computes, in plain code (ROSETTA_AMX=model: the AMX path's packing, loops and
// epilogue checked on a CPU without AMX). TDPBF16PS adds each pair's two products in turn (each
// product of two bf16 values is exact in fp32, so fused or not gives the same sums). A row of C at
// a time, its NR sums side by side: the same additions in the same order as one sum per element,
// but vectorised instead of NR x AMR chains of dependent adds (the [bf16] tests through the model
// took 96 s that way). Not instrumented by the sanitizers, whose checks of every element kept it
// scalar (132 s under them): amx_kernel_model checks what it reads.
// (GNU spelling: clang ignores [[gnu::no_sanitize]].)
__attribute__((no_sanitize("address", "undefined"))) void amx_products_model(int64_t ks, const uint32_t* a,
                                                                            const uint32_t* b, float* acc) {
  // The pair's halves as floats, by the builtin: a lambda or std::bit_cast is a function of its own,
  // instrumented, and called per element at -O1.
#define ROSETTA_LO(w) __builtin_bit_cast(float, uint32_t((w) << 16))
#define ROSETTA_HI(w) __builtin_bit_cast(float, uint32_t((w) & 0xFFFF0000u))
  for (int i = 0; i < AMR; ++i) {
    float sums[NR] = {};
    for (int64_t p = 0; p < ks; ++p) {
      const uint32_t x = a[(p & ~int64_t(15)) * AMR + i * 16 + (p & 15)];  // amx_a_word(i, p)
      const float xl = ROSETTA_LO(x), xh = ROSETTA_HI(x);
      const uint32_t* y = b + p * NR;
#pragma omp simd  // vectorised at -O1 too (the sanitized build's)
      for (int j = 0; j < NR; ++j) {
        sums[j] += xl * ROSETTA_LO(y[j]);
        sums[j] += xh * ROSETTA_HI(y[j]);
      }
    }
#undef ROSETTA_LO
#undef ROSETTA_HI
    std::copy(sums, sums + NR, acc + i * NR);
  }
}

void amx_kernel_model(int64_t ks, const uint32_t* a, const uint32_t* b, float* acc) {
  // The words the tile loads read, A's panel (amx_a_word(i, p) for AMR rows and ks pairs, a
  // multiple of 16) and B's sliver, each read once here where the sanitizers see it.
  uint32_t seen = 0;
  for (int64_t w = 0; w < AMR * ks; ++w) seen |= a[w];
  for (int64_t w = 0; w < ks * NR; ++w) seen |= b[w];
  asm volatile("" : : "r"(seen));
  amx_products_model(ks, a, b, acc);
}

// C tile (m x n of AMR x NR) from acc, through the epilogue of the AVX-512 kernel.
ROSETTA_BF16_TARGET void store_amx_tile(const float* acc, float* c, int64_t ldc, int m, int n, float alpha,
                                        float beta, const float* bias, const Gate& gate, const Out16& out16) {
  for (int i = 0; i < m; ++i)
    for (int v = 0; v < NV; ++v) {
      const __mmask16 k = first_lanes(n - 16 * v);
      if (!k) break;
      const __m512 sums = _mm512_loadu_ps(acc + i * NR + 16 * v);
      if (out16) store_relu_dropout(sums, out16, i, 16 * v, k, alpha, bias ? bias + 16 * v : nullptr);
      else store_lanes(sums, c + i * ldc + 16 * v, k, alpha, beta, bias ? bias + 16 * v : nullptr, gate.at(i, 16 * v));
    }
}

using Problem = Bf16Gemm;

// k per packed block, and its k pairs: kp = ceil(kc / 2), padded to a tile's 16 for the AMX kernels.
int64_t block_k(bool amx) { return amx ? KC_AMX : KC; }
int64_t block_pairs(int64_t kc, bool amx) { return amx ? round_up((kc + 1) / 2, 16) : (kc + 1) / 2; }

// Words of a whole packed op(B): per block of k, ceil(N / NR) slivers of block_pairs x NR.
int64_t packed_b_words(int64_t K, int64_t N, bool amx) {
  const int64_t np = round_up(N, NR), kb = block_k(amx);
  int64_t words = 0;
  for (int64_t pc = 0; pc < K; pc += kb) words += block_pairs(std::min(kb, K - pc), amx) * np;
  return words;
}

// Packs columns [j0, j0 + nc) of op(B) rows [pc, pc + kc) as slivers of ks x NR.
ROSETTA_BF16_TARGET void pack_b_block(const Problem& g, int64_t pc, int64_t kc, int64_t j0, int64_t nc,
                                      uint32_t* out, int64_t ks) {
  const int64_t offset = g.trans_b ? j0 * g.ldb + pc : pc * g.ldb + j0;
  if (g.b16) pack_block(!g.trans_b, g.b16 + offset, g.ldb, kc, nc, NR, out, nullptr, ks);
  else pack_block(!g.trans_b, g.b + offset, g.ldb, kc, nc, NR, out, nullptr, ks);
}

// C[m0:m1, n0:n1] on the calling thread (n0 a multiple of NR), and a_sums[m0:m1] where the
// thread computes the first columns (it packs each A block of its rows once there): on AMX tiles
// (AMR-row panels of A packed row-major, k pairs padded to 16) or with the AVX-512 micro-kernel
// (MR-row panels, pair-major).
template <bool Amx>
ROSETTA_AMX_TARGET void compute(const Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  static thread_local Scratch<uint32_t> a_buf, b_buf;
  constexpr int64_t mr = Amx ? AMR : MR;
  [[maybe_unused]] alignas(64) float acc[Amx ? AMR * NR : 1];
  [[maybe_unused]] const bool model = Amx && gemm_bf16_amx_modelled();
  if constexpr (Amx)
    if (!model) configure_tiles();
  const int64_t np_all = round_up(g.N, NR), kb = block_k(Amx);
  // On AMX tiles with short k, a panel of A meets every sliver of the B panel in turn (below), so
  // the B panel is kept to what L2 holds beside the rest.
  const int64_t ks0 = block_pairs(std::min(kb, g.K), Amx);
  const bool rows_first = Amx && ks0 <= kAmxRowsFirstPairs;
  const int64_t nc_max = rows_first ? std::clamp(kAmxBPanelBytes / (ks0 * 4) / NR * NR, int64_t(NR), NC) : NC;
  for (int64_t jc = n0; jc < n1; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n1 - jc);
    int64_t block_offset = 0;  // of this block of k in a pre-packed B
    for (int64_t pc = 0; pc < g.K; pc += kb) {
      const int64_t kc = std::min(kb, g.K - pc), ks = block_pairs(kc, Amx);
      const uint32_t* bp;
      if (g.packed) {
        bp = g.packed->words + block_offset + (jc / NR) * ks * NR;
        block_offset += ks * np_all;
      } else {
        uint32_t* w = b_buf.get(size_t(ks * round_up(nc, NR)));
        pack_b_block(g, pc, kc, jc, nc, w, ks);
        bp = w;
      }
      const float beta = pc == 0 ? g.beta : 1.0f;
      const float* bias = pc == 0 && g.bias ? g.bias + jc : nullptr;
      for (int64_t ic = m0; ic < m1; ic += MC) {
        const int64_t mc = std::min(MC, m1 - ic);
        uint32_t* ap = a_buf.get(size_t(ks * round_up(mc, mr)));
        float* sums = g.a_sums && jc == 0 ? g.a_sums + ic : nullptr;
        if (sums && pc == 0) std::fill(sums, sums + mc, 0.0f);
        const int64_t a_offset = g.trans_a ? pc * g.lda + ic : ic * g.lda + pc;
        // A's values as packed, once: by the thread that computes the first columns.
        uint16_t* rounded = g.rounded && jc == 0 ? g.rounded + ic * g.ld_rounded + pc : nullptr;
        const auto pack_a = [&](const auto* a) {
          if constexpr (Amx) pack_a_amx(g.trans_a, a + a_offset, g.lda, kc, mc, ks, ap, sums, rounded, g.ld_rounded);
          else pack_block(g.trans_a, a + a_offset, g.lda, kc, mc, MR, ap, sums, 0, rounded, g.ld_rounded);
        };
        if (g.a16) pack_a(g.a16);
        else pack_a(g.a);
        const auto tile = [&](int64_t i, int64_t j) {
          const int m = int(std::min<int64_t>(mr, mc - i)), n = int(std::min<int64_t>(NR, nc - j));
          float* c = g.c ? g.c + (ic + i) * g.ldc + jc + j : nullptr;
          const Gate gate = Gate{g.gate, g.gate16, g.ldg}.at(ic + i, jc + j);
          const Out16 out16{g.relu_dropout, g.N, ic + i, jc + j};
          if constexpr (Amx) {
            // The epilogue writes the C tile (and reads it where beta != 0: gradients added
            // to, blocks of k after the first) and reads the gate tile: their lines are
            // fetched while the tiles multiply. A bf16 training step's products mostly write
            // C where it is not in cache; on a 2-core Xeon with AMX this took ~2% off the
            // small preset's step for C read and the gate, and ~2% more for C written. (The
            // same for the bf16 output of a relu and dropout epilogue.)
            if (c) prefetch_rows(c, g.ldc, m);
            else prefetch_rows16(out16, m);
            if (gate) gate.prefetch(m);
            if (model) amx_kernel_model(ks, ap + i * ks, bp + (j / NR) * ks * NR, acc);
            else amx_kernel(ks, ap + i * ks, bp + (j / NR) * ks * NR, acc);
            store_amx_tile(acc, c, g.ldc, m, n, g.alpha, beta, bias ? bias + j : nullptr, gate, out16);
          } else {
            const auto kernel = m <= 4 ? micro_kernel<4> : m <= 8 ? micro_kernel<8> : micro_kernel<MR>;
            kernel(ks, ap + i * ks, bp + (j / NR) * ks * NR, c, g.ldc, m, n, g.alpha, beta, bias ? bias + j : nullptr,
                   gate, out16);
          }
        };
        // AVX-512, and AMX tiles with long k: the B sliver stays in L1 while the A panels stream
        // from L2. AMX tiles with short k: the A panel stays while the B slivers stream, so that
        // C is written along its rows, in 32 sequential runs the hardware prefetchers follow;
        // down C's columns, a 32 x 32 block of C written cold took as long as its product. On a
        // 2-core Xeon with AMX, one thread (bench/gemm.sh): 1,250 x 1,024 x 256 810 -> 923-976
        // GFLOP/s, the small preset's output layer 596 -> 739-818; its training step's bf16
        // products took 4% less time.
        if (rows_first) {
          for (int64_t i = 0; i < mc; i += mr)
            for (int64_t j = 0; j < nc; j += NR) tile(i, j);
        } else {
          for (int64_t j = 0; j < nc; j += NR)
            for (int64_t i = 0; i < mc; i += mr) tile(i, j);
        }
      }
    }
  }
  if constexpr (Amx)
    if (!model) _tile_release();
}

void scale_c(const Problem& g) {  // K == 0: C = bias + beta * C
  if (g.a_sums) std::fill(g.a_sums, g.a_sums + g.M, 0.0f);
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      float& x = g.c[i * g.ldc + j];
      x = (g.bias ? g.bias[j] : 0.0f) + (g.beta == 0.0f ? 0.0f : g.beta * x);
      const float gv = g.gate ? g.gate[i * g.ldg + j] : g.gate16 ? std::bit_cast<float>(uint32_t(g.gate16[i * g.ldg + j]) << 16) : 1.0f;
      if (!(gv > 0.0f)) x = 0.0f;
    }
}

// Splits C over `threads` threads along its longer side, in whole micro-tiles; on AMX tiles where
// gemm_bf16_amx() (a pre-packed B says which kernels it was packed for).
void run(const Problem& g, int threads) {
  if (g.M == 0 || g.N == 0) return;
  if (g.K == 0) return scale_c(g);
  const bool amx = g.packed ? g.packed->amx : gemm_bf16_amx();
  const int64_t mr = amx ? AMR : MR;
  const auto part = amx ? compute<true> : compute<false>;
  const int64_t tiles_m = (g.M + mr - 1) / mr, tiles_n = (g.N + NR - 1) / NR;
  const bool split_m = g.M >= g.N;
  const int64_t tiles = split_m ? tiles_m : tiles_n;
  threads = int(std::min<int64_t>(std::max(threads, 1), tiles));
  // Inside a parallel region (a model replica's thread) this region is nested: it has its
  // threads only where nested parallelism is on (ThreadReplicas turns it on for that).
  if (threads <= 1) return part(g, 0, g.M, 0, g.N);
#pragma omp parallel num_threads(threads)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t b = tiles * t / nt, e = tiles * (t + 1) / nt;
    if (b < e) {
      if (split_m) part(g, b * mr, std::min(g.M, e * mr), 0, g.N);
      else part(g, 0, g.M, b * NR, std::min(g.N, e * NR));
    }
  }
}

}  // namespace

void gemm_bf16(const Bf16Gemm& g, int threads) {
  // The operands of an empty product are never read (they may be null).
  const bool reads = g.M > 0 && g.N > 0 && g.K > 0;
  if ((reads && (!g.a == !g.a16 || (!g.packed && !g.b == !g.b16))) || (g.gate && g.gate16))
    throw std::logic_error("gemm_bf16: give one of a and a16, of b, b16 and packed, and at most one gate");
  if (g.a_sums && !g.trans_a) throw std::logic_error("gemm_bf16: the row sums of op(A) need trans_a");
  if (g.rounded && (g.trans_a || g.a16)) throw std::logic_error("gemm_bf16: rounded needs a row-major fp32 A");
  if (g.packed && (g.packed->K != g.K || g.packed->N != g.N))
    throw std::logic_error("gemm_bf16: B packed for another shape");
  if (g.M > 0 && g.N > 0 && !g.c && !g.relu_dropout) throw std::logic_error("gemm_bf16: no output (c or relu_dropout)");
  if (g.relu_dropout && (g.c || g.beta != 0.0f || g.gate || g.gate16 || g.K == 0 || !gemm_bf16_one_block(g.K) ||
                         (g.packed && g.packed->amx != gemm_bf16_amx())))
    throw std::logic_error("gemm_bf16: a relu and dropout epilogue writes no C, and needs beta 0, no gate and K in one block of k");
  run(g, threads);
}

bool gemm_bf16_one_block(int64_t K) { return K <= block_k(gemm_bf16_amx()); }

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc, int threads, const float* bias, float* a_sums, const float* gate, int64_t ldg) {
  gemm_bf16({.trans_a = trans_a, .trans_b = trans_b, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .a = a,
             .lda = lda, .b = b, .ldb = ldb, .c = c, .ldc = ldc, .bias = bias, .a_sums = a_sums, .gate = gate,
             .ldg = ldg},
            threads);
}

ROSETTA_BF16_TARGET void round_to_bf16(const float* src, uint16_t* dst, float* sums, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = first_lanes(n - j);
    const __m512 x = _mm512_maskz_loadu_ps(k, src + j);
    _mm256_mask_storeu_epi16(dst + j, k, (__m256i)_mm512_cvtneps_pbh(x));
    if (sums) _mm512_mask_storeu_ps(sums + j, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, sums + j), x));
  }
}

namespace {
// `iters` rounds of 16 independent instructions `op` into zmm0-15 from zmm16 and zmm17 (both
// broadcast from `x`, a normal number: no denormal assists): enough independent chains to cover
// the latency of two pipes (FMA: 4 cycles, VDPBF16PS: up to 6), so the loop runs at the
// instruction's throughput. Written in assembly so that it times the instruction at any
// optimization level (at -O0 an array of accumulators would live in memory).
#define ROSETTA_PROBE_LOOP(op)                                                                       \
  asm volatile(                                                                                    \
      "vbroadcastss %1, %%zmm16\n\t"                                                               \
      "vbroadcastss %1, %%zmm17\n\t"                                                               \
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\tvmovaps %%zmm0, %%zmm1\n\tvmovaps %%zmm0, %%zmm2\n\t"      \
      "vmovaps %%zmm0, %%zmm3\n\tvmovaps %%zmm0, %%zmm4\n\tvmovaps %%zmm0, %%zmm5\n\t"             \
      "vmovaps %%zmm0, %%zmm6\n\tvmovaps %%zmm0, %%zmm7\n\tvmovaps %%zmm0, %%zmm8\n\t"             \
      "vmovaps %%zmm0, %%zmm9\n\tvmovaps %%zmm0, %%zmm10\n\tvmovaps %%zmm0, %%zmm11\n\t"           \
      "vmovaps %%zmm0, %%zmm12\n\tvmovaps %%zmm0, %%zmm13\n\tvmovaps %%zmm0, %%zmm14\n\t"          \
      "vmovaps %%zmm0, %%zmm15\n\t"                                                                \
      "1:\n\t"                                                                                     \
      op " %%zmm17, %%zmm16, %%zmm0\n\t" op " %%zmm17, %%zmm16, %%zmm1\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm2\n\t" op " %%zmm17, %%zmm16, %%zmm3\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm4\n\t" op " %%zmm17, %%zmm16, %%zmm5\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm6\n\t" op " %%zmm17, %%zmm16, %%zmm7\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm8\n\t" op " %%zmm17, %%zmm16, %%zmm9\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm10\n\t" op " %%zmm17, %%zmm16, %%zmm11\n\t"                     \
      op " %%zmm17, %%zmm16, %%zmm12\n\t" op " %%zmm17, %%zmm16, %%zmm13\n\t"                     \
      op " %%zmm17, %%zmm16, %%zmm14\n\t" op " %%zmm17, %%zmm16, %%zmm15\n\t"                     \
      "dec %0\n\t"                                                                                 \
      "jnz 1b\n\t"                                                                                 \
      "vzeroupper"                                                                                 \
      : "+r"(n)                                                                                    \
      : "m"(x)                                                                                     \
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",  \
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "cc")

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

ROSETTA_BF16_TARGET double time_bf16_dots(int64_t iters) {
  if (iters <= 0) return 0;
  int64_t n = iters;
  const float x = 0.25f;  // as a pair of bf16 words: 0x3E80 and 0x0000, both normal or zero
  const auto t0 = std::chrono::steady_clock::now();
  ROSETTA_PROBE_LOOP("vdpbf16ps");
  return seconds_since(t0);
}

ROSETTA_BF16_TARGET double time_fp32_fmas(int64_t iters) {
  if (iters <= 0) return 0;
  int64_t n = iters;
  const float x = 0.25f;
  const auto t0 = std::chrono::steady_clock::now();
  ROSETTA_PROBE_LOOP("vfmadd231ps");
  return seconds_since(t0);
}
#undef ROSETTA_PROBE_LOOP

ROSETTA_AMX_TARGET double time_amx_dots(int64_t iters) {
  if (iters <= 0) return 0;
  alignas(64) uint16_t ones[16 * 32];  // bf16 0.25: normal numbers, no special cases
  std::fill(ones, ones + 16 * 32, uint16_t(0x3E80));
  configure_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  const double dt = seconds_since(t0);
  _tile_release();
  return dt;
}

void pack_b_bf16(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedB& out) {
  const bool amx = gemm_bf16_amx();
  const int64_t words = packed_b_words(K, N, amx);
  // Packed again into a buffer of the same size (weights packed after every update): kept, so
  // that no pages are freed and faulted in again.
  if (!out.words || packed_b_words(out.K, out.N, out.amx) != words) {
    std::free(out.words);
    out.words = nullptr;
    out.K = out.N = 0;
    if (words > 0) {
      out.words = static_cast<uint32_t*>(std::aligned_alloc(64, size_t(round_up(words, 16)) * sizeof(uint32_t)));
      if (!out.words) throw std::bad_alloc();
    }
  }
  out.K = K;
  out.N = N;
  out.amx = amx;
  if (words == 0) return;
  const Problem g{.trans_b = trans_b, .N = N, .K = K, .b = b, .ldb = ldb};
  const int64_t np = round_up(N, NR), kb = block_k(out.amx);
  int64_t offset = 0;
  for (int64_t pc = 0; pc < K; pc += kb) {
    const int64_t kc = std::min(kb, K - pc), ks = block_pairs(kc, out.amx);
    pack_b_block(g, pc, kc, 0, N, out.words + offset, ks);
    offset += ks * np;
  }
}

void gemm_bf16_packed(bool trans_a, int64_t M, float alpha, const float* a, int64_t lda,
                      const PackedB& b, float beta, float* c, int64_t ldc, int threads, const float* bias,
                      const float* gate, int64_t ldg) {
  gemm_bf16({.trans_a = trans_a, .M = M, .N = b.N, .K = b.K, .alpha = alpha, .beta = beta, .a = a, .lda = lda,
             .packed = &b, .c = c, .ldc = ldc, .bias = bias, .gate = gate, .ldg = ldg},
            threads);
}

#else  // not x86-64: never available, never called

void gemm_bf16(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
               int64_t, float, float*, int64_t, int, const float*, float*, const float*, int64_t) {}
void pack_b_bf16(bool, int64_t, int64_t, const float*, int64_t, PackedB&) {}
void round_to_bf16(const float*, uint16_t*, float*, int64_t) {}
bool gemm_bf16_one_block(int64_t) { return false; }
void gemm_bf16(const Bf16Gemm&, int) {}
double time_bf16_dots(int64_t) { return 0; }
double time_fp32_fmas(int64_t) { return 0; }
double time_amx_dots(int64_t) { return 0; }
void gemm_bf16_packed(bool, int64_t, float, const float*, int64_t, const PackedB&, float, float*,
                      int64_t, int, const float*, const float*, int64_t) {}

#endif

}  // namespace rosetta::detail
