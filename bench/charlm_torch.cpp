// The LibTorch twin of examples/charlm: the same model (charlm.h), data sampling, loop and
// hyperparameters, written as a LibTorch 1.13 user would, for bench/charlm.sh.
//
//   charlm_torch TEXT [--steps N] [--batch N] [--threads N] [--seed N]
//
// Prints the loss and, last, "tokens/s X" over the steps after the first two, as charlm does.
// The initialisation differs (LibTorch's defaults), which does not change the speed.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

constexpr int64_t kVocab = 256, kDim = 128, kHeads = 4, kLayers = 4, kContext = 64;

// A pre-norm decoder block: x + attn(ln1(x)), then + ff(ln2(x)).
struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})))),
        attn(register_module("attn", torch::nn::MultiheadAttention(kDim, kHeads))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})))),
        linear1(register_module("linear1", torch::nn::Linear(kDim, 4 * kDim))),
        linear2(register_module("linear2", torch::nn::Linear(4 * kDim, kDim))) {}

  // x [B, T, D], mask [T, T] (0 or -inf) -> [B, T, D]
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) {
    // MultiheadAttention takes [T, B, D].
    const torch::Tensor h = ln1(x).transpose(0, 1);
    const torch::Tensor a = std::get<0>(attn->forward(h, h, h, /*key_padding_mask=*/{}, /*need_weights=*/false, mask));
    const torch::Tensor y = x + a.transpose(0, 1);
    return y + linear2(torch::gelu(linear1(ln2(y))));
  }

  torch::nn::LayerNorm ln1;
  torch::nn::MultiheadAttention attn;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear linear1, linear2;
};
TORCH_MODULE(Block);

struct CharLMImpl : torch::nn::Module {
  CharLMImpl()
      : embed(register_module("embed", torch::nn::Embedding(kVocab, kDim))),
        pos(register_parameter("pos", torch::randn({kContext, kDim}) * 0.02)),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        ln_f(register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})))),
        head(register_module("head", torch::nn::Linear(torch::nn::LinearOptions(kDim, kVocab).bias(false)))) {
    for (int64_t i = 0; i < kLayers; ++i) blocks->push_back(Block());
  }

  // ids [B, T] (int64) -> logits [B, T, V]
  torch::Tensor forward(const torch::Tensor& ids) {
    const int64_t T = ids.size(1);
    const torch::Tensor mask =
        torch::full({T, T}, -std::numeric_limits<float>::infinity()).triu(1);
    torch::Tensor x = embed(ids) + pos.narrow(0, 0, T);
    for (const auto& block : *blocks) x = block->as<Block>()->forward(x, mask);
    return head(ln_f(x));
  }

  torch::nn::Embedding embed;
  torch::Tensor pos;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm ln_f;
  torch::nn::Linear head;
};
TORCH_MODULE(CharLM);

struct Args {
  std::string text;
  int64_t steps = 20, batch = 32, threads = 1, seed = 1;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      a.text = arg;
      continue;
    }
    if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
    const std::string value = argv[++i];
    char* end = nullptr;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (*end != '\0' || value.empty() || n < 0)
      throw std::runtime_error(arg + ": '" + value + "' is not a non-negative integer");
    if (arg == "--steps") a.steps = n;
    else if (arg == "--batch") a.batch = n;
    else if (arg == "--threads") a.threads = n;
    else if (arg == "--seed") a.seed = n;
    else throw std::runtime_error("unknown option " + arg);
  }
  if (a.text.empty()) throw std::runtime_error("usage: charlm_torch TEXT [--steps N] ...");
  if (a.steps <= 0 || a.batch <= 0) throw std::runtime_error("--steps and --batch must be positive");
  return a;
}

int run(const Args& args) {
  at::set_num_threads(int(std::max<int64_t>(args.threads, 1)));
  at::set_num_interop_threads(1);
  torch::manual_seed(uint64_t(args.seed));
  std::ifstream in(args.text, std::ios::binary);
  if (!in) throw std::runtime_error(args.text + ": cannot open for reading");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int64_t T = kContext, B = args.batch;
  if (int64_t(text.size()) <= T) throw std::runtime_error(args.text + ": too short");
  const torch::Tensor bytes =
      torch::from_blob(const_cast<char*>(text.data()), {int64_t(text.size())}, torch::kUInt8)
          .to(torch::kInt64);

  CharLM model;
  torch::optim::AdamW opt(model->parameters(),
                          torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  int64_t parameters = 0;
  for (const auto& p : model->parameters()) parameters += p.numel();
  std::printf("charlm_torch: %lld parameters, %s (%zu bytes), batch %lld x %lld, %d threads\n",
              (long long)parameters, args.text.c_str(), text.size(), (long long)B, (long long)T,
              at::get_num_threads());

  using Clock = std::chrono::steady_clock;
  const int64_t warmup = args.steps > 2 ? 2 : 0;
  Clock::time_point start = Clock::now();
  double first = 0, last = 0;
  for (int64_t step = 1; step <= args.steps; ++step) {
    if (step == warmup + 1) start = Clock::now();
    // B random windows of T + 1 bytes: inputs and next-byte targets [B, T].
    const torch::Tensor starts = torch::randint(int64_t(text.size()) - T, {B, 1}, torch::kInt64);
    const torch::Tensor window = bytes.index({starts + torch::arange(T + 1)});
    const torch::Tensor x = window.narrow(1, 0, T), y = window.narrow(1, 1, T);
    const torch::Tensor loss =
        torch::cross_entropy_loss(model->forward(x).reshape({B * T, kVocab}), y.reshape({B * T}));
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    opt.zero_grad();
    last = loss.item<double>();
    if (step == 1) first = last;
    if (step == 1 || step % 10 == 0 || step == args.steps)
      std::printf("step %4lld  loss %.4f\n", (long long)step, last);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("tokens/s %.0f\n", double((args.steps - warmup) * B * T) / seconds);
  return last < first ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "charlm_torch: %s\n", e.what());
    return 2;
  }
}
