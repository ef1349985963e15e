// Loads a translator trained by the rosetta CLI and translates with it from C++:
//
//   rosetta train --train train.tsv --valid valid.tsv --out runs/de-en
//   translate runs/de-en "Der Hund sieht den Ball."     # no sentences: one per line on stdin
//
// translator::Translator::load reads a run directory as `rosetta translate` does: the SentencePiece
// tokenizers (src.model, tgt.model, verified against the checkpoint), and the weights with the
// best validation score (best.safetensors, or the last checkpoint before any validation), whose
// checksum is verified and whose metadata shapes the model (model.*).
#include <rosetta/core/start.h>
#include <rosetta/translator/translator.h>  // link rosetta::translator

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

using namespace rosetta;

int main(int argc, char** argv) try {
  // First: threads that wait passively, OpenBLAS's best kernels, rosetta's checked (rosetta/core/start.h).
  for (const std::string& w : start(argc, argv).warnings()) std::fprintf(stderr, "translate: warning: %s\n", w.c_str());
  if (argc < 2) {
    std::fprintf(stderr, "usage: translate RUN_DIR [SENTENCE...]  (none: one per line on stdin)\n");
    return 2;
  }
  const translator::Translator de_en = translator::Translator::load(argv[1], "best");
  std::vector<std::string> lines(argv + 2, argv + argc);
  if (argc == 2)  // no sentences given: translate stdin, line by line
    for (std::string line; std::getline(std::cin, line);) lines.push_back(line);
  // Length-sorted batches of up to 2,000 source tokens, beam 4; hypotheses best first.
  const auto hyps = de_en.translate(lines, nn::SearchOptions().beam(4), /*batch_tokens=*/2000);
  for (const auto& nbest : hyps) std::printf("%s\n", de_en.codec.decode_target(nbest[0].tokens).c_str());
  return 0;
} catch (const Error& e) {
  std::fprintf(stderr, "translate: %s\n", e.what());
  return 1;
}
