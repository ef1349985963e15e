#include "replicas.h"

#include <omp.h>

#include <exception>

#include "rosetta/core/ops.h"

namespace rosetta::cli {

ThreadReplicas::ThreadReplicas(const optim::Optimizer& opt,
                               std::vector<std::shared_ptr<nn::Module>> extra)
    : extra_(std::move(extra)) {
  const std::vector<Var>& primary = opt.params();
  for (const auto& m : extra_) {
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
    grads_.push_back(flat);
  }
}

void ThreadReplicas::run(const std::function<void(int)>& f) const {
  const int n = size();
  if (n == 1) return f(0);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
#pragma omp parallel num_threads(n)
  {
    const int t = omp_get_thread_num();
    try {
      f(t);
    } catch (...) {
      errors[size_t(t)] = std::current_exception();
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void ThreadReplicas::zero_grad() {
  for (Tensor& g : grads_) g.zero_();
}

void ThreadReplicas::reduce_into(const optim::Optimizer& opt) {
  Tensor total = opt.flat_grads();  // a handle on the optimizer's buffer, written in place
  for (const Tensor& g : grads_) add_(total, g);
}

int ThreadReplicas::auto_count(int threads, int64_t rows, int64_t dim) {
  // bench/MACHINE.md: two BLAS threads gain 1.5x over one at 2048 x 256 x 256 and nothing at
  // 512 x 64 x 64; replicas pay off while a whole batch's projection has fewer than 2^28 multiply-adds (measured:
  // tiny 1.56x, small 1.10x, base none, with 2 threads).
  constexpr int64_t kReplicaLimit = int64_t(1) << 28;
  if (threads <= 1 || rows < threads) return 1;
  return rows * dim * dim < kReplicaLimit ? threads : 1;
}

}  // namespace rosetta::cli
