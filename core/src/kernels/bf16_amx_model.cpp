// What the AMX tile kernel computes, in plain code (ROSETTA_AMX=model): the AMX path's packing,
// loops and epilogue checked on a CPU without AMX (bf16_amx.cpp; dispatch.h).
#include <algorithm>

#include "bf16_kernel.h"
#include "rosetta/core/cpu.h"

namespace rosetta::detail {

namespace {
bool runs_on(const CpuFeatures& f) { return bf16_avx512.runs_on(f); }  // packing and epilogue: AVX512_BF16
}  // namespace

const Bf16Kernel bf16_amx_model{"AMX (modelled)", true, true, runs_on};

#if defined(__x86_64__)

namespace bf16 {

namespace {
// TDPBF16PS adds each pair's two products in turn (each product of two bf16 values is exact in
// fp32, so fused or not gives the same sums). A row of C at a time, its NR sums side by side: the
// same additions in the same order as one sum per element, but vectorised instead of NR x AMR
// chains of dependent adds (the [bf16] tests through the model took 96 s that way). Not
// instrumented by the sanitizers, whose checks of every element kept it scalar (132 s under
// them): amx_kernel_model checks what it reads. (GNU spelling: clang ignores
// [[gnu::no_sanitize]].)
__attribute__((no_sanitize("address", "undefined"))) void amx_products_model(int64_t ks, const uint32_t* a,
                                                                            const uint32_t* b, float* acc) {
  // The pair's halves as floats, by the builtin: a lambda or std::bit_cast is a function of its own,
  // instrumented, and called per element at -O1.
#define ROSETTA_LO(w) __builtin_bit_cast(float, uint32_t((w) << 16))
#define ROSETTA_HI(w) __builtin_bit_cast(float, uint32_t((w) & 0xFFFF0000u))
  for (int i = 0; i < AMR; ++i) {
    float sums[NR] = {};
    for (int64_t p = 0; p < ks; ++p) {
      const uint32_t x = a[(p & ~int64_t(15)) * AMR + i * 16 + (p & 15)];  // amx_a_word(i, p)
      const float xl = ROSETTA_LO(x), xh = ROSETTA_HI(x);
      const uint32_t* y = b + p * NR;
#pragma omp simd  // vectorised at -O1 too (the sanitized build's)
      for (int j = 0; j < NR; ++j) {
        sums[j] += xl * ROSETTA_LO(y[j]);
        sums[j] += xh * ROSETTA_HI(y[j]);
      }
    }
#undef ROSETTA_LO
#undef ROSETTA_HI
    std::copy(sums, sums + NR, acc + i * NR);
  }
}
}  // namespace

void amx_kernel_model(int64_t ks, const uint32_t* a, const uint32_t* b, float* acc) {
  // The words the tile loads read, A's panel (amx_a_word(i, p) for AMR rows and ks pairs, a
  // multiple of 16) and B's sliver, each read once here where the sanitizers see it.
  uint32_t seen = 0;
  for (int64_t w = 0; w < AMR * ks; ++w) seen |= a[w];
  for (int64_t w = 0; w < ks * NR; ++w) seen |= b[w];
  asm volatile("" : : "r"(seen));
  amx_products_model(ks, a, b, acc);
}

}  // namespace bf16

#endif

}  // namespace rosetta::detail
