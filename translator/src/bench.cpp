// rosetta bench's measurements (synthetic.h): training and decoding throughput on the shapes of
// bench/torch_reference.py (random token batches of fixed length), as JSON lines.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/storage.h"
#include "rosetta/core/check.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/tensor.h"
#include "rosetta/nn/nn.h"
#include "rosetta/optim/optim.h"
#include "rosetta/translator/synthetic.h"

namespace rosetta::translator {

// The PRESETS of torch_reference.py.
BenchPreset bench_preset(const std::string& name) {
  if (name == "tiny") return {1000, 64, 4, 256, 2, 2, 32, 16, 16};
  if (name == "small") return {8000, 256, 4, 1024, 3, 3, 64, 32, 32};
  if (name == "base") return {8000, 512, 8, 2048, 6, 6, 32, 32, 32};
  ROSETTA_FAIL("unknown preset '", name, "' (tiny, small, base)");
}

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Forward FLOPs of the model on one batch (multiply-add = 2 FLOPs); training is 3x.
double forward_flops(const BenchPreset& p) {
  const double B = double(p.batch), S = double(p.src_len), T = double(p.tgt_len), d = double(p.d),
               f = double(p.ff), V = double(p.vocab);
  const double Ns = B * S, Nt = B * T;
  const double enc = 4 * 2 * Ns * d * d + 2 * 2 * B * S * S * d + 2 * 2 * Ns * d * f;
  const double dec = 4 * 2 * Nt * d * d + 2 * 2 * B * T * T * d  // self-attention
                     + 2 * 2 * Nt * d * d + 2 * 2 * Ns * d * d + 2 * 2 * B * T * S * d  // cross
                     + 2 * 2 * Nt * d * f;
  return double(p.enc) * enc + double(p.dec) * dec + 2 * Nt * d * V;
}

nn::TransformerOptions model_options(const BenchPreset& p, double dropout) {
  return nn::TransformerOptions()
      .src_vocab(p.vocab)
      .tgt_vocab(p.vocab)
      .d_model(p.d)
      .heads(p.heads)
      .ff(p.ff)
      .encoder_layers(p.enc)
      .decoder_layers(p.dec)
      .dropout(dropout)
      .norm_first(true)
      .max_len(512);
}

}  // namespace

std::string bench_training(const BenchOptions& a) {
  const BenchPreset p = bench_preset(a.preset);
  optim::AdamOptions ao;
  ao.lr = 1e-4;
  ao.beta1 = 0.9;
  ao.beta2 = 0.98;
  ao.eps = 1e-9;
  // The batch in one shard per replica (the whole batch when there is one): the training
  // step of rosetta train (train::Trainer), without clipping.
  translator::SyntheticTraining training(model_options(p, 0.1), ao, {p.batch, p.src_len, p.tgt_len}, a.replicas);
  const train::ThreadPlan plan = training.plan();

  std::vector<double> times;
  double loss_value = 0;
  AllocatorStats steady{};
  for (int step = 0; step < a.warmup + a.steps; ++step) {
    if (step == a.warmup) steady = allocator_stats();
    const double t0 = now();
    loss_value = training.step().loss;
    if (step >= a.warmup) times.push_back(now() - t0);
  }
  const AllocatorStats end = allocator_stats();
  const double med = median(times);
  const double flops = 3 * forward_flops(p);
  // The roof is that of the products' precision: a large fp32 or bf16 GEMM on the same threads.
  const double sgemm_peak = measure_sgemm_gflops(), bf16_peak = measure_bf16_gemm_gflops();
  const double peak = matmul_precision() == Precision::bf16 ? bf16_peak : sgemm_peak;
  const double gflops = flops / med / 1e9;
  nlohmann::json j{{"system", std::string("rosetta-") + ROSETTA_VERSION},
                   {"preset", a.preset},
                   {"threads", get_num_threads()},
                   {"params", training.model().parameter_count()},
                   {"step_s_median", std::round(med * 1e4) / 1e4},
                   {"tgt_tokens_per_s", std::round(double(p.batch * p.tgt_len) / med * 10) / 10},
                   {"peak_rss_mb", std::round(peak_rss_mb() * 10) / 10},
                   {"peak_tensor_mb", std::round(double(end.peak_bytes) / 1e5) / 10},
                   {"final_loss", std::round(loss_value * 1e4) / 1e4},
                   {"model_gflop_per_step", std::round(flops / 1e7) / 100},
                   {"achieved_gflops", std::round(gflops * 10) / 10},
                   {"precision", precision_name(matmul_precision())},
                   {"sgemm_peak_gflops", std::round(sgemm_peak * 10) / 10},
                   {"bf16_peak_gflops", std::round(bf16_peak * 10) / 10},
                   {"mfu", std::round(gflops / peak * 1000) / 1000},
                   {"isa", cpu_isa_name()},
                   {"blas_core", blas_core_name()},
                   {"kernels", kernels_summary()},
                   {"replicas", plan.replicas},
                   {"replica_threads", plan.inner_threads},
                   {"steady_state_system_allocs", end.system_allocs - steady.system_allocs}};
  return j.dump();
}

std::vector<std::string> bench_decoding(const BenchOptions& a) {
  const BenchPreset p = bench_preset(a.preset);
  std::vector<std::string> lines;
  Generator g(0);
  nn::Transformer model(model_options(p, 0.1), g);
  model.eval();
  const Tensor src = g.randint({p.batch, p.src_len}, 1, int32_t(p.vocab));
  for (int beam : {1, 4}) {
    const auto o = nn::SearchOptions().beam(beam).stop_at_eos(false).max_len_a(0).max_len_b(p.tgt_len).bos(1);
    std::vector<double> times;
    const int reps = 1 + std::max(1, a.steps / 5);
    for (int rep = 0; rep < reps; ++rep) {
      const double t0 = now();
      const auto hyps = nn::search(model, src, o);
      ROSETTA_CHECK(int64_t(hyps[0][0].tokens.size()) == p.tgt_len, "decode bench: wrong length");
      if (rep > 0) times.push_back(now() - t0);
    }
    const double med = median(times);
    nlohmann::json j{{"system", std::string("rosetta-") + ROSETTA_VERSION},
                     {"preset", a.preset},
                     {"threads", get_num_threads()},
                     {"mode", beam == 1 ? "greedy-decode" : "beam4-decode"},
                     {"batch", p.batch},
                     {"tokens", p.tgt_len},
                     {"batch_s_median", std::round(med * 1e4) / 1e4},
                     {"sentences_per_s", std::round(double(p.batch) / med * 100) / 100},
                     {"peak_rss_mb", std::round(peak_rss_mb() * 10) / 10},
                     {"precision", precision_name(matmul_precision())},
                     {"isa", cpu_isa_name()},
                     {"blas_core", blas_core_name()},
                     {"kernels", kernels_summary()}};
    lines.push_back(j.dump());
  }
  return lines;
}

}  // namespace rosetta::translator
