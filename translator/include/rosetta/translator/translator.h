// A trained translator loaded from a run directory, and batched translation of text lines.
//
// A run directory holds: config.toml, src.model and tgt.model (SentencePiece), checkpoint.safetensors
// (model + optimizer + progress), best.safetensors (best validation), train.log, metrics.jsonl;
// with --keep-checkpoints K the model weights of the K newest saves, step-<STEP>.safetensors;
// with --ema DECAY the exponential moving average of the weights, ema.safetensors; after
// rosetta average, averaged.safetensors. All weights-only files share best.safetensors' format.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rosetta/core/safetensors.h"
#include "rosetta/data/corpus.h"
#include "rosetta/data/line_stream.h"
#include "rosetta/data/tokenizer.h"
#include "rosetta/nn/search.h"
#include "rosetta/nn/transformer.h"
#include "rosetta/train/average.h"
#include "rosetta/train/process_group.h"

namespace rosetta::translator {

struct RunPaths {
  explicit RunPaths(std::string dir) : dir(std::move(dir)) {}
  std::string dir;
  std::string config() const { return dir + "/config.toml"; }
  std::string src_model() const { return dir + "/src.model"; }
  std::string tgt_model() const { return dir + "/tgt.model"; }
  std::string checkpoint() const { return dir + "/checkpoint.safetensors"; }
  std::string best() const { return dir + "/best.safetensors"; }
  std::string averaged() const { return dir + "/averaged.safetensors"; }
  std::string ema() const { return dir + "/ema.safetensors"; }
  std::string snapshot(int64_t step) const { return dir + "/step-" + std::to_string(step) + ".safetensors"; }
  std::string log() const { return dir + "/train.log"; }
  std::string metrics() const { return dir + "/metrics.jsonl"; }
  std::string translations() const { return dir + "/translations.jsonl"; }  // validation sentences translated
  std::string report() const { return dir + "/report.html"; }
  std::string eval() const { return dir + "/eval.json"; }  // the last rosetta eval's scores
  // The files `rosetta train` keeps here and no other command writes: config.toml, the
  // tokenizers, the checkpoint and the one before it, best and EMA weights, metrics, validation
  // translations, train.log and its lock. (Not report.html, which `rosetta report` writes too.)
  std::vector<std::string> trainer_files() const;
};

// What a command other than `rosetta train` writes: text (translations, scores, a report, a
// chart) or model weights (an average).
enum class OutputKind { text, weights };
// Throws naming `flag` unless FILE ("-" or "" = standard output) could be written: its
// directory exists and FILE is not a directory; nor one of a run's own files (its weights,
// checkpoints, tokenizers, config.toml and logs, beside config.toml), nor, for text, any
// existing .safetensors or .model file. For failing before the work, not after.
void check_output_path(const std::string& path, const std::string& flag, OutputKind kind = OutputKind::text);

// The weights snapshots in a run directory, (step, path) by increasing step: the files named
// exactly as RunPaths::snapshot names them (step-<STEP>.safetensors, STEP in decimal without
// leading zeros). Other files, such as write_file_atomic's temporaries, are not listed.
std::vector<std::pair<int64_t, std::string>> step_snapshots(const std::string& dir);
// The `last` newest of them (the highest steps, by the number in the name: file times change
// when files are copied), oldest first, each with its step: what `rosetta average --model`
// averages (train::average_weight_files). Fewer where the run holds fewer; throws when it holds
// none.
std::vector<train::AverageInput> newest_snapshots(const std::string& dir, size_t last);

// Text <-> ids. For translation, SentencePiece models; for the copy task, symbols written as
// space-separated integers 0..N-1 (ids 4..N+3).
class Codec {
 public:
  static Codec sentencepiece(data::Tokenizer src, data::Tokenizer tgt);
  static Codec symbols(int64_t count);
  std::vector<int32_t> encode_source(const std::string& text) const;
  std::vector<int32_t> encode_target(const std::string& text) const;
  std::string decode_target(const std::vector<int32_t>& ids) const;
  std::vector<std::string> source_pieces(const std::string& text) const;  // for plots
  std::vector<std::string> target_pieces(const std::vector<int32_t>& ids) const;
  int64_t src_vocab() const;
  int64_t tgt_vocab() const;
  // Every piece by id: SentencePiece's, or <pad> <unk> <s> </s> and the symbols 0..N-1.
  std::vector<std::string> source_vocabulary() const;
  std::vector<std::string> target_vocabulary() const;
  bool is_symbols() const { return symbols_ > 0; }

