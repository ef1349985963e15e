// What the bf16 driver (bf16_gemm.cpp), its packing (bf16_pack.cpp) and its micro-kernels
// (bf16_avx512.cpp, bf16_amx.cpp, bf16_amx_model.cpp) share: the kernels' descriptions, the tile
// and block sizes, the packing, and the epilogue every kernel stores its tiles through. On
// aarch64 the driver, packing and epilogue are bf16_arm.cpp's and the micro-kernel
// bf16_bfmmla.cpp's (the section at the end).
//
// Both operands are packed as 32-bit words holding two bf16 values of consecutive k (the pairs
// VDPBF16PS and TDPBF16PS multiply):
//   A panel (MR rows):    word [p][i] = (A[i, 2p], A[i, 2p+1])      p over k pairs
//   B sliver (NR cols):   word [p][j] = (B[2p, j], B[2p+1, j])
// The AMX kernels read the same B slivers (a sliver's row of 16 words per k pair is a tile's
// row) with k pairs padded to a multiple of 16 (a tile's depth), and A packed as the tiles' rows
// instead ([p / 16][i][p % 16]: 16 k pairs of each row of a 32-row panel, one tile after the
// other; pack_a_amx).
//
// Everything that uses AVX-512 or AMX instructions carries a target attribute, so the files
// compile whatever -march is, and run only where their kernel runs_on the CPU (dispatch.cpp).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "bf16.h"
#include "common.h"
#include "rosetta/core/ops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define ROSETTA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define ROSETTA_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,amx-tile,amx-bf16")))
#endif

namespace rosetta {
struct CpuFeatures;
}

