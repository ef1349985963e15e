// CPU features (cpuid), OpenBLAS's kernel choice, the GEMM roofs and the matmul precision.
#include "rosetta/core/cpu.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/bf16_kernel.h"
#include "kernels/f32.h"
#include "kernels/int8.h"
#include "kernels/kernel_check.h"
#include "rosetta/core/check.h"
#include "rosetta/core/tensor.h"
#include "start_env.h"

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif


namespace rosetta {

namespace {

#if defined(__x86_64__)
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

CpuFeatures read_cpu() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  f.vendor = vendor;
  __get_cpuid(1, &a, &b, &c, &d);
  const unsigned base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
  f.family = int(base_family == 0xF ? base_family + ((a >> 20) & 0xFF) : base_family);
  f.model = int(base_family == 0x6 || base_family == 0xF ? (((a >> 16) & 0xF) << 4) | base_model : base_model);
  const bool osxsave = c & (1u << 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm_os = (xcr0 & 0x6) == 0x6, zmm_os = (xcr0 & 0xE6) == 0xE6;
  const bool amx_os = (xcr0 & (3ull << 17)) == (3ull << 17);
  f.sse3 = c & 1u;
  f.fma = ymm_os && (c & (1u << 12));
  f.avx = ymm_os && (c & (1u << 28));
  if (max_leaf >= 7) {
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    f.avx2 = ymm_os && (b & (1u << 5));
    f.avx512f = zmm_os && (b & (1u << 16));
    f.avx512dq = zmm_os && (b & (1u << 17));
    f.avx512bw = zmm_os && (b & (1u << 30));
    f.avx512vl = zmm_os && (b & (1u << 31));
    f.avx512_vnni = zmm_os && (c & (1u << 11));
    f.amx_int8 = amx_os && (d & (1u << 25));
    f.amx_bf16 = amx_os && (d & (1u << 22));
    f.amx_tile = amx_os && (d & (1u << 24));
    __get_cpuid_count(7, 1, &a, &b, &c, &d);
    f.avx512_bf16 = zmm_os && (a & (1u << 5));
    f.avx_vnni = ymm_os && (a & (1u << 4));
  }
  __get_cpuid(0x80000000, &a, &b, &c, &d);
  if (a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002 + i, &a, &b, &c, &d);
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
    std::string s = brand;
    s.erase(0, s.find_first_not_of(' '));
    s.erase(s.find_last_not_of(' ') + 1);
    f.brand = s;
  }
  return f;
}
#elif defined(__aarch64__)
// MIDR_EL1's implementer code as a vendor, and the parts rosetta is likely to meet by name.
const char* arm_vendor(unsigned implementer) {
  switch (implementer) {
    case 0x41: return "ARM";
    case 0x42: return "Broadcom";
    case 0x43: return "Cavium";
    case 0x46: return "Fujitsu";
    case 0x48: return "HiSilicon";
    case 0x4E: return "NVIDIA";
    case 0x51: return "Qualcomm";
    case 0x61: return "Apple";
    case 0x6D: return "Microsoft";
    case 0xC0: return "Ampere";
  }
  return "";
}

const char* arm_part(unsigned implementer, unsigned part) {
  if (implementer != 0x41) return "";
  switch (part) {
    case 0xD03: return "Cortex-A53";
    case 0xD07: return "Cortex-A57";
    case 0xD08: return "Cortex-A72";
    case 0xD0B: return "Cortex-A76";
    case 0xD0C: return "Neoverse-N1";
    case 0xD40: return "Neoverse-V1";
    case 0xD49: return "Neoverse-N2";
    case 0xD4F: return "Neoverse-V2";
  }
  return "";
}

CpuFeatures read_cpu() {
  CpuFeatures f;
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.neon = (hw & HWCAP_ASIMD) && (hw & HWCAP_FP);
  f.dotprod = f.neon && (hw & HWCAP_ASIMDDP);
  f.i8mm = f.neon && (hw2 & HWCAP2_I8MM);
  f.bf16 = f.neon && (hw2 & HWCAP2_BF16);
  f.sve = hw & HWCAP_SVE;
  if (hw & HWCAP_CPUID) {  // Linux emulates EL0 reads of the ID registers
    uint64_t midr;
    __asm__("mrs %0, MIDR_EL1" : "=r"(midr));
    const unsigned implementer = unsigned(midr >> 24) & 0xFF, part = unsigned(midr >> 4) & 0xFFF;
    f.family = int(implementer);
    f.model = int(part);
    f.vendor = arm_vendor(implementer);
    char fallback[48];
    std::snprintf(fallback, sizeof fallback, "implementer 0x%02X part 0x%03X", implementer, part);
    const std::string name = arm_part(implementer, part);
    f.brand = name.empty() ? fallback : (f.vendor + " " + name);
  }
  return f;
}
#else
CpuFeatures read_cpu() { return {}; }
#endif

// The instructions each precision's kernels need at least, as messages name them.
#if defined(__aarch64__)
constexpr const char* kBf16Needs = "BFMMLA";
constexpr const char* kInt8Needs = "DOTPROD at least";
constexpr const char* kF32Needs = "NEON";
constexpr bool kX86 = false;
#else
constexpr const char* kBf16Needs = "AVX512_BF16";
constexpr const char* kInt8Needs = "AVX2 at least";
constexpr const char* kF32Needs = "AVX2 and FMA";
constexpr bool kX86 = true;
#endif

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::atomic<Precision> g_precision{Precision::fp32};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = read_cpu();
  return f;
}

