// Trains CharLM (charlm.h) on the bytes of a text file, two ways:
//   --loop train (default): with rosetta::train: thread replicas of the model (one per thread),
//     each training a shard of every batch, gradient clipping, the non-finite policy; with
//     --save and --resume, a training checkpoint that continues bit for bit (--save keeps the
//     file it replaces, F.safetensors as F.prev.safetensors, for --resume when F does not load);
//   --loop bare: forward, cross-entropy, backward, clipping, AdamW step, as examples/mlp.
// Prints the loss, the training speed in tokens/s (steps after the first two) and a checksum
// of the final weights; exits 1 when a run of 10 updates or more did not lower the loss.
//
//   charlm [TEXT] [--loop train|bare] [--steps N] [--batch N] [--threads N] [--replicas N]
//          [--seed N] [--save FILE] [--resume FILE] [--valid-every N] [--metrics FILE]
//          [--precision fp32|bf16|auto]
//
// --valid-every N holds out the text's last tenth and reports the loss on it every N updates
// (Trainer::evaluate, on the replicas); --metrics appends every update's and validation's
// figures to a JSONL file (train::MetricsLog).
// --steps is the update to stop at: `--steps 8` equals `--steps 4 --save F`, then
// `--steps 8 --resume F`, bit for bit (scripts/test-install.sh checks it). TEXT defaults to the
// repository's README.md. bench/charlm.sh runs both loops against the LibTorch twin
// (bench/charlm_torch.cpp): same model, data sampling and hyperparameters.
#include "charlm.h"

#include <rosetta/core/cpu.h>
#include <rosetta/core/io.h>
#include <rosetta/core/safetensors.h>
#include <rosetta/core/start.h>
#include <rosetta/optim/optim.h>
#include <rosetta/train/checkpoint.h>
#include <rosetta/train/metrics.h>
#include <rosetta/train/trainer.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <tuple>
#include <string>

using namespace rosetta;

struct Args {
  std::string text = CHARLM_DEFAULT_TEXT;
  std::string loop = "train", save, resume, metrics;
  std::string precision = "auto";  // of the matrix products: bf16 where the CPU has fast AVX512_BF16
  int64_t steps = 20, batch = 32, threads = 0, replicas = 0, seed = 1, valid_every = 0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      a.text = arg;
      continue;
    }
    ROSETTA_CHECK(i + 1 < argc, arg, " needs a value");
    const std::string value = argv[++i];
    if (arg == "--loop" || arg == "--save" || arg == "--resume" || arg == "--metrics" || arg == "--precision") {
      (arg == "--loop"       ? a.loop
       : arg == "--save"     ? a.save
       : arg == "--resume"   ? a.resume
       : arg == "--metrics"  ? a.metrics
                             : a.precision) = value;
      continue;
    }
    char* end = nullptr;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    ROSETTA_CHECK(*end == '\0' && !value.empty() && n >= 0, arg, ": '", value,
                  "' is not a non-negative integer");
    if (arg == "--steps") a.steps = n;
    else if (arg == "--batch") a.batch = n;
    else if (arg == "--threads") a.threads = n;
    else if (arg == "--replicas") a.replicas = n;
    else if (arg == "--seed") a.seed = n;
    else if (arg == "--valid-every") a.valid_every = n;
    else ROSETTA_FAIL("unknown option ", arg, " (--loop, --steps, --batch, --threads, --replicas, --seed, --save, ",
                      "--resume, --valid-every, --metrics, --precision)");
  }
  ROSETTA_CHECK(a.steps > 0 && a.batch > 0, "--steps and --batch must be positive");
  ROSETTA_CHECK(a.threads <= 1024, "--threads ", a.threads, " is more than 1024");
  ROSETTA_CHECK(a.loop == "train" || a.loop == "bare", "--loop '", a.loop, "' is not train or bare");
  ROSETTA_CHECK(a.loop == "train" || (a.save.empty() && a.resume.empty() && a.replicas == 0 && a.valid_every == 0 &&
                                       a.metrics.empty()),
                "--save, --resume, --replicas, --valid-every and --metrics need --loop train");
  return a;
}

