#include "rosetta/core/storage.h"

#include <atomic>

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
  // The size class of every block handed out for a smaller class (a miss served from a cached
  // block of up to twice the size), so that it goes back to its own free list.
  std::unordered_map<void*, size_t> oversized;
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
    // The block of this size class, else (above 4 KiB) the smallest cached block up to twice
    // its size: batch shapes vary from step to step, and blocks of the classes that missed
    // would otherwise pile up in the cache.
    size_t found = 0;
    auto it = c.free_blocks.find(sz);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      found = sz;
    } else if (sz > 4096) {
      for (auto& [cls, blocks] : c.free_blocks)
        if (!blocks.empty() && cls > sz && cls <= 2 * sz && (found == 0 || cls < found)) found = cls;
      if (found) it = c.free_blocks.find(found);
    }
    if (found) {
      void* p = it->second.back();
      it->second.pop_back();
      if (found != sz) c.oversized[p] = found;
      c.stats.cached_bytes -= found;
      c.stats.in_use_bytes += found;
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
  size_t sz = size_class(nbytes == 0 ? 1 : nbytes);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.oversized.empty()) {
    if (auto it = c.oversized.find(p); it != c.oversized.end()) {
      sz = it->second;
      c.oversized.erase(it);
    }
  }
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

Storage::Storage(size_t nbytes) : data_(allocate_bytes(nbytes)), nbytes_(nbytes) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1, std::memory_order_relaxed);
}
Storage::~Storage() { free_bytes(data_, nbytes_); }

}  // namespace rosetta
