// rosetta report: the page's data and escaping (report_html; the escaper itself and the SVG
// charts: tests/report), malformed metrics lines, the size of a long run's page, what the trainer
// records for it (translations.jsonl, truncated on resume; report.html) and eval.json; and the
// pages rendered in headless Chromium (skipped with a message when no Chromium is installed:
// Debian's `chromium`, or ROSETTA_CHROMIUM=/path/to/it).
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <map>
#include <regex>

#include "cli_support.h"
#include "rosetta/report/report.h"
#include "rosetta/translator/run.h"

using nlohmann::json;
using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::read_jsonl;
using rosetta::test::run_rosetta;
using rosetta::test::slurp;
using rosetta::test::write_file;
namespace fs = std::filesystem;

namespace {

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// The page's data: the JSON of its <script type="application/json"> element.
json page_data(const std::string& html) {
  const std::string open = "id=\"report-data\">";
  const size_t b = html.find(open) + open.size(), e = html.find("</script>", b);
  return json::parse(html.substr(b, e - b));
}

// The attributes of every <tag ...> element in `html`.
std::vector<std::map<std::string, std::string>> elements(const std::string& html, const std::string& tag) {
  std::vector<std::map<std::string, std::string>> out;
  const std::regex element("<" + tag + "\\s([^>]*)>"), attribute("([\\w-]+)=\"([^\"]*)\"");
  for (std::sregex_iterator it(html.begin(), html.end(), element), end; it != end; ++it) {
    const std::string attrs = (*it)[1];
    auto& a = out.emplace_back();
    for (std::sregex_iterator at(attrs.begin(), attrs.end(), attribute); at != end; ++at) a[(*at)[1]] = (*at)[2];
  }
  return out;
}


// ------------------------------------------------------------------ headless Chromium

std::string find_chromium() {
  if (const char* env = std::getenv("ROSETTA_CHROMIUM")) return env;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
    if (std::system((std::string("command -v ") + name + " > /dev/null 2>&1").c_str()) == 0) return name;
  return "";
}

struct Page {
  std::string dom;  // after the page's script ran
  std::string log;  // Chromium's stderr: console messages, script errors, blocked loads
};

// Opens the file `html` in headless Chromium (no network, a fresh profile, at most 2 minutes):
// the DOM, and a screenshot to `png` when given.
Page open_page(const std::string& chromium, const std::string& html, const TempDir& work, const std::string& png = "") {
  static int profiles = 0;
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking "
      "--disable-component-update --disable-sync --enable-logging=stderr --v=0 --user-data-dir='" +
      work / ("chromium-profile-" + std::to_string(++profiles)) + "' ";
  const std::string url = "'file://" + fs::absolute(html).string() + "'";
  const std::string dom = work / "dom.html", log = work / "chromium.log";
  const int status = std::system(("timeout 120 " + chromium + flags + "--dump-dom " + url + " > '" + dom + "' 2> '" +
                                  log + "'").c_str());
  INFO(slurp(log));
  REQUIRE(status == 0);
  Page page{slurp(dom), slurp(log)};
  if (!png.empty()) {
    fs::create_directories(fs::path(png).parent_path());
    std::system(("timeout 120 " + chromium + flags + "--window-size=1200,2000 --screenshot='" + png + "' " + url +
                 " > /dev/null 2>&1").c_str());
  }
  return page;
}

// The page rendered: its script finished (data-ok), no script error (data-error, set by its
// window.onerror), and nothing on the console (script errors, blocked loads of resources).
void require_rendered(const Page& page) {
  INFO(page.log);
  REQUIRE(page.dom.find("data-ok=\"rendered\"") != std::string::npos);
  REQUIRE(page.dom.find("data-error=") == std::string::npos);
  REQUIRE(page.log.find(":CONSOLE") == std::string::npos);
}

// Where screenshots go: beside the rosetta binary, in the build directory.
std::string artifact(const std::string& name) {
  return (fs::path(ROSETTA_BIN).parent_path() / "test-artifacts" / name).string();
}

const char* kCopyFlags =
    "--task copy --d-model 32 --heads 2 --ff 64 --encoder-layers 1 --decoder-layers 2 --max-tokens 1024 "
    "--warmup 10 --dropout 0 --copy-symbols 8 --copy-min-len 3 --copy-max-len 6 --copy-train-size 200 "
    "--copy-valid-size 10 --valid-bleu-sentences 10 --threads 1 --log-every 2 ";

// A run directory written by hand: what the trainer writes, and a malformed metrics line.
void fake_run(const std::string& dir, const std::string& src, const std::string& config_value) {
  fs::create_directories(dir);
  write_file(dir + "/metrics.jsonl",
             "{\"kind\":\"train\",\"step\":1,\"epoch\":0,\"loss\":5.0,\"ppl\":148.4,\"lr\":0.001,\"grad_norm\":2.0,"
             "\"tokens_per_s\":1000,\"elapsed_s\":1.0}\n"
             "{\"kind\":\"train\",\"step\":2,\"loss\":4.\n"  // truncated
             "garbage\n"
             "{\"kind\":\"train\",\"step\":3,\"epoch\":0,\"loss\":null,\"ppl\":null,\"lr\":0.002,\"grad_norm\":1.5,"
             "\"tokens_per_s\":1100,\"elapsed_s\":3.0}\n"
             "{\"kind\":\"valid\",\"step\":3,\"loss\":4.5,\"ppl\":90.0,\"bleu\":1.5,\"chrf\":10.0,\"exact\":0,"
             "\"elapsed_s\":3.5}\n");
  write_file(dir + "/config.toml", "task=\"translate\"\nout=\"" + config_value + "\"\nlr=1e-3\n");
  write_file(dir + "/train.log",
             "[2026-01-01 00:00:00.000] [info] data: 7 training pairs, 1 validation pairs\n"
             "[2026-01-01 00:00:09.000] [info] best weights chosen on all 1 validation pairs (beam 4, as rosetta "
             "eval): the EMA of step 3 bleu 1.50, the trained weights of step 3 1.60: best.safetensors holds the "
             "trained weights\n");
  write_file(dir + "/translations.jsonl",
             json({{"step", 3}, {"src", {src}}, {"ref", {src}}, {"hyp", {"x"}}}).dump() + "\n");
}

}  // namespace

