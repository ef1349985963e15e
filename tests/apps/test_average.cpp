// rosetta average: the mean of a run's step snapshots (or given files), the checks that only
// snapshots of one model are averaged, and loading averaged.safetensors / ema.safetensors in
// translate, eval and Translator::load.
//
// The snapshots are written here from the best.safetensors of one tiny copy-task run, with
// different weights (v * scale + shift) and a fresh checksum, so that their mean is not any one
// of them.
#include <filesystem>

#include "cli_support.h"
#include "rosetta/core/safetensors.h"
#include "layers.h"

using rosetta::SafeTensors;
using rosetta::Tensor;
using rosetta::test::RunResult;
using rosetta::test::TempDir;
using rosetta::test::run_rosetta;
using rosetta::test::slurp;
namespace fs = std::filesystem;
namespace cli = rosetta::cli;

namespace {

// A copy-task run of 10 steps with one validation (so best.safetensors exists), trained once
// for all the tests in this file.
const TempDir& trained_run() {
  static const TempDir dir("average_run");
  static const bool trained = [] {
    const RunResult r = run_rosetta(
        "train --ema 0 --task copy --d-model 16 --heads 2 --ff 32 --encoder-layers 1 --decoder-layers 1 "
        "--max-tokens 256 --lr 3e-3 --warmup 5 --dropout 0 --copy-symbols 8 --copy-min-len 3 --copy-max-len 6 "
        "--copy-train-size 200 --threads 1 --max-steps 10 --validate-every 10 --out " + dir.str());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return true;
  }();
  REQUIRE(trained);
  return dir;
}

SafeTensors best() { return rosetta::load_safetensors(trained_run() / "best.safetensors"); }

// `base` with every weight v replaced by v * scale + shift, train.step = `step` and a checksum
// of the new tensors: a snapshot as rosetta train --keep-checkpoints writes them.
void write_snapshot(const std::string& path, const SafeTensors& base, float scale, float shift, int step) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : base.tensors) {
    std::vector<float> v = t.to_vector<float>();
    for (float& x : v) x = x * scale + shift;
    tensors.emplace_back(name, Tensor::from_vector(v, t.shape()));
  }
  auto meta = base.metadata;
  meta["train.step"] = std::to_string(step);
  meta[cli::kChecksumKey] = cli::tensors_checksum(tensors);
  rosetta::save_safetensors(path, tensors, meta);
}

// Rewrites `path` with `edit` applied to its tensors and metadata, and a fresh checksum (so that
// only the edit, not the checksum, makes it differ).
template <class Edit>
void edit_snapshot(const std::string& path, Edit edit) {
  SafeTensors st = rosetta::load_safetensors(path);
  edit(st.tensors, st.metadata);
  st.metadata[cli::kChecksumKey] = cli::tensors_checksum(st.tensors);
  rosetta::save_safetensors(path, st.tensors, st.metadata);
}

// Checks that `averaged` holds, tensor by tensor, the elementwise mean of `inputs`.
void require_mean(const SafeTensors& averaged, const std::vector<SafeTensors>& inputs) {
  REQUIRE(averaged.tensors.size() == inputs[0].tensors.size());
  for (const auto& [name, t] : inputs[0].tensors) {
    const Tensor* got = averaged.find(name);
    INFO("tensor " << name);
    REQUIRE(got != nullptr);
    REQUIRE(got->shape() == t.shape());
    const std::vector<float> g = got->to_vector<float>();
    std::vector<double> expected(g.size(), 0.0);
    for (const SafeTensors& in : inputs) {
      const std::vector<float> v = in.find(name)->to_vector<float>();
      for (size_t i = 0; i < v.size(); ++i) expected[i] += v[i] / double(inputs.size());
    }
    for (size_t i = 0; i < g.size(); ++i) REQUIRE_THAT(g[i], Catch::WithinAbs(expected[i], 1e-6));
  }
}

}  // namespace

