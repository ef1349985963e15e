// Loads a translator trained by the rosetta CLI and translates with it from C++:
//
//   rosetta train --train train.tsv --valid valid.tsv --out runs/de-en
//   translate runs/de-en "Der Hund sieht den Ball."     # no sentences: one per line on stdin
//
// A run directory holds the SentencePiece tokenizers (src.model, tgt.model) and safetensors
// checkpoints whose metadata records the task (run.task) and the model's shape (model.*).
// `rosetta translate` does the same, with batching and checksum verification.
#include <rosetta/rosetta.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

using namespace rosetta;
namespace fs = std::filesystem;

// The weights with the best validation loss, or the last checkpoint before any validation.
std::string weights_file(const fs::path& run) {
  for (const char* name : {"best.safetensors", "checkpoint.safetensors"})
    if (fs::exists(run / name)) return (run / name).string();
  ROSETTA_FAIL(run.string(), " holds no best.safetensors or checkpoint.safetensors: "
               "not a run directory of rosetta train");
}

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: translate RUN_DIR [SENTENCE...]  (none: one per line on stdin)\n");
    return 2;
  }
  const fs::path run = argv[1];
  const std::string path = weights_file(run);
  SafeTensors checkpoint = load_safetensors(path);
  // The metadata says what was trained (run.task) and how the model is shaped (model.*).
  const std::string task = checkpoint.metadata["run.task"];
  ROSETTA_CHECK(task == "translate", path, ": not a text translation run (run.task '", task, "')");

  // Build the model the checkpoint describes, then copy its weights in (optim.* is Adam's state).
  const auto options = nn::TransformerOptions::from_metadata(checkpoint.metadata);
  Generator init(0);  // the initial weights are all overwritten
  nn::Transformer model(options, init);
  nn::NamedTensors weights;
  for (auto& [name, tensor] : checkpoint.tensors)
    if (!name.starts_with("optim.")) weights.emplace_back(name, tensor);
  model.load_state_dict(weights);
  model.eval();
  const auto src_tok = data::Tokenizer::load(run / "src.model");
  const auto tgt_tok = data::Tokenizer::load(run / "tgt.model");

  auto translate = [&](const std::string& sentence) -> std::string {
    std::vector<int32_t> ids = src_tok.encode(sentence);  // no bos/eos
    if (ids.empty()) return "";
    ids.resize(std::min(ids.size(), size_t(options.max_len())));  // cut to the model's limit
    const Tensor src = Tensor::from_vector(ids, {1, int64_t(ids.size())});  // [B = 1, S]
    const auto nbest = nn::search(model, src, nn::SearchOptions().beam(4));  // per row, best first
    return tgt_tok.decode(nbest[0][0].tokens);
  };
  for (int i = 2; i < argc; ++i) std::printf("%s\n", translate(argv[i]).c_str());
  if (argc == 2)  // no sentences given: translate stdin, line by line
    for (std::string line; std::getline(std::cin, line);)
      std::printf("%s\n", translate(line).c_str());
  return 0;
} catch (const Error& e) {
  std::fprintf(stderr, "translate: %s\n", e.what());
  return 1;
}
