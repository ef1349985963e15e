// fp32 products by weights packed once, for decoding (AVX-512 or AVX2). OpenBLAS's sgemm packs both
// operands on every call; a decoding step multiplies a few hundred rows by the same weights
// hundreds of times, so repacking the weights was ~11% of a translation's samples (and adding the
// bias, a copy before the product, ~3%).
//
// B is packed as slivers of NR columns, k-major: sliver s holds B[k][32s .. 32s + 31] at
// w + s * K * NR + k * NR. A stays where it is (rows lda apart): the micro-kernel keeps an
// MR x NR tile of C in registers and, for every k, loads two vectors of the sliver and
// broadcasts A[i][k] for each of its MR rows (MR x 2 FMAs). K runs in blocks of KC (a sliver's
// block, 64 KiB, stays in L2 while the row panels pass); the first block adds the bias as it
// stores, later ones add to C. Slivers outermost, so a thread's columns of C are finished one
// sliver at a time.
//
// On a CPU with AVX2 and FMA but no AVX-512 (Zen 3, Haswell to Alder Lake) the same packing is
// read by a 6 x 16 tile of 8-lane vectors (12 accumulators, two sliver vectors and a broadcast:
// 15 of the 16 YMM registers, the shape of OpenBLAS's own Haswell kernel), over each sliver's two
// halves in turn. Either kernel sums each element in the same order (k ascending, blocks of KC),
// one FMA per k, so the two give the same bits.
//
// As gemm_bf16.cpp: the vector code carries target attributes, so the file compiles whatever
// -march is and runs only where gemm_f32_packed_available() (cpuid) says so. ROSETTA_PACKED_F32=avx2
// in the environment makes an AVX-512 CPU run the AVX2 kernel (its tests, on CI machines).
#include "f32.h"

#include "common.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "rosetta/core/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define ROSETTA_F32_TARGET __attribute__((target("avx512f,fma")))
#define ROSETTA_F32_AVX2_TARGET __attribute__((target("avx2,fma")))
#endif

namespace rosetta::detail {

namespace {
enum class Kernel { none, avx2, avx512 };

Kernel kernel() {
  static const Kernel k = [] {
    const CpuFeatures& f = cpu_features();
    const char* env = std::getenv("ROSETTA_PACKED_F32");
    const bool want_avx2 = env && std::string(env) == "avx2";
    if (f.avx512f && f.fma && !want_avx2) return Kernel::avx512;
    return f.avx2 && f.fma ? Kernel::avx2 : Kernel::none;
  }();
  return k;
}
}  // namespace

bool gemm_f32_packed_available() { return kernel() != Kernel::none; }

const char* gemm_f32_packed_isa() {
  switch (kernel()) {
    case Kernel::avx512: return "AVX-512";
    case Kernel::avx2: return "AVX2";
    default: return "";
  }
}

PackedBF32::~PackedBF32() { std::free(w); }

namespace {

constexpr int NV = 2;        // 16-lane vectors across a micro-tile
constexpr int NR = 16 * NV;  // its columns
constexpr int MR = 12;       // its rows (24 accumulators); a last panel of <= 4 rows uses 4
constexpr int64_t KC = 512;  // k per block
constexpr int MR2 = 6;       // the AVX2 tile's rows (12 accumulators of 8 lanes); last panels 4 or 2
constexpr int NH = 16;       // the AVX2 tile's columns: half a sliver

}  // namespace

#if defined(__x86_64__)

namespace {

// C tile (m x n of R x NR) = A rows [kc] . B sliver block (+ bias when `bias`, + C when `add`).
template <int R>
ROSETTA_F32_TARGET void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* b, const float* bias,
                                     bool add, float* c, int64_t ldc, int m, int n) {
  __m512 acc[R][NV];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const float* rows[R];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) rows[i] = a + std::min(i, m - 1) * lda;  // rows past m repeat the last
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(b + k * NR + 16 * v);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(rows[i][k]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    if (i >= m) break;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __mmask16 k = first_lanes(n - 16 * v);
      if (!k) break;
      float* ci = c + i * ldc + 16 * v;
      __m512 r = acc[i][v];
      if (add) r = _mm512_add_ps(_mm512_maskz_loadu_ps(k, ci), r);
      else if (bias) r = _mm512_add_ps(_mm512_maskz_loadu_ps(k, bias + 16 * v), r);
      _mm512_mask_storeu_ps(ci, k, r);
    }
  }
}