 private:
  data::Tokenizer src_, tgt_;
  int64_t symbols_ = 0;
};

// The metadata keys of the checksums (train/checkpoint.h bytes_checksum) of src.model and
// tgt.model as trained: a checkpoint holding them only loads with those tokenizers, so that
// tokenizer files swapped in from another run are an error. Like every run.* key (run.task,
// run.copy_symbols), they say which model the weights are: train::average_weight_files averages
// only files that agree on them.
inline constexpr const char* kSrcTokenizerKey = "run.src_model_checksum";
inline constexpr const char* kTgtTokenizerKey = "run.tgt_model_checksum";

// Throws when src.model / tgt.model, given as bytes, are not the tokenizers whose checksums the
// metadata of the model in `path` records (if it does).
void verify_tokenizers(const std::map<std::string, std::string>& metadata, const std::string& path,
                       const RunPaths& run, std::string_view src_bytes, std::string_view tgt_bytes);

// Translates lines with `model` in length-sorted batches of at most `batch_tokens` source
// tokens and kMaxBatchRows sentences; returns the hypotheses in input order. Sources longer
// than the model's maximum length are cut to it and counted in *truncated. A line the codec
// rejects throws "line N: ...". With several threads, batches decode side by side, one per
// thread (longest first, each taken by the next thread free; the operations inside a batch
// then run on their thread alone); the results do not depend on the number of threads.
// `check_batch`, when given, sees every batch's size (rows, source length) and how many batches
// decode at once before any is decoded, and may throw to refuse the job (apps check memory).
// `batch_done`, when given, is called after each batch with its number of sentences (from the
// thread that decoded it, one call at a time): for a progress display.
inline constexpr int64_t kMaxBatchRows = 256;
using BatchCheck = std::function<void(int64_t rows, int64_t src_len, int decoders)>;
using BatchDone = std::function<void(int64_t sentences)>;
std::vector<std::vector<nn::Hypothesis>> translate_lines(const nn::Transformer& model,
                                                         const Codec& codec,
                                                         const std::vector<std::string>& lines,
                                                         const nn::SearchOptions& options,
                                                         int64_t batch_tokens,
                                                         int64_t* truncated = nullptr,
                                                         const BatchCheck& check_batch = {},
                                                         const BatchDone& batch_done = {});

// How translate_stream gathers the lines it translates together.
struct StreamOptions {
  // true: a chunk ends where the next line has not arrived yet, so that a line typed at a
  // terminal, or written to a pipe, is translated as soon as it is read. false: chunks are full.
  ROSETTA_ARG(bool, interactive) = false;
  // At most this many lines are translated together (sorted by length into batches as
  // translate_lines sorts them); input of at most this many lines gives translate_lines' batches.
  ROSETTA_ARG(int64_t, chunk_lines) = 4096;
};

// What translate_stream calls: `emit` with each line's index (from 0), text and hypotheses, in
// input order, as soon as its chunk is decoded; check_batch and batch_done as translate_lines.
struct StreamCallbacks {
  std::function<void(int64_t index, const std::string& source, const std::vector<nn::Hypothesis>& hyps)> emit;
  BatchCheck check_batch;
  BatchDone batch_done;
};

struct StreamCounts {
  int64_t lines = 0;      // read and translated
  int64_t truncated = 0;  // sources cut to the model's maximum length
};

// Translates the lines of `in` chunk by chunk (StreamOptions) until its end, each chunk as
// translate_lines translates its lines; the memory held is one chunk's, whatever the input's
// length. A line the codec rejects throws "<in's name>: line N: ..."; a line `in` cannot read
// throws as `in` does. The weights are packed once for the whole stream on this thread.
StreamCounts translate_stream(const nn::Transformer& model, const Codec& codec, data::LineStream& in,
                              const nn::SearchOptions& options, int64_t batch_tokens, const StreamOptions& stream,
                              const StreamCallbacks& callbacks);

// The lines `rosetta translate` writes for source `index` (from 0): its best translation, or
// with n_best > 0 its n best as "index ||| translation ||| score".
std::string hypothesis_lines(const Codec& codec, int n_best, int64_t index, const std::vector<nn::Hypothesis>& hyps);

// The beam `rosetta translate` and `eval` decode with unless told otherwise (chosen on the
// validation set: docs/results/recipes.md#the-levers-one-by-one-2026-11-23-to-2026-11-29-the-machine-in-each-row),
// and with which a run's last choice of its best weights translates the validation set (run.h).
inline constexpr int kDefaultBeam = 4;

// The scores of a translation model on a validation set.
struct TranslationScores {
  double loss = std::numeric_limits<double>::quiet_NaN();  // per target token
  double bleu = std::numeric_limits<double>::quiet_NaN(), chrf = bleu, exact = bleu;  // root only
  std::vector<std::string> src, ref, hyp;  // the root's first `keep` sentences
};

// Validation sharded over the ranks of `group` (call it on every rank): rank r scores every
// size-th batch of `pairs` (token-budget batches of `max_tokens`, in order) and translates every
// size-th of the first `translate_count` sentences of `text` with `search`, from the r-th. The
// loss is summed over the ranks, so every rank knows it; the translations are gathered on the
// root, which alone computes BLEU, chrF and the share of exact matches (the others get NaN)
// and keeps its first `keep` sentences. The model is in eval mode meanwhile, then in training mode.
TranslationScores validate_translation(nn::Transformer& model, const Codec& codec,
                                       const std::vector<data::TokenPair>& pairs,
                                       const std::vector<data::SentencePair>& text, int64_t max_tokens,
                                       size_t translate_count, const nn::SearchOptions& search, size_t keep,
                                       const train::ProcessGroup& group);

struct Translator {
  std::unique_ptr<nn::Transformer> model;
  Codec codec;
  std::map<std::string, std::string> metadata;
  std::string weights_path;