namespace rosetta::detail {

// One bf16 path: AVX512_BF16 micro-kernels, or AMX tiles (real or modelled).
struct Bf16Kernel {
  const char* name;  // as the tests name the kernel
  bool amx;          // AMX packing, blocks and tile kernel
  bool modelled;     // the tile products modelled in plain code (ROSETTA_AMX=model)
  bool (*runs_on)(const CpuFeatures& cpu);
};
extern const Bf16Kernel bf16_avx512;     // bf16_avx512.cpp
extern const Bf16Kernel bf16_amx;        // bf16_amx.cpp
extern const Bf16Kernel bf16_amx_model;  // bf16_amx_model.cpp
extern const Bf16Kernel bf16_bfmmla;     // bf16_bfmmla.cpp (aarch64: BFMMLA)

namespace bf16 {

// Measured on a Zen 4 (bench/gemm_bench.cpp): 12 x 32 beat 8 x 48 and 14 x 32 by 0-10% on the
// model's shapes (16 x 16, which packs A without padding: small preset +1.8%, base -2.4%); KC 512
// beat 256 by ~5% where K >= 1024; MC within noise; an NC that holds a whole vocabulary (A packed
// once for the output layer) gave the small preset +2%.
constexpr int MR = 12;            // rows of the AVX-512 micro-tile (24 accumulators + 2 B vectors)
constexpr int NV = 2;             // 16-lane vectors across it
constexpr int NR = 16 * NV;       // columns of a micro-tile (either kernel's) and of a B sliver
constexpr int64_t KC = 512;       // k per packed block (even): a B sliver of 32 KiB
constexpr int64_t MC = 16 * MR;   // rows of an A block (192 KiB at KC)
constexpr int64_t NC = 256 * NR;  // columns of a B panel (up to 8 MiB per thread at KC)

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

// k per packed block, and its k pairs: kp = ceil(kc / 2), padded to a tile's 16 for the AMX kernels.
inline int64_t block_k(bool amx) { return amx ? KC_AMX : KC; }
inline int64_t block_pairs(int64_t kc, bool amx) { return amx ? round_up((kc + 1) / 2, 16) : (kc + 1) / 2; }

// Where word (i, p) of an AMX A panel (AMR rows of ks pairs) lies: tile by tile, each the panel's
// AMR rows of 16 pairs, row-major (a tile load reads 16 consecutive rows of 64 bytes: one
// sequential run per step of the kernel, not 32 rows ks words apart).
constexpr int64_t amx_a_word(int64_t i, int64_t p) { return (p & ~int64_t(15)) * AMR + i * 16 + (p & 15); }

// The bits of x rounded to bf16 as the bf16 products round their operands: to nearest even (what
// VCVTNEPS2BF16 and reference::round_bf16 do to a finite value); a NaN stays a NaN (quiet). The
// packing of plain code rounds with it (round_to_bf16 and bf16_arm.cpp, off x86-64).
inline uint16_t bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? uint16_t((u >> 16) | 0x40u) : uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// The driver's part of each architecture behind bf16.h's functions (bf16_gemm.cpp checks their
// arguments and calls these): on x86-64 bf16_gemm.cpp's, on aarch64 bf16_arm.cpp's.
// run: C of g (M, N and K positive) on `kernel`'s tiles (a packed B was packed for it), split
// among up to `threads` threads. packed_b_words: the words of a whole op(B) of K x N packed for
// a kernel (`amx`: for the AMX kernels). pack_b: op(B) of K x N, every block of k in turn, into
// out (packed_b_words of it).
void run(const Bf16Gemm& g, int threads, const Bf16Kernel& kernel);
int64_t packed_b_words(int64_t K, int64_t N, bool amx);
void pack_b(const Bf16Operand& b, int64_t K, int64_t N, bool amx, uint32_t* out);

#if defined(__x86_64__)

// ------------------------------------------------------------------ packing (bf16_pack.cpp)

// 16 words (lo[l], hi[l]) in bf16, lo in the low half.
ROSETTA_BF16_TARGET inline __m512i pair_words(__m512 lo, __m512 hi) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                              23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
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

// Packs X (kc x w, element (k, j)) as panels of W columns, panel q at out + q * ks * W holding
// words [p][j] (a row of W words per k pair), zero past kc and w. ks, the pairs a panel holds,
// is kp = ceil(kc / 2) unless given larger (the AMX kernels': a multiple of 16; zero past kp).
// X is k-major (element at src[k * ld + j]) or j-major (src[j * ld + k]). With `sums` (k-major X
// only), sums[j] += the kc fp32 values of column j, as they are read. X is fp32 or bf16 (T:
// uint16_t). With `rounded` (j-major fp32 X only), X's values as packed: rounded[j * ldr + k] in
// bf16. (Instantiated for float and uint16_t.)
template <class T>
ROSETTA_BF16_TARGET void pack_block(bool k_major, const T* src, int64_t ld, int64_t kc, int64_t w, int W, uint32_t* out,
                                    float* sums = nullptr, int64_t ks = 0, uint16_t* rounded = nullptr,
                                    int64_t ldr = 0);

// Packs op(A) rows [0, mc) x k [0, kc) as AMX panels of AMR rows: word (i, p) at
// out + q * AMR * ks + amx_a_word(i - q * AMR, p) (panel q, rows q * AMR ..), zero past kc and
// for rows mc .. round_up(mc, AMR). A is row-major (src[i * ld + k]) or, with ta, k-major
// (src[k * ld + i]). With `sums` (ta only), sums[i] += the kc fp32 values of row i, as they are
// read. A is fp32 or bf16. With `rounded` (row-major fp32 A only), A's values as packed:
// rounded[i * ldr + k] in bf16. (bf16_amx.cpp; instantiated for float and uint16_t.)
template <class T>
ROSETTA_AMX_TARGET void pack_a_amx(bool ta, const T* src, int64_t ld, int64_t kc, int64_t mc, int64_t ks, uint32_t* out,
                                   float* sums, uint16_t* rounded, int64_t ldr);

// ------------------------------------------------------------------ the epilogue

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
  // Prefetches the gate of rows x NR values from here (see bf16_amx.cpp).
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

// Where a tile's product goes instead of C (Bf16Epilogue::relu_dropout): the output and the
// tile's first row and column in the M x N product (the dropout's counters count its elements).
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

// A tile's epilogue (Bf16Epilogue at the tile's first row and column): where each row's lanes of
// the product go as they leave the registers, and what is done to them on the way.
struct TileEpilogue {
  float* c = nullptr;  // the tile's first element of C (null with out16)
  int64_t ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;  // the tile's first column's
  Gate gate;                    // at the tile's first element
  Out16 out16;

