// The bf16 GEMM's driver (bf16.h): checks, the split of C among threads, and the loops of cache
// blocking around the micro-kernels (bf16_kernel.h), in the manner of BLIS.
//
// Loops, outermost first: N by NC, K by KC (a B panel of KC x NC packed once), M by MC (an A block
// packed once), then the tiles of slivers and panels: on AVX512_BF16 (bf16_avx512.cpp) the B
// sliver stays in L1 while the panels of the A block stream from L2. On AMX tiles (bf16_amx.cpp)
// k runs in longer blocks (KC_AMX), A is packed as the tiles' rows (pack_a_amx), and where k is
// short (K <= 1024) the loops over panels and slivers swap (compute).
//
// The functions of bf16.h are here for every architecture: they check their arguments and call
// the driver of this one (bf16::run, packed_b_words, pack_b: below on x86-64, bf16_arm.cpp on
// aarch64).
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "amx.h"
#include "bf16_kernel.h"

namespace rosetta::detail {

PackedB::~PackedB() { std::free(words); }

namespace {
const Bf16Kernel& kernel_or_default(const Bf16Kernel* kernel) {
  if (!kernel) kernel = bf16_kernel();
  if (!kernel) throw std::logic_error("gemm_bf16: this CPU has no bf16 kernel");
  return *kernel;
}
}  // namespace

#if defined(__x86_64__)

namespace bf16 {
namespace {

// Packs columns [j0, j0 + nc) of op(B) rows [pc, pc + kc) as slivers of ks x NR.
void pack_b_block(const Bf16Operand& b, int64_t pc, int64_t kc, int64_t j0, int64_t nc, uint32_t* out, int64_t ks) {
  const int64_t offset = b.trans ? j0 * b.ld + pc : pc * b.ld + j0;
  if (b.bf16) pack_block(!b.trans, b.bf16 + offset, b.ld, kc, nc, NR, out, nullptr, ks);
  else pack_block(!b.trans, b.f32 + offset, b.ld, kc, nc, NR, out, nullptr, ks);
}

// C[m0:m1, n0:n1] on the calling thread (n0 a multiple of NR), and A's row sums [m0:m1] where the
// thread computes the first columns (it packs each A block of its rows once there): on AMX tiles
// (AMR-row panels of A packed as the tiles' rows, k pairs padded to 16; real or modelled) or with
// the AVX-512 micro-kernel (MR-row panels, pair-major).
template <bool Amx>
ROSETTA_AMX_TARGET void compute(const Bf16Gemm& g, bool modelled, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  static thread_local Scratch<uint32_t> a_buf, b_buf;
  constexpr int64_t mr = Amx ? AMR : MR;
  const Bf16Operand& A = g.a;
  const Bf16AOutputs& A_out = g.a_out;
  const Bf16Epilogue& out = g.out;
  if constexpr (Amx)
    if (!modelled) amx::configure_tiles();
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
      if (g.b_packed) {
        bp = g.b_packed->words + block_offset + (jc / NR) * ks * NR;
        block_offset += ks * np_all;
      } else {
        uint32_t* w = b_buf.get(size_t(ks * round_up(nc, NR)));
        pack_b_block(g.b, pc, kc, jc, nc, w, ks);
        bp = w;
      }
      // Blocks of k after the first add to C; the first adds the bias.
      const float beta = pc == 0 ? out.beta : 1.0f;
      const float* bias = pc == 0 && out.bias ? out.bias + jc : nullptr;
      for (int64_t ic = m0; ic < m1; ic += MC) {
        const int64_t mc = std::min(MC, m1 - ic);
        uint32_t* ap = a_buf.get(size_t(ks * round_up(mc, mr)));
        float* sums = A_out.row_sums && jc == 0 ? A_out.row_sums + ic : nullptr;
        if (sums && pc == 0) std::fill(sums, sums + mc, 0.0f);
        const int64_t a_offset = A.trans ? pc * A.ld + ic : ic * A.ld + pc;
        // A's values as packed, once: by the thread that computes the first columns.
        uint16_t* rounded = A_out.rounded && jc == 0 ? A_out.rounded + ic * A_out.ld_rounded + pc : nullptr;
        const auto pack_a = [&](const auto* a) {
          if constexpr (Amx) pack_a_amx(A.trans, a + a_offset, A.ld, kc, mc, ks, ap, sums, rounded, A_out.ld_rounded);
          else pack_block(A.trans, a + a_offset, A.ld, kc, mc, MR, ap, sums, 0, rounded, A_out.ld_rounded);
        };
        if (A.bf16) pack_a(A.bf16);
        else pack_a(A.f32);
        const auto tile = [&](int64_t i, int64_t j) {
          const int m = int(std::min<int64_t>(mr, mc - i)), n = int(std::min<int64_t>(NR, nc - j));
          const TileEpilogue ep{out.c ? out.c + (ic + i) * out.ldc + jc + j : nullptr,
                                out.ldc,
                                out.alpha,
                                beta,
                                bias ? bias + j : nullptr,
                                Gate{out.gate, out.gate16, out.ldg}.at(ic + i, jc + j),
                                Out16{out.relu_dropout, g.N, ic + i, jc + j}};
          if constexpr (Amx) amx_tile(ks, ap + i * ks, bp + (j / NR) * ks * NR, m, n, ep, modelled);
          else avx512_tile(ks, ap + i * ks, bp + (j / NR) * ks * NR, m, n, ep);
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
    if (!modelled) amx::release_tiles();
}

}  // namespace

// Words of a whole packed op(B): per block of k, ceil(N / NR) slivers of block_pairs x NR.
int64_t packed_b_words(int64_t K, int64_t N, bool amx) {
  const int64_t np = round_up(N, NR), kb = block_k(amx);
  int64_t words = 0;
  for (int64_t pc = 0; pc < K; pc += kb) words += block_pairs(std::min(kb, K - pc), amx) * np;
  return words;
}

void pack_b(const Bf16Operand& b, int64_t K, int64_t N, bool amx, uint32_t* out) {
  const int64_t np = round_up(N, NR), kb = block_k(amx);
  int64_t offset = 0;
  for (int64_t pc = 0; pc < K; pc += kb) {
    const int64_t kc = std::min(kb, K - pc), ks = block_pairs(kc, amx);
    pack_b_block(b, pc, kc, 0, N, out + offset, ks);
    offset += ks * np;
  }
}

// Splits C (M, N and K positive) over `threads` threads along its longer side, in whole
// micro-tiles, on `kernel`'s tiles (a pre-packed B was packed for it).
void run(const Bf16Gemm& g, int threads, const Bf16Kernel& kernel) {
  const bool amx = kernel.amx, modelled = kernel.modelled;
  const int64_t mr = amx ? AMR : MR;
  const auto compute_part = amx ? compute<true> : compute<false>;
  const auto part = [&](const Bf16Gemm& g, bool modelled, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const KernelScope running("bf16", kernel.name);
    compute_part(g, modelled, m0, m1, n0, n1);
  };
  const int64_t tiles_m = (g.M + mr - 1) / mr, tiles_n = (g.N + NR - 1) / NR;
  const bool split_m = g.M >= g.N;
  const int64_t tiles = split_m ? tiles_m : tiles_n;
  threads = int(std::min<int64_t>(std::max(threads, 1), tiles));
  // Inside a parallel region (a model replica's thread) this region is nested: it has its
  // threads only where nested parallelism is on (ThreadReplicas turns it on for that).
  if (threads <= 1) return part(g, modelled, 0, g.M, 0, g.N);
#pragma omp parallel num_threads(threads)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t b = tiles * t / nt, e = tiles * (t + 1) / nt;
    if (b < e) {
      if (split_m) part(g, modelled, b * mr, std::min(g.M, e * mr), 0, g.N);
      else part(g, modelled, 0, g.M, b * NR, std::min(g.N, e * NR));
    }
  }
}

}  // namespace bf16

ROSETTA_BF16_TARGET void round_to_bf16(const float* src, uint16_t* dst, float* sums, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = first_lanes(n - j);
    const __m512 x = _mm512_maskz_loadu_ps(k, src + j);
    _mm256_mask_storeu_epi16(dst + j, k, (__m256i)_mm512_cvtneps_pbh(x));
    if (sums) _mm512_mask_storeu_ps(sums + j, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, sums + j), x));
  }
}