IsaLevel cpu_isa_level(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) return IsaLevel::avx512;
  if (f.avx2 && f.fma) return IsaLevel::avx2;
  if (f.avx) return IsaLevel::avx;
  if (f.sse3) return IsaLevel::sse3;
  return IsaLevel::generic;
}

const char* isa_level_name(IsaLevel l) {
  switch (l) {
    case IsaLevel::avx512: return "AVX-512";
    case IsaLevel::avx2: return "AVX2";
    case IsaLevel::avx: return "AVX";
    case IsaLevel::sse3: return "SSE3";
    case IsaLevel::generic: break;
  }
  return "generic";
}

std::string cpu_isa_name(const CpuFeatures& f) {
  if (f.neon) {
    std::string s = "NEON";
    if (f.dotprod) s += "+DOTPROD";
    if (f.i8mm) s += "+I8MM";
    if (f.bf16) s += "+BF16";
    if (f.sve) s += "+SVE";
    return s;
  }
  std::string s = isa_level_name(cpu_isa_level(f));
  if (f.avx512_bf16) s += "+AVX512_BF16";
  if (f.amx_tile && f.amx_bf16) s += "+AMX";
  return s;
}

IsaLevel blas_core_isa(const std::string& core) {
  std::string c = core;
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  for (const char* n : {"skylakex", "cooperlake", "sapphirerapids"})
    if (c == n) return IsaLevel::avx512;
  for (const char* n : {"haswell", "zen", "excavator"})
    if (c == n) return IsaLevel::avx2;
  for (const char* n : {"sandybridge", "bulldozer", "piledriver", "steamroller"})
    if (c == n) return IsaLevel::avx;
  for (const char* n : {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "barcelona",
                        "opteron_sse3", "nano", "bobcat", "katmai", "coppermine", "northwood", "banias",
                        "athlon", "opteron"})
    if (c == n) return IsaLevel::sse3;
  return IsaLevel::generic;
}

std::string blas_core_for(const CpuFeatures& f) {
  switch (cpu_isa_level(f)) {
    case IsaLevel::avx512: return f.avx512_bf16 ? "Cooperlake" : "SkylakeX";
    case IsaLevel::avx2: return "Haswell";
    case IsaLevel::avx: return "Sandybridge";
    case IsaLevel::sse3: return "Prescott";
    case IsaLevel::generic: break;
  }
  return "";
}

BlasKernels blas_kernels() {
  BlasKernels k;
  k.core = blas_core_name();
  k.core_isa = blas_core_isa(k.core);
  k.cpu_isa = cpu_isa_level();
  if (const char* e = std::getenv("OPENBLAS_CORETYPE")) k.env = e;
  if (!k.env.empty()) k.picked_by_openblas = detail::blas_core_was();
  return k;
}

namespace {
// What runs a precision's products where its kernel failed the check.
std::string runs_instead(const std::string& precision) {
  if (precision == "fp32") {
    const std::string isa = detail::gemm_f32_packed_isa();
    return isa.empty() ? "fp32 products by packed weights run on OpenBLAS instead"
                       : "fp32 products by packed weights run on " + isa + " instead";
  }
  if (precision == "bf16")
    return detail::bf16_kernel() ? std::string("bf16 products run on ") + detail::bf16_kernel()->name + " instead"
                                 : "no bf16 kernel is left: --precision bf16 and auto run in fp32";
  const std::string isa = detail::gemm_int8_isa();
  return isa.empty() ? "no int8 kernel is left: --precision int8 runs in fp32" : "int8 products run on " + isa + " instead";
}
}  // namespace

std::vector<std::string> kernel_check_warnings() {
  std::vector<std::string> lines;
  const detail::KernelChecks& checked = detail::kernel_checks();
  if (!checked.not_run.empty())
    lines.push_back("rosetta's kernels could not be checked on this CPU before use (" + checked.not_run +
                    "): they run unchecked");
  for (const detail::KernelCheck& c : checked.checks)
    if (!c.failure.empty())
      lines.push_back(std::string("the ") + c.precision + " kernel " + c.kernel +
                      " failed its start-up check on this CPU (" + c.failure + "): " + runs_instead(c.precision));
  return lines;
}

