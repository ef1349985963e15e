#include "run_files.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/data/tokenizer.h"
#include "rosetta/translator/run.h"
#include "rosetta/translator/translator.h"

namespace rosetta::report {

namespace fs = std::filesystem;
using detail::dump;
using detail::json;

namespace {

std::vector<std::string> first_few(const std::vector<std::string>& v) {
  return {v.begin(), v.begin() + std::ptrdiff_t(std::min(v.size(), translator::kSampleSentences))};
}

}  // namespace

void append_translations(const std::string& run_dir, int64_t step, const std::vector<std::string>& src,
                         const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  const json j = {{"step", step}, {"src", first_few(src)}, {"ref", first_few(ref)}, {"hyp", first_few(hyp)}};
  const std::string path = translator::RunPaths(run_dir).translations();
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << dump(j) << "\n";
  out.flush();
  ROSETTA_CHECK(out, path, ": cannot append");
}

std::vector<std::string> record_validation(const std::string& run_dir, int64_t step, const std::vector<std::string>& src,
                                           const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  if (!hyp.empty()) append_translations(run_dir, step, src, ref, hyp);
  std::vector<std::string> warnings;
  write_report({run_dir}, translator::RunPaths(run_dir).report(), {}, &warnings);
  return warnings;
}

namespace detail {

namespace {

using rosetta::detail::concat;
using rosetta::detail::num;
using translator::RunPaths;
using translator::Translator;

// The JSON objects of a .jsonl file (none when it is missing); other lines are skipped with a
// warning naming the file and line (e.g. the last line of a run killed while writing it).
std::vector<json> read_jsonl(const std::string& path, Notes& notes) {
  std::vector<json> out;
  if (fs::exists(path)) require_regular_file(path);  // a FIFO would block the read
  std::ifstream in(path, std::ios::binary);
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      notes.warn(concat(path, ":", n, ": skipped: not a JSON object (a truncated or malformed line)"));
      continue;
    }
    if (!j.contains("step") || !j["step"].is_number()) {
      notes.warn(concat(path, ":", n, ": skipped: no step"));
      continue;
    }
    out.push_back(std::move(j));
  }
  return out;
}

// Six significant digits are plenty for a plot and keep the page small.
json rounded(double v) {
  if (!std::isfinite(v)) return nullptr;
  return std::stod(num("%.6g", v));
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// KEY = VALUE lines as CLI11 writes them; quotes around strings dropped.
std::vector<std::pair<std::string, std::string>> read_config(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  if (fs::exists(path)) require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    const size_t eq = line.find('=');
    if (line.empty() || line[0] == '#' || line[0] == '[' || eq == std::string::npos) continue;
    std::string value = trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    out.emplace_back(trim(line.substr(0, eq)), value);
  }
  return out;
}

std::map<std::string, std::string> read_facts(const std::string& path) {
  std::map<std::string, std::string> out;
  if (fs::exists(path)) require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find("[info] ");
    if (at == std::string::npos) continue;
    const std::string message = trim(line.substr(at + 7));
    for (const Fact& f : kFacts) {
      const std::string prefix = f.prefix;
      if (message.rfind(prefix, 0) != 0) continue;
      const bool drop = prefix.size() >= 2 && prefix.compare(prefix.size() - 2, 2, ": ") == 0;
      out[f.label] = drop ? message.substr(prefix.size()) : message;
    }
  }
  return out;
}

// The latest validation's sources, as the trainer recorded them.
std::vector<std::string> recorded_sources(const Run& run) {
  if (run.translations.empty()) return {};
  const json& src = run.translations.back().value("src", json::array());
  std::vector<std::string> out;
  for (const json& s : src)
    if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

// Probabilities [1, H, R, C] as one flat array per head of integers 0..100.
json quantized(const Tensor& weights) {
  const Tensor w = weights.contiguous();
  const int64_t heads = w.shape()[1], n = w.numel() / heads;
  const float* p = w.data<float>();
  json out = json::array();
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<int> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = int(std::lround(100 * p[h * n + i]));
    out.push_back(std::move(v));
  }
  return out;
}

