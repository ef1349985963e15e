#include "rosetta/translator/sweep.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "rosetta/data/corpus.h"

namespace rosetta::translator {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The optional numbers of a record and their JSON keys, in the order of results.jsonl.
template <class Record, class F>
void for_each_number(Record& r, F&& f) {
  f("updates", r.updates);
  f("epochs", r.epochs);
  f("train_s", r.train_s);
  f("best_valid_loss", r.best_valid_loss);
  f("best_valid_bleu", r.best_valid_bleu);
  f("best_valid_chrf", r.best_valid_chrf);
  f("bleu_at_best_loss", r.bleu_at_best_loss);
  f("wall_s", r.wall_s);
  f("load_before", r.load_before);
  f("load_after", r.load_after);
}

}  // namespace

bool sweep_sets_flag(const std::string& flag) {
  for (const std::string r : {"--out", "--resume", "--max-time", "--dump-config"})
    if (flag == r || flag.rfind(r + "=", 0) == 0) return true;
  return false;
}

std::vector<SweepConfig> read_sweep_grid(const std::string& path) {
  static const std::regex kName("[A-Za-z0-9][A-Za-z0-9._-]*");
  std::vector<SweepConfig> grid;
  const std::vector<std::string> lines = data::read_lines(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::istringstream words(lines[i]);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    if (w.empty() || w[0][0] == '#') continue;
    SweepConfig c{w[0], path + ":" + std::to_string(i + 1), {w.begin() + 1, w.end()}};
    ROSETTA_CHECK(std::regex_match(c.name, kName), c.where, ": '", c.name, "' is not a name (a line is NAME ",
                  "FLAGS...; a NAME is letters, digits, '.', '_' and '-', starting with a letter or digit)");
    for (const SweepConfig& seen : grid)
      ROSETTA_CHECK(seen.name != c.name, c.where, ": the name '", c.name, "' is already used at ", seen.where);
    for (const auto& f : c.flags)
      ROSETTA_CHECK(!sweep_sets_flag(f), c.where, ": ", f, " is set by the sweep (--out DIR/runs/NAME, --max-time)");
    grid.push_back(std::move(c));
  }
  ROSETTA_CHECK(!grid.empty(), path, ": no configurations (one per line: NAME TRAIN-FLAGS...)");
  return grid;
}

void SweepRecord::summarize(const std::string& metrics_path) {
  std::istringstream in(fs::exists(metrics_path) ? read_file(metrics_path) : "");
  auto num = [](const json& j, const char* k) { return j.contains(k) && j[k].is_number(); };
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    // The lines are in step order (a resumed run drops those after its checkpoint): the last
    // line's step is the run's updates, its elapsed_s the time spent training.
    if (num(j, "step")) updates = j["step"].get<double>();
    if (num(j, "elapsed_s")) train_s = j["elapsed_s"].get<double>();
    if (j.value("kind", "") == "train" && num(j, "epoch")) epochs = j["epoch"].get<double>();
    // valid_trained: the trained weights validated at the end of a run with --ema (run_loop.cpp)
    if (j.value("kind", "") != "valid" && j.value("kind", "") != "valid_trained") continue;
    auto keep = [&](std::optional<double>& best, const char* field, bool lower) {
      if (num(j, field) && (!best || (j[field].get<double>() < *best) == lower)) best = j[field].get<double>();
    };
    if (num(j, "loss") && (!best_valid_loss || j["loss"].get<double>() < *best_valid_loss))
      bleu_at_best_loss = num(j, "bleu") ? std::optional<double>(j["bleu"].get<double>()) : std::nullopt;
    keep(best_valid_loss, "loss", true);
    keep(best_valid_bleu, "bleu", false);
    keep(best_valid_chrf, "chrf", false);
  }
}

std::optional<double> SweepRecord::best_valid(BestMetric select) const {
  return select == BestMetric::loss ? best_valid_loss : select == BestMetric::chrf ? best_valid_chrf : best_valid_bleu;
}

