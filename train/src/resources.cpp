#include "rosetta/train/resources.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rosetta/core/check.h"

namespace rosetta::train {

namespace fs = std::filesystem;

namespace {

// The first word of a file as a number (memory.max, memory.current), if it is one.
std::optional<double> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word)) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(word.c_str(), &end);
  if (end == word.c_str() || *end) return std::nullopt;
  return v;
}

// The number after `key` on a line "key value" (memory.stat) or "key: value kB" (meminfo).
std::optional<double> read_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string k, unit;
    double v = 0;
    if (!(words >> k >> v) || (k != key && k != key + ":")) continue;
    return words >> unit && unit == "kB" ? v * 1024 : v;
  }
  return std::nullopt;
}

struct Cgroup {
  bool v2;
  std::string dir, base;  // the process's cgroup directory, and its hierarchy's mount point
};

// The directories of the process's memory cgroups: v2 (the "0::PATH" line of
// /proc/self/cgroup) and v1 (the line listing the memory controller), under the mount points
// /proc/self/mountinfo gives for them.
std::vector<Cgroup> memory_cgroups(const std::string& root) {
  std::vector<Cgroup> out;
  std::ifstream groups(root + "/proc/self/cgroup");
  for (std::string line; std::getline(groups, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    // (Appended rather than `"," + ...`: GCC 12 warns falsely on that, -Wrestrict, PR 105651.)
    std::string controllers = ",";
    controllers.append(line, a + 1, b - a - 1).push_back(',');
    const std::string path = line.substr(b + 1);
    const bool v2 = line.substr(0, a) == "0" && controllers == ",,";
    if (!v2 && controllers.find(",memory,") == std::string::npos) continue;
    // mountinfo: ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS ... - FSTYPE SOURCE SUPER_OPTIONS
    std::ifstream mounts(root + "/proc/self/mountinfo");
    for (std::string m; std::getline(mounts, m);) {
      std::istringstream words(m);
      std::string id, parent, dev, mount_root, point, w, fstype, source, super;
      words >> id >> parent >> dev >> mount_root >> point;
      while (words >> w && w != "-") {}
      words >> fstype >> source >> super;
      const bool match = v2 ? fstype == "cgroup2"
                            : fstype == "cgroup" && ("," + super + ",").find(",memory,") != std::string::npos;
      if (!match || path.rfind(mount_root, 0) != 0) continue;
      const std::string rel = mount_root == "/" ? path : path.substr(mount_root.size());
      out.push_back({v2, root + point + rel, root + point});
      break;
    }
  }
  return out;
}

// The tightest limit along `g` and its ancestors, less the working set there.
std::optional<AvailableMemory> cgroup_available(const Cgroup& g) {
  std::optional<AvailableMemory> best;
  fs::path dir = fs::path(g.dir).lexically_normal();
  const fs::path base = fs::path(g.base).lexically_normal();
  for (;;) {
    const std::string d = dir.string();
    const auto limit = read_number(d + (g.v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    const auto usage = read_number(d + (g.v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    // v1 writes "no limit" as a huge number (2^63 rounded to pages).
    if (limit && usage && *limit < std::ldexp(1.0, 60)) {
      const double inactive = read_field(d + "/memory.stat", g.v2 ? "inactive_file" : "total_inactive_file").value_or(0);
      const double in_use = std::max(0.0, *usage - inactive);
      const double left = std::max(0.0, *limit - in_use);
      if (!best || left < best->bytes) {
        const std::string name = d.size() > base.string().size() ? d.substr(base.string().size()) : "/";
        best = AvailableMemory{left, "available (the memory limit of cgroup " + name + ", " + format_size(*limit) +
                                         ", less " + format_size(in_use) + " in use)"};
      }
    }
    if (dir == base || !dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return best;
}

std::string join_parts(const MemoryPlan& plan) {
  std::string out;
  for (const auto& [name, bytes] : plan.parts) {
    if (bytes <= 0) continue;
    out += (out.empty() ? "" : ", ") + name + " " + format_size(bytes);
  }
  return out;
}

}  // namespace

double parse_size(const std::string& text, const std::string& flag) {
  const std::string bad = flag + " '" + text + "' is not a memory size (e.g. 2G, 512M, 1.5GiB; K, M, G, T are powers of 1024)";
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    ROSETTA_FAIL(bad);
  }
  std::string unit;
  for (char ch : text.substr(used)) unit += char(std::tolower(static_cast<unsigned char>(ch)));
  if (unit.size() >= 2 && unit.compare(unit.size() - 2, 2, "ib") == 0) unit.resize(unit.size() - 2);
  else if (!unit.empty() && unit.back() == 'b') unit.pop_back();
  const std::string units = "kmgt";
  const size_t power = unit.empty() ? 0 : unit.size() == 1 ? units.find(unit[0]) + 1 : 0;
  ROSETTA_CHECK(std::isfinite(v) && v > 0 && (unit.empty() || power > 0), bad);
  return std::ldexp(v, int(10 * power));
}

std::string format_size(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  std::ostringstream os;
  os.precision(u ? 1 : 0);
  os << std::fixed << bytes << " " << units[u];
  return os.str();
}

std::optional<AvailableMemory> detect_available_memory(const std::string& root) {
  std::optional<AvailableMemory> best;
  if (const auto v = read_field(root + "/proc/meminfo", "MemAvailable"))
    best = AvailableMemory{*v, "available (MemAvailable in /proc/meminfo)"};
  for (const Cgroup& g : memory_cgroups(root))
    if (const auto c = cgroup_available(g); c && (!best || c->bytes < best->bytes)) best = c;
  return best;
}

double MemoryPlan::total() const {
  double t = 0;
  for (const auto& part : parts) t += part.second;
  return t;
}

MemoryBudget::MemoryBudget(const std::string& memory_limit) {
  from_flag_ = !memory_limit.empty();
  if (memory_limit.empty()) available_ = detect_available_memory();
  else available_ = AvailableMemory{parse_size(memory_limit, "--memory-limit"), "of --memory-limit " + memory_limit};
}

void MemoryBudget::check(const MemoryPlan& plan) const {
  if (!available_ || plan.total() <= available_->bytes) return;
  ROSETTA_FAIL(plan.what, " needs about ", format_size(plan.total()), " (", join_parts(plan), "), more than the ",
               format_size(available_->bytes), " ", available_->source, "; ", plan.drivers,
               from_flag_ ? "" : "; give --memory-limit SIZE to override the figure detected");
}

// ---------------------------------------------------------------- loading a weights file

MemoryPlan loading_plan(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  const double file_bytes = ec ? 0.0 : double(size);  // one that cannot be read fails when it is read
  MemoryPlan plan;
  plan.what = "loading " + path;
  // The file is read whole, then parsed into tensors: both at once.
  plan.parts = {{"the file", file_bytes}, {"its tensors", file_bytes}};
  plan.drivers = path + " is " + format_size(file_bytes) + " on disk";
  return plan;
}

// ---------------------------------------------------------------- disk

namespace {

// train.step from the header of the checkpoint at `path` (read alone: 8 bytes of length, then
// the JSON header), if it can be read.
std::optional<std::string> saved_step(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8] = {};
  if (!in.read(reinterpret_cast<char*>(len), 8)) return std::nullopt;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  if (n > (uint64_t(1) << 27)) return std::nullopt;
  std::string header(n, '\0');
  if (!in.read(header.data(), std::streamsize(n))) return std::nullopt;
  const auto j = nlohmann::json::parse(header, nullptr, false);
  const auto step = j.is_object() && j.contains("__metadata__") ? j["__metadata__"].value("train.step", "") : "";
  return step.empty() ? std::nullopt : std::optional<std::string>(step);
}

}  // namespace

void keeping_last_checkpoint(const std::string& checkpoint, const std::function<void()>& write) {
  auto fail = [&](const std::string& what) {
    if (!fs::exists(checkpoint)) ROSETTA_FAIL(what, "; no checkpoint was written before this one");
    const auto step = saved_step(checkpoint);
    ROSETTA_FAIL(what, "; the last checkpoint ", checkpoint, step ? " (step " + *step + ")" : "",
                 " is intact: make room, then continue with rosetta train --resume ",
                 fs::path(checkpoint).parent_path().string());
  };
  try {
    write();
  } catch (const Error& e) {
    fail(e.what());
  } catch (const std::bad_alloc&) {  // the file is serialized whole before it is written
    fail("out of memory: an allocation failed (std::bad_alloc) while the checkpoint was serialized");
  }
}

}  // namespace rosetta::train
