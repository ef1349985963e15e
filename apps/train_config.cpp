#include "train_config.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"

namespace rosetta::cli {

namespace {
using train::model_option_flag;

// Options the data determines (the vocabularies and the padding id come from the tokenizers),
// or that have no flag.
bool set_without_flag(const std::string& key) {
  return key == "src_vocab" || key == "tgt_vocab" || key == "pad_id" || key == "layer_norm_eps";
}

template <class T>
CLI::Option* add_model_flag(CLI::App& cmd, T& value, const nn::OptionField& f) {
  CLI::Option* opt = cmd.add_option(model_option_flag(f.key), value, f.description);
  if (!f.choices.empty()) opt->check(CLI::IsMember(f.choices));
  return opt;
}

CLI::Option* add_model_flag(CLI::App& cmd, bool& value, const nn::OptionField& f) {
  if (std::string(f.key) != "norm_first") return cmd.add_option(model_option_flag(f.key), value, f.description);
  return cmd
      .add_option_function<std::string>(
          "--norm", [&value](const std::string& v) { value = v == "pre"; },
          "pre (pre-norm) or post (post-norm, as the paper)")
      ->check(CLI::IsMember({"pre", "post"}))
      ->default_str(value ? "pre" : "post");
}

// The flags of nn::TransformerOptions, from its list of options.
void add_model_options(CLI::App& cmd, nn::TransformerOptions& o) {
  nn::TransformerOptions::for_each_field(o, [&](auto& value, const nn::OptionField& f) {
    if (!set_without_flag(f.key)) add_model_flag(cmd, value, f)->group("Model");
  });
}
}  // namespace

void add_train_options(CLI::App& cmd, TrainConfig& c) {
  const char* data = "Data";
  cmd.add_option("--task", c.task, "translate, or copy (synthetic copy task, no files)")
      ->check(CLI::IsMember({"translate", "copy"}))->group(data);
  cmd.add_option("--train", c.train, "training corpus, TSV: source<TAB>target")->group(data);
  cmd.add_option("--valid", c.valid, "validation corpus, TSV")->group(data);
  cmd.add_option("--src", c.src, "training sources, one per line (with --tgt)")->group(data);
  cmd.add_option("--tgt", c.tgt, "training targets, line-aligned with --src")->group(data);
  cmd.add_option("--valid-src", c.valid_src, "validation sources (with --valid-tgt)")->group(data);
  cmd.add_option("--valid-tgt", c.valid_tgt, "validation targets")->group(data);
  cmd.add_option("--out", c.out, "run directory to create")->group(data);
  cmd.add_option("--resume", c.resume, "run directory to continue from its last checkpoint")
      ->group(data)->configurable(false);
  cmd.add_option("--max-src-len", c.max_src_len, "drop pairs whose source has more tokens (0: as many as --max-len allows)")->group(data);
  cmd.add_option("--max-tgt-len", c.max_tgt_len, "drop pairs whose target has more tokens (0: as many as --max-len allows)")->group(data);

  const char* noise = "More data and noise";
  cmd.add_option("--train-repeat", c.train_repeat, "each training pair appears this many times per epoch")
      ->group(noise);
  cmd.add_option("--extra-train", c.extra_train,
                 "extra training pairs, TSV (e.g. phrases.tsv of prepare-corpus --phrases)")->group(noise);
  cmd.add_option("--extra-max", c.extra_max, "use at most this many extra pairs, a sample fixed by --seed (0: all)")
      ->group(noise);
  cmd.add_option("--extra-tag", c.extra_tag, "start the sources of extra pairs with a tag token")->group(noise);
  cmd.add_option("--word-dropout", c.word_dropout,
                 "replace source and decoder-input tokens by <unk> with this probability")->group(noise);
  cmd.add_option("--sp-nbest", c.sp_nbest,
                 "subword regularization: sample one of the N best segmentations per epoch (< 2: off)")
      ->group(noise);
  cmd.add_option("--sp-alpha", c.sp_alpha, "subword regularization: P(segmentation) ~ exp(alpha * log-prob)")
      ->group(noise);

  const char* tok = "Tokenizer";
  cmd.add_option("--vocab-size", c.vocab_size, "SentencePiece vocabulary size")->group(tok);
  cmd.add_option("--joint-vocab", c.joint_vocab, "one vocabulary for source and target")->group(tok);
  cmd.add_option("--tokenizer", c.tokenizer, "unigram or bpe")
      ->check(CLI::IsMember({"unigram", "bpe"}))->group(tok);

  add_model_options(cmd, c.model);

  const char* opt = "Optimisation";
  cmd.add_option("--label-smoothing", c.label_smoothing, "label smoothing")->group(opt);
  cmd.add_option("--optimizer", c.optimizer, "adam, adamw or sgd")
      ->check(CLI::IsMember({"adam", "adamw", "sgd"}))->group(opt);
  cmd.add_option("--lr", c.lr, "peak learning rate (the factor, for noam)")->group(opt);
  cmd.add_option("--beta1", c.beta1, "Adam beta1")->group(opt);
  cmd.add_option("--beta2", c.beta2, "Adam beta2")->group(opt);
  cmd.add_option("--eps", c.eps, "Adam epsilon")->group(opt);
  cmd.add_option("--weight-decay", c.weight_decay, "weight decay")->group(opt);
  cmd.add_option("--momentum", c.momentum, "SGD momentum")->group(opt);
  cmd.add_option("--schedule", c.schedule, "constant, noam, inverse-sqrt or cosine")
      ->check(CLI::IsMember({"constant", "noam", "inverse-sqrt", "cosine"}))->group(opt);
  cmd.add_option("--warmup", c.warmup, "warmup steps")->group(opt);
  cmd.add_option("--max-tokens", c.max_tokens, "token budget per batch (B x padded length)")->group(opt);
  cmd.add_option("--accum", c.accum, "batches accumulated per update")->group(opt);
  cmd.add_option("--clip", c.clip, "clip gradients to this global norm (0: off)")->group(opt);

  const char* stop = "Stopping";
  cmd.add_option("--max-steps", c.max_steps, "stop after this many updates (0: no limit)")->group(stop);
  cmd.add_option("--max-epochs", c.max_epochs, "stop after this many epochs (0: no limit)")->group(stop);
  cmd.add_option("--max-time", c.max_time, "stop after this long: seconds, or 90s, 15m, 2h")->group(stop);
  cmd.add_option("--early-stopping", c.early_stopping,
                 "stop after this many validations without improvement (0: off)")->group(stop);
  cmd.add_option("--best-metric", c.best_metric,
                 "keep best.safetensors and stop early by validation loss, BLEU or chrF")
      ->check(CLI::IsMember({"loss", "bleu", "chrf"}))->group(stop);
  cmd.add_option("--ema", c.ema,
                 "keep an exponential moving average of the weights with this decay (0: off); validation, "
                 "best.safetensors and ema.safetensors use it")->group(stop);
  cmd.add_option("--keep-checkpoints", c.keep_checkpoints,
                 "keep the weights of the last N checkpoints as step-STEP.safetensors (for rosetta average)")
      ->group(stop);

  const char* run = "Run";
  cmd.add_option("--seed", c.seed, "random seed (weights, dropout, data order)")->group(run);
  cmd.add_option("--threads", c.threads, "threads (0: OMP_NUM_THREADS or all cores)")->group(run);
  cmd.add_option("--replicas", c.replicas,
                 "model replicas, one per thread, each training a shard of every batch (0: one "
                 "per thread for models whose GEMMs are too small for BLAS's threads, else 1)")
      ->group(run);
  cmd.add_option("--memory-limit", c.memory_limit,
                 "memory the run may use, e.g. 2G or 512M (default: what is available, from /proc/meminfo "
                 "and the cgroup's limit); a larger plan is refused before it starts")
      ->group(run);
  cmd.add_option("--validate-every", c.validate_every, "validate every N updates (0: only at the end)")->group(run);
  cmd.add_option("--save-every", c.save_every, "checkpoint every N updates (0: only at the end)")->group(run);
  cmd.add_option("--log-every", c.log_every, "log training metrics every N updates")->group(run);
  cmd.add_option("--valid-bleu-sentences", c.valid_bleu_sentences,
                 "validation sentences translated for BLEU/chrF (0: none)")->group(run);
  cmd.add_option("--valid-beam", c.valid_beam, "beam size for validation translations")->group(run);
  cmd.add_option("--valid-length-penalty", c.valid_length_penalty,
                 "length penalty for validation translations")->group(run);
  cmd.add_option("--on-nonfinite", c.on_nonfinite,
                 "a non-finite loss or gradient: skip the update (100 in a row stop the run), or stop")
      ->check(CLI::IsMember({"skip", "stop"}))->group(run);
  cmd.add_flag("--distributed", c.distributed,
               "data-parallel over MPI: mpirun -np N rosetta train ... (automatic under mpirun)")
      ->group(run)->configurable(false);

  const char* copy = "Copy task";
  cmd.add_option("--copy-symbols", c.copy_symbols, "distinct symbols")->group(copy);
  cmd.add_option("--copy-min-len", c.copy_min_len, "shortest sequence")->group(copy);
  cmd.add_option("--copy-max-len", c.copy_max_len, "longest sequence")->group(copy);
  cmd.add_option("--copy-train-size", c.copy_train_size, "training sequences")->group(copy);
  cmd.add_option("--copy-valid-size", c.copy_valid_size, "held-out sequences")->group(copy);
}

void apply_config_toml(CLI::App& cmd, const std::string& toml, const std::string& name) {
  std::vector<CLI::ConfigItem> items;
  try {
    std::istringstream in(toml);
    items = CLI::ConfigTOML().from_config(in);
  } catch (const CLI::Error& e) {
    ROSETTA_FAIL(name, ": ", e.what());
  }
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // table markers
    CLI::Option* opt = item.parents.empty() ? cmd.get_option_no_throw("--" + item.name) : nullptr;
    ROSETTA_CHECK(opt != nullptr && opt->get_configurable(), name, ": unknown option '", item.fullname(), "'");
    if (opt->count() > 0) continue;  // the command line wins
    try {
      for (const std::string& v : item.inputs) opt->add_result(v);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      ROSETTA_FAIL(name, ": ", item.name, ": ", e.what());
    }
  }
}

void apply_config_file(CLI::App& cmd, const std::string& path) {
  ROSETTA_CHECK(std::filesystem::is_regular_file(path), "--config ", path, " is not a readable file");
  apply_config_toml(cmd, read_file(path), path);
}

}  // namespace rosetta::cli