std::optional<double> SweepRecord::metric(BestMetric select) const {
  const std::optional<double> v = best_valid(select);
  if (status != "done" || !v) return std::nullopt;
  return select == BestMetric::loss ? -*v : *v;
}

std::string SweepRecord::to_json() const {
  json j = {{"name", name}, {"flags", flags}, {"status", status}};
  if (!error.empty()) j["error"] = error;
  // Whole numbers (updates, epochs) are written as integers, as metrics.jsonl has them.
  for_each_number(*this, [&j](const char* key, const std::optional<double>& v) {
    j[key] = !v ? json() : *v == std::floor(*v) && std::fabs(*v) < 9e15 ? json(int64_t(*v)) : json(*v);
  });
  j["max_time"] = max_time;
  j["common"] = common;
  return j.dump();
}

std::vector<SweepRecord> read_sweep_records(const std::string& path) {
  std::vector<SweepRecord> records;
  if (!fs::exists(path)) return records;
  const std::vector<std::string> lines = data::read_lines(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const json j = json::parse(lines[i], nullptr, false);
    auto text = [&](const char* key) { return j.is_object() && j.contains(key) && j[key].is_string(); };
    ROSETTA_CHECK(text("name") && text("flags") && text("status"), path, ":", i + 1,
                  ": not a sweep record (a JSON object with name, flags and status)");
    SweepRecord r;
    r.name = j["name"], r.flags = j["flags"], r.status = j["status"];
    r.error = text("error") ? j["error"].get<std::string>() : "";
    r.max_time = text("max_time") ? j["max_time"].get<std::string>() : "";
    if (j.contains("common") && j["common"].is_array())
      for (const json& f : j["common"])
        if (f.is_string()) r.common.push_back(f);
    for_each_number(r, [&j](const char* key, std::optional<double>& v) {
      if (j.contains(key) && j[key].is_number()) v = j[key].get<double>();
    });
    records.push_back(std::move(r));
  }
  return records;
}

std::string sweep_cell(const std::optional<double>& v, int digits) {
  return v ? rosetta::detail::num(("%." + std::to_string(digits) + "f").c_str(), *v) : "-";
}

std::string sweep_table(std::vector<SweepRecord>& records, BestMetric select) {
  std::stable_sort(records.begin(), records.end(), [&](const SweepRecord& a, const SweepRecord& b) {
    const auto x = a.metric(select), y = b.metric(select);
    return x && (!y || *x > *y);
  });
  const bool selected = !records.empty() && records[0].metric(select);
  auto md = [](const std::string& s) { return std::regex_replace(s, std::regex("\\|"), "\\|"); };
  std::string t = std::string("Sorted by best validation ") + best_metric_name(select) + "; * = selected.\n\n";
  t += "| | name | flags | status | updates | epochs | valid loss | BLEU | chrF | BLEU at best loss | train s "
       "| wall s | load before/after |\n|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const SweepRecord& r : records) {
    const std::string cells[] = {selected && &r == &records[0] ? "*" : "",
                                 md(r.name),
                                 md("`" + r.flags + "`"),
                                 md(r.status) + (r.error.empty() ? "" : ": " + md(r.error)),
                                 sweep_cell(r.updates, 0),
                                 sweep_cell(r.epochs, 0),
                                 sweep_cell(r.best_valid_loss, 4),
                                 sweep_cell(r.best_valid_bleu, 2),
                                 sweep_cell(r.best_valid_chrf, 2),
                                 sweep_cell(r.bleu_at_best_loss, 2),
                                 sweep_cell(r.train_s, 1),
                                 sweep_cell(r.wall_s, 1),
                                 sweep_cell(r.load_before, 2) + " / " + sweep_cell(r.load_after, 2)};
    for (const std::string& c : cells) t += "| " + c + " ";
    t += "|\n";
  }
  t += "\nload: the 1-minute load average before and after the run. A run under a time budget that shared "
       "the cores with other work made fewer updates: compare such rows with care.\n";
  return t;
}

}  // namespace rosetta::translator
