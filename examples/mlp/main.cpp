// An MLP learns XOR of signs: points uniform in [-1, 1]^2, class 1 when x0 * x1 > 0.
// Prints the loss going down; exits 1 unless test accuracy reaches 95%. The README quotes the
// MLP and its training loop (scripts/check-links.sh checks that it quotes them as they are).
#include <rosetta/rosetta.h>

#include <cstdio>
#include <memory>

using namespace rosetta;

// n points [n, 2] and their labels [n] (I32).
std::pair<Tensor, Tensor> make_batch(Generator& gen, int64_t n) {
  Tensor x = gen.uniform({n, 2}, -1.0, 1.0);
  std::vector<float> v = x.to_vector<float>();
  std::vector<int32_t> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = v[2 * i] * v[2 * i + 1] > 0;
  return {x, Tensor::from_vector(y)};
}

struct MLP : nn::Module {
  MLP(int64_t in, int64_t hidden, int64_t out, Generator& gen)
      : fc1(register_module("fc1", std::make_shared<nn::Linear>(nn::LinearOptions(in, hidden), gen))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(nn::LinearOptions(hidden, out), gen))) {}
  Var forward(const Var& x) const { return fc2->forward(tanh(fc1->forward(x))); }  // [N, 2] -> [N, 2]
  std::shared_ptr<nn::Linear> fc1, fc2;
};

int main(int argc, char** argv) {
  // First: threads that wait passively, OpenBLAS's best kernels, rosetta's checked (rosetta/core/start.h).
  for (const std::string& w : start(argc, argv).warnings()) std::fprintf(stderr, "mlp: warning: %s\n", w.c_str());
  Generator gen(7);
  MLP model(2, 16, 2, gen);
  optim::Adam opt(model.parameters(), optim::AdamOptions{.lr = 0.03});
  double first = 0, last = 0;
  for (int step = 1; step <= 400; ++step) {
    auto [x, y] = make_batch(gen, 128);
    Var loss = cross_entropy(model.forward(Var(x)), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    last = loss.item();
    if (step == 1) first = last;
    if (step % 50 == 0 || step == 1) std::printf("step %3d  loss %.4f\n", step, last);
  }
  NoGradGuard no_grad;
  auto [x, y] = make_batch(gen, 2000);
  std::vector<int32_t> pred = argmax(model.forward(Var(x)).data(), -1).to_vector<int32_t>();
  std::vector<int32_t> truth = y.to_vector<int32_t>();
  int correct = 0;
  for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == truth[i];
  const double accuracy = double(correct) / double(pred.size());
  std::printf("test accuracy %.3f (loss %.4f -> %.4f)\n", accuracy, first, last);
  return accuracy >= 0.95 && last < 0.5 * first ? 0 : 1;
}
