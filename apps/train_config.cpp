#include "train_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <sstream>
#include <string_view>

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

// An enum option takes its words (`choices`, or all of the enum's), and shows them and its
// default as a text option does: "--schedule TEXT:{constant,...}=inverse-sqrt".
template <class E>
CLI::Option* add_enum_option(CLI::App& cmd, const std::string& flag, E& value, const std::string& description,
                             std::vector<std::string> choices = {}) {
  if (choices.empty()) choices = enum_words<E>();
  return cmd
      .add_option_function<std::string>(
          flag, [&value](const std::string& word) { value = parse_enum<E>(word); }, description)
      ->check(CLI::IsMember(choices))
      ->default_str(enum_name(value));
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

namespace {

bool bare_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// A TOML number (underscores allowed between digits), inf or nan, with an optional sign.
bool toml_number(std::string_view v) {
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) v.remove_prefix(1);
  if (v == "inf" || v == "nan") return true;
  size_t i = 0;
  const auto digits = [&] {
    const size_t from = i;
    while (i < v.size() && (std::isdigit(static_cast<unsigned char>(v[i])) || (v[i] == '_' && i > from))) ++i;
    return i > from && v[i - 1] != '_';
  };
  if (!digits()) return false;
  if (i < v.size() && v[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    if (++i < v.size() && (v[i] == '+' || v[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == v.size();
}

// Where the value that starts at `at` ends (one past it), or npos when no TOML value starts
// there: a quoted string, a one-line array, true, false or a number.
size_t toml_value_end(const std::string& line, size_t at) {
  if (at >= line.size()) return std::string::npos;
  if (line[at] == '"') {
    for (size_t i = at + 1; i < line.size(); ++i) {
      if (line[i] == '\\') ++i;
      else if (line[i] == '"') return i + 1;
    }
    return std::string::npos;
  }
  if (line[at] == '\'') {
    const size_t close = line.find('\'', at + 1);
    return close == std::string::npos ? close : close + 1;
  }
  if (line[at] == '[') {
    const size_t close = line.rfind(']');
    return close == std::string::npos || close < at ? std::string::npos : close + 1;
  }
  size_t end = at;
  while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end])) && line[end] != '#') ++end;
  const std::string_view v(line.data() + at, end - at);
  return v == "true" || v == "false" || toml_number(v) ? end : std::string::npos;
}

// True when only blanks, and perhaps a comment, follow `at`.
bool rest_is_blank(const std::string& line, size_t at) {
  const size_t next = line.find_first_not_of(" \t", at);
  return next == std::string::npos || line[next] == '#';
}

// The line of each key of `toml` ("table.key" in a table), after checking that every line is
// blank, a comment, a [table] header or `key = value` with one TOML value (a number, true or
// false, a quoted string, a one-line array), and that no key comes twice in one table. CLI11's
// reader takes `lr = = 3` as two values and a second `lr` as a second value, and says "At Most
// 1 required"; here such a file gets its line named instead. (A scanner, not std::regex, whose
// matcher recurses once per character and could overflow the stack on a long line.)
std::map<std::string, int> config_lines(const std::string& toml, const std::string& name) {
  std::map<std::string, int> lines;  // "key" or "table.key" -> line
  std::istringstream in(toml);
  std::string line, prefix;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto shown = [&] { return "'" + line.substr(first, 80) + (line.size() - first > 80 ? "...'" : "'"); };
    if (line[first] == '[') {
      const size_t close = line.find(']', first);
      std::string table = close == std::string::npos ? "" : line.substr(first + 1, close - first - 1);
      table.erase(0, table.find_first_not_of(" \t"));
      table.erase(table.find_last_not_of(" \t") + 1);
      ROSETTA_CHECK(!table.empty() && std::all_of(table.begin(), table.end(), bare_key_char) &&
                        rest_is_blank(line, close + 1),
                    name, ":", n, ": ", shown(), " is not a [table] header");
      prefix = table + ".";
      continue;
    }
    size_t i = first;
    while (i < line.size() && bare_key_char(line[i])) ++i;
    const std::string key = line.substr(first, i - first);
    i = line.find_first_not_of(" \t", i);
    const bool assigned = !key.empty() && i != std::string::npos && line[i] == '=';
    const size_t value = assigned ? line.find_first_not_of(" \t", i + 1) : std::string::npos;
    const size_t end = value == std::string::npos ? value : toml_value_end(line, value);
    ROSETTA_CHECK(end != std::string::npos && rest_is_blank(line, end), name, ":", n, ": ", shown(),
                  " is not key = value with one value (a number, true or false, or a quoted string)");
    const auto [at, added] = lines.emplace(prefix + key, n);
    ROSETTA_CHECK(added, name, ":", n, ": ", key, " is given again (first on line ", at->second, ")");
  }
  return lines;
}

}  // namespace

void apply_config_toml(CLI::App& cmd, const std::string& toml, const std::string& name, bool name_lines) {
  const std::map<std::string, int> lines = config_lines(toml, name);
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