std::string kernels_summary() {
  const BlasKernels k = blas_kernels();
  std::string s = "CPU " + cpu_isa_name();
  // OpenBLAS's cores are ranked by ISA on x86-64 only (blas_core_isa); elsewhere the core's name says it.
  s += "; fp32 GEMM: OpenBLAS " + k.core + " (" + (kX86 ? std::string(isa_level_name(k.core_isa)) + ", " : "");
  if (!k.picked_by_openblas.empty())
    s += "chosen by rosetta after a self-test: OpenBLAS picked " + k.picked_by_openblas + ")";
  else if (!k.env.empty())
    s += "OPENBLAS_CORETYPE=" + k.env + " from the environment)";
  else
    s += "OpenBLAS's own choice)";
  s += "; bf16 GEMM: ";
  if (detail::gemm_bf16_available()) {
    char rate[80];
    std::snprintf(rate, sizeof rate, " (bf16 dot products at %.1fx the multiply-add rate of fp32 FMAs)",
                  bf16_dot_speedup());
    s += (!bf16_uses_amx()                   ? std::string("rosetta ") + detail::bf16_kernel()->name + " micro-kernels"
          : detail::gemm_bf16_amx_modelled() ? std::string("rosetta AMX tiles modelled in scalar code (ROSETTA_AMX=model)")
                                             : std::string("rosetta AMX tiles")) +
         rate;
  } else {
    s += std::string("none (no ") + kBf16Needs + ")";
  }
  const std::string packed = detail::gemm_f32_packed_isa();
  s += "; fp32 decoding: " + (packed.empty() ? std::string("OpenBLAS (no ") + kF32Needs + ")"
                                              : "rosetta " + packed + " kernel on weights packed once");
  const std::string int8 = detail::gemm_int8_isa();
  s += "; int8 decoding: " + (int8.empty() ? std::string("none (no ") + (kX86 ? "AVX2" : "DOTPROD") + ")"
                                           : "rosetta " + int8 + " kernel");
  const detail::KernelChecks& checked = detail::kernel_checks();
  std::string failed;
  for (const detail::KernelCheck& c : checked.checks)
    if (!c.failure.empty()) failed += std::string(failed.empty() ? "" : ", ") + c.precision + " " + c.kernel;
  if (!checked.not_run.empty()) s += "; kernels not checked before use (" + checked.not_run + ")";
  else if (!failed.empty()) s += "; failed their start-up check, not used: " + failed;
  else if (!checked.checks.empty()) s += "; every kernel passed its start-up check";
  return s;
}

std::string kernels_line(int roof_n) {
  // The roofs' products grow from 128 to roof_n, stopping where one takes 20 ms: on a slow CPU
  // (or under emulation, where a 1024^3 product takes seconds) the line costs ~0.1 s, not minutes.
  int n = std::min(128, roof_n);
  while (n < roof_n) {
    std::vector<float> a(size_t(n) * n, 1.0f), c(size_t(n) * n);
    const double t0 = now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, a.data(), n, 0.0f, c.data(), n);
    if (now_s() - t0 >= 0.02) break;
    n = std::min(2 * n, roof_n);
  }
  const double bf16 = measure_bf16_gemm_gflops(n);
  std::string roofs = bf16 > 0 ? "roofs on " : "roof on ";
  const int threads = omp_get_max_threads();
  roofs += std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
           (n < roof_n ? " (" + std::to_string(n) + "^3 products)" : std::string()) + ": sgemm " +
           std::to_string(std::lround(measure_sgemm_gflops(n))) + " GFLOP/s";
  if (bf16 > 0) roofs += ", bf16 " + std::to_string(std::lround(bf16)) + " GFLOP/s";
  return "kernels: " + kernels_summary() + "; matrix products in " + precision_name(matmul_precision()) + "; " + roofs;
}

std::string blas_kernels_warning() {
  const BlasKernels k = blas_kernels();
  if (!k.below_cpu()) return "";
  const std::string better = blas_core_for();
  std::string s = std::string("OpenBLAS runs its ") + k.core + " kernels (" + isa_level_name(k.core_isa) +
                  ") on a CPU with " + isa_level_name(k.cpu_isa) + ": fp32 matrix products run several times slower than they could";
  if (!better.empty() && better == detail::blas_self_test_failed())  // start() tested it (start.h)
    s += "; the " + better + " kernels failed rosetta's self-test on this machine, so they are not used";
  else if (!k.env.empty())
    s += " (OPENBLAS_CORETYPE=" + k.env + " is set in the environment; unset it or set OPENBLAS_CORETYPE=" + better + ")";
  else
    s += "; call rosetta::start(argc, argv) first in main (rosetta/core/start.h), or start the program with "
         "OPENBLAS_CORETYPE=" + better + " in its environment";
  return s;
}

