// What this CPU can run, which kernels rosetta runs on it, and the precision of its matrix
// products.
//
// Two families of kernels do the GEMMs:
// - fp32: OpenBLAS's sgemm. Debian's OpenBLAS (DYNAMIC_ARCH) picks a "core" (a kernel set: Zen,
//   Haswell, SkylakeX, Cooperlake, ...) from the CPU model at load time; on a model it does not
//   know it falls back to a generic one (Prescott: SSE3), silently, at a fraction of the speed.
//   blas_kernels() tells which core is running and whether it is below what the CPU can run;
//   OPENBLAS_CORETYPE, when set, is the user's choice and is reported as such.
// - bf16 (Precision::bf16): rosetta's own micro-kernels on AVX512_BF16 (VDPBF16PS: pairs of
//   bf16 products summed into fp32 lanes), or on AMX tiles (TDPBF16PS: a 16 x 32 by 32 x 16 bf16
//   product summed into a 16 x 16 fp32 tile) where the CPU has AMX-BF16 and the OS grants the
//   tiles (bf16_uses_amx(); ROSETTA_AMX=0 in the environment turns them off). Operands are
//   rounded to bf16 (round to nearest even) as they are packed; products and sums are fp32, and
//   so is the result.
// - int8 (Precision::int8, inference only): rosetta's own micro-kernels on AMX tiles
//   (TDPBUSD), AVX512_VNNI or AVX-VNNI (VPDPBUSD: four int8 products summed into int32 lanes), or
//   AVX2 (VPMADDUBSW and VPMADDWD, with 7-bit activations so that no int16 pair saturates) for the
//   products of activations by weights while decoding (inside a PackedWeightsScope): each weight
//   column quantized to int8 once, each activation row as the product runs, sums exact in int32,
//   results fp32 (int8_kernel_name() names the kernel).
// On ARM64 (aarch64): fp32 is OpenBLAS's too; rosetta's own kernels are NEON's for fp32 by packed
// weights (every Armv8-A CPU), SMMLA (I8MM) or SDOT (DotProd) for int8, signed by signed with no
// shift, and BFMMLA (BF16) for bf16. The messages below name each architecture's instructions.
#pragma once

#include <string>
#include <vector>

#include "rosetta/core/enum_names.h"

