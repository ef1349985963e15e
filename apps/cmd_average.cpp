// rosetta average: the elementwise mean of the model weights of several snapshots of one run.
//
// Averaging the weights of the last few checkpoints of a run (Vaswani et al. 2017 averaged the
// last 5 or 20) smooths out the noise of the final updates and usually scores a little better
// than any one of them. Only snapshots of the same model can be averaged: same tensors and
// shapes, same model options, same tokenizers; the inputs are checked for that.
//
//   rosetta average --model DIR [--last K] [--out FILE]   the K newest DIR/step-*.safetensors
//   rosetta average --inputs F1 F2 ... --out FILE         given files, oldest first
//
// The output has the weights-only format of best.safetensors and the metadata of the newest
// (last) input, with average.steps (the steps averaged, comma-separated: from the snapshots'
// names with --model, the files' train.step with --inputs) and a checksum of the averaged
// tensors; `translate --checkpoint averaged` loads DIR/averaged.safetensors.
#include <filesystem>
#include <map>
#include <set>

#include "commands.h"
#include "log.h"
#include "rosetta/core/safetensors.h"
#include "text_io.h"
#include "train_layer.h"

namespace rosetta::cli {

namespace {

namespace fs = std::filesystem;

struct AverageArgs {
  std::string model, out;
  std::vector<std::string> inputs;
  int64_t last = 5;
};

// The metadata that says which model the weights belong to: the model options (model.*), the
// task and its symbols (which decide the codec) and the tokenizers' checksums. Inputs must
// agree on all of it, or their mean is not a model of anything.
bool identifies_model(const std::string& key) {
  return key.starts_with("model.") || key == kSrcTokenizerKey || key == kTgtTokenizerKey || key == "run.task" ||
         key == "run.copy_symbols";
}

// Metadata of the newest input that would be false of the mean: a validation loss measured on
// that input alone, and the optimizer's description (its tensors are not averaged).
bool dropped_from_output(const std::string& key) {
  return key.starts_with("valid.") || key.starts_with("optim.");
}

// The model weights of a loaded file: every tensor but the optimizer's (optim.*), by name.
std::map<std::string, Tensor> model_tensors(const SafeTensors& st) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : st.tensors)
    if (!name.starts_with("optim.")) out.emplace(name, t);
  return out;
}

// Throws naming `path` when `other`, the weights and metadata of input `path`, are not those of
// the same model as `first`, read from `first_path`: the first key or tensor that differs.
void check_same_model(const std::map<std::string, std::string>& first_meta, const std::map<std::string, Tensor>& first,
                      const std::string& first_path, const std::map<std::string, std::string>& meta,
                      const std::map<std::string, Tensor>& other, const std::string& path) {
  std::set<std::string> keys;
  for (const auto* m : {&first_meta, &meta})
    for (const auto& [key, value] : *m)
      if (identifies_model(key)) keys.insert(key);
  auto value_of = [](const std::map<std::string, std::string>& m, const std::string& key) {
    const auto it = m.find(key);
    return it == m.end() ? std::string("(absent)") : "'" + it->second + "'";
  };
  for (const std::string& key : keys)
    ROSETTA_CHECK(value_of(first_meta, key) == value_of(meta, key), path, ": not the same model as ", first_path,
                  ": metadata ", key, " is ", value_of(meta, key), " here, ", value_of(first_meta, key), " there");
  for (const auto& [name, t] : first) {
    const auto it = other.find(name);
    ROSETTA_CHECK(it != other.end(), path, ": not the same model as ", first_path, ": no tensor ", name);
    ROSETTA_CHECK(it->second.shape() == t.shape() && it->second.dtype() == t.dtype(), path,
                  ": not the same model as ", first_path, ": tensor ", name, " is ", dtype_name(it->second.dtype()),
                  " ", it->second.shape().str(), " here, ", dtype_name(t.dtype()), " ", t.shape().str(), " there");
  }
  for (const auto& [name, t] : other)
    ROSETTA_CHECK(first.contains(name), path, ": not the same model as ", first_path, ": extra tensor ", name);
}

// One file to average, and its training step for average.steps: from its name for a run's
// step-<STEP>.safetensors, else (empty) its train.step metadata.
struct Input {
  std::string path, step;
};