// The first n of 8 lanes, as AVX2's masked loads and stores take them (a lane's sign bit).
ROSETTA_F32_AVX2_TARGET inline __m256i first_lanes8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(std::clamp(n, 0, 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// As micro_kernel, on AVX2: C tile (m x n of R x NH) from half a sliver (b: its first column;
// rows of NR floats).
template <int R>
ROSETTA_F32_AVX2_TARGET void micro_kernel_avx2(int64_t kc, const float* a, int64_t lda, const float* b,
                                               const float* bias, bool add, float* c, int64_t ldc, int m, int n) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  const float* rows[R];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) rows[i] = a + std::min(i, m - 1) * lda;  // rows past m repeat the last
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b + k * NR), b1 = _mm256_load_ps(b + k * NR + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(rows[i] + k);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    if (i >= m) break;
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const int left = n - 8 * v;
      if (left <= 0) break;
      float* ci = c + i * ldc + 8 * v;
      __m256 r = acc[i][v];
      if (left >= 8) {
        if (add) r = _mm256_add_ps(_mm256_loadu_ps(ci), r);
        else if (bias) r = _mm256_add_ps(_mm256_loadu_ps(bias + 8 * v), r);
        _mm256_storeu_ps(ci, r);
      } else {
        const __m256i mask = first_lanes8(left);
        if (add) r = _mm256_add_ps(_mm256_maskload_ps(ci, mask), r);
        else if (bias) r = _mm256_add_ps(_mm256_maskload_ps(bias + 8 * v, mask), r);
        _mm256_maskstore_ps(ci, mask, r);
      }
    }
  }
}

struct Problem {
  int64_t M;
  const float* a;
  int64_t lda;
  const PackedBF32* b;
  float* c;
  int64_t ldc;
  const float* bias;
};

// C[m0:m1, n0:n1] on the calling thread (n0 a multiple of NR), on AVX2.
ROSETTA_F32_AVX2_TARGET void compute_avx2(const Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t K = g.b->K;
  for (int64_t j = n0; j < n1; j += NR) {
    const float* sliver = g.b->w + j * K;  // (j / NR) * K * NR
    for (int h = 0; h < NR / NH && j + h * NH < n1; ++h) {
      const int n = int(std::min<int64_t>(NH, n1 - j - h * NH));
      const float* bias = g.bias ? g.bias + j + h * NH : nullptr;
      for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = std::min(KC, K - pc);
        const float* b = sliver + pc * NR + h * NH;
        for (int64_t i = m0; i < m1; i += MR2) {
          const int m = int(std::min<int64_t>(MR2, m1 - i));
          const float* a = g.a + i * g.lda + pc;
          float* c = g.c + i * g.ldc + j + h * NH;
          if (m <= 2)
            micro_kernel_avx2<2>(kc, a, g.lda, b, bias, pc > 0, c, g.ldc, m, n);
          else if (m <= 4)
            micro_kernel_avx2<4>(kc, a, g.lda, b, bias, pc > 0, c, g.ldc, m, n);
          else
            micro_kernel_avx2<MR2>(kc, a, g.lda, b, bias, pc > 0, c, g.ldc, m, n);
        }
      }
    }
  }
}

// C[m0:m1, n0:n1] on the calling thread (n0 a multiple of NR).
ROSETTA_F32_TARGET void compute(const Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t K = g.b->K;
  for (int64_t j = n0; j < n1; j += NR) {
    const float* sliver = g.b->w + j * K;  // (j / NR) * K * NR
    const int n = int(std::min<int64_t>(NR, n1 - j));
    const float* bias = g.bias ? g.bias + j : nullptr;
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc);
      for (int64_t i = m0; i < m1; i += MR) {
        const int m = int(std::min<int64_t>(MR, m1 - i));
        const float* a = g.a + i * g.lda + pc;
        float* c = g.c + i * g.ldc + j;
        if (m <= 4)
          micro_kernel<4>(kc, a, g.lda, sliver + pc * NR, bias, pc > 0, c, g.ldc, m, n);
        else
          micro_kernel<MR>(kc, a, g.lda, sliver + pc * NR, bias, pc > 0, c, g.ldc, m, n);
      }
    }
  }
}

}  // namespace

void pack_b_f32(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedBF32& out) {
  std::free(out.w);
  out.w = nullptr;
  out.K = K;
  out.N = N;
  const int64_t np = round_up(std::max<int64_t>(N, 1), NR), words = std::max<int64_t>(K, 1) * np;
  out.w = static_cast<float*>(std::aligned_alloc(64, size_t(round_up(words * int64_t(sizeof(float)), 64))));
  if (!out.w) throw std::bad_alloc();
  std::memset(out.w, 0, size_t(words) * sizeof(float));
  for (int64_t j = 0; j < N; ++j) {
    float* col = out.w + (j / NR) * K * NR + j % NR;
    for (int64_t k = 0; k < K; ++k) col[k * NR] = trans_b ? b[j * ldb + k] : b[k * ldb + j];
  }
}

void gemm_f32_packed(int64_t M, const float* a, int64_t lda, const PackedBF32& b, float* c, int64_t ldc,
                     int threads, const float* bias) {
  const int64_t N = b.N;
  if (M <= 0 || N <= 0) return;
  if (b.K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = bias ? bias[j] : 0.0f;
    return;
  }
  const Problem g{M, a, lda, &b, c, ldc, bias};
  if (kernel() == Kernel::avx2)
    split_over_threads(M, N, MR2, NR, threads,
                       [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { compute_avx2(g, m0, m1, n0, n1); });
  else
    split_over_threads(M, N, MR, NR, threads,
                       [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { compute(g, m0, m1, n0, n1); });
}

#else  // not x86-64: never available, never called

void pack_b_f32(bool, int64_t, int64_t, const float*, int64_t, PackedBF32&) {}
void gemm_f32_packed(int64_t, const float*, int64_t, const PackedBF32&, float*, int64_t, int, const float*) {}

#endif

}  // namespace rosetta::detail
