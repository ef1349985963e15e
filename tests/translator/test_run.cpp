// A whole training run from the library (translator/run.h), as `rosetta train` makes it but with the
// caller's hooks: the run directory's files, the log lines through the hooks (the library
// itself logs nothing), validations, and a resumed run that ends where an uninterrupted one does.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "rosetta/core/cpu.h"
#include "rosetta/core/io.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/train/process_group.h"
#include "rosetta/translator/run.h"
#include "rosetta/translator/run_data.h"
#include "support.h"

using namespace rosetta;
namespace fs = std::filesystem;

namespace {

std::string fresh_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("rosetta-test-run-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

// The copy task on a tiny model: no files needed.
translator::TrainConfig tiny_copy_run(const std::string& out, int64_t steps) {
  translator::TrainConfig c;
  c.task = translator::Task::copy;
  c.out = out;
  c.model.d_model(16).heads(2).ff(32).encoder_layers(1).decoder_layers(1).max_len(16);
  c.copy_train_size = 400;
  c.copy_valid_size = 20;
  c.max_tokens = 256;
  c.max_steps = steps;
  c.validate_every = 4;
  c.save_every = 4;
  c.log_every = 2;
  c.valid_bleu_sentences = 20;
  c.threads = 1;
  return c;
}

struct Heard {
  std::vector<std::string> info, warn;
  std::vector<int64_t> validated;
  int run_dir_ready = 0;
  translator::RunHooks hooks() {
    translator::RunHooks h;
    h.info = [this](const std::string& s) { info.push_back(s); };
    h.warn = [this](const std::string& s) { warn.push_back(s); };
    h.run_dir_ready = [this](const translator::RunPaths&) { ++run_dir_ready; };
    h.validated = [this](const translator::RunPaths&, int64_t step, const translator::TranslationScores& v) {
      REQUIRE(std::isfinite(v.loss));
      validated.push_back(step);
    };
    return h;
  }
  bool said(const std::string& start) const {
    for (const auto& line : info)
      if (line.rfind(start, 0) == 0) return true;
    return false;
  }
};

}  // namespace

TEST_CASE("train_translator runs in a directory and speaks only through its hooks", "[train][run]") {
  const std::string dir = fresh_dir("hooks");
  Heard heard;
  const translator::TrainOutcome r = translator::train_translator(tiny_copy_run(dir, 8), "task = \"copy\"\n", heard.hooks());
  REQUIRE(r.steps == 8);
  REQUIRE(r.stop_reason == translator::StopReason::max_steps);
  REQUIRE(r.root);
  REQUIRE(heard.run_dir_ready == 1);
  REQUIRE(heard.validated == std::vector<int64_t>{4, 8});
  REQUIRE(heard.said("starting run in " + dir));
  REQUIRE(heard.said("step 2 epoch 0 loss "));
  REQUIRE(heard.said("valid step 8: loss "));
  REQUIRE(heard.said("stopped at step 8 (max-steps)"));
  // The one warning a run may give: OpenBLAS on kernels below the CPU's (in a library user's
  // process nothing restarts it; the CLI does).
  const std::string blas_warning = blas_kernels_warning();
  REQUIRE(heard.warn == (blas_warning.empty() ? std::vector<std::string>{} : std::vector<std::string>{blas_warning}));
  const translator::RunPaths run(dir);
  for (const std::string& f : {run.config(), run.checkpoint(), run.best(), run.ema(), run.metrics(), run.translations()})
    REQUIRE(fs::exists(f));
  REQUIRE(read_file(run.config()) == "task = \"copy\"\n");
  // With a progress hook, the training lines go there instead.
  const std::string dir2 = fresh_dir("progress");
  Heard quiet;
  std::vector<std::string> progress;
  translator::RunHooks h = quiet.hooks();
  h.progress = [&](const std::string& s) { progress.push_back(s); };
  translator::train_translator(tiny_copy_run(dir2, 4), "", h);
  REQUIRE(progress.size() == 2);
  REQUIRE(progress[0].rfind("step 2 | epoch 0 | loss ", 0) == 0);
  REQUIRE_FALSE(quiet.said("step 2 epoch"));
  fs::remove_all(dir);
  fs::remove_all(dir2);
}

TEST_CASE("train_translator resumed halfway ends with the uninterrupted run's weights", "[train][run]") {
  const std::string whole = fresh_dir("whole"), halves = fresh_dir("halves");
  translator::train_translator(tiny_copy_run(whole, 8), "");
  translator::train_translator(tiny_copy_run(halves, 4), "");
  translator::TrainConfig rest = tiny_copy_run("", 8);
  rest.resume = halves;
  Heard heard;
  translator::train_translator(rest, "", heard.hooks());
  REQUIRE(heard.said("resumed at step 4"));
  const SafeTensors a = load_safetensors(translator::RunPaths(whole).checkpoint());
  const SafeTensors b = load_safetensors(translator::RunPaths(halves).checkpoint());
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    const Tensor* u = b.find(name);
    REQUIRE(u != nullptr);
    REQUIRE_THAT(*u, test::AllClose(t, 0, 0));
  }
  fs::remove_all(whole);
  fs::remove_all(halves);
}

namespace {

// A number field of a metrics.jsonl line (written by nlohmann::json: "key":value, no spaces).
double field(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  return std::stod(line.substr(at + key.size() + 3));
}

}  // namespace

