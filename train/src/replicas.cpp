#include "rosetta/train/replicas.h"

#include <omp.h>

#include <algorithm>
#include <exception>

#include "rosetta/core/ops.h"
#include "rosetta/nn/layers.h"

namespace rosetta::train {

std::vector<Generator*> dropout_generators(const nn::Module& model) {
  std::vector<Generator*> out;
  for (const nn::Module* m : model.modules())
    if (const auto* d = dynamic_cast<const nn::Dropout*>(m))
      if (std::find(out.begin(), out.end(), &d->generator()) == out.end()) out.push_back(&d->generator());
  return out;
}

ThreadReplicas::ThreadReplicas(nn::Module& model, const optim::Optimizer& opt, int n, const Factory& make,
                               int inner_threads)
    : model_(model), generators_{dropout_generators(model)}, inner_threads_(std::max(inner_threads, 1)) {
  const std::vector<Var>& primary = opt.params();
  for (int r = 1; r < n; ++r) {
    ROSETTA_CHECK(make, "replicas: ", n, " replicas need a factory for the models of the others");
    std::unique_ptr<nn::Module> m = make();
    m->train(model.is_training());
    std::vector<Var> params = m->parameters();
    ROSETTA_CHECK(params.size() == primary.size(), "replicas: a replica has ", params.size(),
                  " parameters, the optimizer ", primary.size());
    Tensor flat = Tensor::zeros({opt.numel()});
    int64_t at = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      Var& p = params[i];
      const Tensor& value = primary[i].data();
      ROSETTA_CHECK(p.shape() == value.shape(), "replicas: parameter ", i, " has shape ",
                    p.shape(), " in a replica, ", value.shape(), " in the model");
      p.set_data(value);          // same values, so that tying them below copies nothing new
      p.bind_data_buffer(value);  // one storage: the optimizer's step updates every replica
      p.bind_grad_buffer(flat.narrow(0, at, p.numel()).view(p.shape()));
      at += p.numel();
    }
    generators_.push_back(dropout_generators(*m));
    ROSETTA_CHECK(generators_.back().size() == generators_[0].size(), "replicas: a replica has ",
                  generators_.back().size(), " dropout generators, the model ", generators_[0].size());
    extra_.push_back(std::move(m));
    grads_.push_back(flat);
    params_.push_back(std::move(params));
  }
}

void ThreadReplicas::run(int64_t rows, const std::function<void(int, int64_t, int64_t)>& f) {
  const int n = int(std::min<int64_t>(size(), std::max<int64_t>(rows, 1)));
  // Without this, each replica (and each thread of a product split along its rows) packs every
  // weight again for its own products; the same results either way.
  std::vector<Tensor> weights;
  for (const Var& p : model_.parameters()) weights.push_back(p.data());
  packed_.pack(weights);
  if (n == 1) {
    const SharedPackedWeights::Use use(packed_);
    return f(0, 0, rows);
  }
  const std::vector<Generator*>& primary = generators_[0];
  std::vector<uint64_t> counters;
  for (Generator* g : primary) counters.push_back(g->counter());
  for (int r = 0; r < n; ++r)
    for (size_t j = 0; j < primary.size(); ++j) {
      Generator& g = *generators_[size_t(r)][j];
      g.set_state(primary[j]->seed(), counters[j]);
      g.set_shard(rows * r / n, rows * (r + 1) / n - rows * r / n, rows);
    }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  if (inner_threads_ > 1 && omp_get_max_active_levels() < 2) omp_set_max_active_levels(2);
#pragma omp parallel num_threads(n)
  {
    const int r = omp_get_thread_num();
    const SharedPackedWeights::Use use(packed_);
    set_nested_gemm_threads(inner_threads_);
    try {
      f(r, rows * r / n, rows * (r + 1) / n);
    } catch (...) {
      errors[size_t(r)] = std::current_exception();
    }
    set_nested_gemm_threads(1);
  }
  for (int r = 0; r < n; ++r)
    for (Generator* g : generators_[size_t(r)]) g->clear_shard();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  // Every shard drew its rows of the same draws: all counters end where the model's do.
  for (int r = 1; r < n; ++r)
    for (size_t j = 0; j < primary.size(); ++j)
      ROSETTA_CHECK(generators_[size_t(r)][j]->counter() == primary[j]->counter(), "replicas: replica ", r,
                    " drew ", generators_[size_t(r)][j]->counter() - counters[j], " random values, replica 0 ",
                    primary[j]->counter() - counters[j]);
}

