// rosetta report (report.h). The C++ side reads the runs, writes the tables (all text escaped)
// and puts what the script draws (curves, heatmaps) in the page as JSON, in a
// <script type="application/json"> element whose '<', '>' and '&' are \u escapes.
#include "rosetta/report/report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/data/tokenizer.h"
#include "rosetta/report/escape.h"
#include "rosetta/translator/run.h"
#include "rosetta/translator/translator.h"

namespace rosetta::report {

namespace fs = std::filesystem;
using json = nlohmann::json;
using translator::RunPaths;
using translator::Translator;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::vector<std::string> first_few(const std::vector<std::string>& v) {
  return {v.begin(), v.begin() + std::ptrdiff_t(std::min(v.size(), translator::kSampleSentences))};
}

}  // namespace

void append_translations(const std::string& run_dir, int64_t step, const std::vector<std::string>& src,
                         const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  const json j = {{"step", step}, {"src", first_few(src)}, {"ref", first_few(ref)}, {"hyp", first_few(hyp)}};
  const std::string path = RunPaths(run_dir).translations();
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << dump(j) << "\n";
  out.flush();
  ROSETTA_CHECK(out, path, ": cannot append");
}

namespace {

// ------------------------------------------------------------------ reading a run

using rosetta::detail::concat;

using rosetta::detail::num;

// Problems found while reading: listed on the page, and passed on to the caller.
struct Notes {
  std::vector<std::string> lines;
  void warn(const std::string& line) { lines.push_back(line); }
};

// The JSON objects of a .jsonl file (none when it is missing); other lines are skipped with a
// warning naming the file and line (e.g. the last line of a run killed while writing it).
std::vector<json> read_jsonl(const std::string& path, Notes& notes) {
  std::vector<json> out;
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

double number(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
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

// What train.log says about the data and the model: the message of the last line of each kind.
struct Fact {
  const char* label;
  const char* prefix;  // of the message; dropped when it ends in ": "
};
constexpr Fact kFacts[] = {
    {"data", "data: "},
    {"training corpus", "training corpus: "},
    {"validation corpus", "validation corpus: "},
    {"extra pairs", "extra training pairs: "},
    {"length filter", "dropped "},
    {"tokenizer", "tokenizer: "},
    {"subword regularization", "subword regularization: "},
    {"model", "model: "},
    {"schedule", "schedule: "},
    {"kernels", "kernels: "},
    {"last stop", "stopped at step "},
};

std::map<std::string, std::string> read_facts(const std::string& path) {
  std::map<std::string, std::string> out;
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

struct Run {
  std::string dir, name, color;
  std::vector<json> train, valid, translations;
  std::vector<std::pair<std::string, std::string>> config;
  std::map<std::string, std::string> facts;
  json eval;       // eval.json, or null
  json attention;  // heatmap data, or {"note": why there is none}
};

// One curve per key, averaged over buckets of consecutive records so that at most max_points
// remain (x: the bucket's last step and time).
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
    run.eval = json::parse(read_file(paths.eval()), nullptr, false);
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

// ------------------------------------------------------------------ the page

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string fixed(double v, int digits) { return std::isfinite(v) ? num(("%." + std::to_string(digits) + "f").c_str(), v) : "—"; }

std::string duration(double s) {
  if (!std::isfinite(s)) return "—";
  if (s < 120) return num("%.0f s", s);
  if (s < 7200) return num("%.1f min", s / 60);
  return num("%.1f h", s / 3600);
}

// The best (lowest or highest) finite value of `key` in `records`, NaN when none.
double best_of(const std::vector<json>& records, const char* key, bool lowest) {
  double best = kNaN;
  for (const json& j : records) {
    const double v = number(j, key);
    if (std::isfinite(v) && (std::isnan(best) || (lowest ? v < best : v > best))) best = v;
  }
  return best;
}

std::string swatch(const Run& r) {
  return "<span class=\"swatch\" style=\"background:" + r.color + "\"></span>" + escape_markup(r.name);
}

std::string run_attrs(size_t i) { return " data-run=\"" + std::to_string(i) + "\""; }

void summary_section(std::string& h, const std::vector<Run>& runs) {
  h += "<section id=\"runs\"><h2>Runs</h2><table class=\"summary\"><tr><th>show</th><th>run</th><th>steps</th>"
       "<th>training time</th><th>validations</th><th>best valid loss</th><th>best BLEU</th><th>best chrF</th></tr>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    double steps = kNaN, time = kNaN;
    for (const auto* v : {&r.train, &r.valid})
      if (!v->empty()) {
        steps = std::max(std::isnan(steps) ? 0.0 : steps, number(v->back(), "step"));
        time = std::max(std::isnan(time) ? 0.0 : time, number(v->back(), "elapsed_s"));
      }
    h += "<tr" + run_attrs(i) + "><td><input type=\"checkbox\" class=\"run-toggle\" checked" + run_attrs(i) +
         "></td><td class=\"nowrap\" title=\"" + escape_markup(r.dir) + "\">" + swatch(r) + "</td><td>" +
         fixed(steps, 0) + "</td><td>" + duration(time) + "</td><td>" + std::to_string(r.valid.size()) + "</td><td>" +
         fixed(best_of(r.valid, "loss", true), 4) + "</td><td>" + fixed(best_of(r.valid, "bleu", false), 2) +
         "</td><td>" + fixed(best_of(r.valid, "chrf", false), 2) + "</td></tr>\n";
  }
  h += "</table></section>\n";
}

// A table of one row per key and one column per run; rows whose values differ are marked.
void side_by_side(std::string& h, const std::vector<Run>& runs, const std::vector<std::string>& keys,
                  const std::vector<std::map<std::string, std::string>>& values, const char* id) {
  // One run: its settings in columns, to keep the page short; several: only those that differ, at first.
  const bool config = id == std::string("config-table");
  const std::string cls = !config ? "side" : runs.size() == 1 ? "side single" : "side only-diff";
  h += "<table class=\"" + cls + "\" id=\"" + id + "\"><tr><th></th>";
  for (size_t i = 0; i < runs.size(); ++i)
    h += "<th class=\"per-run\"" + run_attrs(i) + ">" + swatch(runs[i]) + "</th>";
  h += "</tr>\n";
  for (const std::string& key : keys) {
    std::set<std::string> distinct;
    for (const auto& v : values) distinct.insert(v.count(key) ? v.at(key) : "\x01");
    h += std::string("<tr") + (distinct.size() > 1 ? " class=\"diff\"" : "") + "><th>" + escape_markup(key) + "</th>";
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto it = values[i].find(key);
      const std::string value = it == values[i].end() ? "<span class=\"sub\">—</span>"
                                : it->second.empty()   ? "<span class=\"sub\">(empty)</span>"
                                                       : escape_markup(it->second);
      h += "<td class=\"per-run\"" + run_attrs(i) + ">" + value + "</td>";
    }
    h += "</tr>\n";
  }
  h += "</table>\n";
}

void config_section(std::string& h, const std::vector<Run>& runs) {
  std::vector<std::string> keys;
  std::vector<std::map<std::string, std::string>> values;
  for (const Run& r : runs) {
    values.emplace_back();
    for (const auto& [k, v] : r.config) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      values.back()[k] = v;
    }
  }
  h += "<section id=\"config\"><h2>Configuration</h2>";
  if (keys.empty()) {
    h += "<p class=\"note\">no config.toml</p></section>\n";
    return;
  }
  if (runs.size() > 1)
    h += "<label class=\"controls\"><input type=\"checkbox\" id=\"only-diff\" checked> only the settings that "
         "differ (highlighted)</label>";
  side_by_side(h, runs, keys, values, "config-table");
  h += "</section>\n";
}

void facts_section(std::string& h, const std::vector<Run>& runs) {
  std::vector<std::string> keys;
  std::vector<std::map<std::string, std::string>> values;
  for (const Run& r : runs) values.push_back(r.facts);
  for (const Fact& f : kFacts)
    for (const Run& r : runs)
      if (r.facts.count(f.label) && std::find(keys.begin(), keys.end(), f.label) == keys.end()) keys.push_back(f.label);
  h += "<section id=\"data\"><h2>Data and model</h2>";
  if (keys.empty()) h += "<p class=\"note\">no train.log</p>";
  else side_by_side(h, runs, keys, values, "facts-table");
  h += "</section>\n";
}

void eval_section(std::string& h, const std::vector<Run>& runs) {
  std::string rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& e = runs[i].eval;
    if (!e.is_object()) continue;
    auto text = [&](const char* key) {
      const auto it = e.find(key);
      return it == e.end() || it->is_null() ? "—" : escape_markup(it->is_string() ? it->get<std::string>() : dump(*it));
    };
    const auto model = e.find("model");
    const std::string weights = model != e.end() && model->is_string() ? model->get<std::string>() : "";
    rows += "<tr class=\"per-run\"" + run_attrs(i) + "><td class=\"nowrap\">" + swatch(runs[i]) + "</td><td>" +
            text("test") + "</td><td>" + fixed(number(e, "bleu"), 2) + "</td><td>" + fixed(number(e, "chrf"), 2) +
            "</td><td>" + text("sentences") + "</td><td>" + text("beam") + "</td><td title=\"" +
            escape_markup(weights) + "\">" + escape_markup(fs::path(weights).filename().string()) + "</td></tr>\n";
  }
  h += "<section id=\"test\"><h2>Test scores</h2>";
  if (rows.empty())
    h += "<p class=\"note\">none yet: <code>rosetta eval --model RUN --test FILE</code> records them</p>";
  else
    h += "<table class=\"eval\"><tr><th>run</th><th>test set</th><th>BLEU</th><th>chrF</th><th>sentences</th>"
         "<th>beam</th><th>weights</th></tr>\n" + rows + "</table>";
  h += "</section>\n";
}

