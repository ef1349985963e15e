// What the fp32 driver (f32_gemm.cpp) and its micro-kernels (f32_avx512.cpp, f32_avx2.cpp,
// f32_neon.cpp) share.
//
// B is packed as slivers of kF32Cols columns, k-major: sliver s holds B[k][32s .. 32s + 31] at
// w + s * K * 32 + k * 32. A stays where it is (rows lda apart): a micro-kernel keeps an
// MR x 32 tile of C in registers (or two of MR x 16, one after the other) and, for every k,
// loads the sliver's row k and broadcasts A[i][k] for each of its MR rows. K runs in blocks of
// kF32BlockK (a sliver's block, 64 KiB, stays in L2 while the row panels pass); the first block
// adds the bias as it stores, later ones add to C. Slivers outermost, so a thread's columns of C
// are finished one sliver at a time. Every kernel sums each element in the same order (k
// ascending, blocks of kF32BlockK), one FMA per k, so all give the same bits.
#pragma once

#include <cstdint>

#include "f32.h"

namespace rosetta {
struct CpuFeatures;
}

namespace rosetta::detail {

constexpr int kF32Cols = 32;          // columns of a packed sliver
constexpr int64_t kF32BlockK = 512;   // k per block

// One product C = A @ B (+ bias) as the kernels see it.
struct F32Problem {
  int64_t M;
  const float* a;
  int64_t lda;
  const PackedBF32* b;
  float* c;
  int64_t ldc;
  const float* bias;
};

// One ISA's kernel: what it is called, what it needs, and its loops over a part of C.
struct F32Kernel {
  const char* name;  // the ISA, as kernels_summary() and PackedWeightsScope::fp32_kernel_isa() say it
  int mr;            // rows of its micro-tile: C is split among threads in whole tiles
  bool (*runs_on)(const CpuFeatures& cpu);
  // C[m0:m1, n0:n1] on the calling thread (n0 a multiple of kF32Cols).
  void (*compute)(const F32Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
};

extern const F32Kernel f32_avx512;  // f32_avx512.cpp
extern const F32Kernel f32_avx2;    // f32_avx2.cpp
extern const F32Kernel f32_neon;    // f32_neon.cpp (ARM64)

}  // namespace rosetta::detail
