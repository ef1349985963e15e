// rosetta export --format ctranslate2: the model directory parses back (model.bin read by a
// reader of CTranslate2's format written here, config.json, the vocabulary), holds the run's
// tensors where docs/export.md says, is refused where it would overwrite or mistranslate, and,
// where Python's ctranslate2 is importable (ROSETTA_CT2_PYTHON, else python3), CTranslate2's
// greedy translations equal `rosetta translate --beam 1`'s.
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "cli_support.h"
#include "rosetta/data/tokenizer.h"

namespace {

using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::require_error;
using rosetta::test::run_rosetta;
using rosetta::test::run_shell;
using rosetta::test::slurp;
using rosetta::test::write_file;
using nlohmann::json;
namespace fs = std::filesystem;

// A toy German->English run after 120 updates: it translates the toy corpus well enough that a
// greedy choice is never a near tie. `flags` change the architecture.
std::string train_toy(const TempDir& work, const std::string& name, const std::string& flags = "") {
  const std::string tsv = work / "train.tsv", dir = work / name;
  if (!fs::exists(tsv)) rosetta::test::write_tsv(tsv, rosetta::test::toy_corpus(400, 1));
  std::string args = flags;  // with the defaults of what `flags` does not set
  for (const auto& [flag, value] : {std::pair{"--heads", "2"}, {"--encoder-layers", "1"}, {"--max-steps", "120"},
                                    {"--validate-every", "120"}})
    if (flags.find(std::string(flag) + " ") == std::string::npos) args.append(" ").append(flag).append(" ").append(value);
  const RunResult r = run_rosetta("train --train " + tsv + " --valid " + tsv +
                                  " --d-model 32 --ff 64 --decoder-layers 2 --vocab-size 60 --max-tokens 256"
                                  " --lr 3e-3 --warmup 20 --dropout 0 --threads 1 --log-every 50"
                                  " --valid-bleu-sentences 0 " + args + " --out " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return dir;
}

// A model.bin read back: CTranslate2's binary format, version 6 (translator/src/export_ctranslate2.cpp).
struct Ct2Bin {
  struct Var {
    std::vector<uint32_t> shape;
    int type;  // 0 float32, 1 int8, 2 int16
    std::string bytes;
    std::vector<float> floats() const {
      REQUIRE(type == 0);
      std::vector<float> v(bytes.size() / 4);
      std::memcpy(v.data(), bytes.data(), bytes.size());
      return v;
    }
  };
  uint32_t version = 0, revision = 0;
  std::string spec;
  std::map<std::string, Var> vars;
  std::map<std::string, std::string> aliases;

  explicit Ct2Bin(const std::string& path) {
    const std::string b = slurp(path);
    size_t at = 0;
    auto take = [&](size_t n) {
      REQUIRE(at + n <= b.size());
      at += n;
      return b.substr(at - n, n);
    };
    auto u32 = [&] {
      uint32_t v;
      std::memcpy(&v, take(4).data(), 4);
      return v;
    };
    auto str = [&] {
      uint16_t n;
      std::memcpy(&n, take(2).data(), 2);
      const std::string s = take(n);
      REQUIRE(s.back() == '\0');
      return s.substr(0, n - 1);
    };
    version = u32();
    spec = str();
    revision = u32();
    for (uint32_t i = 0, n = u32(); i < n; ++i) {
      const std::string name = str();
      Var v;
      const int rank = uint8_t(take(1)[0]);
      for (int d = 0; d < rank; ++d) v.shape.push_back(u32());
      v.type = uint8_t(take(1)[0]);
      v.bytes = take(u32());
      size_t count = 1;
      for (uint32_t d : v.shape) count *= d;
      INFO(name);
      REQUIRE(v.bytes.size() == count * (v.type == 0 ? 4 : v.type == 2 ? 2 : 1));
      REQUIRE(vars.emplace(name, v).second);
    }
    for (uint32_t i = 0, n = u32(); i < n; ++i) {
      const std::string a = str();
      aliases[a] = str();
    }
    REQUIRE(at == b.size());  // nothing after the aliases
  }
  const Var& get(const std::string& name) const {
    const auto a = aliases.find(name);
    const auto it = vars.find(a == aliases.end() ? name : a->second);
    INFO(name);
    REQUIRE(it != vars.end());
    return it->second;
  }
};

std::vector<float> tensor(const rosetta::SafeTensors& st, const std::string& name) {
  const rosetta::Tensor* t = st.find(name);
  INFO(name);
  REQUIRE(t != nullptr);
  return t->contiguous().to_vector<float>();
}

std::vector<float> cat(std::vector<std::vector<float>> parts) {
  std::vector<float> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// The names a TransformerSpec of E encoder and L decoder layers holds (variables and aliases).
std::set<std::string> expected_names(int E, int L) {
  std::set<std::string> n{"encoder/num_heads", "encoder/pre_norm", "encoder/activation", "encoder/embeddings_merge",
                          "encoder/scale_embeddings", "encoder/multi_query_attention", "encoder/embeddings_0/weight",
                          "encoder/position_encodings/encodings", "encoder/layer_norm/gamma", "encoder/layer_norm/beta",
                          "decoder/num_heads", "decoder/pre_norm", "decoder/activation", "decoder/scale_embeddings",
                          "decoder/alignment_layer", "decoder/alignment_heads", "decoder/alibi",
                          "decoder/alibi_use_positive_positions", "decoder/scale_alibi",
                          "decoder/start_from_zero_embedding", "decoder/embeddings/weight",
                          "decoder/position_encodings/encodings", "decoder/layer_norm/gamma", "decoder/layer_norm/beta",
                          "decoder/projection/weight", "decoder/projection/bias"};
  auto linear = [&](const std::string& p) { n.insert(p + "/weight"), n.insert(p + "/bias"); };
  auto norm = [&](const std::string& p) { n.insert(p + "/gamma"), n.insert(p + "/beta"); };
  for (int i = 0; i < E + L; ++i) {
    const std::string l = i < E ? "encoder/layer_" + std::to_string(i) : "decoder/layer_" + std::to_string(i - E);
    norm(l + "/self_attention/layer_norm");
    linear(l + "/self_attention/linear_0");
    linear(l + "/self_attention/linear_1");
    norm(l + "/ffn/layer_norm");
    linear(l + "/ffn/linear_0");
    linear(l + "/ffn/linear_1");
    if (i < E) continue;
    norm(l + "/attention/layer_norm");
    for (int k = 0; k < 3; ++k) linear(l + "/attention/linear_" + std::to_string(k));
  }
  return n;
}

// The Python that runs CTranslate2 here, or "" (with why in *why).
std::string ct2_python(std::string* why) {
  const char* env = std::getenv("ROSETTA_CT2_PYTHON");
  const std::string py = env && *env ? env : "python3";
  if (run_shell(py + " -c 'import ctranslate2' 2>&1").exit_code == 0) return py;
  *why = py + " cannot import ctranslate2 (pip install ctranslate2 in a venv, then set ROSETTA_CT2_PYTHON to its python)";
  return "";
}

const char* kCt2Greedy = R"(import sys, ctranslate2
model, pieces, max_len = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = ctranslate2.Translator(model, device="cpu", intra_threads=1)
for line in open(pieces, encoding="utf-8").read().splitlines():
    src = line.split(" ") if line else []
    n = min(int(1.5 * len(src)) + 10, max_len - 1)  # rosetta's limit: --max-len-a 1.5 --max-len-b 10
    r = t.translate_batch([src], beam_size=1, max_decoding_length=n) if src else None
    print(" ".join(r[0].hypotheses[0]) if r else "")
)";

}  // namespace

TEST_CASE("export writes a CTranslate2 model directory that holds the run's tensors", "[export]") {
  TempDir work("export");
  const std::string run = train_toy(work, "run");
  const std::string out = work / "ct2";
  const RunResult r = run_rosetta("export --format ctranslate2 " + run + " " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(out)) files.insert(e.path().filename().string());
  CHECK(files == std::set<std::string>{"config.json", "model.bin", "shared_vocabulary.json"});
  for (const auto& e : fs::directory_iterator(work.str()))  // the temporary directory is gone
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);