std::string string_at(const json& record, const char* key, size_t i) {
  const auto it = record.find(key);
  if (it == record.end() || !it->is_array() || i >= it->size() || !(*it)[i].is_string()) return "";
  return (*it)[i].get<std::string>();
}

void translations_section(std::string& h, const std::vector<Run>& runs, const ReportOptions& o) {
  h += "<section id=\"translations\"><h2>Translations over time</h2>"
       "<p class=\"note\">The first validation sentences, translated at every validation "
       "(<span class=\"exact\">exact match</span>).</p>\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    const auto& recs = runs[r].translations;
    h += "<div class=\"per-run block\"" + run_attrs(r) + "><h3>" + swatch(runs[r]) + "</h3>";
    if (recs.empty()) {
      h += "<p class=\"note\">no translations recorded (translations.jsonl)</p></div>\n";
      continue;
    }
    // At most max_translation_rows validations, evenly spaced, the first and the last included.
    const size_t n = recs.size(), m = std::max<size_t>(2, o.max_translation_rows);
    std::vector<size_t> shown;
    for (size_t k = 0; k < std::min(n, m); ++k) shown.push_back(n <= m ? k : k * (n - 1) / (m - 1));
    if (n > m) h += concat("<p class=\"note\">", shown.size(), " of ", n, " validations shown</p>");
    const json& last = recs.back();
    const size_t sentences = last.contains("src") && last["src"].is_array() ? last["src"].size() : 0;
    for (size_t s = 0; s < sentences; ++s) {
      const std::string src = string_at(last, "src", s), ref = string_at(last, "ref", s);
      h += std::string("<details class=\"sentence\"") + (s == 0 ? " open" : "") + "><summary>" +
           std::to_string(s + 1) + ". " + escape_markup(src) + "</summary><table class=\"translations\"" +
           run_attrs(r) + " data-sentence=\"" + std::to_string(s) + "\">" + "<tr class=\"src\"><th>source</th><td>" +
           escape_markup(src) + "</td></tr><tr class=\"ref\"><th>reference</th><td>" + escape_markup(ref) + "</td></tr>\n";
      for (size_t k : shown) {
        const std::string hyp = string_at(recs[k], "hyp", s);
        const std::string step = fixed(number(recs[k], "step"), 0);
        h += "<tr class=\"hyp" + std::string(hyp == ref ? " exact" : "") + "\" data-step=\"" + step + "\"><th>step " +
             step + "</th><td>" + (hyp.empty() ? "<span class=\"sub\">(empty)</span>" : escape_markup(hyp)) +
             "</td></tr>\n";
      }
      h += "</table></details>\n";
    }
    h += "</div>\n";
  }
  h += "</section>\n";
}

