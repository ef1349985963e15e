// int8 products for inference: the weights' quantization and packing, and the driver, which
// quantizes A and runs one ISA's micro-kernel on each thread's part of C (int8_kernel.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common.h"
#include "rosetta/core/check.h"
#include "int8_kernel.h"

namespace rosetta::detail {

PackedBInt8::~PackedBInt8() {
  std::free(q);
  std::free(scale);
  std::free(comp);
}

namespace {
template <typename T>
T* aligned(size_t n) {
  void* p = std::aligned_alloc(64, size_t(round_up(int64_t(std::max<size_t>(n, 1) * sizeof(T)), 64)));
  if (!p) throw std::bad_alloc();
  return static_cast<T*>(p);
}
}  // namespace

void pack_b_int8(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedBInt8& out, int w_max) {
  constexpr int NR = kInt8Cols;
  if (w_max <= 0) w_max = int8_kernel() ? int8_kernel()->w_max : 127;
  std::free(out.q);
  std::free(out.scale);
  std::free(out.comp);
  out.q = nullptr;
  out.scale = nullptr;
  out.comp = nullptr;
  out.K = K;
  out.N = N;
  out.w_max = w_max;
  const float range = float(w_max);
  const int64_t kp = round_up(std::max<int64_t>(K, 1), kInt8KStep), np = round_up(std::max<int64_t>(N, 1), NR);
  out.q = aligned<int8_t>(size_t(kp * np));
  out.scale = aligned<float>(size_t(np));
  out.comp = aligned<int32_t>(size_t(np));
  std::memset(out.q, 0, size_t(kp * np));
  for (int64_t j = 0; j < np; ++j) {
    out.scale[j] = 0.0f;
    out.comp[j] = 0;
    if (j >= N) continue;
    auto at = [&](int64_t k) { return trans_b ? b[j * ldb + k] : b[k * ldb + j]; };
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(at(k)));
    if (!(amax > 0.0f) || !std::isfinite(amax)) continue;  // an all-zero (or broken) column gives zeros
    const float inv = range / amax;
    out.scale[j] = amax / range;
    // Sliver j / NR, word (k / 4, j % NR), byte k % 4.
    int8_t* sliver = out.q + (j / NR) * NR * kp;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t q = int32_t(std::clamp(std::nearbyint(at(k) * inv), -range, range));
      sliver[(k / 4) * 4 * NR + (j % NR) * 4 + k % 4] = int8_t(q);
      sum += q;
    }
    out.comp[j] = 128 * sum;
  }
}

void gemm_int8_packed(int64_t M, const float* a, int64_t lda, const PackedBInt8& b, float* c, int64_t ldc,
                      int threads, const float* bias, const Int8Kernel* kernel) {
  const int64_t N = b.N, K = b.K;
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = bias ? bias[j] : 0.0f;
    return;
  }
  const Int8Kernel& k = kernel ? *kernel : *int8_kernel();
  ROSETTA_CHECK(b.w_max == k.w_max, "gemm_int8_packed: weights packed to [-", b.w_max, ", ", b.w_max, "] for the ",
                k.name, " kernel, which needs [-", k.w_max, ", ", k.w_max, "]");
  static thread_local Scratch<uint8_t> rows;
  static thread_local Scratch<float> scales;
  const int64_t kp = round_up(K, kInt8KStep), Mp = round_up(M, k.mr);
  uint8_t* qa = rows.get(size_t(Mp * kp));
  float* sa = scales.get(size_t(Mp));
  k.quantize_rows(M, Mp, K, kp, a, lda, qa, sa);
  const Int8Problem g{M, kp, qa, sa, &b, c, ldc, bias};
  split_over_threads(M, N, k.mr, kInt8Cols, threads,
                     [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
                       const KernelScope running("int8", k.name);
                       k.compute(g, m0, m1, n0, n1);
                     });
}

}  // namespace rosetta::detail
