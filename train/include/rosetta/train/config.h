// The configuration of a run of train_translator (run.h): data, tokenizer, model, optimizer,
// stopping, run. Every field is a `rosetta train` flag of the same name (--d-model, --max-tokens,
// ...); validation messages name the fields that way.
#pragma once

#include <cstdint>
#include <string>

#include "rosetta/nn/transformer.h"

namespace rosetta::train {

// The defaults are the default German->English translator of scripts/run-default.sh: a
// pre-norm Transformer (d_model 256, 4 heads, FF 1024, 2+2 layers, dropout 0.1, shared and tied
// embeddings over a joint 5,000-piece vocabulary) trained with Adam at 2e-3, inverse-square-root
// schedule, with an EMA of the weights. Chosen on the validation set at the updates 13 minutes
// give on 2 cores (the README's tables): 2+2 layers beat 3+3 (more updates in the budget), 2e-3
// beat 1e-3 and 3e-3, and dropout 0.1 beat 0.2 (and 0.2 without attention/activation dropout).
struct TrainConfig {
  // data
  std::string task = "translate";  // translate | copy
  std::string train, valid;        // TSV files (source<TAB>target)
  std::string src, tgt;            // or line-aligned training files
  std::string valid_src, valid_tgt;
  std::string out;     // run directory
  std::string resume;  // run directory to continue
  // tokenizer
  int vocab_size = 5000;
  bool joint_vocab = true;
  std::string tokenizer = "unigram";  // unigram | bpe
  // Pairs longer (in tokens) are filtered out; 0: as long as --max-len allows (src_limit()).
  int64_t max_src_len = 0;
  int64_t max_tgt_len = 0;
  // more data and training-side noise (low-resource levers)
  int64_t train_repeat = 1;  // each sentence pair appears this many times per epoch
  std::string extra_train;   // TSV of extra pairs (e.g. the dictionary's phrases.tsv)
  int64_t extra_max = 0;     // at most this many extra pairs, a sample fixed by the seed (0: all)
  bool extra_tag = true;     // sources of extra pairs start with a tag token
  double word_dropout = 0;   // source and decoder-input tokens replaced by unk
  int sp_nbest = 0;          // subword regularization: sample among the n-best segmentations (< 2: off)
  double sp_alpha = 0.2;     // its smoothing: P(segmentation) ~ exp(alpha * log-probability)
  // model: a flag for each option of nn::TransformerOptions (--d-model, --heads, ...; --norm
  // pre|post for norm_first) but those the data sets (the vocabularies, pad_id) and
  // layer_norm_eps.
  nn::TransformerOptions model = nn::TransformerOptions()
                                     .d_model(256)
                                     .heads(4)
                                     .ff(1024)
                                     .encoder_layers(2)
                                     .decoder_layers(2)
                                     .dropout(0.1)  // valid BLEU +0.9 over 0.2 at 13 minutes' updates
                                     .share_embeddings(true)  // needs joint_vocab
                                     .tie_output(true)
                                     .max_len(256);
  // objective, optimizer, schedule
  double label_smoothing = 0.1;
  std::string optimizer = "adam";  // adam | adamw | sgd
  double lr = 2e-3;
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-9, weight_decay = 0.0, momentum = 0.9;
  std::string schedule = "inverse-sqrt";  // constant | noam | inverse-sqrt | cosine
  int64_t warmup = 300;
  int64_t max_tokens = 2500;  // token budget per batch
  int64_t accum = 1;          // batches per update
  double clip = 1.0;          // global gradient-norm clip (0 = off)
  // stopping
  int64_t max_steps = 0;   // 0 = no limit
  int64_t max_epochs = 0;  // 0 = no limit
  std::string max_time;    // e.g. 900, 900s, 15m, 1h ("" = no limit)
  int64_t early_stopping = 0;  // validations without improvement before stopping (0 = off)
  std::string best_metric = "loss";  // best.safetensors and early stopping by: loss | bleu | chrf
  // weights
  double ema = 0.999;            // decay of an exponential moving average of the weights (0 = off)
  int64_t keep_checkpoints = 0;  // weight snapshots step-N.safetensors kept (for rosetta average)
  // run
  uint64_t seed = 1;
  int threads = 0;  // 0 = OMP default
  int replicas = 0;  // model replicas training shards of each batch, one per thread (0 = automatic)
  std::string memory_limit;  // e.g. 2G: the memory the run may use ("" = what is available, detected)
  int64_t validate_every = 200, save_every = 200, log_every = 50;
  int64_t valid_bleu_sentences = 300;  // valid sentences translated for BLEU/chrF (0 = none)
  int valid_beam = 1;
  double valid_length_penalty = 1.0;
  std::string on_nonfinite = "skip";  // skip | stop
  bool distributed = false;  // join an MPI job (automatic under mpirun); not saved in config.toml
  // synthetic copy task (--task copy)
  int64_t copy_symbols = 10, copy_min_len = 4, copy_max_len = 10, copy_train_size = 20000,
          copy_valid_size = 200;

  // Throws rosetta::Error naming the first invalid value.
  void validate() const;
  // The length filters in effect: --max-src-len/--max-tgt-len, or else what --max-len allows
  // (a source takes its length in positions, a target its length + 1).
  int64_t src_limit() const { return max_src_len > 0 ? max_src_len : model.max_len(); }
  int64_t tgt_limit() const { return max_tgt_len > 0 ? max_tgt_len : model.max_len() - 1; }
  double max_time_seconds() const;  // 0 = no limit
  // `model` for these vocabularies (shared embeddings only when they are equal).
  nn::TransformerOptions model_options(int64_t src_vocab, int64_t tgt_vocab) const;
};

// The flag of a model option: --d-model for d_model; norm_first is --norm (pre|post).
std::string model_option_flag(const std::string& key);

}  // namespace rosetta::train
