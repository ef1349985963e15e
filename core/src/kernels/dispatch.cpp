// The choice of micro-kernels (dispatch.h): each precision's list, best first, and the
// environment's say.
#include "dispatch.h"

#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "bf16_kernel.h"
#include "f32_kernel.h"
#include "int8_kernel.h"
#include "kernel_check.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/fault.h"

namespace rosetta::detail {

namespace {

// The lists, best first. A kernel of another ISA is one file of this folder and one entry here.
// x86-64's kernels never run on ARM64 nor ARM64's on x86-64 (runs_on), so one list holds both.
const F32Kernel* const kF32Kernels[] = {&f32_avx512, &f32_avx2, &f32_neon};
// int8: AMX tiles where the CPU has them and grants them, else the widest VPDPBUSD, else AVX2's
// VPMADDUBSW; the modelled paths (the AMX loops, the AVX-VNNI loops on AVX512_VNNI) only where
// the tests or the environment ask. ARM64: SMMLA (I8MM), else SDOT (DotProd).
const Int8Kernel* const kInt8Kernels[] = {&int8_amx,      &int8_avx512_vnni, &int8_avx_vnni,
                                          &int8_avx2,     &int8_i8mm,        &int8_neon_dot};

const Int8Kernel* const kInt8Models[] = {&int8_amx_model, &int8_avx_vnni_model};
// bf16: AMX tiles where the CPU has them and grants them, else AVX512_BF16; the model of the
// tiles only where ROSETTA_AMX=model asks for it (every x86 bf16 path packs and stores with
// AVX512_BF16). ARM64: BFMMLA (BF16).
const Bf16Kernel* const kBf16Kernels[] = {&bf16_amx, &bf16_avx512, &bf16_bfmmla};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A kernel's name as ROSETTA_INT8 gives it: lower case, '_' and ' ' as '-' ("avx512-vnni",
// "avx-vnni-(modelled)" is not asked for: models are named by their own switches).
std::string kernel_key(const char* name) {
  std::string key;
  for (const char* c = name; *c; ++c) key += *c == '_' || *c == ' ' ? '-' : char(std::tolower(*c));
  return key;
}

template <class K, size_t N>
std::vector<const K*> runnable(const K* const (&list)[N]) {
  std::vector<const K*> here;
  for (const K* k : list)
    if (k->runs_on(cpu_features())) here.push_back(k);
  return here;
}

// What fault.h reads: this thread's kernel, and the choices so far (a fixed buffer, written under
// a lock by the choices, read by a signal handler as it stands).
thread_local __attribute__((tls_model("initial-exec"))) const char* t_precision = nullptr;
thread_local __attribute__((tls_model("initial-exec"))) const char* t_kernel = nullptr;
char g_in_use[192] = "";
std::mutex g_in_use_lock;

template <class K>
const K* note_choice(const char* precision, const K* k) {
  const std::lock_guard<std::mutex> hold(g_in_use_lock);
  std::string s = g_in_use;
  s += std::string(s.empty() ? "" : ", ") + precision + " " + (k ? k->name : "none");
  std::strncpy(g_in_use, s.c_str(), sizeof g_in_use - 1);
  return k;
}

// The first of `list` that the CPU runs and that passed its start-up check (kernel_check.h);
// null where none did. `allowed` is the environment's say.
template <class K, class List, class Allowed>
const K* first_proven(const List& list, Allowed allowed) {
  for (const K* k : list)
    if (allowed(k) && k->runs_on(cpu_features()) && passed_check(k)) return k;
  return nullptr;
}

}  // namespace

const F32Kernel* f32_kernel() {
  static const F32Kernel* const chosen = [] {
    const bool avx2 = env("ROSETTA_PACKED_F32") == "avx2";
    const auto allowed = [&](const F32Kernel* k) { return !avx2 || k == &f32_avx2; };
    return note_choice("fp32", first_proven<F32Kernel>(kF32Kernels, allowed));
  }();
  return chosen;
}

const Bf16Kernel* bf16_kernel() {
  static const Bf16Kernel* const chosen = note_choice("bf16", []() -> const Bf16Kernel* {
    const std::string amx = env("ROSETTA_AMX");
    if (amx == "model" && bf16_amx_model.runs_on(cpu_features()))
      return first_proven<Bf16Kernel>(std::array{&bf16_amx_model}, [](auto) { return true; });
    return first_proven<Bf16Kernel>(kBf16Kernels,
                                    [&](const Bf16Kernel* k) { return k != &bf16_amx || (amx != "0" && amx != "off"); });
  }());
  return chosen;
}

const Int8Kernel* int8_kernel() {
  static const Int8Kernel* const chosen = note_choice("int8", []() -> const Int8Kernel* {
    const std::string amx = env("ROSETTA_AMX"), asked = env("ROSETTA_INT8");
    const auto any = [](const Int8Kernel*) { return true; };
    if (amx == "model" && int8_amx_model.runs_on(cpu_features()))
      return first_proven<Int8Kernel>(std::array{&int8_amx_model}, any);
    if (!asked.empty())
      return first_proven<Int8Kernel>(int8_kernels_here(), [&](const Int8Kernel* k) { return kernel_key(k->name) == asked; });
    return first_proven<Int8Kernel>(kInt8Kernels,
                                    [&](const Int8Kernel* k) { return k != &int8_amx || (amx != "0" && amx != "off"); });
  }());
  return chosen;
}

std::vector<const F32Kernel*> f32_kernels_here() { return runnable(kF32Kernels); }

std::vector<const Bf16Kernel*> bf16_kernels_here() {
  std::vector<const Bf16Kernel*> here = runnable(kBf16Kernels);
  if (bf16_amx_model.runs_on(cpu_features())) here.push_back(&bf16_amx_model);
  return here;
}

std::vector<const Int8Kernel*> int8_kernels_here() {
  std::vector<const Int8Kernel*> here = runnable(kInt8Kernels);
  for (const Int8Kernel* k : runnable(kInt8Models)) here.push_back(k);
  return here;
}

bool gemm_f32_packed_available() { return f32_kernel() != nullptr; }
const char* gemm_f32_packed_isa() { return f32_kernel() ? f32_kernel()->name : ""; }
bool gemm_bf16_available() { return bf16_kernel() != nullptr; }
bool gemm_bf16_amx() { return bf16_kernel() && bf16_kernel()->amx; }
bool gemm_bf16_amx_modelled() { return bf16_kernel() && bf16_kernel()->modelled; }
bool gemm_int8_available() { return int8_kernel() != nullptr; }
const char* gemm_int8_isa() { return int8_kernel() ? int8_kernel()->name : ""; }

KernelScope::KernelScope(const char* precision, const char* kernel)
    : saved_precision_(t_precision), saved_kernel_(t_kernel) {
  t_precision = precision;
  t_kernel = kernel;
}

KernelScope::~KernelScope() {
  t_precision = saved_precision_;
  t_kernel = saved_kernel_;
}

}  // namespace rosetta::detail

namespace rosetta {

RunningKernel kernel_running_here() { return {detail::t_precision, detail::t_kernel}; }

const char* kernels_in_use() { return detail::g_in_use; }

}  // namespace rosetta