namespace {
// Best GFLOP/s of product() (an n x n x n GEMM) over 4 timed runs after a warm-up.
template <class F>
double best_gflops(int n, F product) {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now_s();
    product();
    const double dt = now_s() - t0;
    if (rep > 0) best = std::max(best, 2.0 * n * n * n / dt / 1e9);
  }
  return best;
}
}  // namespace

double measure_sgemm_gflops(int n) {
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f), c(size_t(n) * n);
  return best_gflops(n, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
  });
}

double measure_bf16_gemm_gflops(int n) {
  if (!detail::gemm_bf16_available()) return 0;
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f), c(size_t(n) * n);
  return best_gflops(n, [&] {
    detail::gemm_bf16(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n,
                      omp_get_max_threads());
  });
}

bool int8_supported() { return detail::gemm_int8_available(); }

const char* int8_kernel_name() { return detail::gemm_int8_isa(); }

bool bf16_supported() { return detail::gemm_bf16_available(); }

bool bf16_uses_amx() { return detail::gemm_bf16_amx(); }

double bf16_dot_speedup() {
  static const double speedup = [] {
    if (!bf16_supported()) return 0.0;
    // ~0.1 ms a round; the best of 7 alternating rounds keeps an interrupt or a busy sibling
    // thread out of the ratio. A round of the FMA loop does 16 x 16 multiply-adds, of the
    // VDPBF16PS loop 16 x 32, of the AMX loop 4 x 16 x 16 x 32 (TDPBF16PS on tiles, where the
    // bf16 GEMMs run on them).
    constexpr int64_t kIters = 2048;
    const bool amx = bf16_uses_amx() && !detail::gemm_bf16_amx_modelled();  // a model has no rate
    const int64_t bf16_iters = amx ? kIters / 16 : kIters;
    const double bf16_macs = amx ? 4.0 * 16 * 16 * 32 : 16.0 * 32;
    double bf16 = 1e30, fp32 = 1e30;
    for (int round = 0; round < 7; ++round) {
      bf16 = std::min(bf16, amx ? detail::time_amx_dots(bf16_iters) : detail::time_bf16_dots(bf16_iters));
      fp32 = std::min(fp32, detail::time_fp32_fmas(kIters));
    }
    if (bf16 <= 0) return 0.0;
    return (bf16_macs * double(bf16_iters) / bf16) / (16.0 * 16 * double(kIters) / fp32);
  }();
  return speedup;
}

Precision auto_precision(bool supported, double speedup) {
  return supported && speedup >= kAutoBf16Speedup ? Precision::bf16 : Precision::fp32;
}

Precision resolve_precision(PrecisionChoice choice, std::string* note) {
  if (note) note->clear();
  if (choice == PrecisionChoice::fp32) return Precision::fp32;
  if (choice == PrecisionChoice::int8) {
    if (int8_supported()) return Precision::int8;
    if (note)
      *note = "this CPU (" + cpu_isa_name() + ") has none of rosetta's int8 kernels (" + kInt8Needs +
              "): matrix products run in fp32 instead of the int8 asked for";
    return Precision::fp32;
  }
  if (!bf16_supported()) {
    if (note)
      *note = "this CPU (" + cpu_isa_name() + ") has no bf16 dot products (" + kBf16Needs + "): matrix products run in fp32" +
              (choice == PrecisionChoice::bf16 ? " instead of the bf16 asked for" : "");
    return Precision::fp32;
  }
  const double speedup = bf16_dot_speedup();
  const Precision p = choice == PrecisionChoice::bf16 ? Precision::bf16 : auto_precision(true, speedup);
  if (note && speedup < kAutoBf16Speedup) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.2fx", speedup);
    *note = std::string("this CPU's bf16 dot products (") + kBf16Needs + ") reach " + rate +
            " the multiply-add rate of its fp32 FMAs" +
            (p == Precision::fp32 ? ": --precision auto runs matrix products in fp32 (--precision bf16 forces bf16)"
                                  : ": bf16 matrix products, as asked, may run slower than fp32 here");
  }
  return p;
}

void set_matmul_precision(Precision p) {
  ROSETTA_CHECK(p != Precision::bf16 || bf16_supported(), "bf16 matrix products need ", kBf16Needs,
                ", which this CPU (", cpu_isa_name(), ") does not have");
  ROSETTA_CHECK(p != Precision::int8 || int8_supported(), "int8 matrix products need ", kInt8Needs,
                ", which this CPU (", cpu_isa_name(), ") does not have");
  g_precision.store(p, std::memory_order_relaxed);
}

Precision matmul_precision() { return g_precision.load(std::memory_order_relaxed); }

}  // namespace rosetta
