// The training layer (train/): thread replicas of any nn::Module, the Trainer's update
// (token-weighted shards, clipping, the non-finite policy, the schedule, the moving average),
// training checkpoints that resume bit for bit. Weights files and the metrics log:
// test_run_files.cpp.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "rosetta/autograd/functions.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/io.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/nn/nn.h"
#include "rosetta/optim/optim.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/trainer.h"
#include "support.h"
#include "trainer_support.h"

using namespace rosetta;
using rosetta::test::AllClose;
using train::ShardLoss;
using train::ThreadReplicas;
using train::Trainer;
using train::TrainerOptions;

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

// A fixed regression task for Mlp: inputs x [B, 6], integer classes y [B] in 0..4.
struct Task {
  Tensor x, y;
  explicit Task(uint64_t seed, int64_t B = 9) {
    Generator g(seed);
    x = g.normal({B, 6}, 0.0, 1.0);
    y = g.randint({B}, 0, 5);
  }
  // The loss of rows [b0, b1) through `m`, as a mean over its rows (one token each).
  ShardLoss loss(nn::Module& m, int64_t b0, int64_t b1) const {
    const auto& mlp = static_cast<Mlp&>(m);
    const Var logits = mlp.forward(Var(x.narrow(0, b0, b1 - b0).contiguous()));
    return {cross_entropy(logits, y.narrow(0, b0, b1 - b0).contiguous(), 0.0, -1), b1 - b0};
  }
};

std::unique_ptr<optim::Adam> adam(nn::Module& m) {
  optim::AdamOptions o;
  o.lr = 1e-2;
  return std::make_unique<optim::Adam>(m.parameters(), o);
}

Tensor params_of(const optim::Optimizer& opt) { return opt.flat_params().clone(); }

}  // namespace

