// Plain reference GEMMs beside the fast kernels, as llm.c keeps a naive kernel beside each fast
// one: textbook loops, no packing, blocking, vectors or threads. The tests hold every kernel this
// CPU can run to them (tests/core/test_gemm_kernels.cpp, README.md).
#pragma once

#include <cstdint>
#include <vector>

namespace rosetta::detail::reference {

// fp32 -> bf16 -> fp32, rounded to nearest even: what the bf16 kernels' packing
// (VCVTNE2PS2BF16) and round_to_bf16 do to a finite value.
float round_bf16(float x);

// An operand as cblas_sgemm reads it, row-major: op(A)[i][k] = A[i*ld + k], or A[k*ld + i] with
// trans; op(B)[k][j] = B[k*ld + j], or B[j*ld + k] with trans.
struct Operand {
  const float* x = nullptr;
  int64_t ld = 0;
  bool trans = false;
  float at(int64_t r, int64_t c) const { return trans ? x[c * ld + r] : x[r * ld + c]; }
};

// op(A) @ op(B) (M x N, row-major) summed in double, each operand first rounded to bf16 where
// `bf16` (what the bf16 kernels multiply), and beside it sum_k |op(A)[i][k] op(B)[k][j]|: the
// scale of the rounding bounds (an fp32 sum of K products is within K 2^-23 of it of the exact
// sum; each operand's rounding to bf16 within 2^-8 of it).
struct Product {
  std::vector<double> value, magnitude;
};
Product gemm(int64_t M, int64_t N, int64_t K, const Operand& a, const Operand& b, bool bf16 = false);

// An int8 product as the int8 kernels define it (int8_kernel.h): A quantized by rows to
// [-127, 127], op(B) by columns to [-w_max, w_max] (the kernel's Int8Kernel::w_max), each by
// scale = max |x| / range to q = x * (range / max |x|) rounded to nearest even (in fp32; scale 0
// and q 0 where max |x| is 0 or not finite); the products summed exactly in int32;
// c[i][j] = float(sums[i][j]) * (row_scale[i] * col_scale[j]) in fp32, before any bias.
struct Int8Product {
  std::vector<int32_t> sums;
  std::vector<float> row_scale, col_scale, c;
};
Int8Product gemm_int8(int64_t M, int64_t N, int64_t K, const Operand& a, const Operand& b, int w_max = 127);

}  // namespace rosetta::detail::reference
