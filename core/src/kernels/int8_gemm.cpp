// int8 GEMM for inference on AVX512_VNNI: weights quantized once per output column, activations
// per row as each product runs, products summed exactly in int32.
//
// The instruction: VPDPBUSD acc, a, b adds a[4l]*b[4l] + ... + a[4l+3]*b[4l+3] to the int32 lane
// l of acc, a's bytes unsigned and b's signed (16 lanes, 64 products per instruction: four times
// what one fp32 FMA does). A row of A, quantized to q_a in [-127, 127] by its own scale, goes in
// as the unsigned q_a + 128; the extra 128 * sum_k q_b[k][j] is known from the weights alone
// (PackedBInt8::comp) and taken off as the result is scaled back:
//   C[i][j] = (acc[i][j] - comp[j]) * scale_a[i] * scale_b[j] (+ bias[j]).
// No sum can overflow: |acc| <= 4 * 255 * 127 per instruction, 2^31 only past K of 66,000.
// B is packed as slivers of NR columns, word [p][j] = (q[4p][j], .., q[4p+3][j]); A's quantized
// rows stay row-major, K rounded up to 4 with zeros (128 shifted). The micro-kernel keeps an
// MR x NR tile of C in registers: for every quad p it loads NR/16 vectors of the sliver and
// broadcasts each row's word p. Slivers outermost, so each stays in L1 while A's rows (a few
// KiB each) stream from L2. No cache blocking of K: the model's K (<= 4096) makes slivers of at
// most 128 KiB.
//
// As gemm_bf16.cpp: the AVX-512 code carries a target attribute, so the file compiles whatever
// -march is and runs only where gemm_int8_available() (cpuid) says so.
#include "int8.h"

#include "common.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "rosetta/core/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define ROSETTA_INT8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#endif

namespace rosetta::detail {

bool gemm_int8_available() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_vnni;
}

PackedBInt8::~PackedBInt8() {
  std::free(q);
  std::free(scale);
  std::free(comp);
}

namespace {

constexpr int NV = 2;        // 16-lane vectors across a micro-tile
constexpr int NR = 16 * NV;  // its columns
constexpr int MR = 8;        // its rows (16 accumulators); a last panel of <= 4 rows uses 4

template <typename T>
T* aligned(size_t n) {
  void* p = std::aligned_alloc(64, size_t(round_up(int64_t(std::max<size_t>(n, 1) * sizeof(T)), 64)));
  if (!p) throw std::bad_alloc();
  return static_cast<T*>(p);
}

}  // namespace

#if defined(__x86_64__)

namespace {

// Rows [0, M) of A as unsigned bytes (q + 128) in rows of kp bytes (zeros past K, 128 shifted),
// rows [M, Mp) all zeros, and each row's scale.
ROSETTA_INT8_TARGET void quantize_rows(int64_t M, int64_t Mp, int64_t K, int64_t kp, const float* a, int64_t lda,
                                       uint8_t* out, float* scale) {
  const __m512i shift = _mm512_set1_epi32(128);
  for (int64_t i = 0; i < M; ++i) {
    const float* r = a + i * lda;
    __m512 mx = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(first_lanes(K - k), r + k)));
    const float amax = _mm512_reduce_max_ps(mx);
    const bool usable = amax > 0 && std::isfinite(amax);
    scale[i] = usable ? amax / 127.0f : 0.0f;
    const __m512 inv = _mm512_set1_ps(usable ? 127.0f / amax : 0.0f);
    uint8_t* o = out + i * kp;
    for (int64_t k = 0; k < kp; k += 16) {
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(first_lanes(K - k), r + k), inv);
      const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), shift);  // nearest even: in [1, 255]
      _mm_mask_storeu_epi8(o + k, first_lanes(kp - k), _mm512_cvtusepi32_epi8(q));
    }
  }
  if (Mp > M) std::memset(out + M * kp, 128, size_t((Mp - M) * kp));
  for (int64_t i = M; i < Mp; ++i) scale[i] = 0.0f;
}

// C tile (m x n of R x NR) from R rows of quantized A (rows kp bytes apart) and a B sliver.
template <int R>
ROSETTA_INT8_TARGET void micro_kernel(int64_t kq, const uint8_t* a, int64_t kp, const int8_t* b, const float* sa,
                                      const float* sb, const int32_t* comp, const float* bias, float* c,
                                      int64_t ldc, int m, int n) {
  __m512i acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_si512();
  for (int64_t p = 0; p < kq; ++p) {
    __m512i bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_si512(b + p * 4 * NR + 64 * v);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      int32_t word;
      std::memcpy(&word, a + i * kp + 4 * p, 4);
      const __m512i av = _mm512_set1_epi32(word);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], av, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    if (i >= m) break;
    const __m512 si = _mm512_set1_ps(sa[i]);
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __mmask16 k = first_lanes(n - 16 * v);
      if (!k) break;
      const __m512i exact = _mm512_sub_epi32(acc[i][v], _mm512_load_si512(comp + 16 * v));
      __m512 r = _mm512_mul_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(si, _mm512_load_ps(sb + 16 * v)));
      if (bias) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(k, bias + 16 * v));
      _mm512_mask_storeu_ps(c + i * ldc + 16 * v, k, r);
    }
  }
}

