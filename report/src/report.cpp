// rosetta report (report.h). The C++ side reads the runs (run_files.cpp), writes the tables (all
// text escaped) and puts what the script draws (curves, heatmaps) in the page as JSON, in a
// <script type="application/json"> element whose '<', '>' and '&' are \u escapes.
#include "rosetta/report/report.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/report/escape.h"
#include "run_files.h"

namespace rosetta::report {

namespace fs = std::filesystem;

namespace {

using detail::curves;
using detail::dump;
using detail::Fact;
using detail::json;
using detail::kFacts;
using detail::kNaN;
using detail::Notes;
using detail::number;
using detail::read_run;
using detail::Run;
using rosetta::detail::concat;
using rosetta::detail::num;

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
