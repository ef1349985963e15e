#include "rosetta/translator/translator.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "rosetta/core/io.h"
#include "rosetta/core/ops.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/autograd/functions.h"
#include "rosetta/data/batch.h"
#include "rosetta/data/metrics.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/run_lock.h"

namespace rosetta::translator {

namespace fs = std::filesystem;

using train::bytes_checksum;
using train::load_model_weights;

// ------------------------------------------------------------------ run directory

std::vector<std::string> RunPaths::trainer_files() const {
  return {config(), src_model(), tgt_model(), checkpoint(), train::previous_checkpoint(checkpoint()), best(), ema(),
          metrics(), translations(), log(), train::RunLock::path(dir)};
}

std::vector<std::pair<int64_t, std::string>> step_snapshots(const std::string& dir) {
  constexpr std::string_view prefix = "step-", suffix = ".safetensors";
  std::vector<std::pair<int64_t, std::string>> out;
  const RunPaths run(dir);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
      continue;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const int64_t step = std::stoll(digits);
    // Only the canonical spelling: step-05 would otherwise be a second file for step 5.
    if (run.snapshot(step) == run.dir + "/" + name) out.emplace_back(step, run.snapshot(step));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<train::AverageInput> newest_snapshots(const std::string& dir, size_t last) {
  const auto snapshots = step_snapshots(dir);
  ROSETTA_CHECK(!snapshots.empty(), dir, " holds no step-*.safetensors snapshots to average: train with ",
                "rosetta train --keep-checkpoints K to keep the K newest");
  std::vector<train::AverageInput> out;
  for (size_t i = snapshots.size() - std::min(last, snapshots.size()); i < snapshots.size(); ++i)
    out.push_back({snapshots[i].second, std::to_string(snapshots[i].first)});
  return out;
}

// ------------------------------------------------------------------ codec

Codec Codec::sentencepiece(data::Tokenizer src, data::Tokenizer tgt) {
  Codec c;
  c.src_ = std::move(src);
  c.tgt_ = std::move(tgt);
  return c;
}

Codec Codec::symbols(int64_t count) {
  Codec c;
  c.symbols_ = count;
  return c;
}

namespace {
std::vector<int32_t> encode_symbols(const std::string& text, int64_t count) {
  std::istringstream in(text);
  std::vector<int32_t> ids;
  std::string word;
  while (in >> word) {
    int64_t v = -1;
    try {
      size_t used = 0;
      v = std::stoll(word, &used);
      if (used != word.size()) v = -1;
    } catch (const std::exception&) {
    }
    ROSETTA_CHECK(v >= 0 && v < count, "copy task: '", word, "' is not a symbol 0..", count - 1);
    ids.push_back(int32_t(v + 4));
  }
  return ids;
}
}  // namespace

std::vector<int32_t> Codec::encode_source(const std::string& text) const {
  return symbols_ ? encode_symbols(text, symbols_) : src_.encode(text);
}

std::vector<int32_t> Codec::encode_target(const std::string& text) const {
  return symbols_ ? encode_symbols(text, symbols_) : tgt_.encode(text);
}

std::string Codec::decode_target(const std::vector<int32_t>& ids) const {
  if (!symbols_) return tgt_.decode(ids);
  std::string out;
  for (int32_t id : ids) {
    if (id < 4) continue;
    if (!out.empty()) out += ' ';
    out += std::to_string(id - 4);
  }
  return out;
}

std::vector<std::string> Codec::source_pieces(const std::string& text) const {
  if (!symbols_) return src_.encode_pieces(text);
  std::vector<std::string> out;
  for (int32_t id : encode_symbols(text, symbols_)) out.push_back(std::to_string(id - 4));
  return out;
}

std::vector<std::string> Codec::target_pieces(const std::vector<int32_t>& ids) const {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(symbols_ ? std::to_string(id - 4) : tgt_.id_to_piece(id));
  return out;
}

namespace {
std::vector<std::string> vocabulary(const data::Tokenizer& tok, int64_t symbols) {
  std::vector<std::string> out;
  if (symbols > 0) {
    out = {"<pad>", "<unk>", "<s>", "</s>"};
    for (int64_t s = 0; s < symbols; ++s) out.push_back(std::to_string(s));
    return out;
  }
  for (int32_t id = 0; id < tok.vocab_size(); ++id) out.push_back(tok.id_to_piece(id));
  return out;
}
}  // namespace

std::vector<std::string> Codec::source_vocabulary() const { return vocabulary(src_, symbols_); }
std::vector<std::string> Codec::target_vocabulary() const { return vocabulary(tgt_, symbols_); }

int64_t Codec::src_vocab() const { return symbols_ ? symbols_ + 4 : src_.vocab_size(); }
int64_t Codec::tgt_vocab() const { return symbols_ ? symbols_ + 4 : tgt_.vocab_size(); }

// ------------------------------------------------------------------ loading

void verify_tokenizers(const std::map<std::string, std::string>& metadata, const std::string& path,
                       const RunPaths& run, std::string_view src_bytes, std::string_view tgt_bytes) {
  for (const auto& [key, file, bytes] : {std::tuple{kSrcTokenizerKey, run.src_model(), src_bytes},
                                         std::tuple{kTgtTokenizerKey, run.tgt_model(), tgt_bytes}}) {
    const auto expected = metadata.find(key);
    if (expected != metadata.end())
      ROSETTA_CHECK(bytes_checksum(bytes) == expected->second, file, " is not the tokenizer the model in ", path,
                    " was trained with (checksum differs)");
  }
}

std::string Translator::weights_file(const std::string& dir, const std::string& which) {
  ROSETTA_CHECK(fs::is_directory(dir), "--model ", dir, " is not a directory (give a run directory ",
                "made by rosetta train)");
  const RunPaths run(dir);
  std::string path;
  if (which == "best" || which == "last") {
    path = which == "last" || !fs::exists(run.best()) ? run.checkpoint() : run.best();
    ROSETTA_CHECK(fs::exists(path), dir, " holds no model (no best.safetensors or ",
                  "checkpoint.safetensors): train one with rosetta train --out ", dir);
  } else if (which == "averaged") {
    path = run.averaged();
    ROSETTA_CHECK(fs::exists(path), dir, " holds no averaged.safetensors; run rosetta average --model ", dir);
  } else if (which == "ema") {
    path = run.ema();
    ROSETTA_CHECK(fs::exists(path), dir, " holds no ema.safetensors; train with rosetta train --ema DECAY ",
                  "to keep an exponential moving average of the weights");
  } else {
    ROSETTA_FAIL("unknown checkpoint '", which, "' (best, last, averaged or ema)");
  }
  return path;
}

Translator Translator::load(const std::string& dir, const std::string& which) {
  const std::string path = weights_file(dir, which);
  const RunPaths run(dir);
  Translator t;
  t.weights_path = path;
  const SafeTensors st = load_safetensors(path);  // checked before anything is built
  t.metadata = st.metadata;
  const auto task = t.metadata.find("run.task");
  ROSETTA_CHECK(task != t.metadata.end(), path, ": not a rosetta translator checkpoint (no run.task)");
  std::string src_bytes, tgt_bytes;  // the tokenizers' files
  if (task->second == "copy") {
    t.codec = Codec::symbols(metadata_int(t.metadata, "run.copy_symbols", path));
  } else {
    src_bytes = read_regular_file(run.src_model());
    tgt_bytes = read_regular_file(run.tgt_model());
    t.codec = Codec::sentencepiece(data::Tokenizer::from_serialized(src_bytes, run.src_model()),
                                   data::Tokenizer::from_serialized(tgt_bytes, run.tgt_model()));
  }
  nn::TransformerOptions o;
  try {
    o = nn::TransformerOptions::from_metadata(t.metadata);
  } catch (const Error& e) {
    ROSETTA_FAIL(path, ": ", e.what());
  }
  ROSETTA_CHECK(o.src_vocab() == t.codec.src_vocab() && o.tgt_vocab() == t.codec.tgt_vocab(), path,
                ": the model's vocabularies (", o.src_vocab(), ", ", o.tgt_vocab(),
                ") do not match the tokenizers in ", dir, " (", t.codec.src_vocab(), ", ",
                t.codec.tgt_vocab(), ")");
  // Tokenizers of the same sizes may still be others than those the model was trained with.
  if (task->second != "copy") verify_tokenizers(t.metadata, path, run, src_bytes, tgt_bytes);
  Generator g(0);
  t.model = std::make_unique<nn::Transformer>(o, g);
  load_model_weights(*t.model, st, path);
  t.model->eval();
  return t;
}

Tensor attention_map(const nn::Transformer& model, const std::vector<int32_t>& src,
                     const std::vector<int32_t>& tgt, int32_t bos) {
  NoGradGuard ng;
  std::vector<int32_t> tgt_in{bos};
  tgt_in.insert(tgt_in.end(), tgt.begin(), tgt.end());
  const Tensor s = Tensor::from_vector(src, {1, int64_t(src.size())});
  const Tensor t = Tensor::from_vector(tgt_in, {1, int64_t(tgt_in.size())});
  const Var memory = model.encode(s);
  Tensor weights;  // [1, H, T, S]
  model.decode(t, memory, nn::key_padding_mask(s, model.options().pad_id()), &weights);
  return mean(weights.select(0, 0), 0);  // [T, S]
}

// ------------------------------------------------------------------ validation

namespace {

// Strings as one message: each as its byte length, ':', its bytes (any bytes).
std::string pack(const std::vector<std::string>& strings) {
  std::string out;
  for (const std::string& s : strings) out += std::to_string(s.size()) + ":" + s;
  return out;
}

std::vector<std::string> unpack(const std::string& packed) {
  std::vector<std::string> out;
  for (size_t at = 0; at < packed.size();) {
    const size_t colon = packed.find(':', at);
    const size_t n = std::stoull(packed.substr(at, colon - at));
    out.push_back(packed.substr(colon + 1, n));
    at = colon + 1 + n;
  }
  return out;
}

}  // namespace

TranslationScores validate_translation(nn::Transformer& model, const Codec& codec,
                                       const std::vector<data::TokenPair>& pairs,
                                       const std::vector<data::SentencePair>& text, int64_t max_tokens,
                                       size_t translate_count, const nn::SearchOptions& search, size_t keep,
                                       const train::ProcessGroup& group) {
  TranslationScores r;
  if (pairs.empty()) return r;
  model.eval();
  NoGradGuard ng;
  double sums[2] = {0, 0};  // loss x tokens, tokens
  data::BatchIterator vit(pairs, data::BatchOptions().max_tokens(size_t(max_tokens)).shuffle(false));
  for (size_t b = 0; b < vit.batches_in_epoch(); ++b) {
    const data::Batch batch = vit.next();
    if (int(b % size_t(group.size())) != group.rank()) continue;
    const Var logits = model.forward(batch.src, batch.tgt_in);
    const Var loss = cross_entropy(logits, batch.tgt_out, 0.0, data::kPadId);
    sums[0] += loss.item() * double(batch.tgt_tokens);
    sums[1] += double(batch.tgt_tokens);
  }
  group.sum(sums, 2);
  r.loss = sums[0] / std::max(sums[1], 1.0);
  const size_t n = std::min(text.size(), translate_count);
  if (n > 0) {
    const size_t ranks = size_t(group.size());
    std::vector<std::string> srcs, mine;
    for (size_t i = size_t(group.rank()); i < n; i += ranks) srcs.push_back(text[i].src);
    if (!srcs.empty()) {
      const auto out = translate_lines(model, codec, srcs, search, max_tokens);
      for (const auto& h : out) mine.push_back(codec.decode_target(h[0].tokens));
    }
    const std::vector<std::string> parts = group.gather(pack(mine));
    model.train();
    if (!group.is_root()) return r;
    std::vector<std::vector<std::string>> by_rank;
    for (const std::string& part : parts) by_rank.push_back(unpack(part));
    std::vector<std::string> refs, hyps;
    int64_t exact = 0;
    for (size_t i = 0; i < n; ++i) {
      hyps.push_back(by_rank[i % ranks][i / ranks]);
      refs.push_back(text[i].tgt);
      exact += hyps.back() == refs[i];
    }
    r.bleu = data::corpus_bleu(hyps, refs).score;
    r.chrf = data::corpus_chrf(hyps, refs).score;
    r.exact = double(exact) / double(n);
    for (size_t i = 0; i < std::min(n, keep); ++i) {
      r.src.push_back(text[i].src);
      r.ref.push_back(refs[i]);
      r.hyp.push_back(hyps[i]);
    }
  }
  model.train();
  return r;
}


}  // namespace rosetta::translator
