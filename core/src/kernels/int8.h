// rosetta's int8 GEMM for inference, internal to core: the driver is int8_gemm.cpp, its
// micro-kernels int8_<isa>.cpp (int8_kernel.h).
#pragma once

#include <cstdint>

#include "dispatch.h"

namespace rosetta::detail {

// A weight matrix op(B) (K x N) quantized once for many products: column j (an output feature)
// as int8 values q[k][j] = round(B[k][j] / scale[j]), scale[j] = max_k |B[k][j]| / w_max (127,
// or 63 for the AVX2 kernel: int8_kernel.h), laid out as the micro-kernels read it (slivers of 32
// columns, 4 consecutive k per 32-bit word).
struct PackedBInt8 {
  int64_t K = 0, N = 0;
  int w_max = 127;
  int8_t* q = nullptr;       // owned, 64-byte aligned
  float* scale = nullptr;    // [N rounded up to 32]
  int32_t* comp = nullptr;   // [N rounded up to 32]: 128 * sum_k q[k][j] (A is shifted to u8)
  PackedBInt8() = default;
  PackedBInt8(const PackedBInt8&) = delete;
  PackedBInt8& operator=(const PackedBInt8&) = delete;
  ~PackedBInt8();
};
// op(B) is B[k*ldb + j], or B[j*ldb + k] when trans_b (a Linear's [out, in] weight); quantized to
// [-w_max, w_max], the range of the kernel that will multiply by it (0: int8_kernel()'s).
void pack_b_int8(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedBInt8& out, int w_max = 0);

// C = A @ B (+ bias, N values added to every row, when given), A fp32 M x K row-major (rows lda
// apart), C fp32 (rows ldc apart). Each row of A is quantized to int8 by its own scale
// (max |a| / 127), products are summed exactly in int32 and scaled back to fp32:
//   C[i][j] = float(sum_k qa[i][k] qb[k][j]) * (scale_a[i] * scale_b[j]) (+ bias[j]).
// Non-finite values are not carried through as fp32 would: a row with an infinity gives the
// bias alone, a NaN an arbitrary finite row. Uses up to `threads` OpenMP threads. On `kernel`
// (one of int8_kernels_here()), or int8_kernel(); only where one runs (gemm_int8_available()),
// and only by weights packed for its range (PackedBInt8::w_max: throws otherwise).
void gemm_int8_packed(int64_t M, const float* a, int64_t lda, const PackedBInt8& b, float* c, int64_t ldc,
                      int threads, const float* bias = nullptr, const Int8Kernel* kernel = nullptr);

}  // namespace rosetta::detail
