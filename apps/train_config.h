// The configuration of a training run: every `rosetta train` flag, also readable from and
// written to TOML (CLI11's config format).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "rosetta/translator/config.h"

namespace rosetta::cli {

using translator::TrainConfig;

// Adds every TrainConfig field as an option of `cmd` (`--d-model`, `--max-tokens`, ...).
void add_train_options(CLI::App& cmd, TrainConfig& c);

// Applies the KEY=VALUE lines of a TOML configuration (as --dump-config writes them) to the
// options of `cmd` (after it parsed its command line) that were not given on the command line:
// the command line wins. `name` (the file) starts every error, with the line where `name_lines`.
// Throws rosetta::Error for a line that is not `key = value` (one value) or a [table] header, a
// key given twice, an unknown or non-configurable key, a table, or a value the option rejects;
// the values themselves are checked later by TrainConfig::validate.
void apply_config_toml(CLI::App& cmd, const std::string& toml, const std::string& name, bool name_lines = false);
// apply_config_toml on the content of a file; throws naming it when it cannot be read.
void apply_config_file(CLI::App& cmd, const std::string& path);

}  // namespace rosetta::cli