TEST_CASE("report: malformed metrics lines are skipped with a warning, and no text breaks the page", "[report]") {
  TempDir work("report_fake");
  const std::string nasty = "<b>Bäume</b> & \"Häuser\" 'x' </script><script>alert(1)</script>";
  const std::string run = work / "run<&\"'>";
  fake_run(run, nasty, "</script><script>alert(2)</script>");
  std::vector<std::string> warnings;
  const std::string html = rosetta::report::report_html({run}, {}, &warnings);
  // The malformed lines are named on the page and returned to the caller; the good ones are plotted.
  REQUIRE(html.find("metrics.jsonl:2: skipped") != std::string::npos);
  REQUIRE(html.find("metrics.jsonl:3: skipped") != std::string::npos);
  REQUIRE(warnings.size() >= 2);
  REQUIRE(warnings[0].find("metrics.jsonl:2: skipped: not a JSON object") != std::string::npos);
  // rosetta report logs them.
  const std::string plain = work / "plain";
  fake_run(plain, "x", "y");
  const auto r = run_rosetta("report " + plain + " --out " + std::string(work / "page.html") + " --no-attention");
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("metrics.jsonl:2: skipped: not a JSON object") != std::string::npos);
  // rosetta plot reads the same lines the same way.
  const auto p = run_rosetta("plot --run " + plain + " --out " + std::string(work / "curves.svg"));
  INFO(p.output);
  REQUIRE(p.exit_code == 0);
  REQUIRE(p.output.find("metrics.jsonl:2: skipped: not a JSON object") != std::string::npos);
  const json data = page_data(html);
  REQUIRE(data["runs"][0]["train"]["step"] == json({1, 3}));
  REQUIRE(data["runs"][0]["train"]["loss"] == json({5.0, nullptr}));
  REQUIRE(data["runs"][0]["valid"]["bleu"] == json({1.5}));
  REQUIRE(data["runs"][0]["name"] == "run<&\"'>");
  // No text became markup: three script elements (the error handler, the data, the script).
  REQUIRE(count(html, "<script") == 3);
  REQUIRE(html.find("alert(1)</script>") == std::string::npos);
  REQUIRE(html.find("<b>") == std::string::npos);
  REQUIRE(html.find("&lt;b&gt;Bäume&lt;/b&gt; &amp; &quot;Häuser&quot; &#39;x&#39;") != std::string::npos);
  REQUIRE(html.find("run&lt;&amp;&quot;&#39;&gt;") != std::string::npos);
  // No model: the attention section says so.
  REQUIRE(html.find("no model yet") != std::string::npos);
  // train.log's facts, the end's choice of the best weights among them.
  REQUIRE(html.find("7 training pairs, 1 validation pairs") != std::string::npos);
  REQUIRE(html.find("the trained weights of step 3 1.60: best.safetensors holds the trained weights") !=
          std::string::npos);

  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    WARN("no Chromium (install Debian's chromium, or set ROSETTA_CHROMIUM): the page was not rendered");
    return;
  }
  write_file(work / "page.html", html);
  const Page page = open_page(chromium, work / "page.html", work);
  require_rendered(page);
  // The text is text in the browser's DOM too (serialized with its markup escaped).
  REQUIRE(page.dom.find("<td>&lt;b&gt;Bäume&lt;/b&gt; &amp; \"Häuser\" 'x' &lt;/script&gt;") != std::string::npos);
  REQUIRE(page.dom.find("<b>B") == std::string::npos);
}

