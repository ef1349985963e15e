// What rosetta's own GEMMs (the fp32, bf16 and int8 drivers and micro-kernels here) share: rounding,
// per-thread scratch, the AVX-512 lane mask of a short row, and the split of C over threads.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rosetta::detail {

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// 64-byte aligned scratch of T that grows and is kept (one per thread: declare it thread_local).
template <class T>
struct Scratch {
  T* p = nullptr;
  size_t n = 0;
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(p); }
  T* get(size_t count) {
    if (count > n) {
      std::free(p);
      p = nullptr;
      n = 0;
      const size_t rounded = size_t(round_up(int64_t(std::max<size_t>(count, 1)), 64));
      p = static_cast<T*>(std::aligned_alloc(64, rounded * sizeof(T)));
      if (!p) throw std::bad_alloc();
      n = rounded;
    }
    return p;
  }
};

#if defined(__x86_64__)
// The first n of 16 lanes (none for n <= 0, all for n >= 16).
__attribute__((target("avx512f"))) inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}
#endif

// Runs compute(m0, m1, n0, n1) over C (M x N) split among up to `threads` OpenMP threads along
// the side with more micro-tiles (MR x NR), in whole tiles; on the calling thread alone where one
// thread is enough. Inside a parallel region the team is nested (it has threads only where
// nested parallelism is on).
template <class F>
void split_over_threads(int64_t M, int64_t N, int64_t MR, int64_t NR, int threads, F&& compute) {
  const int64_t tiles_m = (M + MR - 1) / MR, tiles_n = (N + NR - 1) / NR;
  const bool split_m = tiles_m > tiles_n;
  const int64_t tiles = split_m ? tiles_m : tiles_n;
  threads = int(std::min<int64_t>(std::max(threads, 1), tiles));
  if (threads <= 1) return compute(int64_t(0), M, int64_t(0), N);
#pragma omp parallel num_threads(threads)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = tiles * t / nt, hi = tiles * (t + 1) / nt;
    if (lo < hi) {
      if (split_m) compute(lo * MR, std::min(M, hi * MR), int64_t(0), N);
      else compute(int64_t(0), M, lo * NR, std::min(N, hi * NR));
    }
  }
}

}  // namespace rosetta::detail
