// Probes of one core's instruction rates (bf16.h): `iters` rounds of 16 independent VDPBF16PS or
// VFMADD231PS on registers alone (aarch64: of BFMMLA or FMLA, as many multiply-adds a round), for
// bf16_dot_speedup() (cpu.cpp). The AMX one is in bf16_amx.cpp.
#include <chrono>
#include <cstdint>

#include "bf16_kernel.h"

namespace rosetta::detail {

#if defined(__x86_64__)

namespace {
// `iters` rounds of 16 independent instructions `op` into zmm0-15 from zmm16 and zmm17 (both
// broadcast from `x`, a normal number: no denormal assists): enough independent chains to cover
// the latency of two pipes (FMA: 4 cycles, VDPBF16PS: up to 6), so the loop runs at the
// instruction's throughput. Written in assembly so that it times the instruction at any
// optimization level (at -O0 an array of accumulators would live in memory).
#define ROSETTA_PROBE_LOOP(op)                                                                       \
  asm volatile(                                                                                    \
      "vbroadcastss %1, %%zmm16\n\t"                                                               \
      "vbroadcastss %1, %%zmm17\n\t"                                                               \
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\tvmovaps %%zmm0, %%zmm1\n\tvmovaps %%zmm0, %%zmm2\n\t"      \
      "vmovaps %%zmm0, %%zmm3\n\tvmovaps %%zmm0, %%zmm4\n\tvmovaps %%zmm0, %%zmm5\n\t"             \
      "vmovaps %%zmm0, %%zmm6\n\tvmovaps %%zmm0, %%zmm7\n\tvmovaps %%zmm0, %%zmm8\n\t"             \
      "vmovaps %%zmm0, %%zmm9\n\tvmovaps %%zmm0, %%zmm10\n\tvmovaps %%zmm0, %%zmm11\n\t"           \
      "vmovaps %%zmm0, %%zmm12\n\tvmovaps %%zmm0, %%zmm13\n\tvmovaps %%zmm0, %%zmm14\n\t"          \
      "vmovaps %%zmm0, %%zmm15\n\t"                                                                \
      "1:\n\t"                                                                                     \
      op " %%zmm17, %%zmm16, %%zmm0\n\t" op " %%zmm17, %%zmm16, %%zmm1\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm2\n\t" op " %%zmm17, %%zmm16, %%zmm3\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm4\n\t" op " %%zmm17, %%zmm16, %%zmm5\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm6\n\t" op " %%zmm17, %%zmm16, %%zmm7\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm8\n\t" op " %%zmm17, %%zmm16, %%zmm9\n\t"                       \
      op " %%zmm17, %%zmm16, %%zmm10\n\t" op " %%zmm17, %%zmm16, %%zmm11\n\t"                     \
      op " %%zmm17, %%zmm16, %%zmm12\n\t" op " %%zmm17, %%zmm16, %%zmm13\n\t"                     \
      op " %%zmm17, %%zmm16, %%zmm14\n\t" op " %%zmm17, %%zmm16, %%zmm15\n\t"                     \
      "dec %0\n\t"                                                                                 \
      "jnz 1b\n\t"                                                                                 \
      "vzeroupper"                                                                                 \
      : "+r"(n)                                                                                    \
      : "m"(x)                                                                                     \
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",  \
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "cc")

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

ROSETTA_BF16_TARGET double time_bf16_dots(int64_t iters) {
  if (iters <= 0) return 0;
  int64_t n = iters;
  const float x = 0.25f;  // as a pair of bf16 words: 0x3E80 and 0x0000, both normal or zero
  const auto t0 = std::chrono::steady_clock::now();
  ROSETTA_PROBE_LOOP("vdpbf16ps");
  return seconds_since(t0);
}

ROSETTA_BF16_TARGET double time_fp32_fmas(int64_t iters) {
  if (iters <= 0) return 0;
  int64_t n = iters;
  const float x = 0.25f;
  const auto t0 = std::chrono::steady_clock::now();
  ROSETTA_PROBE_LOOP("vfmadd231ps");
  return seconds_since(t0);
}
#undef ROSETTA_PROBE_LOOP

#elif defined(__aarch64__)

namespace {
// BFMMLA does 16 multiply-adds an instruction and FMLA (.4s) 4: a round of the BFMMLA loop is 32
// of them in two passes over v0-v15 (16 x 32 multiply-adds, as a round of VDPBF16PS), a round of
// the FMLA loop 64 in four passes (16 x 16, as a round of VFMADD231PS), so bf16_dot_speedup
// (cpu.cpp) reads both architectures' rounds alike. 16 independent chains cover the latency of
// up to four pipes. The operands: v16 and v17 both hold `x` (0.25f) in every lane, as bf16
// pairs 0x3E80 and 0x0000 (normal or zero: no denormal flushes) for BFMMLA.
#define ROSETTA_PROBE_PASS(op, d, s) \
  op " v0." d ", v16." s ", v17." s "\n\t" \
  op " v1." d ", v16." s ", v17." s "\n\t" \
  op " v2." d ", v16." s ", v17." s "\n\t" \
  op " v3." d ", v16." s ", v17." s "\n\t" \
  op " v4." d ", v16." s ", v17." s "\n\t" \
  op " v5." d ", v16." s ", v17." s "\n\t" \
  op " v6." d ", v16." s ", v17." s "\n\t" \
  op " v7." d ", v16." s ", v17." s "\n\t" \
  op " v8." d ", v16." s ", v17." s "\n\t" \
  op " v9." d ", v16." s ", v17." s "\n\t" \
  op " v10." d ", v16." s ", v17." s "\n\t" \
  op " v11." d ", v16." s ", v17." s "\n\t" \
  op " v12." d ", v16." s ", v17." s "\n\t" \
  op " v13." d ", v16." s ", v17." s "\n\t" \
  op " v14." d ", v16." s ", v17." s "\n\t" \
  op " v15." d ", v16." s ", v17." s "\n\t"
#define ROSETTA_PROBE_LOOP(body)                                                                      \
  asm volatile(                                                                                     \
      "dup v16.4s, %w1\n\t"                                                                        \
      "dup v17.4s, %w1\n\t"                                                                        \
      "movi v0.16b, #0\n\tmov v1.16b, v0.16b\n\tmov v2.16b, v0.16b\n\tmov v3.16b, v0.16b\n\t"       \
      "mov v4.16b, v0.16b\n\tmov v5.16b, v0.16b\n\tmov v6.16b, v0.16b\n\tmov v7.16b, v0.16b\n\t"    \
      "mov v8.16b, v0.16b\n\tmov v9.16b, v0.16b\n\tmov v10.16b, v0.16b\n\tmov v11.16b, v0.16b\n\t"  \
      "mov v12.16b, v0.16b\n\tmov v13.16b, v0.16b\n\tmov v14.16b, v0.16b\n\tmov v15.16b, v0.16b\n\t" \
      "1:\n\t" body                                                                                 \
      "subs %0, %0, #1\n\t"                                                                         \
      "b.ne 1b"                                                                                     \
      : "+r"(n)                                                                                     \
      : "r"(bits)                                                                                   \
      : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", \
        "v15", "v16", "v17", "cc")

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
constexpr uint32_t kBits = 0x3E800000u;  // 0.25f
}  // namespace

ROSETTA_BF16_ARM_TARGET double time_bf16_dots(int64_t iters) {
  if (iters <= 0) return 0;
  int64_t n = iters;
  const uint32_t bits = kBits;
  const auto t0 = std::chrono::steady_clock::now();
  ROSETTA_PROBE_LOOP(ROSETTA_PROBE_PASS("bfmmla", "4s", "8h") ROSETTA_PROBE_PASS("bfmmla", "4s", "8h"));
  return seconds_since(t0);
}

double time_fp32_fmas(int64_t iters) {
  if (iters <= 0) return 0;
  int64_t n = iters;
  const uint32_t bits = kBits;
  const auto t0 = std::chrono::steady_clock::now();
  ROSETTA_PROBE_LOOP(ROSETTA_PROBE_PASS("fmla", "4s", "4s") ROSETTA_PROBE_PASS("fmla", "4s", "4s")
                         ROSETTA_PROBE_PASS("fmla", "4s", "4s") ROSETTA_PROBE_PASS("fmla", "4s", "4s"));
  return seconds_since(t0);
}
#undef ROSETTA_PROBE_LOOP
#undef ROSETTA_PROBE_PASS

#else  // neither: never called
double time_bf16_dots(int64_t) { return 0; }
double time_fp32_fmas(int64_t) { return 0; }
#endif

}  // namespace rosetta::detail