TEST_CASE("replicas on shards of a batch give the whole batch's gradient and share one step", "[train]") {
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
  uint64_t other_seed = 100;
  ThreadReplicas replicas(model, opt, n, [&] {
    Generator other(other_seed++);
    return std::make_unique<nn::Transformer>(tiny_options(), other);
  });
  REQUIRE(replicas.size() == n);
  opt.zero_grad();
  const double total = tokens(tgt_out);
  auto shard = [&](int r, int64_t b0, int64_t b1) {
    const Tensor out = tgt_out.narrow(0, b0, b1 - b0).contiguous();
    const Var loss = cross_entropy(static_cast<nn::Transformer&>(replicas.model(r))
                                       .forward(src.narrow(0, b0, b1 - b0).contiguous(),
                                                tgt_in.narrow(0, b0, b1 - b0).contiguous()),
                                   out, 0.1, 0);
    loss.backward(Tensor::full(loss.shape(), tokens(out) / total));
  };
  replicas.run(B, shard);
  replicas.reduce_into(opt);
  REQUIRE_THAT(opt.flat_grads(), AllClose(whole, 1e-5, 1e-6));
  REQUIRE(dropout.counter() == counter_after);  // the model's stream moved past the whole batch
  // The other replicas' buffers were not cleared, only counted as zero: the batch again is
  // written over them, and the sum is its gradient again, not twice it.
  for (int r = 1; r < n; ++r) {
    const std::vector<Var> params = replicas.model(r).parameters();
    REQUIRE(std::all_of(params.begin(), params.end(), [](const Var& p) { return p.grad_is_stale(); }));
  }
  dropout.set_state(seed, counter);
  opt.zero_grad();
  replicas.run(B, shard);
  replicas.reduce_into(opt);
  REQUIRE_THAT(opt.flat_grads(), AllClose(whole, 1e-5, 1e-6));

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

TEST_CASE("replicas need a factory, and one of the same architecture", "[train]") {
  Generator g(1);
  Mlp model(g, 7);
  auto opt = adam(model);
  REQUIRE_THROWS_WITH(ThreadReplicas(model, *opt, 2, {}), Catch::Contains("need a factory"));
  REQUIRE_THROWS_WITH(ThreadReplicas(model, *opt, 2,
                                     [] {
                                       Generator other(2);
                                       return std::make_unique<nn::Linear>(nn::LinearOptions(6, 5), other);
                                     }),
                      Catch::Contains("a replica has 2 parameters, the optimizer 4"));
  REQUIRE_NOTHROW(ThreadReplicas(model, *opt, 1, {}));
}

TEST_CASE("replicas are used when BLAS threads cannot pay off", "[train]") {
  REQUIRE(ThreadReplicas::count(0, 1, 512, 64) == 1);
  REQUIRE(ThreadReplicas::count(0, 2, 512, 64) == 2);    // bench tiny
  REQUIRE(ThreadReplicas::count(0, 2, 2048, 256) == 2);  // bench small
  REQUIRE(ThreadReplicas::count(0, 2, 1024, 512) == 1);  // bench base: GEMM-bound
  REQUIRE(ThreadReplicas::count(0, 4, 3, 64) == 1);      // fewer rows than threads
  REQUIRE(ThreadReplicas::count(1, 2, 512, 64) == 1);    // asked for: as asked
  REQUIRE(ThreadReplicas::count(2, 2, 1024, 512) == 2);
  REQUIRE_THROWS_WITH(ThreadReplicas::count(3, 2, 512, 64), Catch::Contains("3 exceed the 2 threads"));
}

TEST_CASE("the thread plan keeps shards of at least 64 rows, the other threads inside the products", "[train]") {
  auto plan = [](int requested, int threads, int64_t rows, int64_t dim) {
    const train::ThreadPlan p = ThreadReplicas::plan(requested, threads, rows, dim);
    return std::make_pair(p.replicas, p.inner_threads);
  };
  CHECK(plan(0, 2, 2500, 256) == std::make_pair(2, 1));    // the default translator, 2 threads
  CHECK(plan(0, 16, 2500, 256) == std::make_pair(16, 1));  // 16 threads: 156 rows each
  CHECK(plan(0, 64, 2500, 256) == std::make_pair(32, 2));  // 64 threads: 39 rows would be too few
  CHECK(plan(0, 16, 512, 64) == std::make_pair(8, 2));     // bench tiny on 16 threads
  CHECK(plan(0, 12, 512, 64) == std::make_pair(6, 2));     // a divisor of the threads
  CHECK(plan(0, 2, 1024, 512) == std::make_pair(1, 2));    // bench base: one model, both threads
  CHECK(plan(2, 4, 512, 64) == std::make_pair(2, 2));      // asked for: the threads shared
  CHECK(plan(3, 4, 512, 64) == std::make_pair(3, 1));
}

TEST_CASE("replicas with threads inside their bf16 products train as with one each", "[train][bf16]") {
  if (!bf16_supported()) {
    WARN("skipped: this CPU has no AVX512_BF16");
    return;
  }
  const MatmulPrecisionScope bf16(Precision::bf16);
  // Products of 256 rows x 256 x 256 per replica: large enough for nested threads.
  auto make = [] {
    Generator g(4);
    return std::make_unique<nn::Linear>(nn::LinearOptions(256, 256), g);
  };
  Generator data(9);
  const Tensor x = data.normal({512, 256}, 0.0, 1.0), y = data.normal({512, 256}, 0.0, 1.0);
  std::vector<std::vector<double>> losses;
  const int threads = get_num_threads();
  set_num_threads(4);  // oversubscribed on a 2-core machine: this checks results, not speed
  for (int inner : {1, 2}) {
    auto model = make();
    optim::Adam opt(model->parameters(), optim::AdamOptions());
    Trainer trainer(*model, opt, TrainerOptions().replicas(2).replica_threads(inner).clip(1.0), make);
    std::vector<double> run;
    for (int step = 0; step < 3; ++step)
      run.push_back(trainer.step({512}, 512, [&](nn::Module& m, size_t, int64_t b0, int64_t b1) {
        const Var out = static_cast<nn::Linear&>(m).forward(Var(x.narrow(0, b0, b1 - b0)));
        const Var d = sub(out, Var(y.narrow(0, b0, b1 - b0)));
        return ShardLoss{mean(square(d)), (b1 - b0)};
      }).loss);
    losses.push_back(run);
  }
  set_num_threads(threads);
  // Each element of a bf16 product is summed by one thread in one order, however many share it.
  CHECK(losses[0] == losses[1]);

  // The replicas' products read the weight packed once per run (the bias is not a matrix);
  // fp32 packs nothing (OpenBLAS packs its own).
  auto model = make();
  optim::Adam opt(model->parameters(), optim::AdamOptions());
  ThreadReplicas replicas(*model, opt, 2, make);
  auto forward = [&](int r, int64_t b0, int64_t b1) {
    static_cast<nn::Linear&>(replicas.model(r)).forward(Var(x.narrow(0, b0, b1 - b0)));
  };
  replicas.run(512, forward);
  CHECK(replicas.packed_weights().size() == 1);
  const MatmulPrecisionScope fp32(Precision::fp32);
  replicas.run(512, forward);
  CHECK(replicas.packed_weights().size() == 0);
}

TEST_CASE("a user's model trains the same on one replica and on two", "[train]") {
  // Updates with dropout, two batches per update (accumulation) and clipping: two replicas
  // follow one model up to float rounding, dropout masks included.
  std::vector<Tensor> weights;
  std::vector<double> losses;
  for (int n : {1, 2}) {
    Generator g(3);
    Mlp model(g, 11);
    auto opt = adam(model);
    Trainer trainer(model, *opt, TrainerOptions().replicas(n).clip(0.5), [] {
      Generator other(99);
      return std::make_unique<Mlp>(other, 12345);
    });
    REQUIRE(trainer.replicas() == n);
    const Task a(21, 9), b(22, 4);
    double last = 0;
    for (int step = 0; step < 5; ++step) {
      const auto r = trainer.step({9, 4}, 13, [&](nn::Module& m, size_t batch, int64_t b0, int64_t b1) {
        return (batch == 0 ? a : b).loss(m, b0, b1);
      });
      REQUIRE_FALSE(r.skipped);
      REQUIRE(r.tokens == 13);
      REQUIRE(r.grad_norm > 0);
      last = r.loss;
    }
    REQUIRE(trainer.steps() == 5);
    REQUIRE(opt->steps() == 5);
    weights.push_back(params_of(*opt));
    losses.push_back(last);
  }
  REQUIRE_THAT(weights[1], AllClose(weights[0], 1e-4, 1e-5));
  REQUIRE(std::abs(losses[1] - losses[0]) < 1e-5);
}

TEST_CASE("the trainer's loss is the token-weighted mean and its schedule sets the rate", "[train]") {
  Generator g(4);
  Mlp model(g, 5);
  model.eval();  // no dropout: the loss can be computed again outside
  auto opt = adam(model);
  const Task t(8, 6);
  const Var whole = cross_entropy(model.forward(Var(t.x)), t.y, 0.0, -1);
  const double expected = whole.item();
  auto schedule = std::make_shared<optim::InverseSqrtSchedule>(0.5, 4);
  Trainer trainer(model, *opt, TrainerOptions().clip(0), {}, schedule);
  // Two shards of 2 and 4 rows given as two batches of one update: weighted 2/6 and 4/6.
  const auto r = trainer.step({2, 4}, 6, [&](nn::Module& m, size_t batch, int64_t b0, int64_t b1) {
    const int64_t at = batch == 0 ? 0 : 2;
    Task part = t;
    part.x = t.x.narrow(0, at, batch == 0 ? 2 : 4).contiguous();
    part.y = t.y.narrow(0, at, batch == 0 ? 2 : 4).contiguous();
    return part.loss(m, b0, b1);
  });
  REQUIRE_THAT(r.loss, Catch::Matchers::WithinRel(expected, 1e-6));
  REQUIRE_THAT(opt->lr(), Catch::Matchers::WithinRel(schedule->lr(1), 1e-12));
}

TEST_CASE("evaluate is the eval-mode loss on the replicas and changes nothing", "[train]") {
  const int n = GENERATE(1, 2);
  Generator g(12);
  Mlp model(g, 13);
  auto opt = adam(model);
  Trainer trainer(model, *opt, TrainerOptions().replicas(n), [] {
    Generator other(1);
    return std::make_unique<Mlp>(other, 2);
  });
  const Task t(14, 7);
  model.eval();
  const double expected = cross_entropy(model.forward(Var(t.x)), t.y, 0.0, -1).item();
  model.train();
  const Tensor before = params_of(*opt);
  const uint64_t counter = trainer.generators()[0]->counter();
  std::vector<int> training(size_t(n), -1);  // checked here: Catch's assertions are not for other threads
  const double got = trainer.evaluate({7}, 7, [&](nn::Module& m, size_t, int64_t b0, int64_t b1) {
    training[size_t(b0 == 0 ? 0 : 1)] = m.is_training();
    return t.loss(m, b0, b1);
  });
  for (int v : training) REQUIRE(v == 0);
  REQUIRE_THAT(got, Catch::Matchers::WithinRel(expected, 1e-6));
  REQUIRE(model.is_training());
  REQUIRE(trainer.generators()[0]->counter() == counter);  // no dropout drawn
  REQUIRE_THAT(params_of(*opt), AllClose(before, 0, 0));
  REQUIRE_THAT(opt->flat_grads(), AllClose(Tensor::zeros({opt->numel()}), 0, 0));
  REQUIRE(trainer.steps() == 0);
}

TEST_CASE("non-finite updates are skipped, or stop the run, leaving the weights of the last good one", "[train]") {
  Generator g(6);
  Mlp model(g, 1);
  auto opt = adam(model);
  const Task t(3, 4);
  bool poison = false;
  auto loss = [&](nn::Module& m, size_t, int64_t b0, int64_t b1) {
    ShardLoss s = t.loss(m, b0, b1);
    if (poison) s.loss = s.loss * Var(Tensor::full({}, std::nanf("")));
    return s;
  };
  Trainer trainer(model, *opt, TrainerOptions().max_skipped(3));
  trainer.step({4}, 4, loss);
  const Tensor good = params_of(*opt);
  poison = true;
  for (int i = 1; i <= 2; ++i) {
    const auto r = trainer.step({4}, 4, loss);
    REQUIRE(r.skipped);
    REQUIRE(trainer.skipped() == i);
  }
  REQUIRE_THROWS_AS(trainer.step({4}, 4, loss), train::NonFiniteError);
  REQUIRE_THAT(params_of(*opt), AllClose(good, 0, 0));
  REQUIRE(trainer.steps() == 1);
  poison = false;
  REQUIRE_FALSE(trainer.step({4}, 4, loss).skipped);  // a good update resets the count

  Trainer strict(model, *opt, TrainerOptions().stop_on_nonfinite(true));
  poison = true;
  REQUIRE_THROWS_WITH(strict.step({4}, 4, loss), Catch::Contains("non-finite loss at step 1"));
}

TEST_CASE("the moving average follows its formula and EmaWeights swaps it in and back", "[train]") {
  Generator g(7);
  Mlp model(g, 2);
  model.eval();
  auto opt = adam(model);
  const double decay = 0.9;
  Trainer trainer(model, *opt, TrainerOptions().ema(decay));
  const Task t(4, 5);
  Tensor expected = params_of(*opt);
  for (int64_t step = 1; step <= 4; ++step) {
    trainer.step({5}, 5, [&](nn::Module& m, size_t, int64_t b0, int64_t b1) { return t.loss(m, b0, b1); });
    const double d = std::min(decay, double(1 + step) / double(10 + step));
    expected = add(mul(expected, Tensor::scalar(d)), mul(opt->flat_params(), Tensor::scalar(1 - d)));
  }
  REQUIRE_THAT(trainer.ema(), AllClose(expected, 1e-6, 1e-7));
  const Tensor trained = params_of(*opt);
  {
    const train::EmaWeights swap(trainer);
    REQUIRE_THAT(model.parameters()[0].data().reshape({model.parameters()[0].numel()}),
                 AllClose(trainer.ema().narrow(0, 0, model.parameters()[0].numel()), 0, 0));
  }
  REQUIRE_THAT(params_of(*opt), AllClose(trained, 0, 0));
}

TEST_CASE("a training checkpoint resumes bit for bit, on one replica or two", "[train]") {
  const int n = GENERATE(1, 2);
  const std::string dir = temp_dir("resume" + std::to_string(n));
  const std::string path = dir + "/checkpoint.safetensors";
  auto schedule = std::make_shared<optim::InverseSqrtSchedule>(0.02, 3);
  auto make = [] {
    Generator other(50);
    return std::make_unique<Mlp>(other, 60);
  };
  const Task t(9, 8);
  auto loss = [&](nn::Module& m, size_t, int64_t b0, int64_t b1) { return t.loss(m, b0, b1); };
  const auto options = TrainerOptions().replicas(n).ema(0.5);

  // Straight through: 6 updates.
  Generator g1(10);
  Mlp straight(g1, 20);
  auto opt1 = adam(straight);
  Trainer t1(straight, *opt1, options, make, schedule);
  for (int i = 0; i < 6; ++i) t1.step({8}, 8, loss);

  // Stopped after 3, saved, loaded into a new model and optimizer of other weights, 3 more.
  Generator g2(10);
  Mlp first(g2, 20);
  auto opt2 = adam(first);
  Trainer t2(first, *opt2, options, make, schedule);
  for (int i = 0; i < 3; ++i) t2.step({8}, 8, loss);
  train::save_training_checkpoint(path, t2, {{"app.note", "mine"}});

  Generator g3(777);
  Mlp resumed(g3, 888);
  auto opt3 = adam(resumed);
  Trainer t3(resumed, *opt3, options, make, schedule);
  const SafeTensors st = load_safetensors(path);
  const auto& meta = train::load_training_checkpoint(st, path, t3);
  REQUIRE(meta.at("app.note") == "mine");
  REQUIRE(t3.steps() == 3);
  for (int i = 0; i < 3; ++i) t3.step({8}, 8, loss);

  REQUIRE_THAT(params_of(*opt3), AllClose(params_of(*opt1), 0, 0));
  REQUIRE_THAT(t3.ema(), AllClose(t1.ema(), 0, 0));
  REQUIRE(opt3->lr() == opt1->lr());
  for (size_t i = 0; i < t1.generators().size(); ++i)
    REQUIRE(t3.generators()[i]->counter() == t1.generators()[i]->counter());

  // The guide's call, on a temporary SafeTensors: the metadata is returned by value. (It was a
  // reference into the temporary, read after it was destroyed: the ASan build of this test
  // reports that if it comes back.)
  Trainer t5(resumed, *opt3, options, make, schedule);
  const auto& meta5 = train::load_training_checkpoint(load_safetensors(path), path, t5);
  REQUIRE(meta5.at("app.note") == "mine");
  REQUIRE(train::load_training_checkpoint(path, t5).at("train.step") == "3");

  // A flipped byte in the tensors' data is found by the checksum.
  std::string bytes = read_file(path);
  bytes[bytes.size() - 3] ^= 0x10;
  write_file_atomic(path, bytes);
  Trainer t4(resumed, *opt3, options, make, schedule);
  REQUIRE_THROWS_WITH(train::load_training_checkpoint(load_safetensors(path), path, t4),
                      Catch::Contains(path) && Catch::Contains("corrupted"));
  fs::remove_all(dir);
}