void attention_section(std::string& h, const std::vector<Run>& runs) {
  h += "<section id=\"attention\"><h2>Attention</h2><p class=\"note\">The recorded validation sentences "
       "translated greedily by each run's best model. Rows: the token predicted; columns: the tokens attended to; "
       "darker: more attention, relative to the largest value shown (hover a cell for its value)."
       "</p>\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    const json& a = runs[r].attention;
    h += "<div class=\"per-run block\"" + run_attrs(r) + "><h3>" + swatch(runs[r]);
    if (a.contains("note")) {
      h += "</h3><p class=\"note\">" + escape_markup(a["note"].get<std::string>()) + "</p></div>\n";
      continue;
    }
    h += " <span class=\"sub\">" + escape_markup(a["weights"].get<std::string>()) + ", step " +
         escape_markup(a["step"].get<std::string>()) + "</span></h3><div class=\"attn\"" + run_attrs(r) +
         "></div></div>\n";
  }
  h += "</section>\n";
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

// '<', '>' and '&' as \u escapes: the JSON cannot end its <script> element, and parses the same.
std::string script_json(const json& j) {
  std::string out;
  for (char c : dump(j)) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

}  // namespace

std::string report_html(const std::vector<std::string>& dirs, const ReportOptions& o,
                        std::vector<std::string>* warnings) {
  ROSETTA_CHECK(!dirs.empty(), "no run directories to report on");
  Notes notes;
  std::vector<Run> runs;
  std::map<std::string, int> names;
  for (const std::string& d : dirs) {
    std::string dir = d;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    runs.push_back(read_run(dir, o, notes));
    runs.back().name = fs::path(dir).filename().string();
    ++names[runs.back().name];
  }
  json data = {{"runs", json::array()}};
  std::string title;
  for (size_t i = 0; i < runs.size(); ++i) {
    Run& r = runs[i];
    if (names[r.name] > 1) r.name = r.dir;  // two runs of the same name: their paths tell them apart
    r.color = kColors[i % std::size(kColors)];
    title += (i ? ", " : "") + r.name;
    data["runs"].push_back(
        {{"name", r.name}, {"color", r.color},
         {"train", curves(r.train, {"loss", "ppl", "lr", "grad_norm", "tokens_per_s"}, o.max_points)},
         {"valid", curves(r.valid, {"loss", "ppl", "bleu", "chrf"}, std::max(r.valid.size(), size_t(1)))},
         {"attention", r.attention}});
  }
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                  "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                  "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                  "<title>rosetta report: " + escape_markup(title) + "</title>\n"
                  // First, so that any script error marks the page (tests look for data-error).
                  "<script>window.onerror = function (message, source, line) {\n"
                  "  document.documentElement.setAttribute('data-error', message + ' (line ' + line + ')');\n"
                  "  var e = document.getElementById('error');\n"
                  "  if (e) { e.hidden = false; e.textContent = 'The page failed to render: ' + message; }\n"
                  "};</script>\n<style>" + report_css() + "</style></head>\n<body>\n";
  h += "<header><h1>rosetta report</h1><p class=\"sub\">" + escape_markup(title) + " · generated " + now_text() +
       " · reload to follow a live run</p></header>\n<div id=\"error\" class=\"error\" hidden></div>\n";
  summary_section(h, runs);
  if (!notes.lines.empty()) {
    h += "<section id=\"notes\" class=\"warnings\"><h2>Warnings</h2><ul>";
    for (size_t i = 0; i < std::min<size_t>(notes.lines.size(), 50); ++i)
      h += "<li>" + escape_markup(notes.lines[i]) + "</li>";
    if (notes.lines.size() > 50) h += concat("<li>… and ", notes.lines.size() - 50, " more</li>");
    h += "</ul></section>\n";
  }
  h += "<section id=\"curves\"><h2>Curves</h2><div class=\"controls\">x axis: <button data-x=\"step\" "
       "class=\"on\">update step</button><button data-x=\"time\">training time</button>"
       "<span class=\"sub\">hover for values; solid: training, dashed: validation";
  size_t bucket = 1;
  for (const json& r : data["runs"]) bucket = std::max(bucket, r["train"]["bucket"].get<size_t>());
  if (bucket > 1) h += concat("; training curves: means of up to ", bucket, " consecutive records");
  h += "</span></div><div id=\"charts\" class=\"charts\"></div></section>\n";
  config_section(h, runs);
  facts_section(h, runs);
  eval_section(h, runs);
  translations_section(h, runs, o);
  attention_section(h, runs);
  h += "<div id=\"tooltip\" class=\"tooltip\" hidden></div>\n<script type=\"application/json\" id=\"report-data\">" +
       script_json(data) + "</script>\n<script>" + report_js() + "</script>\n</body></html>\n";
  if (warnings) warnings->insert(warnings->end(), notes.lines.begin(), notes.lines.end());
  return h;
}

void write_report(const std::vector<std::string>& runs, const std::string& out, const ReportOptions& options,
                  std::vector<std::string>* warnings) {
  write_file_atomic(out, report_html(runs, options, warnings));
}

}  // namespace rosetta::report
