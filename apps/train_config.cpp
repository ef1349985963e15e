#include "train_config.h"

#include <filesystem>
#include <map>
#include <sstream>

#include "rosetta/core/check.h"
#include "rosetta/core/io.h"
#include "validators.h"

namespace rosetta::cli {

namespace {
using translator::model_option_flag;

// Options the data determines (the vocabularies and the padding id come from the tokenizers),
// or that have no flag.
bool set_without_flag(const std::string& key) {
  return key == "src_vocab" || key == "tgt_vocab" || key == "pad_id" || key == "layer_norm_eps";
}

template <class T>
void check_integer(CLI::Option* opt) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) opt->check(whole_number<T>());
}

template <class T>
CLI::Option* add_model_flag(CLI::App& cmd, T& value, const nn::OptionField& f) {
  if constexpr (std::is_enum_v<T>) {
    return add_enum_option(cmd, model_option_flag(f.key), value, f.description);
  } else {
    CLI::Option* opt = cmd.add_option(model_option_flag(f.key), value, f.description);
    check_integer<T>(opt);
    return opt;
  }
}

CLI::Option* add_model_flag(CLI::App& cmd, bool& value, const nn::OptionField& f) {
  if (std::string(f.key) != "norm_first") return cmd.add_option(model_option_flag(f.key), value, f.description);
  return cmd
      .add_option_function<std::string>(
          "--norm", [&value](const std::string& v) { value = v == "pre"; },
          "pre (pre-norm) or post (post-norm, as the paper)")
      ->check(CLI::IsMember({"pre", "post"}))
      ->default_str(value ? "pre" : "post");
}

// The flags of nn::TransformerOptions, from its list of options.
void add_model_options(CLI::App& cmd, nn::TransformerOptions& o) {
  nn::TransformerOptions::for_each_field(o, [&](auto& value, const nn::OptionField& f) {
    if (!set_without_flag(f.key)) add_model_flag(cmd, value, f)->group("Model");
  });
}
}  // namespace

void add_train_options(CLI::App& cmd, TrainConfig& c) {
  TrainConfig::for_each_field(c, [&cmd](auto& value, const translator::ConfigField& f) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, nn::TransformerOptions>) {
      add_model_options(cmd, value);
    } else {
      const std::string flag = model_option_flag(f.key);  // --max-tokens for max_tokens
      CLI::Option* opt = nullptr;
      if constexpr (std::is_enum_v<T>)
        opt = add_enum_option(cmd, flag, value, f.description, f.choices);
      else if constexpr (std::is_same_v<T, bool>)
        opt = f.saved ? cmd.add_option(flag, value, f.description) : cmd.add_flag(flag, value, f.description);
      else
        opt = cmd.add_option(flag, value, f.description);
      check_integer<T>(opt);
      opt->group(f.group)->configurable(f.saved);
    }
  });
}

void apply_config_toml(CLI::App& cmd, const std::string& toml, const std::string& name, bool name_lines) {
  const std::map<std::string, int> lines = translator::config_toml_lines(toml, name);
  std::vector<CLI::ConfigItem> items;
  try {
    std::istringstream in(toml);
    items = CLI::ConfigTOML().from_config(in);
  } catch (const CLI::Error& e) {
    ROSETTA_FAIL(name, ": ", e.what());
  }
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // table markers
    const auto line = lines.find(item.fullname());
    const std::string where = name + (name_lines && line != lines.end() ? ":" + std::to_string(line->second) : "");
    CLI::Option* opt = item.parents.empty() ? cmd.get_option_no_throw("--" + item.name) : nullptr;
    ROSETTA_CHECK(opt != nullptr && opt->get_configurable(), where, ": unknown option '", item.fullname(), "'");
    if (opt->count() > 0) continue;  // the command line wins
    try {
      for (const std::string& v : item.inputs) opt->add_result(v);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      ROSETTA_FAIL(where, ": ", item.name, ": ", e.what());
    }
  }
}

void apply_config_file(CLI::App& cmd, const std::string& path) {
  ROSETTA_CHECK(std::filesystem::is_regular_file(path), "--config ", path, " is not a readable file");
  apply_config_toml(cmd, read_file(path), path, true);
}

}  // namespace rosetta::cli