TEST_CASE("average --model averages the newest step snapshots elementwise", "[average]") {
  const SafeTensors base = best();
  TempDir dir("average_model");
  // Written out of step order, so that the newest files by time (step-5, then step-10) are not
  // the highest steps.
  write_snapshot(dir / "step-20.safetensors", base, 1.0f, 0.0f, 20);
  write_snapshot(dir / "step-5.safetensors", base, 0.5f, 0.25f, 5);
  write_snapshot(dir / "step-10.safetensors", base, -1.0f, 0.125f, 10);
  // Not snapshots: a zero-padded step and an atomic write's temporary file (garbage, so that
  // averaging either would fail).
  rosetta::test::write_file(dir / "step-07.safetensors", "not a snapshot");
  rosetta::test::write_file(dir / "step-30.safetensors.tmp.1.0", "not a snapshot");
  auto load = [&](const std::string& name) { return rosetta::load_safetensors(dir / name); };

  SECTION("all three (fewer than the default --last 5, with a warning)") {
    const RunResult r = run_rosetta("average --model " + dir.str());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    REQUIRE_THAT(r.output, Catch::Contains("fewer than --last 5"));
    const SafeTensors avg = load("averaged.safetensors");
    require_mean(avg, {load("step-5.safetensors"), load("step-10.safetensors"), load("step-20.safetensors")});
    REQUIRE(avg.metadata.at("average.steps") == "5,10,20");
    // The newest input's metadata, and a checksum of the averaged tensors.
    REQUIRE(avg.metadata.at("train.step") == "20");
    REQUIRE(avg.metadata.at("model.d_model") == "16");
    REQUIRE(avg.metadata.at(cli::kChecksumKey) == cli::tensors_checksum(avg.tensors));
  }
  SECTION("--last 2 takes the two highest steps, not the two newest files") {
    const RunResult r = run_rosetta("average --model " + dir.str() + " --last 2 --out " + (dir / "two.safetensors"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    REQUIRE_THAT(r.output, !Catch::Contains("fewer than"));
    const SafeTensors avg = load("two.safetensors");
    require_mean(avg, {load("step-10.safetensors"), load("step-20.safetensors")});
    REQUIRE(avg.metadata.at("average.steps") == "10,20");
    REQUIRE_FALSE(fs::exists(dir / "averaged.safetensors"));
  }
}

TEST_CASE("averaging one file gives its weights exactly, without the optimizer's", "[average]") {
  const std::string checkpoint = trained_run() / "checkpoint.safetensors";
  const SafeTensors in = rosetta::load_safetensors(checkpoint);
  TempDir dir("average_one");
  const RunResult r = run_rosetta("average --inputs " + checkpoint + " --out " + (dir / "one.safetensors"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const SafeTensors out = rosetta::load_safetensors(dir / "one.safetensors");
  size_t weights = 0;
  for (const auto& [name, t] : in.tensors) {
    INFO("tensor " << name);
    if (name.starts_with("optim.")) {
      REQUIRE(out.find(name) == nullptr);
      continue;
    }
    ++weights;
    REQUIRE(out.find(name) != nullptr);
    REQUIRE(out.find(name)->to_vector<float>() == t.to_vector<float>());
  }
  REQUIRE(weights < in.tensors.size());  // the checkpoint did hold optimizer state
  REQUIRE(out.tensors.size() == weights);
  REQUIRE_FALSE(out.metadata.contains("optim.type"));
  REQUIRE(out.metadata.at("average.steps") == in.metadata.at("train.step"));
}

TEST_CASE("average refuses snapshots of different models, naming the file", "[average]") {
  const SafeTensors base = best();
  TempDir dir("average_mismatch");
  const std::string a = dir / "a.safetensors", b = dir / "b.safetensors", c = dir / "c.safetensors";
  write_snapshot(a, base, 1.0f, 0.0f, 1);
  write_snapshot(b, base, 2.0f, 0.0f, 2);
  write_snapshot(c, base, 3.0f, 0.0f, 3);
  const std::string first_tensor = base.tensors[0].first;
  std::string expected;  // in the error message

  SECTION("a tensor of another shape") {
    edit_snapshot(c, [](auto& tensors, auto&) { tensors[0].second = Tensor::zeros({tensors[0].second.numel() + 1}); });
    expected = "tensor " + first_tensor;
  }
  SECTION("a missing tensor") {
    edit_snapshot(c, [](auto& tensors, auto&) { tensors.erase(tensors.begin()); });
    expected = "no tensor " + first_tensor;
  }
  SECTION("other model options") {
    edit_snapshot(c, [](auto&, auto& meta) { meta["model.ff"] = "64"; });
    expected = "model.ff";
  }
  SECTION("another tokenizer") {
    edit_snapshot(c, [](auto&, auto& meta) { meta[cli::kSrcTokenizerKey] = "0123456789abcdef"; });
    expected = cli::kSrcTokenizerKey;
  }
  const RunResult r = run_rosetta("average --inputs " + a + " " + b + " " + c + " --out " + (dir / "out.safetensors"));
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains(c + ": not the same model as " + a));
  REQUIRE_THAT(r.output, Catch::Contains(expected));
  REQUIRE_FALSE(fs::exists(dir / "out.safetensors"));
}

TEST_CASE("average refuses a corrupted snapshot and a run without snapshots", "[average]") {
  TempDir dir("average_corrupt");
  SECTION("a flipped byte in the data section") {
    write_snapshot(dir / "step-1.safetensors", best(), 1.0f, 0.0f, 1);
    write_snapshot(dir / "step-2.safetensors", best(), 2.0f, 0.0f, 2);
    std::string bytes = slurp(dir / "step-2.safetensors");
    bytes.back() ^= 0x01;  // the last byte of the last tensor's data
    rosetta::test::write_file(dir / "step-2.safetensors", bytes);
    const RunResult r = run_rosetta("average --model " + dir.str());
    INFO(r.output);
    REQUIRE(r.exit_code == 1);
    REQUIRE_THAT(r.output, Catch::Contains((dir / "step-2.safetensors") + ": corrupted"));
    REQUIRE_FALSE(fs::exists(dir / "averaged.safetensors"));
  }
  SECTION("no step-*.safetensors") {
    const RunResult r = run_rosetta("average --model " + dir.str());
    INFO(r.output);
    REQUIRE(r.exit_code == 1);
    REQUIRE_THAT(r.output, Catch::Contains(dir.str() + " holds no step-*.safetensors"));
    REQUIRE_THAT(r.output, Catch::Contains("--keep-checkpoints"));
  }
}

TEST_CASE("translate and eval load averaged and EMA weights", "[average]") {
  TempDir dir("average_translate");
  fs::copy(trained_run().str(), dir.str(), fs::copy_options::recursive);
  const std::string input = "3 1 4\n0 7 2 6\n";

  // Before rosetta average / train --ema wrote them: errors that say how to make them.
  RunResult r = run_rosetta("translate --checkpoint averaged --model " + dir.str(), input);
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains(dir.str() + " holds no averaged.safetensors; run rosetta average --model"));
  r = run_rosetta("eval --checkpoint ema --test " + (dir / "none.tsv") + " --model " + dir.str());
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains(dir.str() + " holds no ema.safetensors"));

  // Snapshots identical to best.safetensors average to it bit for bit, so translations with
  // the averaged weights are those with the best.
  for (int step : {1, 2, 3}) write_snapshot(dir / ("step-" + std::to_string(step) + ".safetensors"), best(), 1, 0, step);
  r = run_rosetta("average --model " + dir.str());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const RunResult with_best = run_rosetta("translate --beam 1 --checkpoint best --model " + dir.str(), input);
  const RunResult with_avg = run_rosetta("translate --beam 1 --checkpoint averaged --model " + dir.str(), input);
  INFO(with_avg.output);
  REQUIRE(with_best.exit_code == 0);
  REQUIRE(with_avg.exit_code == 0);
  REQUIRE(with_avg.output == with_best.output);

  // Translator::load reads the file `which` names, weights and all.
  write_snapshot(dir / "ema.safetensors", best(), 0.5f, 0.0f, 3);
  for (const char* which : {"averaged", "ema"}) {
    INFO(which);
    const cli::Translator t = cli::Translator::load(dir.str(), which);
    const std::string path = dir / (std::string(which) + ".safetensors");
    REQUIRE(t.weights_path == path);
    const SafeTensors file = rosetta::load_safetensors(path);
    for (const auto& [name, w] : t.model->state_dict()) {
      INFO("tensor " << name);
      REQUIRE(file.find(name) != nullptr);
      REQUIRE(w.to_vector<float>() == file.find(name)->to_vector<float>());
    }
  }
  r = run_rosetta("translate --beam 1 --checkpoint ema --model " + dir.str(), input);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}