TEST_CASE("report: a long run's page stays small", "[report]") {
  TempDir work("report_long");
  const std::string run = work / "long";
  fs::create_directories(run);
  std::string metrics, translations;
  for (int step = 1; step <= 40000; ++step) {
    metrics += json({{"kind", "train"}, {"step", step}, {"epoch", step / 1000}, {"loss", 5.0 / step},
                     {"ppl", 1.0 + 1.0 / step}, {"lr", 1e-3}, {"grad_norm", 0.5}, {"tokens_per_s", 20000.5},
                     {"elapsed_s", step * 0.31}}).dump() + "\n";
    if (step % 20 == 0) {
      metrics += json({{"kind", "valid"}, {"step", step}, {"loss", 3.0}, {"ppl", 20.1}, {"bleu", 10.5},
                       {"chrf", 30.25}, {"exact", 0.0}, {"elapsed_s", step * 0.31}}).dump() + "\n";
      const std::vector<std::string> s(5, "ein ganz normaler Satz mit einigen Wörtern darin, wie sie vorkommen");
      translations += json({{"step", step}, {"src", s}, {"ref", s}, {"hyp", s}}).dump() + "\n";
    }
  }
  write_file(run + "/metrics.jsonl", metrics);
  write_file(run + "/translations.jsonl", translations);
  const std::string html = rosetta::report::report_html({run});
  INFO("page of " << html.size() << " bytes");
  REQUIRE(html.size() < 3'000'000);
  const json data = page_data(html);
  REQUIRE(data["runs"][0]["train"]["step"].size() <= 2000);
  REQUIRE(data["runs"][0]["train"]["step"].back() == 40000);
  REQUIRE(data["runs"][0]["valid"]["step"].size() == 2000);
  REQUIRE(count(html, "<tr class=\"hyp") == 5 * rosetta::report::ReportOptions().max_translation_rows);
}

TEST_CASE("train records translations (truncated on resume) and its report, eval records eval.json", "[report]") {
  TempDir work("report_resume");
  const std::string run = work / "run";
  RunResult r = run_rosetta(std::string("train ") + kCopyFlags + "--lr 3e-3 --max-steps 8 --validate-every 4 "
                            "--save-every 4 --out " + run);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // A line from beyond the checkpoint, as a run killed after a validation leaves.
  std::ofstream(run + "/translations.jsonl", std::ios::app)
      << json({{"step", 10}, {"src", {"1"}}, {"ref", {"1"}}, {"hyp", {"1"}}}).dump() << "\n";
  r = run_rosetta("train --resume " + run + " --max-steps 12");
  REQUIRE(r.exit_code == 0);
  const auto lines = read_jsonl(run + "/translations.jsonl");
  REQUIRE(lines.size() == 3);
  for (size_t i = 0; i < lines.size(); ++i) {
    REQUIRE(lines[i]["step"] == 4 * (i + 1));
    REQUIRE(lines[i]["src"].size() == rosetta::translator::kSampleSentences);
    REQUIRE(lines[i]["hyp"].size() == rosetta::translator::kSampleSentences);
    REQUIRE(lines[i]["ref"] == lines[i]["src"]);  // the copy task
  }
  // The report the trainer rewrote at the last validation.
  const json data = page_data(slurp(run + "/report.html"));
  REQUIRE(data["runs"][0]["valid"]["step"] == json({4, 8, 12}));

  rosetta::test::write_tsv(work / "test.tsv", {{"3 1 4", "3 1 4"}, {"2 7 1 5", "2 7 1 5"}});
  r = run_rosetta("eval --model " + run + " --test " + (work / "test.tsv"));
  REQUIRE(r.exit_code == 0);
  const json ev = json::parse(slurp(run + "/eval.json"));
  REQUIRE(ev["test"] == work / "test.tsv");
  REQUIRE(ev["sentences"] == 2);
  REQUIRE(ev.contains("bleu"));
}

