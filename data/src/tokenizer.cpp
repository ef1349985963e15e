// Tokenizer: SentencePiece training, loading and encoding, with errors as rosetta::Error.
#include "rosetta/data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <iterator>
#include <mutex>
#include <unordered_map>

#include "line_reader.h"
#include "rosetta/core/check.h"

namespace rosetta::data {

namespace {

namespace spm = sentencepiece;

// Feeds a vector of sentences to the trainer without writing a temporary file.
class VectorIterator : public spm::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& s) : s_(s) { skip_blank(); }
  bool done() const override { return i_ >= s_.size(); }
  void Next() override {
    ++i_;
    skip_blank();
  }
  const std::string& value() const override { return s_[i_]; }
  spm::util::Status status() const override { return {}; }

 private:
  void skip_blank() {
    while (i_ < s_.size() && s_[i_].find_first_not_of(" \t\r\n") == std::string::npos) ++i_;
  }
  const std::vector<std::string>& s_;
  size_t i_ = 0;
};

// SentencePiece's trainer and its random seed are process-global.
std::mutex& train_mutex() {
  static std::mutex m;
  return m;
}

std::unique_ptr<spm::SentencePieceProcessor> load_proto(std::string_view bytes,
                                                        const std::string& what) {
  auto sp = std::make_unique<spm::SentencePieceProcessor>();
  const auto st = sp->LoadFromSerializedProto(bytes);
  ROSETTA_CHECK(st.ok(), what, ": not a SentencePiece model (", st.ToString(), ")");
  ROSETTA_CHECK(sp->pad_id() == kPadId && sp->unk_id() == kUnkId && sp->bos_id() == kBosId &&
                    sp->eos_id() == kEosId,
                what, ": special ids are pad=", sp->pad_id(), " unk=", sp->unk_id(),
                " bos=", sp->bos_id(), " eos=", sp->eos_id(),
                ", rosetta needs pad=0 unk=1 bos=2 eos=3");
  return sp;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::Tokenizer(std::unique_ptr<spm::SentencePieceProcessor> sp) : sp_(std::move(sp)) {}

Tokenizer::Tokenizer(const Tokenizer& o) {
  if (o.sp_) sp_ = load_proto(o.serialized(), "Tokenizer copy");
}
Tokenizer& Tokenizer::operator=(const Tokenizer& o) {
  if (this != &o) *this = Tokenizer(o);
  return *this;
}

const spm::SentencePieceProcessor& Tokenizer::sp() const {
  ROSETTA_CHECK(sp_ != nullptr, "Tokenizer: no model loaded (train() or load() one first)");
  return *sp_;
}

Tokenizer Tokenizer::train(const std::vector<std::string>& sentences,
                           const TokenizerOptions& o) {
  ROSETTA_CHECK(o.vocab_size_ > 4, "Tokenizer::train: vocab_size ", o.vocab_size_,
                " leaves no room beside the 4 special ids");
  ROSETTA_CHECK(o.num_threads_ >= 1, "Tokenizer::train: num_threads ", o.num_threads_, " < 1");
  VectorIterator it(sentences);
  ROSETTA_CHECK(!it.done(), "Tokenizer::train: no training text (", sentences.size(),
                " sentences, all blank)");
  // The map form of Train() applies minloglevel before anything is logged; the string form
  // logs its command line first.
  const std::unordered_map<std::string, std::string> args = {
      {"minloglevel", "2"},
      {"model_type", tokenizer_model_name(o.model_)},
      {"vocab_size", std::to_string(o.vocab_size_)},
      {"hard_vocab_limit", o.hard_vocab_limit_ ? "true" : "false"},
      {"character_coverage", std::to_string(o.character_coverage_)},
      {"num_threads", std::to_string(o.num_threads_)},
      {"normalization_rule_name", o.normalization_},
      {"max_sentence_length", std::to_string(o.max_sentence_bytes_)},
      {"pad_id", "0"}, {"unk_id", "1"}, {"bos_id", "2"}, {"eos_id", "3"},
      {"pad_piece", "<pad>"}, {"unk_piece", "<unk>"}, {"bos_piece", "<s>"},
      {"eos_piece", "</s>"},
      {"input_sentence_size", "0"},  // use every sentence: no random sampling
      {"shuffle_input_sentence", "false"},
  };
  std::string proto;
  {
    std::lock_guard<std::mutex> lock(train_mutex());
    spm::SetRandomGeneratorSeed(o.seed_);
    const auto st = spm::SentencePieceTrainer::Train(args, &it, &proto);
    ROSETTA_CHECK(st.ok(), "Tokenizer::train (", tokenizer_model_name(o.model_), ", vocab_size ",
                  o.vocab_size_, "): ", st.message());
  }
  return Tokenizer(load_proto(proto, "Tokenizer::train"));
}

Tokenizer Tokenizer::train_file(const std::filesystem::path& path, const TokenizerOptions& o) {
  std::vector<std::string> sentences;
  LineReader reader(path, LineReader::kDefaultMaxLineBytes);
  std::string line;
  while (reader.next(line)) {
    check_text(line, reader.name(), reader.line_number());
    sentences.push_back(line);
  }
  ROSETTA_CHECK(!sentences.empty(), path.string(), ": no training text");
  return train(sentences, o);
}

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  check_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  ROSETTA_CHECK(in, path.string(), ": cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return from_serialized(bytes, path.string());
}

Tokenizer Tokenizer::from_serialized(std::string_view bytes, const std::string& what) {
  return Tokenizer(load_proto(bytes, what));
}

void Tokenizer::save(const std::filesystem::path& path) const {
  const std::string bytes = serialized();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  ROSETTA_CHECK(out, path.string(), ": cannot open for writing");
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  ROSETTA_CHECK(out, path.string(), ": write failed");
}

std::string Tokenizer::serialized() const { return std::string(sp().serialized_model_proto()); }

int32_t Tokenizer::vocab_size() const { return sp().GetPieceSize(); }

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto st = sp().Encode(text, &ids);
  ROSETTA_CHECK(st.ok(), "Tokenizer::encode: ", st.message());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::vector<std::vector<int32_t>> Tokenizer::nbest_encode(std::string_view text, int n) const {
  ROSETTA_CHECK(n >= 1, "Tokenizer::nbest_encode: n must be positive, got ", n);
  std::vector<std::vector<int>> nbest;
  const auto st = sp().NBestEncode(text, n, &nbest);
  std::vector<std::vector<int32_t>> out;
  if (!st.ok() || nbest.empty()) {  // BPE has no n-best lattice: the one best segmentation
    out.push_back(encode(text));
    return out;
  }
  for (const auto& ids : nbest) out.emplace_back(ids.begin(), ids.end());
  return out;
}

double Tokenizer::segmentation_score(const std::vector<int32_t>& ids) const {
  double s = 0;
  for (int32_t id : ids) s += sp().GetScore(id);
  return s;
}

std::vector<std::string> Tokenizer::encode_pieces(std::string_view text) const {
  std::vector<std::string> pieces;
  const auto st = sp().Encode(text, &pieces);
  ROSETTA_CHECK(st.ok(), "Tokenizer::encode_pieces: ", st.message());
  return pieces;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  const int32_t n = vocab_size();
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    ROSETTA_CHECK(id >= 0 && id < n, "Tokenizer::decode: id ", id, " at position ", i,
                  " is outside the vocabulary [0, ", n, ")");
    if (id == kPadId || id == kBosId || id == kEosId) continue;
    kept.push_back(id);
  }
  std::string text;
  const auto st = sp().Decode(kept, &text);
  ROSETTA_CHECK(st.ok(), "Tokenizer::decode: ", st.message());
  return text;
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  ROSETTA_CHECK(id >= 0 && id < vocab_size(), "Tokenizer::id_to_piece: id ", id,
                " is outside the vocabulary [0, ", vocab_size(), ")");
  return sp().IdToPiece(id);
}

int32_t Tokenizer::piece_to_id(std::string_view piece) const { return sp().PieceToId(piece); }

}  // namespace rosetta::data