#elif !defined(__aarch64__)  // no bf16 kernel here: bf16_kernel() is null, these are never called

namespace bf16 {
void run(const Bf16Gemm&, int, const Bf16Kernel&) { throw std::logic_error("gemm_bf16: no bf16 driver here"); }
int64_t packed_b_words(int64_t, int64_t, bool) { throw std::logic_error("pack_b_bf16: no bf16 driver here"); }
void pack_b(const Bf16Operand&, int64_t, int64_t, bool, uint32_t*) {
  throw std::logic_error("pack_b_bf16: no bf16 driver here");
}
}  // namespace bf16

#endif

#if !defined(__x86_64__)
void round_to_bf16(const float* src, uint16_t* dst, float* sums, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    dst[j] = bf16::bf16_bits(src[j]);
    if (sums) sums[j] += src[j];
  }
}
#endif

namespace bf16 {
namespace {
void scale_c(const Bf16Gemm& g) {  // K == 0: C = bias + beta * C
  const Bf16Epilogue& o = g.out;
  if (g.a_out.row_sums) std::fill(g.a_out.row_sums, g.a_out.row_sums + g.M, 0.0f);
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      float& x = o.c[i * o.ldc + j];
      x = (o.bias ? o.bias[j] : 0.0f) + (o.beta == 0.0f ? 0.0f : o.beta * x);
      const float gv = o.gate     ? o.gate[i * o.ldg + j]
                       : o.gate16 ? std::bit_cast<float>(uint32_t(o.gate16[i * o.ldg + j]) << 16)
                                  : 1.0f;
      if (!(gv > 0.0f)) x = 0.0f;
    }
}

}  // namespace
}  // namespace bf16

