// The plain reference GEMMs (reference.h).
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace rosetta::detail::reference {

float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

Product gemm(int64_t M, int64_t N, int64_t K, const Operand& a, const Operand& b, bool bf16) {
  // op(A) by rows and op(B) by columns, each k-contiguous, as the products read them.
  std::vector<double> x(size_t(M * K)), y(size_t(N * K)), ax(size_t(M * K)), ay(size_t(N * K));
  const auto value = [&](float v) { return double(bf16 ? round_bf16(v) : v); };
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      x[size_t(i * K + k)] = value(a.at(i, k));
      ax[size_t(i * K + k)] = std::abs(double(a.at(i, k)));
    }
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < K; ++k) {
      y[size_t(j * K + k)] = value(b.at(k, j));
      ay[size_t(j * K + k)] = std::abs(double(b.at(k, j)));
    }
  Product p{std::vector<double>(size_t(M * N)), std::vector<double>(size_t(M * N))};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < K; ++k) {
        sum += x[size_t(i * K + k)] * y[size_t(j * K + k)];
        magnitude += ax[size_t(i * K + k)] * ay[size_t(j * K + k)];
      }
      p.value[size_t(i * N + j)] = sum;
      p.magnitude[size_t(i * N + j)] = magnitude;
    }
  return p;
}

namespace {
// The scale of n values at(0 .. n-1), and their values quantized to [-qmax, qmax].
float quantize(int64_t n, const auto& at, int qmax, std::vector<int32_t>& q) {
  float amax = 0;
  for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(at(k)));
  const bool usable = amax > 0 && std::isfinite(amax);
  const float m = float(qmax), inv = usable ? m / amax : 0.0f;
  q.assign(size_t(n), 0);
  if (usable)
    for (int64_t k = 0; k < n; ++k) q[size_t(k)] = int32_t(std::clamp(std::nearbyint(at(k) * inv), -m, m));
  return usable ? amax / m : 0.0f;
}
}  // namespace

Int8Product gemm_int8(int64_t M, int64_t N, int64_t K, const Operand& a, const Operand& b, int w_max) {
  Int8Product p{std::vector<int32_t>(size_t(M * N)), std::vector<float>(size_t(M)), std::vector<float>(size_t(N)),
                std::vector<float>(size_t(M * N))};
  std::vector<std::vector<int32_t>> qa, qb;
  qa.resize(size_t(M));
  qb.resize(size_t(N));
  for (int64_t i = 0; i < M; ++i)
    p.row_scale[size_t(i)] = quantize(K, [&](int64_t k) { return a.at(i, k); }, 127, qa[size_t(i)]);
  for (int64_t j = 0; j < N; ++j)
    p.col_scale[size_t(j)] = quantize(K, [&](int64_t k) { return b.at(k, j); }, w_max, qb[size_t(j)]);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      int32_t sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += qa[size_t(i)][size_t(k)] * qb[size_t(j)][size_t(k)];
      p.sums[size_t(i * N + j)] = sum;
      p.c[size_t(i * N + j)] = float(sum) * (p.row_scale[size_t(i)] * p.col_scale[size_t(j)]);
    }
  return p;
}

}  // namespace rosetta::detail::reference