void ThreadReplicas::reduce_into(const optim::Optimizer& opt) {
  if (grads_.empty()) return;
  Tensor total = opt.flat_grads();  // a handle on the optimizer's buffer, written in place
  ROSETTA_CHECK(total.dtype() == DType::f32 && total.is_contiguous(),
                "replicas: the optimizer's gradients must be a contiguous F32 buffer");
  // A parameter no gradient reached in a replica still has last step's in its buffer.
  for (const std::vector<Var>& params : params_) settle_grads(params);
  // One pass over the buffers, split across the threads: each thread adds its own chunk of every
  // replica's buffer (an add_ per replica took ~2.5x longer on tiny). The replicas' buffers are
  // only read: counted as zero below, they are written over by their next gradients, which
  // halves this pass's memory traffic (16 replicas of the default translator: 15 x 19 MiB).
  float* t = total.data<float>();
  const int64_t n = total.numel();
  const int threads = std::max(1, std::min(size(), omp_get_max_threads()));
#pragma omp parallel num_threads(threads)
  {
    const int64_t nt = omp_get_num_threads(), i = omp_get_thread_num();
    const int64_t b = n * i / nt, e = n * (i + 1) / nt;
    for (const Tensor& g : grads_) {
      const float* pg = g.data<float>();
#pragma omp simd
      for (int64_t j = b; j < e; ++j) t[j] += pg[j];
    }
  }
  total.bump_version();
  for (const std::vector<Var>& params : params_)
    for (const Var& p : params) p.zero_grad_lazily();
}

ThreadPlan ThreadReplicas::plan(int requested, int threads, int64_t rows, int64_t dim) {
  ROSETTA_CHECK(requested <= threads, "replicas: ", requested, " exceed the ", threads,
                " threads of this process (one replica per thread)");
  threads = std::max(threads, 1);
  if (requested > 0) return {requested, std::max(1, threads / requested)};
  // Replicas pay off while a whole batch's projection has fewer than 2^28 multiply-adds: below
  // that, a product split over two BLAS threads gains little over one thread, and splitting the
  // batch gains more. Measured: docs/results/speed.md#replicas-against-blas-threads-0ae7e3c-2026-11-22
  constexpr int64_t kReplicaLimit = int64_t(1) << 28;
  if (threads <= 1 || rows < threads || rows * dim * dim >= kReplicaLimit) return {1, threads};
  // One replica per thread (the 2-thread default translator: 1,250 rows each), unless the
  // shards would get too small (64 threads: 39 rows): then fewer, larger ones.
  int n = threads;
  while (n > 1 && rows / n < kMinShardRows) {
    --n;
    while (threads % n) --n;
  }
  return {n, threads / n};
}

int ThreadReplicas::count(int requested, int threads, int64_t rows, int64_t dim) {
  return plan(requested, threads, rows, dim).replicas;
}

ThreadPlan thread_plan_for_flag(int requested, int64_t rows, int64_t dim) {
  ROSETTA_CHECK(requested <= get_num_threads(), "--replicas ", requested, " exceeds the ", get_num_threads(),
                " threads of this process (one replica per thread; see --threads)");
  return ThreadReplicas::plan(requested, get_num_threads(), rows, dim);
}

}  // namespace rosetta::train
