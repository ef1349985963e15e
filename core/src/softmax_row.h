// Internal: one row of a softmax, shared by the softmax family (softmax.cpp) and the attention
// of a decoding step (attention_step.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "vecmath.h"

namespace rosetta::detail {

template <class T>
T row_max(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// One softmax row: out = exp(x - max) / sum over the unmasked entries (mask[j * ms] != 0
// means masked; mask may be null). A fully masked row gives zeros. With Log, out = log of it
// (zeros for a fully masked row). Without Log, out may be x itself.
template <bool Log, class T>
void softmax_row(const T* x, T* out, int64_t V, const int32_t* mask, int64_t ms) {
  const T ninf = -std::numeric_limits<T>::infinity();
  T m = ninf;
  if (mask) {
    for (int64_t j = 0; j < V; ++j) m = !mask[j * ms] && x[j] > m ? x[j] : m;
  } else {
    m = row_max(x, V);
  }
  if (m == ninf) {
    for (int64_t j = 0; j < V; ++j) out[j] = T(0);
    return;
  }
  T s = 0;
  if (mask) {
    for (int64_t j = 0; j < V; ++j) {
      const T e = mask[j * ms] ? T(0) : detail::vexp(T(x[j] - m));
      out[j] = e;
      s += e;
    }
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < V; ++j) {
      const T e = detail::vexp(T(x[j] - m));
      out[j] = e;
      s += e;
    }
  }
  if constexpr (Log) {
    const T lse = m + T(std::log(double(s)));
    for (int64_t j = 0; j < V; ++j) out[j] = (mask && mask[j * ms]) ? ninf : x[j] - lse;
  } else {
    const T inv = T(1) / s;
#pragma omp simd
    for (int64_t j = 0; j < V; ++j) out[j] *= inv;
  }
}

}  // namespace rosetta::detail
