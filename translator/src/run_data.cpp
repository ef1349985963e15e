#include "rosetta/translator/run_data.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "rosetta/core/io.h"
#include "rosetta/core/random.h"
#include "rosetta/data/ding.h"
#include "rosetta/train/resources.h"

namespace rosetta::translator {

namespace {
using rosetta::detail::concat;

data::Corpus read_corpus(const std::string& tsv, const std::string& src, const std::string& tgt) {
  return tsv.empty() ? data::read_aligned(src, tgt) : data::read_tsv(tsv);
}

// The extra training pairs of --extra-train (e.g. the dictionary's phrase pairs): at most
// --extra-max of them, a sample fixed by --seed, in file order. Pairs whose source or target is
// the text of a validation source or target are dropped, so that nothing held out is trained on.
std::vector<data::SentencePair> read_extra(const TrainConfig& c, const data::Corpus& valid, RunData& d) {
  if (c.extra_train.empty()) return {};
  data::Corpus extra = data::read_tsv(c.extra_train);
  const size_t read = extra.pairs.size();
  data::Split held_out;
  held_out.valid = valid.pairs;
  const size_t overlapping = data::remove_held_out_text(held_out, extra.pairs);
  std::vector<size_t> idx(extra.pairs.size());
  std::iota(idx.begin(), idx.end(), size_t(0));
  if (c.extra_max > 0 && idx.size() > size_t(c.extra_max)) {
    Generator g(c.seed ^ 0xE7E7A11ull);  // a partial Fisher-Yates shuffle picks the sample
    for (size_t i = 0; i < size_t(c.extra_max); ++i) std::swap(idx[i], idx[i + g.next_below(idx.size() - i)]);
    idx.resize(size_t(c.extra_max));
    std::sort(idx.begin(), idx.end());
  }
  std::vector<data::SentencePair> out;
  for (size_t i : idx) out.push_back(std::move(extra.pairs[i]));
  d.notes.push_back(concat("extra training pairs: ", out.size(), " of ", read, " read from ", c.extra_train,
                                overlapping ? concat(" (", overlapping, " dropped: text of a validation pair)") : "",
                                c.extra_tag ? ", sources tagged" : ""));
  return out;
}

// src.model and tgt.model trained on the training corpus: one joint model (--joint-vocab) or one
// per side.
void train_tokenizers(const TrainConfig& c, const data::Corpus& train, RunData& d) {
  const auto opts = data::TokenizerOptions()
                        .vocab_size(c.vocab_size)
                        .model(c.tokenizer)
                        .seed(uint32_t(c.seed))
                        .num_threads(1);
  std::vector<std::string> src_text, tgt_text;
  for (const auto& p : train.pairs) {
    src_text.push_back(p.src);
    tgt_text.push_back(p.tgt);
  }
  if (c.joint_vocab) {
    std::vector<std::string> all = src_text;
    all.insert(all.end(), tgt_text.begin(), tgt_text.end());
    d.src_model = d.tgt_model = data::Tokenizer::train(all, opts).serialized();
  } else {
    d.src_model = data::Tokenizer::train(src_text, opts).serialized();
    d.tgt_model = data::Tokenizer::train(tgt_text, opts).serialized();
  }
}

// Subword regularization (--sp-nbest): the n-best segmentations of every training pair kept by
// the length filter (`text[kept[i]]`, its source after `prefix`, if any), sampled per epoch.
void add_sampler(const TrainConfig& c, const std::vector<data::SentencePair>& text,
                 const std::vector<std::vector<int32_t>>& prefix, const std::vector<size_t>& kept,
                 const data::Tokenizer& src_tok, const data::Tokenizer& tgt_tok, RunData& d) {
  std::vector<data::SentencePair> kept_text;
  std::vector<std::vector<int32_t>> kept_prefix;
  for (size_t i : kept) {
    kept_text.push_back(text[i]);
    if (!prefix.empty()) kept_prefix.push_back(prefix[i]);
  }
  data::SegmentationSampler::Options o;
  o.nbest = c.sp_nbest;
  o.alpha = c.sp_alpha;
  o.max_src = size_t(c.src_limit());
  o.max_tgt = size_t(c.tgt_limit());
  d.sampler = std::make_shared<data::SegmentationSampler>(kept_text, src_tok, tgt_tok, o, kept_prefix);
  d.notes.push_back(concat("subword regularization: one of the ", c.sp_nbest, " best segmentations per epoch, alpha ",
                           c.sp_alpha));
}

}  // namespace

void make_copy_task(const TrainConfig& c, RunData& d) {
  d.codec = Codec::symbols(c.copy_symbols);
  Generator gen(c.seed * 1000003 + 17);
  auto sample = [&] {
    const int64_t len = c.copy_min_len + int64_t(gen.next_below(uint64_t(c.copy_max_len - c.copy_min_len + 1)));
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < len; ++i) ids.push_back(int32_t(4 + gen.next_below(uint64_t(c.copy_symbols))));
    return ids;
  };
  std::set<std::vector<int32_t>> seen;
  for (int64_t i = 0; i < c.copy_train_size; ++i) {
    auto ids = sample();
    seen.insert(ids);
    d.train.push_back({ids, ids});
  }
  for (int64_t tries = 0; int64_t(d.valid.size()) < c.copy_valid_size && tries < 100 * c.copy_valid_size; ++tries) {
    auto ids = sample();
    if (!seen.insert(ids).second) continue;
    d.valid.push_back({ids, ids});
    const std::string text = d.codec.decode_target(ids);
    d.valid_text.push_back({text, text});
  }
}

