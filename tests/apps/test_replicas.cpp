// Data parallelism across threads (apps/replicas.h): shards of a batch on tied replicas give
// the gradient of the whole batch, dropout masks included, and the optimizer's step moves every
// replica.
#include <cmath>

#include "replicas.h"
#include "rosetta/autograd/functions.h"
#include "rosetta/nn/nn.h"
#include "rosetta/optim/optim.h"
#include "support.h"

using namespace rosetta;
using rosetta::cli::ThreadReplicas;
using rosetta::test::AllClose;

namespace {

nn::TransformerOptions tiny_options() {
  return nn::TransformerOptions()
      .src_vocab(37)
      .tgt_vocab(41)
      .d_model(16)
      .heads(2)
      .ff(32)
      .encoder_layers(1)
      .decoder_layers(2)
      .dropout(0.3)
      .max_len(16);
}

}  // namespace

TEST_CASE("replicas on shards of a batch give the whole batch's gradient and share one step", "[replicas]") {
  const int n = GENERATE(2, 3);
  Generator g(5);
  nn::Transformer model(tiny_options(), g);
  optim::Adam opt(model.parameters(), optim::AdamOptions());
  // Unequal shard sizes, with padding: each shard's loss is weighted by its share of the
  // batch's non-pad target tokens, as the trainer does.
  const int64_t B = 7, S = 6, T = 5;
  Tensor src = g.randint({B, S}, 1, 37), tgt = g.randint({B, T + 1}, 1, 41);
  tgt.data<int32_t>()[T] = 0;  // pads at the end of the first target
  tgt.data<int32_t>()[T - 1] = 0;
  const Tensor tgt_in = tgt.narrow(1, 0, T).contiguous(), tgt_out = tgt.narrow(1, 1, T).contiguous();
  auto tokens = [](const Tensor& t) {
    int64_t k = 0;
    for (int32_t v : t.contiguous().to_vector<int32_t>()) k += v != 0;
    return double(k);
  };

  // The reference: the whole batch on one model, dropout included.
  model.train();
  Generator& dropout = model.dropout_generator();
  const uint64_t seed = dropout.seed(), counter = dropout.counter();
  opt.zero_grad();
  cross_entropy(model.forward(src, tgt_in), tgt_out, 0.1, 0).backward();
  const Tensor whole = opt.flat_grads().clone();
  const uint64_t counter_after = dropout.counter();
  dropout.set_state(seed, counter);

  // The replicas are built with other initial weights and dropout seeds: both must give way
  // to the model's.
  ThreadReplicas replicas(model, opt, n);
  REQUIRE(replicas.size() == n);
  opt.zero_grad();
  const double total = tokens(tgt_out);
  replicas.run(B, [&](int r, int64_t b0, int64_t b1) {
    const Tensor out = tgt_out.narrow(0, b0, b1 - b0).contiguous();
    const Var loss = cross_entropy(
        replicas.model(r).forward(src.narrow(0, b0, b1 - b0).contiguous(),
                                  tgt_in.narrow(0, b0, b1 - b0).contiguous()),
        out, 0.1, 0);
    loss.backward(Tensor::full(loss.shape(), tokens(out) / total));
  });
  replicas.reduce_into(opt);
  REQUIRE_THAT(opt.flat_grads(), AllClose(whole, 1e-5, 1e-6));
  REQUIRE(dropout.counter() == counter_after);  // the model's stream moved past the whole batch

  // One step moves every replica: their weights are the model's storage.
  opt.step();
  const auto mine = model.named_parameters();
  for (int r = 0; r < n; ++r) {
    const auto theirs = replicas.model(r).named_parameters();
    REQUIRE(theirs.size() == mine.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      REQUIRE(theirs[i].first == mine[i].first);
      REQUIRE(theirs[i].second.data().same_storage(mine[i].second.data()));
    }
  }

  // A replica's exception reaches the caller, after every replica has finished.
  std::vector<int> ran(size_t(n), 0);
  REQUIRE_THROWS_WITH(replicas.run(B, [&](int r, int64_t, int64_t) {
                        ran[size_t(r)] = 1;
                        if (r == n - 1) ROSETTA_FAIL("replica ", r, " failed");
                      }),
                      Catch::Contains("replica " + std::to_string(n - 1) + " failed"));
  for (int v : ran) REQUIRE(v == 1);
}

TEST_CASE("replicas are used when BLAS threads cannot pay off", "[replicas]") {
  REQUIRE(ThreadReplicas::count(0, 1, 512, 64) == 1);
  REQUIRE(ThreadReplicas::count(0, 2, 512, 64) == 2);     // bench tiny
  REQUIRE(ThreadReplicas::count(0, 2, 2048, 256) == 2);   // bench small
  REQUIRE(ThreadReplicas::count(0, 2, 1024, 512) == 1);   // bench base: GEMM-bound
  REQUIRE(ThreadReplicas::count(0, 4, 3, 64) == 1);       // fewer rows than threads
  REQUIRE(ThreadReplicas::count(1, 2, 512, 64) == 1);     // asked for: as asked
  REQUIRE(ThreadReplicas::count(2, 2, 1024, 512) == 2);
  REQUIRE_THROWS_WITH(ThreadReplicas::count(3, 2, 512, 64),
                      Catch::Contains("--replicas 3 exceeds the 2 threads of this process"));
}
