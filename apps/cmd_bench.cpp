// rosetta bench: training and decoding throughput on the shapes of bench/torch_reference.py
// (random token batches of fixed length), JSON lines (translator/synthetic.h).
#include <iostream>

#include "commands.h"
#include "decode_args.h"
#include "layers.h"
#include "rosetta/core/check.h"
#include "rosetta/core/cpu.h"
#include "rosetta/translator/synthetic.h"

namespace rosetta::cli {

void register_bench(CLI::App& app) {
  struct BenchArgs : BenchOptions {
    int threads = 2;
    bool decode = false;
    PrecisionChoice precision = PrecisionChoice::automatic;
  };
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "training or decoding throughput on fixed benchmark shapes");
  cmd->add_option("--preset", a->preset, "tiny, small or base (as torch_reference.py)")
      ->check(CLI::IsMember({"tiny", "small", "base"}));
  cmd->add_option("--threads", a->threads, "threads")->check(CLI::Range(1, 1024));
  cmd->add_option("--steps", a->steps, "timed steps (median reported)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--warmup", a->warmup, "untimed warm-up steps")->check(CLI::Range(0, 1000000));
  cmd->add_option("--replicas", a->replicas,
                  "model replicas, one per thread, each training on a shard of the batch "
                  "(0, the default: one per thread for models whose GEMMs are too small for "
                  "BLAS's threads, else 1)")
      ->check(CLI::Range(0, 4096));
  cmd->add_flag("--decode", a->decode, "time greedy and beam-4 decoding instead of training");
  add_enum_option(*cmd, "--precision", a->precision, kPrecisionHelp, kPrecisionChoices);
  cmd->callback([a] {
    ROSETTA_CHECK(a->decode || a->precision != PrecisionChoice::int8,
                  "--precision int8 is for decoding (bench --decode, translate, eval); training runs fp32 or bf16");
    set_num_threads(a->threads);
    apply_precision(a->precision, /*say_auto=*/true);
    if (a->decode)
      for (const std::string& line : bench_decoding(*a)) std::cout << line << std::endl;
    else
      std::cout << bench_training(*a) << std::endl;
  });
}

}  // namespace rosetta::cli
