// rosetta's bf16 GEMM (AVX512_BF16), internal to core. See gemm_bf16.cpp.
#pragma once

#include <cstdint>

namespace rosetta::detail {

// C = alpha * op(A) @ op(B) + beta * C with fp32 operands and result, row-major as cblas_sgemm
// (op(A) is M x K: A[i*lda + k], or A[k*lda + i] when trans_a; op(B) is K x N: B[k*ldb + j], or
// B[j*ldb + k] when trans_b). A and B are rounded to bf16 (nearest even) as they are packed;
// products and sums are fp32 (VDPBF16PS). beta 0 never reads C. `bias` (N values, or null) is
// added to every row as the result is stored: C = alpha * op(A) op(B) + bias + beta * C. Uses up
// to `threads` OpenMP threads (a nested team inside a parallel region). Only where
// gemm_bf16_available(). `a_sums` (M values, or null; trans_a only, as in a weight gradient
// dy^T x) receives the fp32 sums of op(A)'s rows, summed as A is packed: a bias gradient for free.
// M, N and K must be positive where it is given. `gate` (M x N, rows ldg apart, or null) zeroes
// C wherever it is not > 0 (a relu's gradient, gated by its output, as the product is stored).
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc, int threads, const float* bias = nullptr, float* a_sums = nullptr,
               const float* gate = nullptr, int64_t ldg = 0);

// B packed once for many products (weights at inference, or shared by model replicas): op(B)
// of K x N as the micro-kernels read it. gemm_bf16_packed computes C = alpha * op(A) @ B + bias +
// beta * C with it, gated as gemm_bf16 (the same results as gemm_bf16 on the unpacked B).
struct PackedB {
  int64_t K = 0, N = 0;
  bool amx = false;           // packed for the AMX kernels (k pairs padded to 16 per block)
  uint32_t* words = nullptr;  // owned
  PackedB() = default;
  PackedB(const PackedB&) = delete;
  PackedB& operator=(const PackedB&) = delete;
  ~PackedB();
};
void pack_b_bf16(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedB& out);
void gemm_bf16_packed(bool trans_a, int64_t M, float alpha, const float* a, int64_t lda,
                      const PackedB& b, float beta, float* c, int64_t ldc, int threads,
                      const float* bias = nullptr, const float* gate = nullptr, int64_t ldg = 0);

// A relu and a dropout applied to a product as it is stored, written in bf16 instead of C
// (Bf16Gemm::relu_dropout): element (i, j) of the M x N product v becomes
// (v > 0 ? v : 0) * (keep ? scale : 0), keep where dropout_hash(key, offset + i * N + j) >=
// threshold, rounded to bf16 at out[i * ld + j]: what relu_dropout_bf16 makes of the fp32 product.
struct ReluDropout16 {
  uint16_t* out = nullptr;
  int64_t ld = 0;
  uint32_t key = 0, threshold = 0;  // threshold 0 and scale 1: relu alone
  float scale = 1.0f;
  uint64_t offset = 0;
};

// One bf16 product with all that the functions above take, and more: A or B already in bf16
// (a16, b16; lda, ldb counting bf16 values), a gate in bf16 (gate16, rows ldg values apart), and
// A's values kept as the product rounded them (`rounded`: op(A) of M x K in bf16, rows
// ld_rounded values apart; fp32 A without trans_a only, and never with a16). The bf16 operands are the upper halves of
// fp32 values, as round_to_bf16 stores them: nothing is rounded twice, so a product of rounded
// operands equals the product of the fp32 ones they came from, bit for bit.
struct Bf16Gemm {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* a = nullptr;
  const uint16_t* a16 = nullptr;  // A in bf16 instead of a
  int64_t lda = 0;
  const float* b = nullptr;
  const uint16_t* b16 = nullptr;  // B in bf16 instead of b
  int64_t ldb = 0;
  const PackedB* packed = nullptr;  // op(B) already packed (then b, b16 and trans_b are unused)
  float* c = nullptr;
  int64_t ldc = 0;
  const float* bias = nullptr;      // [N], added to every row of the product
  float* a_sums = nullptr;          // [M]: the sums of op(A)'s rows (trans_a only)
  const float* gate = nullptr;      // M x N, rows ldg apart: C is 0 where it is not > 0
  const uint16_t* gate16 = nullptr;  // the same in bf16 instead of gate
  int64_t ldg = 0;
  uint16_t* rounded = nullptr;  // receives op(A) in bf16
  int64_t ld_rounded = 0;
  // Instead of C (c null): the product (+ bias) through a relu and a dropout, in bf16. Needs beta
  // 0, no gate, and K within one block of k (gemm_bf16_one_block).
  const ReluDropout16* relu_dropout = nullptr;
};
void gemm_bf16(const Bf16Gemm& g, int threads);

// K is summed in one block of k by the kernels in use, as an epilogue of a relu and dropout needs.
bool gemm_bf16_one_block(int64_t K);

// dst[j] = src[j] rounded to bf16 (nearest even, as the GEMMs round their operands) for j < n,
// and sums[j] += src[j] where sums is given.
void round_to_bf16(const float* src, uint16_t* dst, float* sums, int64_t n);

// The packing of op(B) (K x N, from b with rows or, with trans_b, columns ldb apart) that this
// thread's products share (SharedPackedWeights::Use), or null. (matmul.cpp)
const PackedB* shared_packing(const float* b, int64_t ldb, int64_t K, int64_t N, bool trans_b);

// Threads for a bf16 product of M x N x K: all of them for a large one outside parallel regions;
// inside one (a model replica's thread) what set_nested_gemm_threads gave this thread, for large
// ones; one for a small one. (matmul.cpp)
int bf16_threads(int64_t M, int64_t N, int64_t K);

// A product of M x N x K runs in bf16 here: bf16 precision (MatmulPrecisionScope), a CPU with
// bf16 products, and enough multiply-adds. (matmul.cpp)
bool bf16_gemm(int64_t M, int64_t N, int64_t K);

// The CPU has AVX512_BF16 (and AVX-512 F/BW/VL) and the OS saves the ZMM registers.
bool gemm_bf16_available();

// The bf16 GEMMs run on AMX tiles (TDPBF16PS) instead of VDPBF16PS: gemm_bf16_available(), the
// CPU has AMX-TILE and AMX-BF16, the OS saves the tile state and grants it to this process
// (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, asked once here), and ROSETTA_AMX is not "0" or "off"
// in the environment when first asked. Decided once per process. ROSETTA_AMX=model takes the AMX
// path with its tile kernel modelled in scalar code (slow; for tests on CPUs without AMX).
bool gemm_bf16_amx();
bool gemm_bf16_amx_modelled();

// Seconds this core takes for `iters` rounds of 16 independent VDPBF16PS (bf16) or VFMADD231PS
// (fp32) on registers alone: the instructions' throughput, with no memory in the way. Only where
// gemm_bf16_available().
double time_bf16_dots(int64_t iters);
double time_fp32_fmas(int64_t iters);
// Seconds for `iters` rounds of 4 independent TDPBF16PS (16 x 16 x 32 multiply-adds each) on
// tiles alone. Only where gemm_bf16_amx().
double time_amx_dots(int64_t iters);

}  // namespace rosetta::detail