  // Lanes j .. j + 15 (the first of k) of the tile's row i, acc their sums.
  ROSETTA_BF16_TARGET void store(__m512 acc, int i, int j, __mmask16 k) const {
    if (out16) store_relu_dropout(acc, out16, i, j, k, alpha, bias ? bias + j : nullptr);
    else store_lanes(acc, c + i * ldc + j, k, alpha, beta, bias ? bias + j : nullptr, gate.at(i, j));
  }
};

// ------------------------------------------------------------------ the micro-kernels

// The tile (m x n of MR x NR) of A panel (kp pairs of MR rows) . B sliver (kp pairs of NR
// columns), stored through ep. (bf16_avx512.cpp)
void avx512_tile(int64_t kp, const uint32_t* a, const uint32_t* b, int m, int n, const TileEpilogue& ep);

// The tile (m x n of AMR x NR) of A panel (AMR rows of ks pairs, a multiple of 16; pack_a_amx) .
// B sliver (ks pairs x NR), on the tiles amx::configure_tiles() set up (amx.h), or in plain code where
// `modelled` (amx_kernel_model), stored through ep. (bf16_amx.cpp)
ROSETTA_AMX_TARGET void amx_tile(int64_t ks, const uint32_t* a, const uint32_t* b, int m, int n, const TileEpilogue& ep,
                                 bool modelled);
// acc (AMR x NR, rows NR apart) = A panel . B sliver as amx_tile takes them: what TDPBF16PS on
// the tiles computes, in plain code. (bf16_amx_model.cpp)
void amx_kernel_model(int64_t ks, const uint32_t* a, const uint32_t* b, float* acc);

#endif  // __x86_64__

#if defined(__aarch64__)

// ------------------------------------------------------------------ aarch64 (BFMMLA)
//
// BFMMLA acc, a, b (vbfmmlaq_f32) adds to the 2 x 2 fp32 block acc (row-major) the product of
// the 2 x 4 bf16 block a (two rows of four k) by the 4 x 2 block held as b (two columns of four
// k): acc[2r + c] += sum_k a[4r + k] b[4c + k]. Both operands are packed in such 128-bit blocks,
// as words of two bf16 of consecutive k (as on x86) with k pairs padded to an even count ks
// (zeros past k): word (p, j) of a panel of W rows of A or columns of B at arm_word(p, j, W), so
// that the 4 words at (p / 2) * 2W + 4c are rows (columns) 2c, 2c + 1 over k 2p .. 2p + 3.
namespace arm {

#define ROSETTA_BF16_ARM_TARGET __attribute__((target("arch=armv8.2-a+bf16")))

constexpr int MR = 8;              // rows of the micro-tile: 4 x 4 blocks of 2 x 2 accumulators
constexpr int NR = 8;              // its columns, and those of a B sliver
constexpr int64_t MC = 16 * MR;    // rows of an A block
constexpr int64_t NC = 512 * NR;   // columns of a B panel
// k per packed block: x86's (gemm_bf16_one_block answers for every kernel of an architecture).
constexpr int64_t KC_ARM = KC;
static_assert(KC_ARM % 4 == 0, "a block of k is whole quads of k");

inline int64_t block_pairs(int64_t kc) { return round_up((kc + 1) / 2, 2); }
constexpr int64_t arm_word(int64_t p, int64_t j, int64_t W) { return (p / 2) * 2 * W + (j / 2) * 4 + (j % 2) * 2 + p % 2; }

// A tile's epilogue (Bf16Epilogue at the tile's first row and column), in plain code: the same
// operations in the same order as x86's TileEpilogue (alpha * sum, + bias, then beta * C by a
// fused multiply-add and the gate; or the relu and dropout into bf16). (bf16_arm.cpp)
struct TileEpilogue {
  float* c = nullptr;  // the tile's first element of C (null with relu_dropout)
  int64_t ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;  // the tile's first column's
  const float* gate = nullptr;  // at the tile's first element, rows ldg apart
  const uint16_t* gate16 = nullptr;
  int64_t ldg = 0;
  const ReluDropout16* relu_dropout = nullptr;
  int64_t N = 0, row = 0, col = 0;  // the product's N, the tile's first row and column in it
  // Row i's first n sums (of NR) of the tile.
  void store(const float* sums, int i, int n) const;
};

// The tile (m x n of MR x NR) of A panel (ks pairs of MR rows) . B sliver (ks pairs of NR
// columns), stored through ep. (bf16_bfmmla.cpp)
void bfmmla_tile(int64_t ks, const uint32_t* a, const uint32_t* b, int m, int n, const TileEpilogue& ep);

}  // namespace arm

#endif  // __aarch64__

}  // namespace bf16

}  // namespace rosetta::detail
