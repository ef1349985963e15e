// fp32 products by weights packed once, for decoding: the packing and the driver, which splits C
// among threads and runs one ISA's micro-kernel on each part (f32_kernel.h; f32_avx512.cpp,
// f32_avx2.cpp). OpenBLAS's sgemm packs both operands on every call; a decoding step multiplies a
// few hundred rows by the same weights hundreds of times, so repacking the weights was ~11% of a
// translation's samples (and adding the bias, a copy before the product, ~3%).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common.h"
#include "f32_kernel.h"

namespace rosetta::detail {

PackedBF32::~PackedBF32() { std::free(w); }

void pack_b_f32(bool trans_b, int64_t K, int64_t N, const float* b, int64_t ldb, PackedBF32& out) {
  constexpr int NR = kF32Cols;
  std::free(out.w);
  out.w = nullptr;
  out.K = K;
  out.N = N;
  const int64_t np = round_up(std::max<int64_t>(N, 1), NR), words = std::max<int64_t>(K, 1) * np;
  out.w = static_cast<float*>(std::aligned_alloc(64, size_t(round_up(words * int64_t(sizeof(float)), 64))));
  if (!out.w) throw std::bad_alloc();
  std::memset(out.w, 0, size_t(words) * sizeof(float));
  for (int64_t j = 0; j < N; ++j) {
    float* col = out.w + (j / NR) * K * NR + j % NR;
    for (int64_t k = 0; k < K; ++k) col[k * NR] = trans_b ? b[j * ldb + k] : b[k * ldb + j];
  }
}

void gemm_f32_packed(int64_t M, const float* a, int64_t lda, const PackedBF32& b, float* c, int64_t ldc,
                     int threads, const float* bias, const F32Kernel* kernel) {
  const int64_t N = b.N;
  if (M <= 0 || N <= 0) return;
  if (b.K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = bias ? bias[j] : 0.0f;
    return;
  }
  const F32Kernel& k = kernel ? *kernel : *f32_kernel();
  const F32Problem g{M, a, lda, &b, c, ldc, bias};
  split_over_threads(M, N, k.mr, kF32Cols, threads,
                     [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
                       const KernelScope running("fp32", k.name);
                       k.compute(g, m0, m1, n0, n1);
                     });
}

}  // namespace rosetta::detail
