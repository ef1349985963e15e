// rosetta's fp32 GEMM with weights packed once (decoding on AVX-512 or AVX2), internal to core.
// The driver is f32_gemm.cpp, its micro-kernels f32_avx512.cpp and f32_avx2.cpp (f32_kernel.h).
#pragma once

#include <cstdint>

#include "dispatch.h"

namespace rosetta::detail {

// A weight matrix op(B) (K x N) packed once for many products: slivers of 32 columns, each
// k-major (32 consecutive floats per k), as the micro-kernels read them.
struct PackedBF32 {
  int64_t K = 0, N = 0;
  float* w = nullptr;  // owned, 64-byte aligned
  PackedBF32() = default;
  PackedBF32(const PackedBF32&) = delete;
  PackedBF32& operator=(const PackedBF32&) = delete;
  ~PackedBF32();
};
// op(B) is B[k*ldb + j], or B[j*ldb + k] when trans_b (a Linear's [out, in] weight).
void pack_b_f32(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedBF32& out);

// C = A @ B (+ bias, N values added to every row, when given) in fp32 with FMAs, A M x K
// row-major (rows lda apart), C rows ldc apart. Each element is summed by one thread in one
// order (k ascending, in blocks of 512), whatever `threads` is and whichever kernel runs: every
// kernel gives the same bits. On `kernel` (one of f32_kernels_here()), or f32_kernel(); only
// where one runs (gemm_f32_packed_available()).
void gemm_f32_packed(int64_t M, const float* a, int64_t lda, const PackedBF32& b, float* c, int64_t ldc,
                     int threads, const float* bias = nullptr, const F32Kernel* kernel = nullptr);

}  // namespace rosetta::detail