  const Ct2Bin bin(out + "/model.bin");
  CHECK(bin.version == 6);
  CHECK(bin.spec == "TransformerSpec");
  CHECK(bin.revision == 7);
  std::set<std::string> names;
  for (const auto& [n, v] : bin.vars) names.insert(n);
  for (const auto& [a, n] : bin.aliases) names.insert(a);
  CHECK(names == expected_names(1, 2));
  // One copy of what both stacks read (shared, tied embeddings; one position table).
  CHECK(bin.aliases == std::map<std::string, std::string>{
                           {"decoder/projection/weight", "decoder/embeddings/weight"},
                           {"encoder/embeddings_0/weight", "decoder/embeddings/weight"},
                           {"encoder/position_encodings/encodings", "decoder/position_encodings/encodings"}});
  const int16_t heads = *reinterpret_cast<const int16_t*>(bin.get("decoder/num_heads").bytes.data());
  CHECK(heads == 2);
  CHECK(bin.get("encoder/pre_norm").bytes == std::string(1, '\1'));
  CHECK(bin.get("encoder/activation").bytes == std::string(1, '\0'));  // relu
  CHECK(bin.get("decoder/alignment_layer").shape.empty());

  // The tensors, where docs/export.md puts them.
  const auto st = rosetta::load_safetensors(run + "/best.safetensors");
  const std::string p = "decoder.layers.1.";
  CHECK(bin.get("decoder/embeddings/weight").shape == std::vector<uint32_t>{60, 32});
  CHECK(bin.get("decoder/embeddings/weight").floats() == tensor(st, "shared_embed.weight"));
  CHECK(bin.get("encoder/layer_0/self_attention/linear_0/weight").shape == std::vector<uint32_t>{96, 32});
  CHECK(bin.get("encoder/layer_0/self_attention/linear_0/bias").floats() ==
        cat({tensor(st, "encoder.layers.0.self_attn.q_proj.bias"), tensor(st, "encoder.layers.0.self_attn.k_proj.bias"),
             tensor(st, "encoder.layers.0.self_attn.v_proj.bias")}));
  CHECK(bin.get("decoder/layer_1/attention/linear_1/weight").floats() ==
        cat({tensor(st, p + "cross_attn.k_proj.weight"), tensor(st, p + "cross_attn.v_proj.weight")}));
  CHECK(bin.get("decoder/layer_1/attention/linear_0/weight").floats() == tensor(st, p + "cross_attn.q_proj.weight"));
  CHECK(bin.get("decoder/layer_1/attention/layer_norm/gamma").floats() == tensor(st, p + "norm2.weight"));
  CHECK(bin.get("decoder/layer_1/ffn/layer_norm/beta").floats() == tensor(st, p + "norm3.bias"));
  CHECK(bin.get("decoder/layer_1/ffn/linear_1/weight").floats() == tensor(st, p + "ff.linear2.weight"));
  CHECK(bin.get("encoder/layer_norm/gamma").floats() == tensor(st, "encoder.norm.weight"));
  CHECK(bin.get("decoder/projection/bias").floats() == tensor(st, "out_proj.bias"));
  // rosetta's positions: sin and cos interleaved, position p at row p.
  const Ct2Bin::Var& pos = bin.get("decoder/position_encodings/encodings");
  REQUIRE(pos.shape == std::vector<uint32_t>{256, 32});
  const std::vector<float> pe = pos.floats();
  CHECK_THAT(pe[32 * 1 + 0], Catch::WithinAbs(std::sin(1.0), 1e-6));
  CHECK_THAT(pe[32 * 1 + 1], Catch::WithinAbs(std::cos(1.0), 1e-6));
  CHECK_THAT(pe[32 * 7 + 2], Catch::WithinAbs(std::sin(7.0 * std::exp(-2.0 * std::log(10000.0) / 32)), 1e-6));

