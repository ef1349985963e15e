#include "rosetta/translator/synthetic.h"

#include "rosetta/autograd/functions.h"
#include "rosetta/core/random.h"

namespace rosetta::translator {

struct SyntheticTraining::State {
  Generator g{0};
  nn::Transformer model;
  optim::Adam opt;
  train::ThreadPlan plan;
  train::Trainer trainer;
  SyntheticBatch batch;
  Tensor src, tgt_in, tgt_out;

  State(const nn::TransformerOptions& options, const optim::AdamOptions& adam, const SyntheticBatch& b, int replicas)
      : model(options, g),
        opt(model.parameters(), adam),
        plan(train::thread_plan_for_flag(replicas, b.rows * b.tgt_len, options.d_model())),
        trainer(model, opt, train::TrainerOptions().replicas(plan.replicas).replica_threads(plan.inner_threads).clip(0),
                [options] {
                  Generator init(0);
                  return std::make_unique<nn::Transformer>(options, init);
                }),
        batch(b) {
    const int32_t vocab = int32_t(options.src_vocab()), tgt_vocab = int32_t(options.tgt_vocab());
    src = g.randint({b.rows, b.src_len}, 1, vocab);
    const Tensor tgt = g.randint({b.rows, b.tgt_len + 1}, 1, tgt_vocab);
    tgt_in = tgt.narrow(1, 0, b.tgt_len).contiguous();
    tgt_out = tgt.narrow(1, 1, b.tgt_len).contiguous();
  }
};

SyntheticTraining::SyntheticTraining(const nn::TransformerOptions& options, const optim::AdamOptions& adam,
                                     const SyntheticBatch& batch, int replicas)
    : s_(std::make_unique<State>(options, adam, batch, replicas)) {
  s_->model.train();
}

SyntheticTraining::~SyntheticTraining() = default;

train::StepResult SyntheticTraining::step() {
  State& s = *s_;
  const int64_t len = s.batch.tgt_len;
  return s.trainer.step({s.batch.rows}, s.batch.rows * len, [&s, len](nn::Module& m, size_t, int64_t b0, int64_t b1) {
    const Var loss = static_cast<nn::Transformer&>(m).loss(s.src.narrow(0, b0, b1 - b0), s.tgt_in.narrow(0, b0, b1 - b0),
                                                            s.tgt_out.narrow(0, b0, b1 - b0), 0.1, 0);
    return train::ShardLoss{loss, (b1 - b0) * len};
  });
}

const nn::Transformer& SyntheticTraining::model() const { return s_->model; }
const train::ThreadPlan& SyntheticTraining::plan() const { return s_->plan; }

}  // namespace rosetta::translator