TEST_CASE("report pages of one run and of two runs render in headless Chromium", "[report]") {
  TempDir work("report_browser");
  const std::string a = work / "lr3e-3", b = work / "lr1e-3";
  for (const auto& [dir, lr] : {std::pair{a, "3e-3"}, std::pair{b, "1e-3"}}) {
    const RunResult r = run_rosetta(std::string("train ") + kCopyFlags + "--max-steps 12 --validate-every 4 --lr " +
                                    lr + " --out " + dir);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
  rosetta::test::write_tsv(work / "test.tsv", {{"3 1 4", "3 1 4"}});
  REQUIRE(run_rosetta("eval --model " + a + " --test " + (work / "test.tsv")).exit_code == 0);
  RunResult r = run_rosetta("report " + a + " --out " + (work / "one.html"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_rosetta("report " + a + " " + b + " --out " + (work / "two.html"));
  REQUIRE(r.exit_code == 0);

  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    WARN("no Chromium (install Debian's chromium, or set ROSETTA_CHROMIUM): the pages were not rendered");
    return;
  }
  size_t valid_lines = 0, train_lines = 0;
  for (const json& j : read_jsonl(a + "/metrics.jsonl")) {  // the curves: not the end's valid_trained line
    valid_lines += j["kind"] == "valid";
    train_lines += j["kind"] == "train";
  }
  REQUIRE(valid_lines == 3);
  for (const auto& [file, runs] : {std::pair{std::string("one"), 1}, std::pair{std::string("two"), 2}}) {
    INFO(file);
    const Page page = open_page(chromium, work / (file + ".html"), work, artifact("report-" + file + "-run.png"));
    require_rendered(page);
    const auto paths = elements(page.dom, "path");
    const auto heatmaps = elements(page.dom, "svg class=\"heatmap\"");
    REQUIRE(heatmaps.size() == size_t(runs));
    for (int run = 0; run < runs; ++run) {
      const std::string id = std::to_string(run);
      INFO("run " << id);
      // One curve per run and metric; the validation curves have a point per validation.
      for (const char* metric : {"train.loss", "train.ppl", "train.lr", "train.grad_norm", "train.tokens_per_s",
                                 "valid.loss", "valid.ppl", "valid.bleu", "valid.chrf"}) {
        INFO(metric);
        std::vector<std::map<std::string, std::string>> curves;
        for (const auto& p : paths)
          if (p.count("data-run") && p.at("data-run") == id && p.at("data-metric") == metric) curves.push_back(p);
        REQUIRE(curves.size() == 1);
        REQUIRE(curves[0]["data-run-name"] == (run == 0 ? "lr3e-3" : "lr1e-3"));
        REQUIRE(curves[0]["data-points"] == std::to_string(metric[0] == 'v' ? valid_lines : train_lines));
      }
      // The translations: a table per recorded sentence, a row per validation.
      size_t tables = 0;
      for (size_t at = page.dom.find("<table class=\"translations\" data-run=\"" + id + "\"");
           at != std::string::npos;
           at = page.dom.find("<table class=\"translations\" data-run=\"" + id + "\"", at + 1)) {
        ++tables;
        const std::string table = page.dom.substr(at, page.dom.find("</table>", at) - at);
        REQUIRE(count(table, "<tr class=\"hyp") == valid_lines);
      }
      REQUIRE(tables == rosetta::translator::kSampleSentences);
      // The heatmap: a cell per (target, source) token pair.
      const auto& h = heatmaps[size_t(run)];
      REQUIRE(h.at("data-run") == id);
      const size_t at = page.dom.find("data-run=\"" + id + "\" data-rows");
      const std::string svg = page.dom.substr(at, page.dom.find("</svg>", at) - at);
      REQUIRE(std::stoul(h.at("data-rows")) > 0);
      REQUIRE(count(svg, "<rect") == std::stoul(h.at("data-rows")) * std::stoul(h.at("data-cols")));
    }
    // Test scores of the run that was evaluated; the configurations side by side, lr differing.
    REQUIRE(page.dom.find("test.tsv") != std::string::npos);
    if (runs == 2) REQUIRE(std::regex_search(page.dom, std::regex("<tr class=\"diff\"><th>lr</th>")));
  }
}