TEST_CASE("train_translator with --ema validates the trained weights at the end and keeps the better", "[train][run]") {
  const std::string dir = fresh_dir("trained");
  translator::TrainConfig c = tiny_copy_run(dir, 8);
  c.best_metric = translator::BestMetric::loss;  // BLEU of a model this small is 0 either way; the loss always differs
  REQUIRE(c.ema > 0);
  Heard heard;
  translator::train_translator(c, "", heard.hooks());
  REQUIRE(heard.said("valid step 8 (trained weights, not the EMA): loss "));
  REQUIRE(heard.validated == std::vector<int64_t>{4, 8});  // the hook follows the EMA's validations
  // The lowest validation loss of all, the EMA's at steps 4 and 8 and the trained weights' at 8,
  // is what best.safetensors holds, and it says whose it is.
  const translator::RunPaths run(dir);
  std::istringstream lines(read_file(run.metrics()));
  double best = INFINITY;
  std::string best_kind;
  int trained = 0;
  for (std::string line; std::getline(lines, line);) {
    const bool ema = line.find("\"kind\":\"valid\"") != std::string::npos;
    const bool raw = line.find("\"kind\":\"valid_trained\"") != std::string::npos;
    if (raw) REQUIRE(field(line, "step") == 8);
    trained += raw;
    if ((ema || raw) && field(line, "loss") < best) {
      best = field(line, "loss");
      best_kind = raw ? "trained" : "ema";
    }
  }
  REQUIRE(trained == 1);
  const SafeTensors kept = load_safetensors(run.best());
  REQUIRE(kept.metadata.at("valid.weights") == best_kind);
  REQUIRE(std::abs(std::stod(kept.metadata.at("valid.loss")) - best) <= 1e-9 * best);
  // Kept trained weights are the last checkpoint's.
  if (best_kind == "trained") {
    const SafeTensors last = load_safetensors(run.checkpoint());
    for (const auto& [name, t] : kept.tensors) {
      const Tensor* u = last.find(name);
      REQUIRE(u != nullptr);
      REQUIRE_THAT(*u, test::AllClose(t, 0, 0));
    }
  }
  // Without the EMA there is one set of weights and one validation at the end.
  const std::string plain = fresh_dir("plain");
  translator::TrainConfig p = tiny_copy_run(plain, 8);
  p.ema = 0;
  Heard quiet;
  translator::train_translator(p, "", quiet.hooks());
  REQUIRE(quiet.said("valid step 8: loss "));
  REQUIRE_FALSE(quiet.said("valid step 8 (trained weights"));
  REQUIRE(read_file(translator::RunPaths(plain).metrics()).find("valid_trained") == std::string::npos);
  REQUIRE(load_safetensors(translator::RunPaths(plain).best()).metadata.at("valid.weights") == "trained");
  fs::remove_all(dir);
  fs::remove_all(plain);
}

TEST_CASE("train_translator with --ema, best by BLEU or chrF, chooses its best weights again on all validation pairs",
          "[train][run]") {
  const std::string dir = fresh_dir("final");
  translator::TrainConfig c = tiny_copy_run(dir, 40);
  c.validate_every = 20;
  c.ema = 0.9;                  // an average that differs from the trained weights in 40 updates
  c.lr = 1e-2;                  // which learn something: translations that differ
  c.warmup = "5";
  c.best_metric = translator::BestMetric::chrf;       // BLEU of a model this small is 0 either way; chrF is not
  c.valid_bleu_sentences = 5;   // the periodic validations translate 5 of the 20 (greedy)
  c.precision = PrecisionChoice::fp32;         // as the independent scoring below (no precision scope there)
  Heard heard;
  translator::train_translator(c, "", heard.hooks());
  REQUIRE(heard.said("best weights chosen on all 20 validation pairs (beam 4, as rosetta eval): "));
  const translator::RunPaths run(dir);
  std::istringstream lines(read_file(run.metrics()));
  std::string choice;
  for (std::string line; std::getline(lines, line);)
    if (line.find("\"kind\":\"final_choice\"") != std::string::npos) {
      REQUIRE(choice.empty());  // one
      choice = line;
    }
  REQUIRE_FALSE(choice.empty());
  REQUIRE(field(choice, "step") == 40);
  REQUIRE(field(choice, "sentences") == 20);
  const double kept = field(choice, "kept_chrf"), trained = field(choice, "trained_chrf");
  const bool to_trained = choice.find("\"chosen\":\"trained\"") != std::string::npos;
  REQUIRE(to_trained == (trained > kept));
  // Scored again here, from the files: the last checkpoint is the trained weights, and
  // best.safetensors holds the better of the two and says whose it is.
  translator::RunData d;
  translator::make_copy_task(c, d);  // the same held-out sequences (seeded)
  const auto score = [&](const std::string& which) {
    const translator::Translator t = translator::Translator::load(dir, which);
    return translator::validate_translation(*t.model, t.codec, d.valid, d.valid_text, c.max_tokens,
                                            d.valid_text.size(), nn::SearchOptions().beam(4), 0, train::ProcessGroup())
        .chrf;
  };
  REQUIRE(score("last") == trained);
  REQUIRE(score("best") == std::max(kept, trained));
  REQUIRE(load_safetensors(run.best()).metadata.at("valid.weights") == (to_trained ? "trained" : "ema"));
  // By loss (the test above) there is no such choice: the loss is of all pairs already.
  fs::remove_all(dir);
}

TEST_CASE("train_translator refuses a bad configuration before it writes anything", "[train][run]") {
  const std::string dir = fresh_dir("bad");
  translator::TrainConfig c = tiny_copy_run(dir, 4);
  c.lr = -1;
  REQUIRE_THROWS_WITH(translator::train_translator(c, ""), Catch::Contains("--lr must be positive"));
  REQUIRE_FALSE(fs::exists(dir));
}