// Every layer's attention for the recorded sentences, translated greedily by the run's best
// model (best.safetensors, else the last checkpoint).
json attention_data(const Run& run, const ReportOptions& o) {
  const std::vector<std::string> sources = recorded_sources(run);
  if (sources.empty())
    return {{"note", "no validation sentences recorded yet (translations.jsonl, written at every validation)"}};
  const RunPaths paths(run.dir);
  if (!fs::exists(paths.best()) && !fs::exists(paths.checkpoint()))
    return {{"note", "no model yet (no best.safetensors or checkpoint.safetensors)"}};
  const Translator t = Translator::load(run.dir, "best");
  const auto& mo = t.model->options();
  const size_t cap = size_t(std::max<int64_t>(2, std::min(o.max_attention_tokens, mo.max_len())));
  const auto meta_step = t.metadata.find("train.step");
  json out = {{"weights", fs::path(t.weights_path).filename().string()},
              {"step", meta_step == t.metadata.end() ? "" : meta_step->second},
              {"heads", mo.heads()}, {"encoder_layers", mo.encoder_layers()},
              {"decoder_layers", mo.decoder_layers()}, {"sentences", json::array()}};
  const auto hyps = t.translate(sources, nn::SearchOptions().beam(1), 1 << 16);
  NoGradGuard ng;
  for (size_t i = 0; i < sources.size(); ++i) {
    std::vector<int32_t> src = t.codec.encode_source(sources[i]);
    std::vector<std::string> src_pieces = t.codec.source_pieces(sources[i]);
    if (src.empty() || hyps[i].empty()) continue;
    src.resize(std::min(src.size(), cap));
    src_pieces.resize(src.size(), "</s>");
    std::vector<int32_t> full = hyps[i][0].tokens;  // the predicted tokens, then eos
    full.push_back(data::kEosId);
    full.resize(std::min(full.size(), cap));
    std::vector<int32_t> tgt_in{data::kBosId};
    tgt_in.insert(tgt_in.end(), full.begin(), full.end() - 1);
    std::vector<std::string> out_pieces = t.codec.target_pieces(full), in_pieces{"<s>"};
    if (full.back() == data::kEosId) out_pieces.back() = "</s>";
    in_pieces.insert(in_pieces.end(), out_pieces.begin(), out_pieces.end() - 1);
    const auto w = t.model->attention_weights(Tensor::from_vector(src, {1, int64_t(src.size())}),
                                              Tensor::from_vector(tgt_in, {1, int64_t(tgt_in.size())}));
    json s = {{"text", sources[i]}, {"hyp", t.codec.decode_target(hyps[i][0].tokens)}, {"src", src_pieces},
              {"tgt_in", in_pieces}, {"tgt_out", out_pieces}, {"cross", json::array()},
              {"dec_self", json::array()}, {"enc_self", json::array()}};
    for (const Tensor& l : w.decoder_cross) s["cross"].push_back(quantized(l));
    for (const Tensor& l : w.decoder_self) s["dec_self"].push_back(quantized(l));
    for (const Tensor& l : w.encoder_self) s["enc_self"].push_back(quantized(l));
    out["sentences"].push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

double number(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
}

json curves(const std::vector<json>& records, const std::vector<const char*>& keys, size_t max_points) {
  const size_t k = std::max<size_t>(1, (records.size() + max_points - 1) / std::max<size_t>(max_points, 1));
  json out = {{"step", json::array()}, {"elapsed", json::array()}, {"bucket", k}};
  for (const char* key : keys) out[key] = json::array();
  for (size_t b = 0; b < records.size(); b += k) {
    const size_t e = std::min(records.size(), b + k);
    out["step"].push_back(rounded(number(records[e - 1], "step")));
    out["elapsed"].push_back(rounded(number(records[e - 1], "elapsed_s")));
    for (const char* key : keys) {
      double sum = 0;
      int count = 0;
      for (size_t i = b; i < e; ++i) {
        const double v = number(records[i], key);
        if (std::isfinite(v)) sum += v, ++count;
      }
      out[key].push_back(count ? rounded(sum / count) : json(nullptr));
    }
  }
  return out;
}

Run read_run(const std::string& dir, const ReportOptions& o, Notes& notes) {
  ROSETTA_CHECK(fs::is_directory(dir), dir, " is not a run directory");
  const RunPaths paths(dir);
  Run run;
  run.dir = dir;
  if (!fs::exists(paths.metrics())) notes.warn(dir + ": no metrics.jsonl yet");
  for (json& j : read_jsonl(paths.metrics(), notes)) {
    const std::string kind = j.value("kind", "");
    if (kind == "train") run.train.push_back(std::move(j));
    else if (kind == "valid") run.valid.push_back(std::move(j));
  }
  run.translations = read_jsonl(paths.translations(), notes);
  run.config = read_config(paths.config());
  run.facts = read_facts(paths.log());
  if (fs::exists(paths.eval())) {
    run.eval = json::parse(read_regular_file(paths.eval()), nullptr, false);
    if (run.eval.is_discarded() || !run.eval.is_object()) {
      notes.warn(paths.eval() + ": skipped: not a JSON object");
      run.eval = nullptr;
    }
  }
  if (!o.attention) {
    run.attention = {{"note", "not computed (--no-attention)"}};
  } else {
    try {
      run.attention = attention_data(run, o);
    } catch (const std::exception& e) {
      notes.warn(dir + ": no attention heatmaps: " + e.what());
      run.attention = {{"note", std::string("cannot load the model: ") + e.what()}};
    }
  }
  return run;
}

}  // namespace detail

}  // namespace rosetta::report