// B random windows of T + 1 bytes: inputs [B, T] and next-byte targets [B, T] (I32).
std::pair<Tensor, Tensor> sample_batch(const std::string& text, int64_t B, int64_t T,
                                       Generator& gen) {
  const std::vector<int32_t> starts =
      gen.randint({B}, 0, int32_t(text.size() - T)).to_vector<int32_t>();
  std::vector<int32_t> x(B * T), y(B * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      x[b * T + t] = static_cast<unsigned char>(text[starts[b] + t]);
      y[b * T + t] = static_cast<unsigned char>(text[starts[b] + t + 1]);
    }
  return {Tensor::from_vector(x, {B, T}), Tensor::from_vector(y, {B, T})};
}

// The data position of a checkpoint: the state of the generator that samples the batches.
constexpr const char* kDataRng = "charlm.data_rng";

int run(const Args& args) {
  set_num_threads(int(args.threads));
  // The library's switch for the precision of matrix products (rosetta/core/cpu.h); bf16 is
  // never emulated: without AVX512_BF16, "auto" and "bf16" give fp32 and a note.
  std::string note;
  set_matmul_precision(resolve_precision(args.precision, &note));
  if (!note.empty()) std::fprintf(stderr, "charlm: %s\n", note.c_str());
  const charlm::CharLMOptions options;
  const int64_t T = options.context();
  const std::string text = read_file(args.text);
  ROSETTA_CHECK(int64_t(text.size()) > T && text.size() < (1u << 31), args.text, ": ",
                text.size(), " bytes; needs more than ", T, " and less than 2 GiB");

  // With validation, the last tenth of the text is held out for it.
  const size_t held_out = args.valid_every > 0 ? text.size() / 10 : 0;
  ROSETTA_CHECK(held_out == 0 || int64_t(held_out) > 2 * T, args.text, ": too short to hold out a tenth for validation");
  const std::string train_text = text.substr(0, text.size() - held_out), valid_text = text.substr(text.size() - held_out);

  Generator gen(args.seed);  // the initial weights, then the batches
  charlm::CharLM model(options, gen);
  auto opt = optim::make_adamw(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
  const bool bare = args.loop == "bare";
  std::optional<train::Trainer> trainer;  // the bare loop has none
  if (!bare)
    trainer.emplace(model, *opt,
                    train::TrainerOptions().replicas(args.replicas > 0 ? int(args.replicas) : get_num_threads()).clip(1.0),
                    [&options] {
                      Generator g(0);  // its weights give way to the model's
                      return std::make_unique<charlm::CharLM>(options, g);
                    });
  if (!args.resume.empty()) {
    // The newest of FILE and the one --save kept before it that loads.
    const train::LoadedCheckpoint loaded = train::load_newest_training_checkpoint(args.resume, *trainer);
    for (const std::string& why : loaded.from.skipped)
      std::fprintf(stderr, "charlm: warning: %s; resuming from %s\n", why.c_str(), loaded.from.path.c_str());
    const auto& meta = loaded.metadata;
    const auto it = meta.find(kDataRng);
    ROSETTA_CHECK(it != meta.end(), args.resume, ": no ", kDataRng, " (not a charlm checkpoint)");
    unsigned long long seed = 0, counter = 0;
    ROSETTA_CHECK(std::sscanf(it->second.c_str(), "%llu %llu", &seed, &counter) == 2, args.resume, ": ",
                  kDataRng, " = '", it->second, "'");
    gen.set_state(seed, counter);
  }
  std::printf("charlm: %lld parameters, %s (%zu bytes), batch %lld x %lld, %d threads, %s products; %s\n",
              (long long)model.parameter_count(), args.text.c_str(), text.size(), (long long)args.batch,
              (long long)T, get_num_threads(), precision_name(matmul_precision()), kernels_summary().c_str());
  std::printf("loop: %s%s\n", bare ? "bare" : "rosetta::train, replicas ",
              bare ? "" : std::to_string(trainer->replicas()).c_str());

  // Each replica's loss is the mean over its rows [b0, b1) of x and y; the trainer weights it by
  // its share of the batch's tokens.
  auto lm_loss = [T](const Tensor& x, const Tensor& y) {
    return [&x, &y, T](nn::Module& replica, size_t, int64_t b0, int64_t b1) {
      const auto& m = static_cast<const charlm::CharLM&>(replica);
      return train::ShardLoss{cross_entropy(m.forward(x.narrow(0, b0, b1 - b0)), y.narrow(0, b0, b1 - b0)),
                              (b1 - b0) * T};
    };
  };
  // The validation windows: fixed, from the held-out text.
  Tensor valid_x, valid_y;
  if (held_out) {
    Generator valid_gen(args.seed + 1);
    std::tie(valid_x, valid_y) = sample_batch(valid_text, 64, T, valid_gen);
  }
  std::optional<train::MetricsLog> metrics;
  if (!args.metrics.empty()) metrics.emplace(args.metrics);

  using Clock = std::chrono::steady_clock;
  const int64_t first_step = bare ? 1 : trainer->steps() + 1;
  const int64_t warmup = args.steps - first_step >= 2 ? 2 : 0;
  Clock::time_point start = Clock::now();
  double first = 0, last = 0;
  for (int64_t step = first_step; step <= args.steps; ++step) {
    if (step == first_step + warmup) start = Clock::now();
    auto [x, y] = sample_batch(train_text, args.batch, T, gen);
    if (bare) {
      Var loss = cross_entropy(model.forward(x), y);
      loss.backward();
      optim::clip_grad_norm(*opt, 1.0);
      opt->step();
      opt->zero_grad();
      last = loss.item();
    } else {
      const train::StepResult r = trainer->step({args.batch}, args.batch * T, lm_loss(x, y));
      last = r.loss;
      if (metrics)
        metrics->write({{"kind", std::string("train")}, {"step", step}, {"loss", r.loss}, {"grad_norm", r.grad_norm}});
    }
    if (args.valid_every > 0 && (step % args.valid_every == 0 || step == args.steps)) {
      const double valid = trainer->evaluate({valid_x.size(0)}, valid_x.numel(), lm_loss(valid_x, valid_y));
      std::printf("step %4lld  valid loss %.4f\n", (long long)step, valid);
      if (metrics) metrics->write({{"kind", std::string("valid")}, {"step", step}, {"loss", valid}});
    }
    if (step == first_step) first = last;
    if (step == 1 || step % 10 == 0 || step == args.steps)
      std::printf("step %4lld  loss %.4f\n", (long long)step, last);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double tokens = double((args.steps - first_step + 1 - warmup) * args.batch * T);
  if (args.steps >= first_step) std::printf("tokens/s %.0f\n", tokens / seconds);
  if (!args.save.empty())  // keeping the file it replaces, for a --resume that finds FILE damaged
    train::save_training_checkpoint(args.save, *trainer,
                                    {{kDataRng, std::to_string(gen.seed()) + " " + std::to_string(gen.counter())}},
                                    train::KeepPrevious::yes);
  std::printf("weights %s\n", train::tensors_checksum(model.state_dict()).c_str());
  return args.steps - first_step >= 9 && !(last < first) ? 1 : 0;  // runs of 10 updates or more
}

int main(int argc, char** argv) {
  try {
    // First, as the rosetta CLI: threads that wait passively, and OpenBLAS's best kernels where it
    // picked some below the CPU (rosetta/core/start.h). It may start the program again.
    const StartReport started = start(argc, argv);
    // Kernels still below the CPU: a self-test failed, or OPENBLAS_CORETYPE chose them; and any
    // of rosetta's own that failed their check on this CPU.
    if (const std::string w = started.warning.empty() ? blas_kernels_warning() : started.warning; !w.empty())
      std::fprintf(stderr, "charlm: warning: %s\n", w.c_str());
    for (const std::string& w : started.kernel_warnings) std::fprintf(stderr, "charlm: warning: %s\n", w.c_str());
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "charlm: %s\n", e.what());
    return 2;
  }
}
