// The bf16 GEMM's driver on aarch64 (bf16.h; bf16_gemm.cpp checks the arguments and calls run,
// packed_b_words and pack_b here): the packing of both operands in BFMMLA's 2 x 4 blocks
// (bf16_kernel.h, arm_word), the loops of cache blocking around the micro-kernel
// (bf16_bfmmla.cpp), and the epilogue, all in plain code: only the micro-kernel needs BF16.
//
// Loops, outermost first, as on x86-64: N by NC, K by KC (a B panel packed once), M by MC (an A
// block packed once), then the tiles, the B sliver kept while the panels of the A block stream.
// Every element is summed in the order the blocking fixes (k blocks in turn, each in one
// micro-kernel call), whatever the split among threads.
#include <algorithm>
#include <bit>
#include <cmath>

#include "bf16_kernel.h"

#if defined(__aarch64__)

namespace rosetta::detail::bf16 {

namespace arm {

namespace {

// An operand's value in bf16: an fp32 one rounded (bf16_bits), a bf16 one as it is.
inline uint16_t to_bf16(float x) { return bf16_bits(x); }
inline uint16_t to_bf16(uint16_t x) { return x; }
inline float to_f32(float x) { return x; }
inline float to_f32(uint16_t x) { return std::bit_cast<float>(uint32_t(x) << 16); }

// Packs X (kc x w, element (k, j)) as panels of W rows or columns (panel q at out + q * ks * W),
// word (p, j) at arm_word(p, j, W): zero past kc and w. X is k-major (element at src[k * ld + j])
// or j-major (src[j * ld + k]); fp32 or bf16 (T: uint16_t). With `sums`, sums[j] += the kc fp32
// values of column j, a pair at a time, as they are read. With `rounded` (fp32 X), X's values as
// packed: rounded[j * ldr + k] in bf16. The loops follow the source's rows.
template <class T>
void pack_panels(bool k_major, const T* src, int64_t ld, int64_t kc, int64_t w, int W, uint32_t* out, float* sums,
                 uint16_t* rounded, int64_t ldr) {
  const int64_t ks = block_pairs(kc), panels = (w + W - 1) / W;
  const auto at = [&](int64_t k, int64_t j) { return k_major ? src[k * ld + j] : src[j * ld + k]; };
  const auto put = [&](int64_t p, int64_t j) {
    const int64_t k = 2 * p;
    uint32_t word = 0;
    if (j < w && k < kc) {
      const T lo = at(k, j);
      const T hi = k + 1 < kc ? at(k + 1, j) : T(0);
      const uint16_t lo16 = to_bf16(lo), hi16 = to_bf16(hi);
      word = uint32_t(lo16) | uint32_t(hi16) << 16;
      if (sums) sums[j] += to_f32(lo) + to_f32(hi);
      if (rounded) {
        rounded[j * ldr + k] = lo16;
        if (k + 1 < kc) rounded[j * ldr + k + 1] = hi16;
      }
    }
    out[(j / W) * ks * W + arm_word(p, j % W, W)] = word;
  };
  if (k_major) {
    for (int64_t p = 0; p < ks; ++p)
      for (int64_t j = 0; j < panels * W; ++j) put(p, j);
  } else {
    for (int64_t j = 0; j < panels * W; ++j)
      for (int64_t p = 0; p < ks; ++p) put(p, j);
  }
}

// Packs columns [j0, j0 + nc) of op(B) rows [pc, pc + kc) as slivers of NR columns.
void pack_b_block(const Bf16Operand& b, int64_t pc, int64_t kc, int64_t j0, int64_t nc, uint32_t* out) {
  const int64_t offset = b.trans ? j0 * b.ld + pc : pc * b.ld + j0;
  if (b.bf16) pack_panels(!b.trans, b.bf16 + offset, b.ld, kc, nc, NR, out, nullptr, nullptr, 0);
  else pack_panels(!b.trans, b.f32 + offset, b.ld, kc, nc, NR, out, nullptr, nullptr, 0);
}

// C[m0:m1, n0:n1] on the calling thread (n0 a multiple of NR), and A's row sums [m0:m1] where the
// thread computes the first columns (it packs each A block of its rows once there).
void compute(const Bf16Gemm& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  static thread_local Scratch<uint32_t> a_buf, b_buf;
  const Bf16Operand& A = g.a;
  const Bf16AOutputs& A_out = g.a_out;
  const Bf16Epilogue& out = g.out;
  const int64_t np_all = round_up(g.N, NR);
  for (int64_t jc = n0; jc < n1; jc += NC) {
    const int64_t nc = std::min(NC, n1 - jc);
    int64_t block_offset = 0;  // of this block of k in a pre-packed B
    for (int64_t pc = 0; pc < g.K; pc += KC_ARM) {
      const int64_t kc = std::min(KC_ARM, g.K - pc), ks = block_pairs(kc);
      const uint32_t* bp;
      if (g.b_packed) {
        bp = g.b_packed->words + block_offset + (jc / NR) * ks * NR;
        block_offset += ks * np_all;
      } else {
        uint32_t* w = b_buf.get(size_t(ks * round_up(nc, NR)));
        pack_b_block(g.b, pc, kc, jc, nc, w);
        bp = w;
      }
      // Blocks of k after the first add to C; the first adds the bias.
      const float beta = pc == 0 ? out.beta : 1.0f;
      const float* bias = pc == 0 && out.bias ? out.bias + jc : nullptr;
      for (int64_t ic = m0; ic < m1; ic += MC) {
        const int64_t mc = std::min(MC, m1 - ic);
        uint32_t* ap = a_buf.get(size_t(ks * round_up(mc, MR)));
        float* sums = A_out.row_sums && jc == 0 ? A_out.row_sums + ic : nullptr;
        if (sums && pc == 0) std::fill(sums, sums + mc, 0.0f);
        const int64_t a_offset = A.trans ? pc * A.ld + ic : ic * A.ld + pc;
        // A's values as packed, once: by the thread that computes the first columns.
        uint16_t* rounded = A_out.rounded && jc == 0 ? A_out.rounded + ic * A_out.ld_rounded + pc : nullptr;
        if (A.bf16) pack_panels(A.trans, A.bf16 + a_offset, A.ld, kc, mc, MR, ap, sums, nullptr, 0);
        else pack_panels(A.trans, A.f32 + a_offset, A.ld, kc, mc, MR, ap, sums, rounded, A_out.ld_rounded);
        for (int64_t j = 0; j < nc; j += NR)
          for (int64_t i = 0; i < mc; i += MR) {
            const int m = int(std::min<int64_t>(MR, mc - i)), n = int(std::min<int64_t>(NR, nc - j));
            const int64_t row = ic + i, col = jc + j;
            const TileEpilogue ep{.c = out.c ? out.c + row * out.ldc + col : nullptr,
                                  .ldc = out.ldc,
                                  .alpha = out.alpha,
                                  .beta = beta,
                                  .bias = bias ? bias + j : nullptr,
                                  .gate = out.gate ? out.gate + row * out.ldg + col : nullptr,
                                  .gate16 = out.gate16 ? out.gate16 + row * out.ldg + col : nullptr,
                                  .ldg = out.ldg,
                                  .relu_dropout = out.relu_dropout,
                                  .N = g.N,
                                  .row = row,
                                  .col = col};
            bfmmla_tile(ks, ap + i * ks, bp + (j / NR) * ks * NR, m, n, ep);
          }
      }
    }
  }
}

}  // namespace

void TileEpilogue::store(const float* sums, int i, int n) const {
  for (int j = 0; j < n; ++j) {
    float r = alpha * sums[j];
    if (bias) r += bias[j];
    if (relu_dropout) {
      const ReluDropout16& rd = *relu_dropout;
      const uint64_t element = rd.offset + uint64_t((row + i) * N + col + j);
      const bool keep = dropout_hash(rd.key, element) >= rd.threshold;
      const float v = (r > 0.0f ? r : 0.0f) * (keep ? rd.scale : 0.0f);
      rd.out[(row + i) * rd.ld + col + j] = bf16_bits(v);
      continue;
    }
    float* ci = c + i * ldc + j;
    if (beta != 0.0f) r = std::fma(beta, *ci, r);
    if (gate || gate16) {
      const float g = gate ? gate[i * ldg + j] : to_f32(gate16[i * ldg + j]);
      if (!(g > 0.0f)) r = 0.0f;
    }
    *ci = r;
  }
}

}  // namespace arm

int64_t packed_b_words(int64_t K, int64_t N, bool) {
  const int64_t np = round_up(N, arm::NR);
  int64_t words = 0;
  for (int64_t pc = 0; pc < K; pc += arm::KC_ARM) words += arm::block_pairs(std::min(arm::KC_ARM, K - pc)) * np;
  return words;
}

void pack_b(const Bf16Operand& b, int64_t K, int64_t N, bool, uint32_t* out) {
  const int64_t np = round_up(N, arm::NR);
  int64_t offset = 0;
  for (int64_t pc = 0; pc < K; pc += arm::KC_ARM) {
    const int64_t kc = std::min(arm::KC_ARM, K - pc);
    arm::pack_b_block(b, pc, kc, 0, N, out + offset);
    offset += arm::block_pairs(kc) * np;
  }
}

void run(const Bf16Gemm& g, int threads, const Bf16Kernel& kernel) {
  split_over_threads(g.M, g.N, arm::MR, arm::NR, threads, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const KernelScope running("bf16", kernel.name);
    arm::compute(g, m0, m1, n0, n1);
  });
}

}  // namespace rosetta::detail::bf16

#endif  // __aarch64__
