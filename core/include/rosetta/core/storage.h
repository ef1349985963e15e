// Storage: a reference-counted byte buffer shared by tensor views, from a caching allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "rosetta/core/lifetime.h"

namespace rosetta {

enum class DType : uint8_t { f32, f64, i32 };

inline size_t dtype_size(DType t) { return t == DType::f64 ? 8 : 4; }
const char* dtype_name(DType t);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }
template <>
constexpr DType dtype_of<int32_t>() { return DType::i32; }

// Caching allocator: freed blocks are kept in size classes (steps of 1/4 of a power of two)
// and handed out again, so a training step that repeats the same shapes calls malloc only in
// its first step. Thread-safe. The cache is bounded; past the bound, blocks go back to the OS.
struct AllocatorStats {
  size_t in_use_bytes = 0;   // handed out and not yet returned
  size_t cached_bytes = 0;   // returned and kept for reuse
  size_t peak_bytes = 0;     // peak of in_use_bytes
  size_t system_allocs = 0;  // calls that reached the system allocator
  size_t cache_hits = 0;     // allocations served from the cache
};
void* allocate_bytes(size_t nbytes);
void free_bytes(void* p, size_t nbytes);
AllocatorStats allocator_stats();
// Restarts peak tracking from the bytes in use now (to measure one phase, e.g. a step).
void reset_allocator_peak();
// Returns every cached block to the system (e.g. after a different workload).
void release_cached_memory();
// Upper bound on cached bytes (default 2 GiB).
void set_cache_limit(size_t bytes);

class Storage {
 public:
  explicit Storage(size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() ROSETTA_LIFETIMEBOUND { return data_; }
  const void* data() const ROSETTA_LIFETIMEBOUND { return data_; }
  size_t nbytes() const { return nbytes_; }

  // Bumped by every in-place write, so autograd can detect a saved tensor that was modified.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  // Unique in the process: a new storage never takes an old one's id, even where the
  // allocator hands it the same memory (caches of derived data key on it).
  uint64_t id() const { return id_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  uint64_t version_ = 0;
  uint64_t id_ = 0;
};

}  // namespace rosetta
