// rosetta average: the elementwise mean of the model weights of several snapshots of one run
// (train/average.h: average_weight_files, the output's format and metadata; translator.h:
// newest_snapshots). `translate --checkpoint averaged` loads DIR/averaged.safetensors.
//
//   rosetta average --model DIR [--last K] [--out FILE]   the K newest DIR/step-*.safetensors
//   rosetta average --inputs F1 F2 ... --out FILE         given files, oldest first
#include <filesystem>

#include "commands.h"
#include "log.h"
#include "rosetta/train/average.h"
#include "text_io.h"
#include "layers.h"

namespace rosetta::cli {

namespace {

namespace fs = std::filesystem;

struct AverageArgs {
  std::string model, out;
  std::vector<std::string> inputs;
  int64_t last = 5;
};

void run_average(const AverageArgs& a) {
  ROSETTA_CHECK(!a.model.empty() || !a.inputs.empty(), "give --model DIR (its step-*.safetensors) or --inputs FILES");
  std::vector<AverageInput> inputs;
  std::string out = a.out;
  if (!a.model.empty()) {
    ROSETTA_CHECK(fs::is_directory(a.model), "--model ", a.model, " is not a directory (give a run directory ",
                  "made by rosetta train)");
    inputs = newest_snapshots(a.model, size_t(a.last));
    if (inputs.size() < size_t(a.last))
      spdlog::warn("{} holds {} step snapshot(s), fewer than --last {}: averaging those", a.model, inputs.size(),
                   a.last);
    if (out.empty()) out = RunPaths(a.model).averaged();
  } else {
    ROSETTA_CHECK(!out.empty(), "give --out FILE with --inputs");
    for (const std::string& path : a.inputs) inputs.push_back({path, ""});
  }
  ROSETTA_CHECK(out != "-", "--out: the averaged weights go to a file, not standard output");
  check_output_path(out, "--out", OutputKind::weights);
  for (const AverageInput& in : inputs) {
    std::error_code ec;
    ROSETTA_CHECK(!fs::equivalent(in.path, out, ec), "--out ", out, " is one of the files averaged: not written over ",
                  "(give another file name)");
  }
  const std::string steps = average_weight_files(inputs, out);
  spdlog::info("wrote {}: the mean of {} snapshot(s), steps {}", out, inputs.size(), steps);
}

}  // namespace

void register_average(CLI::App& app) {
  auto a = std::make_shared<AverageArgs>();
  CLI::App* cmd = app.add_subcommand("average", "average the weights of a run's newest snapshots (or given files)");
  auto* model = cmd->add_option("--model", a->model, "run directory: averages its step-*.safetensors");
  auto* inputs = cmd->add_option("--inputs", a->inputs, "files to average instead, oldest first (needs --out)")
                     ->expected(1, -1);
  model->excludes(inputs);
  cmd->add_option("--last", a->last, "with --model: how many of the newest snapshots to average")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->needs(model);
  cmd->add_option("--out", a->out, "output file (default with --model: DIR/averaged.safetensors)");
  cmd->callback([a] { run_average(*a); });
}

}  // namespace rosetta::cli
