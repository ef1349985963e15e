// The search flags `translate` and `eval` share, with the defaults of the default translator
// (chosen on the validation set; README, "The default translator"), and their memory limit.
#pragma once

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "rosetta/core/cpu.h"
#include "validators.h"
#include "rosetta/nn/search.h"
#include "rosetta/translator/translator.h"

namespace rosetta::cli {

// The values of translate's and eval's --checkpoint (Translator::load's `which`), and their help.
inline const std::vector<std::string> kCheckpointChoices{"best", "last", "averaged", "ema"};
inline constexpr const char* kCheckpointHelp =
    "weights: best (best validation), last (latest checkpoint), averaged (rosetta average) or ema "
    "(rosetta train --ema)";

struct DecodeArgs {
  int beam = translator::kDefaultBeam;
  double length_penalty = 1.0;
  // A source of S tokens gets at most a * S + b target tokens: a runaway repetition stops there.
  double max_len_a = 1.5;
  int64_t max_len_b = 10;
  int no_repeat_ngram = 0;   // > 0: no hypothesis repeats an n-gram of this length
  std::string memory_limit;  // "" = what is available (resources.h)
  PrecisionChoice precision = PrecisionChoice::automatic;  // of matrix products

  nn::SearchOptions options() const {
    return nn::SearchOptions().beam(beam).length_penalty(length_penalty).max_len_a(max_len_a).max_len_b(max_len_b)
        .no_repeat_ngram(no_repeat_ngram);
  }
};

// --precision of translate, eval and bench (int8 for decoding only): the choices and their help.
inline const std::vector<std::string> kPrecisionChoices{"fp32", "bf16", "int8", "auto"};
inline constexpr const char* kPrecisionHelp =
    "matrix products: fp32, bf16 (bf16 operands, fp32 sums), int8 (decoding only: weights and activations "
    "quantized to int8, exact int32 sums; needs AVX2, or ARM64's DotProd, at least) or auto (bf16 where the CPU's "
    "bf16 products, AVX512_BF16, AMX or ARM64's BF16, run at 1.5x or more of its fp32 multiply-add rate, else fp32)";

// Sets the precision of the command's matrix products. Where the CPU does not give what was asked
// (bf16 absent, or slower than fp32), one line says so; under `auto`, the default, translate and
// eval say nothing (auto's choice is the CPU's best, and a line on every call is noise), while
// bench (say_auto) names it beside its figures.
inline void apply_precision(PrecisionChoice choice, bool say_auto = false) {
  std::string note;
  set_matmul_precision(resolve_precision(choice, &note));
  if (!note.empty() && (choice != PrecisionChoice::automatic || say_auto)) spdlog::info(note);
}

// The weights file `--checkpoint which` loads from the run `model`; says so when `best`, asked for,
// is not there and the latest checkpoint stands in (a run stopped before its first validation).
inline std::string weights_to_load(const std::string& model, const std::string& which) {
  const std::string path = translator::Translator::weights_file(model, which);
  if (which == "best" && path != translator::RunPaths(model).best())
    spdlog::info("{} holds no best.safetensors (no validation yet): using its latest checkpoint, {}", model, path);
  return path;
}

inline void add_decode_options(CLI::App& cmd, DecodeArgs& a) {
  cmd.add_option("--beam", a.beam, "beam size (1 = greedy)")->check(CLI::Range(1, 64))->capture_default_str();
  cmd.add_option("--length-penalty", a.length_penalty, "score = log-prob / length^A")
      ->check(finite_range(0.0, 10.0))->capture_default_str();
  cmd.add_option("--max-len-a", a.max_len_a, "at most A x source tokens + B target tokens")
      ->check(finite_range(0.0, 100.0))->capture_default_str();
  cmd.add_option("--max-len-b", a.max_len_b, "see --max-len-a")->check(CLI::Range(int64_t(0), int64_t(1) << 20))
      ->capture_default_str();
  cmd.add_option("--no-repeat-ngram", a.no_repeat_ngram, "N > 0: no translation repeats an N-gram of pieces (0: off)")
      ->check(CLI::Range(0, 64))->capture_default_str();
  add_enum_option(cmd, "--precision", a.precision, kPrecisionHelp, kPrecisionChoices);
  cmd.add_option("--memory-limit", a.memory_limit,
                 "memory it may use, e.g. 2G or 512M (default: what is available); a model or batch that "
                 "needs more is refused before it is loaded or decoded");
}

}  // namespace rosetta::cli