// Averages the model weights of `inputs` (oldest first) into `out`. Files are read one at a
// time and summed in double, so memory holds one input and the sums, not every input.
void average_files(const std::vector<Input>& inputs, const std::string& out) {
  std::map<std::string, std::string> first_meta, newest_meta;
  std::map<std::string, Tensor> first;   // the first input's weights, to compare the others with
  std::map<std::string, std::vector<double>> sums;
  std::string steps;  // comma-separated
  for (const auto& [path, step] : inputs) {
    const SafeTensors st = load_safetensors(path);
    verify_checksum(st, path);
    std::map<std::string, Tensor> weights = model_tensors(st);
    ROSETTA_CHECK(!weights.empty(), path, ": holds no model weights");
    if (first.empty()) {
      first = weights;
      first_meta = st.metadata;
    } else {
      check_same_model(first_meta, first, inputs.front().path, st.metadata, weights, path);
    }
    for (const auto& named : weights) {
      const Tensor& t = named.second;
      std::vector<double>& sum = sums[named.first];
      sum.resize(size_t(t.numel()));
      try {
        dispatch_float(t.dtype(), [&](auto tag) {
          using T = decltype(tag);
          const std::vector<T> values = t.template to_vector<T>();
          for (size_t i = 0; i < values.size(); ++i) sum[i] += double(values[i]);
        });
      } catch (const Error& e) {
        ROSETTA_FAIL(path, ": tensor ", named.first, ": ", e.what());
      }
    }
    newest_meta = st.metadata;
    const auto train_step = st.metadata.find("train.step");
    steps += (steps.empty() ? "" : ",") +
             (!step.empty() ? step : train_step != st.metadata.end() ? train_step->second : std::string("?"));
  }

  // The mean in each tensor's own dtype (F32 for models trained here). One input gives its own
  // weights back exactly: a float widened to double and divided by 1 is the same float.
  const double n = double(inputs.size());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : first) {
    const std::vector<double>& sum = sums.at(name);
    Tensor mean = Tensor::empty(t.shape(), t.dtype());
    dispatch_float(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* dst = mean.template data<T>();
      for (size_t i = 0; i < sum.size(); ++i) dst[i] = T(sum[i] / n);
    });
    tensors.emplace_back(name, mean);
  }

  std::map<std::string, std::string> meta;
  for (const auto& [key, value] : newest_meta)
    if (!dropped_from_output(key)) meta[key] = value;
  meta["average.steps"] = steps;
  meta[kChecksumKey] = tensors_checksum(tensors);
  save_safetensors(out, tensors, meta);  // atomically: a crash leaves any old `out` whole
  spdlog::info("wrote {}: the mean of {} snapshot(s), steps {}", out, inputs.size(), steps);
}

void run_average(const AverageArgs& a) {
  ROSETTA_CHECK(!a.model.empty() || !a.inputs.empty(), "give --model DIR (its step-*.safetensors) or --inputs FILES");
  std::vector<Input> inputs;
  std::string out = a.out;
  if (!a.model.empty()) {
    ROSETTA_CHECK(fs::is_directory(a.model), "--model ", a.model, " is not a directory (give a run directory ",
                  "made by rosetta train)");
    const RunPaths run(a.model);
    const auto snapshots = step_snapshots(a.model);
    ROSETTA_CHECK(!snapshots.empty(), a.model, " holds no step-*.safetensors snapshots to average: train with ",
                  "rosetta train --keep-checkpoints K to keep the K newest");
    // The K highest steps, by the number in the name: file times change when files are copied.
    const size_t k = std::min(size_t(a.last), snapshots.size());
    if (k < size_t(a.last))
      spdlog::warn("{} holds {} step snapshot(s), fewer than --last {}: averaging those", a.model, k, a.last);
    for (size_t i = snapshots.size() - k; i < snapshots.size(); ++i)
      inputs.push_back({snapshots[i].second, std::to_string(snapshots[i].first)});
    if (out.empty()) out = run.averaged();
  } else {
    ROSETTA_CHECK(!out.empty(), "give --out FILE with --inputs");
    for (const std::string& path : a.inputs) inputs.push_back({path, ""});
  }
  ROSETTA_CHECK(out != "-", "--out: the averaged weights go to a file, not standard output");
  check_output_path(out, "--out");
  average_files(inputs, out);
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
