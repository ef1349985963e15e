// libFuzzer target for the TOML configuration of `rosetta train --config FILE`: the input is
// the file's text, applied to the train options as the CLI does (apply_config_toml), then
// validated (TrainConfig::validate) and written back as TOML. Every input must either work or
// throw rosetta::Error, the one exception the CLI turns into a clean error line; anything else
// (a crash, a sanitizer report such as signed overflow, another exception) is a bug.
//
// Built by scripts/ci-extra.sh (CMake, -DROSETTA_FUZZ=ON with clang); seeds in corpus/config/,
// dictionary config.dict.
#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "rosetta/core/check.h"
#include "train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string toml(reinterpret_cast<const char*>(data), size);
  rosetta::cli::TrainConfig config;
  CLI::App cmd("fuzz");
  cmd.option_defaults()->always_capture_default();
  rosetta::cli::add_train_options(cmd, config);
  cmd.parse(std::vector<std::string>{"7", "--seed"});  // "--seed 7" on the command line (reversed)
  try {
    rosetta::cli::apply_config_toml(cmd, toml, "fuzz.toml");
    config.validate();
    (void)config.max_time_seconds();
    (void)cmd.config_to_str(true, false);
    if (config.seed != 7) __builtin_trap();  // the command line wins over the file
  } catch (const rosetta::Error&) {
    // Rejected configuration: the expected outcome for most inputs.
  }
  return 0;
}
