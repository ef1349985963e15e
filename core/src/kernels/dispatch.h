// Which micro-kernels rosetta's own GEMMs run on this CPU (see README.md beside this file).
//
// Each precision has a list of kernels, best first, each one file of this folder that names the
// instructions it needs. The first whose instructions the CPU has (cpuid, and the OS's grant of
// the registers or the AMX tiles) and that passed its start-up check on this CPU
// (kernel_check.h) runs, chosen once per process at its first use, unless the environment then
// says otherwise (a kernel it names that failed the check is not chosen either):
//   ROSETTA_PACKED_F32=avx2  fp32: the AVX2 kernel, also on a CPU with AVX-512
//   ROSETTA_AMX=0 or off     bf16: the AVX512_BF16 kernel, also on a CPU with AMX
//   ROSETTA_AMX=model        bf16: the AMX path with its tile products modelled in plain code, on
//                            any CPU with AVX512_BF16 (slow; how the tests reach it without AMX);
//                            int8: the same for AMX-INT8, on any CPU with AVX512_VNNI
//   ROSETTA_INT8=NAME        int8: the kernel of that name in lower case ("avx2", "avx-vnni",
//                            "avx512-vnni", "amx-int8"; ARM64: "i8mm", "dotprod") where the CPU
//                            runs it, else none
// ARM64's kernels: fp32 "NEON" (every Armv8-A CPU); int8 "I8MM" (SMMLA), "DOTPROD" (SDOT).
// The tests also name kernels directly: every kernel this CPU can run is held to the plain
// reference GEMMs (reference.h) in one process, whatever the environment chose.
#pragma once

#include <vector>

namespace rosetta {
struct CpuFeatures;
}

namespace rosetta::detail {

struct F32Kernel;   // f32_kernel.h: products by fp32 weights packed once (decoding)
struct Bf16Kernel;  // bf16_kernel.h: bf16 products with fp32 sums (training, and decoding in bf16)
struct Int8Kernel;  // int8_kernel.h: products by int8 weights, sums exact in int32 (decoding)

// The kernel this process runs for each precision; null where the CPU has none.
const F32Kernel* f32_kernel();
const Bf16Kernel* bf16_kernel();
const Int8Kernel* int8_kernel();

// Every kernel of the lists this CPU can run (the AMX model included where AVX512_BF16 is), best
// first, whatever the environment chose: what the tests hold to the reference.
std::vector<const F32Kernel*> f32_kernels_here();
std::vector<const Bf16Kernel*> bf16_kernels_here();
std::vector<const Int8Kernel*> int8_kernels_here();

// The names by which the rest of core asks (cpu.cpp, matmul.cpp).
bool gemm_f32_packed_available();  // f32_kernel() is not null: AVX-512 F, or AVX2 and FMA; NEON
// f32_kernel()'s ISA, "AVX-512", "AVX2" or "NEON", or "" where none runs.
const char* gemm_f32_packed_isa();
// bf16_kernel() is not null: AVX512_BF16 (and AVX-512 F/BW/VL/DQ), the OS saving the ZMM
// registers; on ARM64 BF16 (BFMMLA)
bool gemm_bf16_available();
// The bf16 products run on AMX tiles: gemm_bf16_available(), AMX-TILE and AMX-BF16, the OS grants
// this process the tile state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, asked once here), and
// ROSETTA_AMX is not "0" or "off"; or ROSETTA_AMX=model, the tiles modelled in plain code.
bool gemm_bf16_amx();
bool gemm_bf16_amx_modelled();
bool gemm_int8_available();  // int8_kernel() is not null: AVX2 at least; ARM64: DotProd at least
const char* gemm_int8_isa();  // int8_kernel()'s name, "" where none runs

// Marks the calling thread as running a product of `precision` on `kernel` while it lives, for
// a fatal signal's report (rosetta/core/fault.h). The drivers hold one around each thread's part.
class KernelScope {
 public:
  KernelScope(const char* precision, const char* kernel);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  const char* saved_precision_;
  const char* saved_kernel_;
};

}  // namespace rosetta::detail
