#include "rosetta/core/storage.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace rosetta {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
  }
  return "?";
}

namespace {

constexpr size_t kAlign = 64;

// Rounds a request up to its size class: multiples of 64 bytes below 4 KiB, above that
// 4 steps per power of two (at most 25% waste).
size_t size_class(size_t n) {
  if (n <= 4096) return (n + kAlign - 1) / kAlign * kAlign;
  size_t p = 1;
  while (p * 2 <= n) p *= 2;
  size_t step = p / 4;
  return (n + step - 1) / step * step;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  AllocatorStats stats;
  size_t limit = size_t(2) << 30;

  void trim_locked(size_t target) {
    for (auto& [sz, blocks] : free_blocks) {
      while (!blocks.empty() && stats.cached_bytes > target) {
        std::free(blocks.back());
        blocks.pop_back();
        stats.cached_bytes -= sz;
      }
    }
  }
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: storages may outlive static destructors
  return *c;
}

}  // namespace

void* allocate_bytes(size_t nbytes) {
  const size_t sz = size_class(nbytes == 0 ? 1 : nbytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free_blocks.find(sz);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.cached_bytes -= sz;
      c.stats.in_use_bytes += sz;
      c.stats.peak_bytes = std::max(c.stats.peak_bytes, c.stats.in_use_bytes);
      ++c.stats.cache_hits;
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlign, sz);
  if (!p) {
    // Out of memory: give back the cache and try once more before failing.
    release_cached_memory();
    p = std::aligned_alloc(kAlign, sz);
    if (!p) throw std::bad_alloc();
  }
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.in_use_bytes += sz;
  c.stats.peak_bytes = std::max(c.stats.peak_bytes, c.stats.in_use_bytes);
  ++c.stats.system_allocs;
  return p;
}

void free_bytes(void* p, size_t nbytes) {
  if (!p) return;
  const size_t sz = size_class(nbytes == 0 ? 1 : nbytes);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.in_use_bytes -= sz;
  if (c.stats.cached_bytes + sz > c.limit) {
    std::free(p);
    return;
  }
  c.free_blocks[sz].push_back(p);
  c.stats.cached_bytes += sz;
}

AllocatorStats allocator_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

void reset_allocator_peak() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.peak_bytes = c.stats.in_use_bytes;
}

void release_cached_memory() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.trim_locked(0);
}

void set_cache_limit(size_t bytes) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.limit = bytes;
  c.trim_locked(bytes);
}

Storage::Storage(size_t nbytes) : data_(allocate_bytes(nbytes)), nbytes_(nbytes) {}
Storage::~Storage() { free_bytes(data_, nbytes_); }

}  // namespace rosetta
