// Tokenizer: a SentencePiece subword model (unigram or BPE) behind a small value-typed API.
//
// Special ids are fixed for every model rosetta trains or loads:
//   pad = 0, unk = 1, bos = 2, eos = 3
// encode() adds neither bos nor eos (the batcher does); decode() drops pad/bos/eos and renders
// unk as SentencePiece does (" ⁇ ").
//
// One model for source and target (joint vocabulary) or one per language: train one or two
// Tokenizer objects. Training is deterministic for the same sentences and options, and quiet.
//
//   Tokenizer tok = Tokenizer::train(sentences, TokenizerOptions().vocab_size(8000));
//   std::vector<int32_t> ids = tok.encode("Guten Morgen.");
//   tok.save("de.model");
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rosetta/core/enum_names.h"
#include "rosetta/core/lifetime.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace rosetta::data {

inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kUnkId = 1;
inline constexpr int32_t kBosId = 2;
inline constexpr int32_t kEosId = 3;

enum class TokenizerModel { unigram, bpe };
constexpr EnumNames<TokenizerModel, 2> enum_names(TokenizerModel) {
  return {"tokenizer", {{{TokenizerModel::unigram, "unigram"}, {TokenizerModel::bpe, "bpe"}}}};
}
// "unigram" | "bpe" (SentencePiece's model types); throws naming the value otherwise.
inline TokenizerModel parse_tokenizer_model(const std::string& s) { return parse_enum<TokenizerModel>(s); }
inline const char* tokenizer_model_name(TokenizerModel m) { return enum_name(m); }

// Training options, with chainable setters: TokenizerOptions().vocab_size(4000).model(bpe).
struct TokenizerOptions {
  int vocab_size_ = 8000;
  TokenizerModel model_ = TokenizerModel::unigram;
  // false: vocab_size is an upper bound, clamped to what the text supports.
  // true: a vocabulary the text cannot fill is an error.
  bool hard_vocab_limit_ = false;
  double character_coverage_ = 1.0;  // fraction of characters covered by the alphabet
  uint32_t seed_ = 1;                // SentencePiece's sampling seed
  // The trained model depends on the thread count; keep it fixed for reproducible models.
  int num_threads_ = 1;
  // SentencePiece normalization rule: "nmt_nfkc" (default), "nfkc", "identity", ...
  std::string normalization_ = "nmt_nfkc";
  int max_sentence_bytes_ = 4192;  // longer training sentences are skipped by SentencePiece

  ROSETTA_SETTER(TokenizerOptions, vocab_size, int, vocab_size_)
  ROSETTA_SETTER(TokenizerOptions, model, TokenizerModel, model_)
  ROSETTA_SETTER(TokenizerOptions, hard_vocab_limit, bool, hard_vocab_limit_)
  ROSETTA_SETTER(TokenizerOptions, character_coverage, double, character_coverage_)
  ROSETTA_SETTER(TokenizerOptions, seed, uint32_t, seed_)
  ROSETTA_SETTER(TokenizerOptions, num_threads, int, num_threads_)
  ROSETTA_SETTER(TokenizerOptions, normalization, std::string, normalization_)
  ROSETTA_SETTER(TokenizerOptions, max_sentence_bytes, int, max_sentence_bytes_)
};

class Tokenizer {
 public:
  Tokenizer();  // an empty tokenizer: loaded() is false
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer& o);
  Tokenizer& operator=(const Tokenizer& o);

  // Trains a model on `sentences` (one sentence per element). Throws rosetta::Error when
  // SentencePiece refuses (e.g. a vocabulary smaller than the alphabet).
  static Tokenizer train(const std::vector<std::string>& sentences,
                         const TokenizerOptions& options = {});
  // Trains on a UTF-8 text file, one sentence per line (BOM and CRLF tolerated, blank lines
  // skipped; invalid UTF-8 or NUL bytes are an error naming file:line).
  static Tokenizer train_file(const std::filesystem::path& path,
                              const TokenizerOptions& options = {});

  // Loads a `.model` file written by save() or by spm_train with the fixed special ids.
  static Tokenizer load(const std::filesystem::path& path);
  // Loads a serialized ModelProto (the bytes of a `.model` file), e.g. from a checkpoint.
  // `what` names the bytes in errors (e.g. the file they came from).
  static Tokenizer from_serialized(std::string_view bytes, const std::string& what = "Tokenizer::from_serialized");

  void save(const std::filesystem::path& path) const;
  std::string serialized() const;  // the bytes save() writes

  bool loaded() const { return sp_ != nullptr; }
  int32_t vocab_size() const;

  // Text -> ids, without bos/eos.
  std::vector<int32_t> encode(std::string_view text) const;
  // Up to n segmentations of `text`, most probable first (unigram models; BPE models give
  // only the best one). Deterministic: subword regularization samples among them.
  std::vector<std::vector<int32_t>> nbest_encode(std::string_view text, int n) const;
  // The model's log-probability of a segmentation: the sum of its pieces' scores.
  double segmentation_score(const std::vector<int32_t>& ids) const;
  // Text -> pieces ("▁Gu", "ten"), for inspection.
  std::vector<std::string> encode_pieces(std::string_view text) const;
  // Ids -> text, skipping pad/bos/eos. Throws on ids outside [0, vocab_size).
  std::string decode(const std::vector<int32_t>& ids) const;

  std::string id_to_piece(int32_t id) const;
  int32_t piece_to_id(std::string_view piece) const;  // kUnkId when unknown

 private:
  explicit Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp);
  const sentencepiece::SentencePieceProcessor& sp() const ROSETTA_LIFETIMEBOUND;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace rosetta::data
