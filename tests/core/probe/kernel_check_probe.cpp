// A program of its own on the core library that calls rosetta::start first, then says which
// kernel each precision chose and whether a product through the dispatch is right, one
// `key=value` a line (warnings as `warning=...`): tests/core/test_kernel_check.cpp runs it with
// faults injected into the start-up checks (ROSETTA_TEST_KERNEL_FAULT).
#include <rosetta/core/cpu.h>
#include <rosetta/core/start.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/bf16_kernel.h"
#include "kernels/f32.h"
#include "kernels/f32_kernel.h"
#include "kernels/int8.h"
#include "kernels/int8_kernel.h"
#include "kernels/reference.h"

using namespace rosetta::detail;

namespace {

constexpr int64_t M = 50, N = 70, K = 600;

std::vector<float> values(int64_t n, float phase) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(0.37f * float(i) + phase);
  return v;
}

// Every element within fp32 summation of the float64 reference.
bool within(const std::vector<float>& c, const reference::Product& want) {
  for (size_t i = 0; i < c.size(); ++i)
    if (!(std::fabs(c[i] - want.value[i]) <= double(K + 2) * std::ldexp(1.0, -23) * want.magnitude[i])) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const rosetta::StartReport started = rosetta::start(argc, argv);
  for (const std::string& w : started.kernel_warnings) std::printf("warning=%s\n", w.c_str());
  const std::vector<float> a = values(M * K, 0.1f), b = values(N * K, 0.7f);
  const reference::Operand ra{a.data(), K, false}, rb{b.data(), K, true};  // B a Linear's [N, K] weight
  std::vector<float> c(size_t(M * N));

  std::printf("fp32=%s\n", f32_kernel() ? f32_kernel()->name : "none");
  if (f32_kernel()) {
    PackedBF32 packed;
    pack_b_f32(true, K, N, b.data(), K, packed);
    gemm_f32_packed(M, a.data(), K, packed, c.data(), N, 2);
    std::printf("fp32_right=%d\n", within(c, reference::gemm(M, N, K, ra, rb)));
  }
  std::printf("bf16=%s\n", bf16_kernel() ? bf16_kernel()->name : "none");
  if (bf16_kernel()) {
    gemm_bf16(false, true, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c.data(), N, 2);
    std::printf("bf16_right=%d\n", within(c, reference::gemm(M, N, K, ra, rb, true)));
  }
  std::printf("int8=%s\n", int8_kernel() ? int8_kernel()->name : "none");
  if (int8_kernel()) {
    PackedBInt8 packed;
    pack_b_int8(true, K, N, b.data(), K, packed);
    gemm_int8_packed(M, a.data(), K, packed, c.data(), N, 2);
    const reference::Int8Product want = reference::gemm_int8(M, N, K, ra, rb, int8_kernel()->w_max);
    bool same = true;
    for (size_t i = 0; i < c.size(); ++i) same = same && std::bit_cast<uint32_t>(c[i]) == std::bit_cast<uint32_t>(want.c[i]);
    std::printf("int8_right=%d\n", same);
  }
  return 0;
}
