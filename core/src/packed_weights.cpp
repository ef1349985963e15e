// Weights packed once for many products: PackedWeightsScope (one thread's products, decoding) and
// SharedPackedWeights (many threads', the model replicas of training).
#include <omp.h>

#include <exception>

#include "matmul_routes.h"
#include "rosetta/core/cpu.h"

namespace rosetta {

// The packings of SharedPackedWeights: op(B) of K x N read from `data` (rows `ld` apart, or
// columns with `trans`), as gemm_bf16 would pack it, and the weights' stamps when packed.
struct SharedPackedWeights::Entries {
  struct Key {
    const float* data;
    int64_t ld, K, N;
    bool trans;
    bool operator<(const Key& o) const {
      return std::tie(data, ld, K, N, trans) < std::tie(o.data, o.ld, o.K, o.N, o.trans);
    }
  };
  struct Stamp {
    const float* data;
    uint64_t storage, version;
    bool operator==(const Stamp& o) const {
      return data == o.data && storage == o.storage && version == o.version;
    }
  };
  std::map<Key, detail::PackedB> packed;  // two per distinct weight (its two orientations)
  std::vector<Stamp> stamps;
};

namespace {
// The packings this thread's bf16 products read (SharedPackedWeights::Use), or null.
thread_local const SharedPackedWeights::Entries* t_shared_packed = nullptr;

thread_local PackedWeightsScope::Cache* t_packed_weights = nullptr;
}  // namespace

PackedWeightsScope::Cache* PackedWeightsScope::Cache::current() { return t_packed_weights; }

std::string PackedWeightsScope::fp32_kernel_isa() { return detail::gemm_f32_packed_isa(); }

PackedWeightsScope::PackedWeightsScope() : cache_(t_packed_weights ? nullptr : new Cache) {
  if (cache_) t_packed_weights = cache_;
}
PackedWeightsScope::~PackedWeightsScope() {
  if (!cache_) return;  // nested: the outer scope's packings stay
  t_packed_weights = nullptr;
  delete cache_;
}

SharedPackedWeights::SharedPackedWeights() : entries_(std::make_unique<Entries>()) {}
SharedPackedWeights::~SharedPackedWeights() = default;

void SharedPackedWeights::clear() { *entries_ = Entries(); }
int64_t SharedPackedWeights::size() const { return int64_t(entries_->packed.size()) / 2; }

void SharedPackedWeights::pack(const std::vector<Tensor>& weights) {
  if (matmul_precision() != Precision::bf16 || !detail::gemm_bf16_available()) return clear();
  std::vector<const Tensor*> kept;
  std::vector<Entries::Stamp> stamps;
  for (const Tensor& w : weights)
    if (w.dim() == 2 && w.dtype() == DType::f32 && w.is_contiguous() && w.numel() > 0) {
      kept.push_back(&w);
      stamps.push_back({w.data<float>(), w.storage_id(), w.version()});
    }
  if (stamps == entries_->stamps) return;  // unchanged since packed
  entries_->stamps.clear();
  // Each weight [R, C] as op(B) of x @ w^T (K = C, N = R, transposed) and of dy @ w (K = R, N = C),
  // into the packings of the same keys where there are (the weights after an update: same data;
  // their nodes move over with their buffers); a weight given twice is one key; weights no longer
  // given are dropped with the old map.
  std::map<Entries::Key, detail::PackedB> packed;
  for (const Tensor* w : kept) {
    const int64_t R = w->shape()[0], C = w->shape()[1];
    for (const Entries::Key key : {Entries::Key{w->data<float>(), C, C, R, true},
                                   Entries::Key{w->data<float>(), C, R, C, false}}) {
      if (packed.count(key)) continue;
      if (auto node = entries_->packed.extract(key)) packed.insert(std::move(node));
      else packed.try_emplace(key);
    }
  }
  entries_->packed = std::move(packed);
  std::vector<std::pair<const Entries::Key*, detail::PackedB*>> jobs;
  for (auto& [key, p] : entries_->packed) jobs.emplace_back(&key, &p);
  std::vector<std::exception_ptr> errors(jobs.size());
#pragma omp parallel for schedule(dynamic, 1) if (!omp_in_parallel())
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Entries::Key& k = *jobs[i].first;
    try {
      detail::pack_b_bf16(k.trans, k.K, k.N, k.data, k.ld, *jobs[i].second);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) {
      clear();
      std::rethrow_exception(e);
    }
  entries_->stamps = std::move(stamps);
}

const detail::PackedB* detail::shared_packing(const float* b, int64_t ldb, int64_t K, int64_t N, bool trans_b) {
  if (!t_shared_packed) return nullptr;
  const auto it = t_shared_packed->packed.find({b, ldb, K, N, trans_b});
  return it == t_shared_packed->packed.end() ? nullptr : &it->second;
}

SharedPackedWeights::Use::Use(const SharedPackedWeights& packed) : saved_(t_shared_packed) {
  t_shared_packed = packed.entries_.get();
}
SharedPackedWeights::Use::~Use() { t_shared_packed = saved_; }

}  // namespace rosetta