  // config.json: CTranslate2's TransformerConfig, its special tokens rosetta's pieces.
  const json config = json::parse(slurp(out + "/config.json"));
  CHECK(config == json{{"add_source_bos", false}, {"add_source_eos", false}, {"bos_token", "<s>"},
                       {"decoder_start_token", "<s>"}, {"eos_token", "</s>"}, {"layer_norm_epsilon", 1e-5},
                       {"multi_query_attention", false}, {"unk_token", "<unk>"}});
  // The vocabulary: every piece by id.
  const json vocab = json::parse(slurp(out + "/shared_vocabulary.json"));
  const auto tok = rosetta::data::Tokenizer::load(run + "/src.model");
  REQUIRE(vocab.size() == 60);
  for (int32_t id = 0; id < 60; ++id) CHECK(vocab[size_t(id)] == tok.id_to_piece(id));
  CHECK(vocab[0] == "<pad>");

  // int8: weights and embeddings quantized per row, each with its scale.
  REQUIRE(run_rosetta("export --quantization int8 " + run + " " + (work / "ct2-int8")).exit_code == 0);
  const Ct2Bin q(work / "ct2-int8/model.bin");
  const Ct2Bin::Var& w = q.get("decoder/layer_1/ffn/linear_1/weight");
  REQUIRE(w.type == 1);
  const std::vector<float> scale = q.get("decoder/layer_1/ffn/linear_1/weight_scale").floats(),
                           fw = tensor(st, p + "ff.linear2.weight");
  REQUIRE(scale.size() == w.shape[0]);
  for (size_t i = 0; i < fw.size(); ++i)
    CHECK_THAT(double(int8_t(w.bytes[i])) / scale[i / w.shape[1]], Catch::WithinAbs(fw[i], 0.5 / scale[i / w.shape[1]]));
  CHECK(q.get("decoder/embeddings/weight").type == 1);
  CHECK(q.get("decoder/layer_1/ffn/linear_1/bias").type == 0);
  CHECK(q.get("decoder/layer_norm/gamma").type == 0);
}