void gemm_bf16(const Bf16Gemm& g, int threads, const Bf16Kernel* kernel) {
  const Bf16Operand &a = g.a, &b = g.b;
  const Bf16Epilogue& o = g.out;
  // The operands of an empty product are never read (they may be null).
  const bool reads = g.M > 0 && g.N > 0 && g.K > 0;
  if ((reads && (!a.f32 == !a.bf16 || (!g.b_packed && !b.f32 == !b.bf16))) || (o.gate && o.gate16))
    throw std::logic_error("gemm_bf16: give A in fp32 or bf16, B in fp32, bf16 or packed, and at most one gate");
  if (g.a_out.row_sums && !a.trans) throw std::logic_error("gemm_bf16: the row sums of op(A) need a transposed A");
  if (g.a_out.rounded && (a.trans || a.bf16)) throw std::logic_error("gemm_bf16: rounded needs a row-major fp32 A");
  if (g.b_packed && (g.b_packed->K != g.K || g.b_packed->N != g.N))
    throw std::logic_error("gemm_bf16: B packed for another shape");
  if (g.M > 0 && g.N > 0 && !o.c && !o.relu_dropout) throw std::logic_error("gemm_bf16: no output (c or relu_dropout)");
  if (o.relu_dropout &&
      (o.c || o.beta != 0.0f || o.gate || o.gate16 || g.K == 0 || !gemm_bf16_one_block(g.K, kernel) ||
       (g.b_packed && g.b_packed->amx != (kernel ? kernel->amx : gemm_bf16_amx()))))
    throw std::logic_error("gemm_bf16: a relu and dropout epilogue writes no C, and needs beta 0, no gate and K in one block of k");
  if (g.M == 0 || g.N == 0) return;
  if (g.K == 0) return bf16::scale_c(g);
  const Bf16Kernel& k = kernel_or_default(kernel);
  if (g.b_packed && g.b_packed->amx != k.amx) throw std::logic_error("gemm_bf16: B packed for another kernel");
  bf16::run(g, threads, k);
}

bool gemm_bf16_one_block(int64_t K, const Bf16Kernel* kernel) {
  return K <= bf16::block_k(kernel ? kernel->amx : gemm_bf16_amx());
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc, int threads, const float* bias, float* a_sums, const float* gate, int64_t ldg) {
  gemm_bf16({.M = M,
             .N = N,
             .K = K,
             .a = {.trans = trans_a, .f32 = a, .ld = lda},
             .b = {.trans = trans_b, .f32 = b, .ld = ldb},
             .a_out = {.row_sums = a_sums},
             .out = {.c = c, .ldc = ldc, .alpha = alpha, .beta = beta, .bias = bias, .gate = gate, .ldg = ldg}},
            threads);
}

void pack_b_bf16(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedB& out,
                 const Bf16Kernel* kernel) {
  const bool amx = kernel_or_default(kernel).amx;
  const int64_t words = bf16::packed_b_words(K, N, amx);
  // Packed again into a buffer of the same size (weights packed after every update): kept, so
  // that no pages are freed and faulted in again.
  if (!out.words || bf16::packed_b_words(out.K, out.N, out.amx) != words) {
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
  bf16::pack_b({.trans = trans_b, .f32 = b, .ld = ldb}, K, N, amx, out.words);
}

void gemm_bf16_packed(bool trans_a, int64_t M, float alpha, const float* a, int64_t lda,
                      const PackedB& b, float beta, float* c, int64_t ldc, int threads, const float* bias,
                      const float* gate, int64_t ldg) {
  gemm_bf16({.M = M,
             .N = b.N,
             .K = b.K,
             .a = {.trans = trans_a, .f32 = a, .ld = lda},
             .b_packed = &b,
             .out = {.c = c, .ldc = ldc, .alpha = alpha, .beta = beta, .bias = bias, .gate = gate, .ldg = ldg}},
            threads);
}


}  // namespace rosetta::detail