struct Problem {
  int64_t M, kp;
  const uint8_t* a;  // quantized rows, kp bytes apart, padded to a multiple of MR rows
  const float* sa;
  const PackedBInt8* b;
  float* c;
  int64_t ldc;
  const float* bias;
};

// C[m0:m1, n0:n1] on the calling thread (m0 and n0 multiples of MR and NR).
ROSETTA_INT8_TARGET void compute(const Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t kq = g.kp / 4;
  for (int64_t j = n0; j < n1; j += NR) {
    const int8_t* sliver = g.b->q + j * g.kp;  // kq x NR words per sliver
    const int n = int(std::min<int64_t>(NR, n1 - j));
    const float* bias = g.bias ? g.bias + j : nullptr;
    for (int64_t i = m0; i < m1; i += MR) {
      const int m = int(std::min<int64_t>(MR, m1 - i));
      const uint8_t* a = g.a + i * g.kp;
      float* c = g.c + i * g.ldc + j;
      if (m <= 4)
        micro_kernel<4>(kq, a, g.kp, sliver, g.sa + i, g.b->scale + j, g.b->comp + j, bias, c, g.ldc, m, n);
      else
        micro_kernel<MR>(kq, a, g.kp, sliver, g.sa + i, g.b->scale + j, g.b->comp + j, bias, c, g.ldc, m, n);
    }
  }
}

}  // namespace

void pack_b_int8(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedBInt8& out) {
  std::free(out.q);
  std::free(out.scale);
  std::free(out.comp);
  out.q = nullptr;
  out.scale = nullptr;
  out.comp = nullptr;
  out.K = K;
  out.N = N;
  const int64_t kp = round_up(std::max<int64_t>(K, 1), 4), np = round_up(std::max<int64_t>(N, 1), NR);
  out.q = aligned<int8_t>(size_t(kp * np));
  out.scale = aligned<float>(size_t(np));
  out.comp = aligned<int32_t>(size_t(np));
  std::memset(out.q, 0, size_t(kp * np));
  for (int64_t j = 0; j < np; ++j) {
    out.scale[j] = 0.0f;
    out.comp[j] = 0;
    if (j >= N) continue;
    auto at = [&](int64_t k) { return trans_b ? b[j * ldb + k] : b[k * ldb + j]; };
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(at(k)));
    if (!(amax > 0.0f) || !std::isfinite(amax)) continue;  // an all-zero (or broken) column gives zeros
    const float inv = 127.0f / amax;
    out.scale[j] = amax / 127.0f;
    // Sliver j / NR, word (k / 4, j % NR), byte k % 4.
    int8_t* sliver = out.q + (j / NR) * NR * kp;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t q = int32_t(std::clamp(std::nearbyint(at(k) * inv), -127.0f, 127.0f));
      sliver[(k / 4) * 4 * NR + (j % NR) * 4 + k % 4] = int8_t(q);
      sum += q;
    }
    out.comp[j] = 128 * sum;
  }
}

void gemm_int8_packed(int64_t M, const float* a, int64_t lda, const PackedBInt8& b, float* c, int64_t ldc,
                      int threads, const float* bias) {
  const int64_t N = b.N, K = b.K;
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = bias ? bias[j] : 0.0f;
    return;
  }
  static thread_local Scratch<uint8_t> rows;
  static thread_local Scratch<float> scales;
  const int64_t kp = round_up(K, 4), Mp = round_up(M, MR);
  uint8_t* qa = rows.get(size_t(Mp * kp));
  float* sa = scales.get(size_t(Mp));
  quantize_rows(M, Mp, K, kp, a, lda, qa, sa);
  const Problem g{M, kp, qa, sa, &b, c, ldc, bias};
  split_over_threads(M, N, MR, NR, threads,
                     [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { compute(g, m0, m1, n0, n1); });
}

#else  // not x86-64: never available, never called

void pack_b_int8(bool, int64_t, int64_t, const float*, int64_t, PackedBInt8&) {}
void gemm_int8_packed(int64_t, const float*, int64_t, const PackedBInt8&, float*, int64_t, int, const float*) {}

#endif

}  // namespace rosetta::detail