void load_text_data(const TrainConfig& c, const RunPaths& run, bool resuming, const train::ProcessGroup& group,
                    RunData& d) {
  const data::Corpus train = read_corpus(c.train, c.src, c.tgt);
  d.notes.push_back(concat("training corpus: ", train.read, " pairs read, ", train.skipped_empty,
                                " skipped as empty"));
  data::Corpus valid;
  if (!c.valid.empty() || !c.valid_src.empty()) {
    valid = read_corpus(c.valid, c.valid_src, c.valid_tgt);
    d.notes.push_back(concat("validation corpus: ", valid.pairs.size(), " pairs"));
  }
  const std::vector<data::SentencePair> extra = read_extra(c, valid, d);  // before the slow tokenizer
  if (group.is_root()) {
    if (resuming) {
      d.src_model = read_regular_file(run.src_model());
      d.tgt_model = read_regular_file(run.tgt_model());
    } else {
      train_tokenizers(c, train, d);
    }
  }
  group.broadcast(d.src_model);
  group.broadcast(d.tgt_model);
  const auto src_tok = data::Tokenizer::from_serialized(d.src_model, run.src_model());
  const auto tgt_tok = data::Tokenizer::from_serialized(d.tgt_model, run.tgt_model());
  if (!resuming)
    d.notes.push_back(concat("tokenizer: ", c.joint_vocab ? "joint" : "separate", " vocabulary, ", src_tok.vocab_size(),
                                  " source and ", tgt_tok.vocab_size(), " target pieces"));
  d.codec = Codec::sentencepiece(src_tok, tgt_tok);

  // The training pairs as text: the sentence pairs --train-repeat times, then the extra pairs.
  if (c.train_repeat > 1) {  // refused before the copies are made, not by the kernel's OOM killer
    double bytes = 0;
    for (const data::SentencePair& p : train.pairs) bytes += double(p.src.size() + p.tgt.size() + 2 * sizeof(std::string));
    const double copies = bytes * double(c.train_repeat);
    // Tokenized: ~1 piece per 3 bytes of text, 4 bytes each, in two vectors per pair.
    const double ids = copies / 3 * 4 + double(train.pairs.size()) * double(c.train_repeat) * 2 * sizeof(std::vector<int32_t>);
    train::MemoryBudget(c.memory_limit)
        .check({"copying the training pairs", {{"text", copies}, {"token ids", ids}},
                concat("--train-repeat ", c.train_repeat, " copies the ", train.pairs.size(), " pairs that many times")});
  }
  std::vector<data::SentencePair> text;
  for (int64_t r = 0; r < c.train_repeat; ++r) text.insert(text.end(), train.pairs.begin(), train.pairs.end());
  const size_t n_sentences = text.size();
  text.insert(text.end(), extra.begin(), extra.end());
  // The source prefix of each pair: the tag on extra pairs, nothing on the others.
  std::vector<std::vector<int32_t>> prefix;
  if (c.extra_tag && !extra.empty()) {
    prefix.assign(text.size(), {});
    for (size_t i = n_sentences; i < text.size(); ++i) prefix[i] = {kExtraTag};
  }
  d.train = data::tokenize(text, src_tok, tgt_tok);
  for (size_t i = 0; i < prefix.size(); ++i) d.train[i].src.insert(d.train[i].src.begin(), prefix[i].begin(), prefix[i].end());
  std::vector<size_t> kept;
  const size_t dropped = data::filter_by_tokens(d.train, size_t(c.src_limit()), size_t(c.tgt_limit()), &kept);
  if (dropped)
    d.notes.push_back(concat("dropped ", dropped, " training pairs longer than ", c.src_limit(), "/",
                              c.tgt_limit(), " tokens"));
  ROSETTA_CHECK(!d.train.empty(), "no training pairs left after filtering by length (--max-src-len ",
                c.src_limit(), ", --max-tgt-len ", c.tgt_limit(), ")");
  if (c.sp_nbest > 1) add_sampler(c, text, prefix, kept, src_tok, tgt_tok, d);
  kept.clear();
  d.valid = data::tokenize(valid.pairs, src_tok, tgt_tok);
  data::filter_by_tokens(d.valid, size_t(c.model.max_len() - 2), size_t(c.model.max_len() - 2), &kept);
  for (size_t i : kept) d.valid_text.push_back(valid.pairs[i]);
}

void write_tokenizers(const RunPaths& run, const RunData& d) {
  if (d.src_model.empty()) return;
  write_file_atomic(run.src_model(), d.src_model);
  write_file_atomic(run.tgt_model(), d.tgt_model);
}

}  // namespace rosetta::translator