  // Loads a model of run DIR with the codec the run used; `which` picks its weights:
  //   "best"      DIR/best.safetensors, or DIR/checkpoint.safetensors when there is no best yet
  //   "last"      DIR/checkpoint.safetensors
  //   "averaged"  DIR/averaged.safetensors (written by rosetta average)
  //   "ema"       DIR/ema.safetensors (written by rosetta train --ema)
  // Throws with a clear message when DIR holds no such file.
  static Translator load(const std::string& dir, const std::string& which = "best");
  // The file load() reads; throws as load() does.
  static std::string weights_file(const std::string& dir, const std::string& which = "best");

  std::vector<std::vector<nn::Hypothesis>> translate(const std::vector<std::string>& lines,
                                                     const nn::SearchOptions& options,
                                                     int64_t batch_tokens,
                                                     int64_t* truncated = nullptr,
                                                     const BatchCheck& check_batch = {},
                                                     const BatchDone& batch_done = {}) const {
    return translate_lines(*model, codec, lines, options, batch_tokens, truncated, check_batch, batch_done);
  }
};

// Cross-attention of the last decoder layer, averaged over heads, for one source and its
// translation: [target tokens + 1 (the step that predicts eos), source tokens].
Tensor attention_map(const nn::Transformer& model, const std::vector<int32_t>& src,
                     const std::vector<int32_t>& tgt, int32_t bos);

}  // namespace rosetta::translator
