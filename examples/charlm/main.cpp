// Trains CharLM (charlm.h) on the bytes of a text file with a bare loop: forward,
// cross-entropy, backward, gradient clipping, AdamW step. Prints the loss and the training
// speed in tokens/s (steps after the first two); exits 1 unless the loss went down.
//
//   charlm [TEXT] [--steps N] [--batch N] [--threads N] [--seed N]
//
// TEXT defaults to the repository's README.md. bench/charlm.sh runs this against its LibTorch
// twin (bench/charlm_torch.cpp), which has the same model, data sampling and hyperparameters.
#include "charlm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace rosetta;

struct Args {
  std::string text = CHARLM_DEFAULT_TEXT;
  int64_t steps = 20, batch = 32, threads = 0, seed = 1;
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
    char* end = nullptr;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    ROSETTA_CHECK(*end == '\0' && !value.empty() && n >= 0, arg, ": '", value,
                  "' is not a non-negative integer");
    if (arg == "--steps") a.steps = n;
    else if (arg == "--batch") a.batch = n;
    else if (arg == "--threads") a.threads = n;
    else if (arg == "--seed") a.seed = n;
    else ROSETTA_FAIL("unknown option ", arg, " (--steps, --batch, --threads, --seed)");
  }
  ROSETTA_CHECK(a.steps > 0 && a.batch > 0, "--steps and --batch must be positive");
  ROSETTA_CHECK(a.threads <= 1024, "--threads ", a.threads, " is more than 1024");
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

int run(const Args& args) {
  set_num_threads(int(args.threads));
  const charlm::CharLMOptions options;
  const int64_t T = options.context();
  const std::string text = read_file(args.text);
  ROSETTA_CHECK(int64_t(text.size()) > T && text.size() < (1u << 31), args.text, ": ",
                text.size(), " bytes; needs more than ", T, " and less than 2 GiB");

  Generator gen(args.seed);
  charlm::CharLM model(options, gen);
  auto opt = optim::make_adamw(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
  std::printf("charlm: %lld parameters, %s (%zu bytes), batch %lld x %lld, %d threads, %s\n",
              (long long)model.parameter_count(), args.text.c_str(), text.size(),
              (long long)args.batch, (long long)T, get_num_threads(), blas_core_name().c_str());

  using Clock = std::chrono::steady_clock;
  const int64_t warmup = args.steps > 2 ? 2 : 0;
  Clock::time_point start = Clock::now();
  double first = 0, last = 0;
  for (int64_t step = 1; step <= args.steps; ++step) {
    if (step == warmup + 1) start = Clock::now();
    auto [x, y] = sample_batch(text, args.batch, T, gen);
    Var loss = cross_entropy(model.forward(x), y);
    loss.backward();
    optim::clip_grad_norm(*opt, 1.0);
    opt->step();
    opt->zero_grad();
    last = loss.item();
    if (step == 1) first = last;
    if (step == 1 || step % 10 == 0 || step == args.steps)
      std::printf("step %4lld  loss %.4f\n", (long long)step, last);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double tokens = double((args.steps - warmup) * args.batch * T);
  std::printf("tokens/s %.0f\n", tokens / seconds);
  return last < first ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "charlm: %s\n", e.what());
    return 2;
  }
}
