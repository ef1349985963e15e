// rosetta's bf16 GEMM, internal to core: operands rounded to bf16 (nearest even) as they are
// packed, products and sums in fp32. The driver is bf16_gemm.cpp, its micro-kernels
// bf16_avx512.cpp (VDPBF16PS) and bf16_amx.cpp (TDPBF16PS on AMX tiles, modelled in plain code
// by bf16_amx_model.cpp for the tests), their packing bf16_pack.cpp (bf16_kernel.h).
#pragma once

#include <cstdint>

#include "dispatch.h"

namespace rosetta::detail {

// C = alpha * op(A) @ op(B) + beta * C with fp32 operands and result, row-major as cblas_sgemm
// (op(A) is M x K: A[i*lda + k], or A[k*lda + i] when trans_a; op(B) is K x N: B[k*ldb + j], or
// B[j*ldb + k] when trans_b). beta 0 never reads C. `bias` (N values, or null) is added to every
// row as the result is stored: C = alpha * op(A) op(B) + bias + beta * C. Uses up to `threads`
// OpenMP threads (a nested team inside a parallel region). Only where gemm_bf16_available().
// `a_sums` (M values, or null; trans_a only, as in a weight gradient dy^T x) receives the fp32
// sums of op(A)'s rows, summed as A is packed: a bias gradient for free. M, N and K must be
// positive where it is given. `gate` (M x N, rows ldg apart, or null) zeroes C wherever it is
// not > 0 (a relu's gradient, gated by its output, as the product is stored).
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
// Packs for `kernel` (one of bf16_kernels_here()), or bf16_kernel().
void pack_b_bf16(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedB& out,
                 const Bf16Kernel* kernel = nullptr);
void gemm_bf16_packed(bool trans_a, int64_t M, float alpha, const float* a, int64_t lda,
                      const PackedB& b, float beta, float* c, int64_t ldc, int threads,
                      const float* bias = nullptr, const float* gate = nullptr, int64_t ldg = 0);

// A relu and a dropout applied to a product as it is stored, written in bf16 instead of C
// (Bf16Epilogue::relu_dropout): element (i, j) of the M x N product v becomes
// (v > 0 ? v : 0) * (keep ? scale : 0), keep where dropout_hash(key, offset + i * N + j) >=
// threshold, rounded to bf16 at out[i * ld + j]: what relu_dropout_bf16 makes of the fp32 product.
struct ReluDropout16 {
  uint16_t* out = nullptr;
  int64_t ld = 0;
  uint32_t key = 0, threshold = 0;  // threshold 0 and scale 1: relu alone
  float scale = 1.0f;
  uint64_t offset = 0;
};

// One operand of a bf16 product: fp32 values, rounded to bf16 as they are packed, or bf16 values
// already (the upper halves of fp32 values, as round_to_bf16 stores them: nothing is rounded
// twice, so a product of rounded operands equals the product of the fp32 ones they came from, bit
// for bit). op(A) is M x K: A[i*ld + k], or A[k*ld + i] with trans; op(B) is K x N: B[k*ld + j],
// or B[j*ld + k] with trans. ld counts values.
struct Bf16Operand {
  bool trans = false;
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;  // instead of f32
  int64_t ld = 0;
};

// What packing A yields besides the packing, each where wanted: the fp32 sums of op(A)'s rows (M
// values; trans A only, as in a weight gradient dy^T x: its bias gradient for free; M, N and K
// positive), and op(A) in bf16 as the product rounded it (rows ld_rounded values apart;
// row-major fp32 A only).
struct Bf16AOutputs {
  float* row_sums = nullptr;
  uint16_t* rounded = nullptr;
  int64_t ld_rounded = 0;
};

// How the product is stored (its epilogue), applied to each tile as it leaves the registers:
//   C = alpha * op(A) op(B) + bias + beta * C, then 0 wherever the gate is not > 0
// (beta 0 never reads C); or, with relu_dropout and no C, the product (+ bias) through a relu and
// a dropout, in bf16 (beta 0, no gate, and K within one block of k: gemm_bf16_one_block).
struct Bf16Epilogue {
  float* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;        // [N], added to every row
  const float* gate = nullptr;        // M x N, rows ldg apart (a relu's output)
  const uint16_t* gate16 = nullptr;   // the same in bf16 instead
  int64_t ldg = 0;
  const ReluDropout16* relu_dropout = nullptr;
};

// One bf16 product with all that the functions above take, and more.
struct Bf16Gemm {
  int64_t M = 0, N = 0, K = 0;
  Bf16Operand a = {}, b = {};
  const PackedB* b_packed = nullptr;  // op(B) packed already (then b is unused)
  Bf16AOutputs a_out = {};
  Bf16Epilogue out = {};
};
// On `kernel` (one of bf16_kernels_here(); a packed B must have been packed for it), or
// bf16_kernel().
void gemm_bf16(const Bf16Gemm& g, int threads, const Bf16Kernel* kernel = nullptr);

// K is summed in one block of k by `kernel` (or bf16_kernel()), as an epilogue of a relu and
// dropout needs.
bool gemm_bf16_one_block(int64_t K, const Bf16Kernel* kernel = nullptr);

// dst[j] = src[j] rounded to bf16 (nearest even, as the GEMMs round their operands) for j < n,
// and sums[j] += src[j] where sums is given.
void round_to_bf16(const float* src, uint16_t* dst, float* sums, int64_t n);

// The packing of op(B) (K x N, from b with rows or, with trans_b, columns ldb apart) that this
// thread's products share (SharedPackedWeights::Use), or null. (packed_weights.cpp)
const PackedB* shared_packing(const float* b, int64_t ldb, int64_t K, int64_t N, bool trans_b);

// Threads for a bf16 product of M x N x K: all of them for a large one outside parallel regions;
// inside one (a model replica's thread) what set_nested_gemm_threads gave this thread, for large
// ones; one for a small one. (matmul.cpp)
int bf16_threads(int64_t M, int64_t N, int64_t K);

// A product of M x N x K runs in bf16 here: bf16 precision (MatmulPrecisionScope), a CPU with
// bf16 products, and enough multiply-adds. (matmul.cpp)
bool bf16_gemm(int64_t M, int64_t N, int64_t K);

// Seconds this core takes for `iters` rounds of 16 independent VDPBF16PS (bf16) or VFMADD231PS
// (fp32) on registers alone: the instructions' throughput, with no memory in the way. Only where
// gemm_bf16_available(). (probes.cpp)
double time_bf16_dots(int64_t iters);
double time_fp32_fmas(int64_t iters);
// Seconds for `iters` rounds of 4 independent TDPBF16PS (16 x 16 x 32 multiply-adds each) on
// tiles alone. Only where gemm_bf16_amx() and not modelled. (bf16_amx.cpp)
double time_amx_dots(int64_t iters);

}  // namespace rosetta::detail