TEST_CASE("export refuses to overwrite, and refuses what CTranslate2 would compute otherwise", "[export]") {
  TempDir work("export_refused");
  const std::string run = train_toy(work, "run");
  fs::create_directories(work / "full");
  write_file(work / "full/keep.txt", "mine");
  require_error(run_rosetta("export " + run + " " + (work / "full")), {work / "full", "is not empty"});
  CHECK(slurp(work / "full/keep.txt") == "mine");
  write_file(work / "file", "mine");
  require_error(run_rosetta("export " + run + " " + (work / "file")), {work / "file", "is not a directory"});
  CHECK(slurp(work / "file") == "mine");
  require_error(run_rosetta("export " + run + " " + (work / "no/such/dir")), {"does not exist"});
  require_error(run_rosetta("export " + run + " " + run), {run, "is not empty"});
  require_error(run_rosetta("export --format onnx " + run + " " + (work / "x")), {"--format"});
  // An empty directory is filled; a trailing slash names the same directory.
  fs::create_directories(work / "empty");
  REQUIRE(run_rosetta("export " + run + " " + (work / "empty/")).exit_code == 0);
  CHECK(fs::exists(work / "empty/model.bin"));
  // A post-norm model: CTranslate2's post-norm stacks have no final layer norm, rosetta's do.
  const std::string post = train_toy(work, "post", "--norm post --max-steps 2 --validate-every 2");
  require_error(run_rosetta("export " + post + " " + (work / "post-ct2")), {"post-norm", "norm_first"});
  CHECK_FALSE(fs::exists(work / "post-ct2"));
}

TEST_CASE("CTranslate2 translates an exported model as rosetta translate --beam 1 does", "[export]") {
  std::string why;
  const std::string py = ct2_python(&why);
  if (py.empty()) {
    WARN("skipped: " << why);
    return;
  }
  TempDir work("export_ct2");
  const std::string script = work / "greedy.py";
  write_file(script, kCt2Greedy);
  // 20 held-out sentences, and an empty line.
  std::vector<std::string> sources{""};
  for (const auto& [de, en] : rosetta::test::toy_corpus(20, 7)) sources.push_back(de);
  std::string text;
  for (const auto& s : sources) text += s + "\n";
  write_file(work / "src.txt", text);
  // The default architecture (shared and tied embeddings, ReLU), and another: separate
  // embeddings, an output layer of its own, GELU, 4 heads, 2 encoder layers.
  for (const std::string& flags :
       {std::string(), std::string("--share-embeddings false --tie-output false --activation gelu --heads 4 "
                                   "--encoder-layers 2")}) {
    INFO("trained with: " << flags);
    const std::string run = train_toy(work, flags.empty() ? "a" : "b", flags);
    const std::string out = run + "-ct2";
    REQUIRE(run_rosetta("export " + run + " " + out).exit_code == 0);
    const RunResult ours = run_rosetta("translate --beam 1 --precision fp32 --model " + run + " --input " +
                                       (work / "src.txt"));
    REQUIRE(ours.exit_code == 0);
    // CTranslate2 is given rosetta's pieces, and its pieces are read back with rosetta's tokenizer.
    const auto src_tok = rosetta::data::Tokenizer::load(run + "/src.model");
    const auto tgt_tok = rosetta::data::Tokenizer::load(run + "/tgt.model");
    std::string pieces;
    for (const auto& s : sources) {
      std::string line;
      for (const auto& piece : src_tok.encode_pieces(s)) line.append(line.empty() ? "" : " ").append(piece);
      pieces += line + "\n";
    }
    write_file(work / "pieces.txt", pieces);
    const RunResult theirs = run_shell(py + " " + script + " " + out + " " + (work / "pieces.txt") + " 256");
    INFO(theirs.output);
    REQUIRE(theirs.exit_code == 0);
    const auto ct2_lines = rosetta::test::lines_of(theirs.output), our_lines = rosetta::test::lines_of(ours.output);
    REQUIRE(ct2_lines.size() == sources.size());
    REQUIRE(our_lines.size() == sources.size());
    for (size_t i = 0; i < sources.size(); ++i) {
      std::vector<int32_t> ids;
      for (const auto& piece : rosetta::test::split(ct2_lines[i])) ids.push_back(tgt_tok.piece_to_id(piece));
      INFO(sources[i]);
      CHECK(tgt_tok.decode(ids) == our_lines[i]);
    }
    CHECK(our_lines[1].find("the") != std::string::npos);  // trained: the outputs are English
  }
}