namespace rosetta {

struct CpuFeatures {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  std::string brand;   // the processor brand string, as the hypervisor shows it
  int family = 0, model = 0;
  // Each true only when the OS also saves the registers it needs (XCR0), so it is usable.
  bool sse3 = false, avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false;               // VDPBF16PS, VCVTNEPS2BF16
  bool avx512_vnni = false;               // VPDPBUSD: int8 dot products summed in int32
  bool avx_vnni = false;                  // the same on 256 bits, VEX-encoded (Alder Lake, Zen 5)
  bool amx_tile = false, amx_bf16 = false;  // TDPBF16PS on tiles (the OS saves the tile state)
  bool amx_int8 = false;                    // TDPBUSD on tiles
  // ARM64 (aarch64), from the hardware capabilities Linux reports (getauxval AT_HWCAP and
  // AT_HWCAP2), so each is usable by this process. On x86-64 all false.
  bool neon = false;     // Advanced SIMD (ASIMD) with fp32 FMLA: every Armv8-A CPU
  bool dotprod = false;  // SDOT and UDOT (Armv8.2 DotProd): four int8 products summed into int32 lanes
  bool i8mm = false;     // SMMLA, UMMLA, USMMLA, USDOT (Armv8.6 I8MM): 2x8 by 8x2 int8 blocks into int32
  bool bf16 = false;     // BFMMLA, BFDOT, BFCVT (Armv8.6 BF16): bf16 products summed into fp32
  bool sve = false;      // the Scalable Vector Extension (no kernel of rosetta's uses it yet)
};

// Read once and cached: on x86-64 cpuid and xgetbv; on aarch64 the hwcaps, and vendor, brand,
// family (the implementer) and model (the part number) from MIDR_EL1 where Linux lets a
// process read it (HWCAP_CPUID; empty and 0 otherwise). Elsewhere every flag is false.
const CpuFeatures& cpu_features();

// The widest vector ISA of this CPU as rosetta names it: "AVX-512", "AVX2", "AVX", "SSE3" or
// "generic", with "+AVX512_BF16" and "+AMX" appended where present; on ARM64 "NEON" with
// "+DOTPROD", "+I8MM", "+BF16" and "+SVE" appended where present.
std::string cpu_isa_name(const CpuFeatures& f = cpu_features());

// ------------------------------------------------------------------ OpenBLAS's kernels

// Vector ISA levels, in order; what a kernel set needs and what a CPU offers.
enum class IsaLevel { generic = 0, sse3 = 1, avx = 2, avx2 = 3, avx512 = 4 };
const char* isa_level_name(IsaLevel l);
IsaLevel cpu_isa_level(const CpuFeatures& f = cpu_features());
// The ISA an OpenBLAS core name's sgemm kernels use ("Prescott": sse3, "Haswell" and "Zen":
// avx2, "SkylakeX", "Cooperlake" and "SapphireRapids": avx512); generic for a name it does not
// know.
IsaLevel blas_core_isa(const std::string& core);
// The OpenBLAS core whose kernels suit this CPU best among those Debian's OpenBLAS 0.3.21
// carries: "Cooperlake" (AVX-512 with AVX512_BF16), "SkylakeX" (AVX-512), "Haswell" (AVX2 and
// FMA), "Sandybridge" (AVX), "Prescott"; empty where the CPU is not x86-64.
std::string blas_core_for(const CpuFeatures& f = cpu_features());

struct BlasKernels {
  std::string core;        // the core OpenBLAS is running (openblas_get_corename)
  IsaLevel core_isa = IsaLevel::generic;
  IsaLevel cpu_isa = IsaLevel::generic;
  std::string env;         // OPENBLAS_CORETYPE as this process saw it ("" when unset)
  // The core OpenBLAS picked by itself, when start() (start.h) started the program again with a
  // better one; "" otherwise.
  std::string picked_by_openblas;
  // True when the running core's ISA is below the CPU's: the fp32 GEMMs run slower than they
  // could.
  bool below_cpu() const { return core_isa < cpu_isa; }
};
BlasKernels blas_kernels();

// Before the dispatch lets a product run on one of rosetta's own kernels, each kernel this CPU
// would run multiplies a small product against a plain reference in a child process, once per
// process (a few ms; core/src/kernels/README.md): a kernel that crashes, gets a wrong result or
// hangs there is not used, and the next on its precision's list runs instead. One line per
// kernel that failed, naming it, how it failed and what runs instead, e.g. "the bf16 kernel AMX
// failed its start-up check on this CPU (killed by SIGILL): bf16 products run on AVX512_BF16
// instead"; empty where all passed. Runs the checks where they have not run yet (rosetta::start
// runs them first thing).
std::vector<std::string> kernel_check_warnings();

// One line for logs and reports: ISA, kernels and where they came from, e.g.
// "CPU AVX-512+AVX512_BF16; fp32 GEMM: OpenBLAS Cooperlake (its own choice); bf16 GEMM: ...;
// fp32 decoding: rosetta AVX-512 kernel on weights packed once".
std::string kernels_summary();
// "kernels: " + kernels_summary(), the precision of matrix products now, and the roofs measured
// on the current threads with n x n products, e.g. "...; matrix products in bf16; roofs on 2
// threads: sgemm 195 GFLOP/s, bf16 398 GFLOP/s". For logs; takes ~0.1 s at n 1024. Where a
// product of n 1024 would take long (a slow CPU, emulation), the roofs are measured on the
// smallest power of two from 128 whose product takes 20 ms, and the line names it ("(256^3
// products)").
std::string kernels_line(int roof_n = 1024);
// Empty when the running OpenBLAS core suits the CPU; else a warning that names the fix
// (OPENBLAS_CORETYPE=<core>, or rosetta::start, which takes the better core itself: start.h).
std::string blas_kernels_warning();

// Best GFLOP/s of a square fp32 GEMM of size n (and a bf16 one, when the CPU has AVX512_BF16)
// on the current threads: the roofs that MFU figures are read against. Takes ~0.2 s at n 2048.
double measure_sgemm_gflops(int n = 2048);
double measure_bf16_gemm_gflops(int n = 2048);

// ------------------------------------------------------------------ precision of matmuls

// int8 is for inference: only products by weights inside a PackedWeightsScope (decoding) run in
// int8; every other product, and training, stays fp32 under it.
enum class Precision { fp32, bf16, int8 };
constexpr EnumNames<Precision, 3> enum_names(Precision) {
  return {"precision", {{{Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}, {Precision::int8, "int8"}}}};
}
inline const char* precision_name(Precision p) { return enum_name(p); }
// Parses "fp32", "bf16" or "int8"; throws naming the value otherwise.
inline Precision parse_precision(const std::string& s) { return parse_enum<Precision>(s); }

// What a --precision flag asks for: a Precision, or auto (resolve_precision below).
enum class PrecisionChoice { fp32, bf16, int8, automatic };
constexpr EnumNames<PrecisionChoice, 4> enum_names(PrecisionChoice) {
  return {"precision",
          {{{PrecisionChoice::fp32, "fp32"}, {PrecisionChoice::bf16, "bf16"}, {PrecisionChoice::int8, "int8"},
            {PrecisionChoice::automatic, "auto"}}}};
}
inline const char* precision_choice_name(PrecisionChoice p) { return enum_name(p); }
inline PrecisionChoice parse_precision_choice(const std::string& s) { return parse_enum<PrecisionChoice>(s); }

// True when one of rosetta's int8 kernels runs on this CPU (AVX2 at least; ARM64: DotProd at least).
bool int8_supported();
// The int8 kernel decoding runs on here ("AMX-INT8", "AVX512_VNNI", "AVX-VNNI", "AVX2"; ARM64: "I8MM",
// "DOTPROD"), "" where none.
const char* int8_kernel_name();

// True when the CPU has native bf16 dot products (AVX512_BF16; ARM64: BFMMLA) that rosetta's kernels use.
bool bf16_supported();
// True when the bf16 products run on AMX tiles: bf16_supported(), AMX-TILE and AMX-BF16, the OS
// grants this process the tile state (Linux 5.16+), and ROSETTA_AMX is not "0" or "off" in the
// environment when first asked. Decided once per process. ROSETTA_AMX=model (for tests) runs the
// AMX path on any CPU with AVX512_BF16, its tile kernel modelled in scalar code: slow.
bool bf16_uses_amx();

// How many times the multiply-add rate of its fp32 FMAs one core reaches with the bf16 dot
// products the bf16 GEMMs use (VDPBF16PS: two bf16 products per fp32 lane; or TDPBF16PS on AMX
// tiles where bf16_uses_amx()), measured once on registers alone (~1 ms, the best of several
// alternating rounds) and cached; 0 where !bf16_supported(). Having the instruction is not
// enough for speed: AMD Zen 4 runs VDPBF16PS at its FMAs' instruction rate, 2.0x the
// multiply-adds, while an Intel Xeon of the Emerald Rapids class measured 0.5x (there the fast
// bf16 path is AMX: up to 16x on paper).
double bf16_dot_speedup();
// --precision auto's rule: bf16 products where the CPU has them at kAutoBf16Speedup times fp32's
// multiply-add rate or more (packing and rounding cost the rest), else fp32.
constexpr double kAutoBf16Speedup = 1.5;
Precision auto_precision(bool supported, double speedup);

// What a --precision choice means on this CPU: "fp32", "bf16", or "auto" (auto_precision() of
// bf16_supported() and bf16_dot_speedup()). bf16 is never emulated: where the CPU lacks
// AVX512_BF16, "bf16" and "auto" give fp32. `note` (when given) gets one line wherever the result
// is not what the choice names at full speed (fp32 for "bf16" or "auto" on a CPU without
// AVX512_BF16 or with slow bf16 dot products, bf16 asked for where it is slow); otherwise it is
// cleared. "int8" (decoding only) gives int8 where int8_supported(), else fp32 with a note; auto
// never chooses int8 (it changes results, not just their rounding). The string form throws naming
// any other value.
Precision resolve_precision(PrecisionChoice choice, std::string* note = nullptr);
inline Precision resolve_precision(const std::string& choice, std::string* note = nullptr) {
  return resolve_precision(parse_precision_choice(choice), note);
}

// The precision of float32 matrix products (matmul, linear, attention) for the whole process:
// fp32 (the default), bf16 operands with fp32 accumulation and fp32 results, or int8 (see
// Precision: decoding's products by weights only). Weights,
// gradients, optimizer state, losses, softmax and layer norm stay fp32 either way; float64
// products (gradchecks) are never affected. Setting bf16 where bf16_supported() is false
// throws, and int8 where int8_supported() is false. Set it between steps, not while another thread runs products.
void set_matmul_precision(Precision p);
Precision matmul_precision();

// Sets the precision for a scope and restores the previous one.
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(Precision p) : saved_(matmul_precision()) { set_matmul_precision(p); }
  ~MatmulPrecisionScope() { set_matmul_precision(saved_); }
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  Precision saved_;
};

}  // namespace rosetta
