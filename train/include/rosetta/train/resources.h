// Resources before they run out: memory and disk. The memory a command will need is planned
// from its options before anything big is allocated (a MemoryPlan: named parts and the options
// that drive them) and checked against what this machine (or container) has available; a plan
// larger than that is refused with one line giving both figures and the options to change.
// `--memory-limit SIZE` replaces the detected figure (e.g. to leave room for other jobs, or to
// run where detection is too cautious). The plans of a translator run are
// rosetta/translator/memory_plan.h.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rosetta/core/lifetime.h"

namespace rosetta::train {

// "2G", "512M", "1.5GiB", "64k", "1T" (powers of 1024; B, iB suffixes optional) or a number of
// bytes. Throws rosetta::Error naming `flag` for anything else, or a size that is not positive.
double parse_size(const std::string& text, const std::string& flag);
// "1.5 GiB".
std::string format_size(double bytes);

struct AvailableMemory {
  double bytes = 0;
  std::string source;  // where the figure comes from, e.g. "MemAvailable", "cgroup /job's limit 4.0 GiB"
};

// The memory this process can still use: MemAvailable from /proc/meminfo, or, when the process's
// cgroup (v2 or v1) or one of its ancestors has a memory limit, that limit minus the cgroup's
// working set (usage less inactive file cache, which the kernel reclaims first), whichever is
// smallest. Nothing when neither can be read (not Linux). `root` prefixes every path read (tests).
std::optional<AvailableMemory> detect_available_memory(const std::string& root = "");

// What a command needs: named parts, and the options that drive them.
struct MemoryPlan {
  std::string what;                                   // "this run", "decoding the largest batch"
  std::vector<std::pair<std::string, double>> parts;  // (name, bytes), in the order printed
  std::string drivers;  // what drives them, and what to change: "the sizes follow --d-model 256 ..."
  double total() const;
};

// The memory a command may use: --memory-limit's value when given, else the memory available
// now (or no bound when it cannot be detected).
class MemoryBudget {
 public:
  explicit MemoryBudget(const std::string& memory_limit);
  // Throws rosetta::Error, one line: the plan's total and parts, the budget and where it comes
  // from, the driving options.
  void check(const MemoryPlan& plan) const;
  const std::optional<AvailableMemory>& available() const ROSETTA_LIFETIMEBOUND { return available_; }

 private:
  std::optional<AvailableMemory> available_;
  bool from_flag_ = false;
};

// ---------------------------------------------------------------- loading a weights file

// Loading the weights file `path` (of the size it has on disk) for translation.
MemoryPlan loading_plan(const std::string& path);

// ---------------------------------------------------------------- disk

// Runs `write`, which writes files of a run atomically (core's write_file_atomic: a temporary
// name, then rename); when it fails (a full disk, a quota; or memory to serialize them),
// throws its error as rosetta::Error saying what is still there: the checkpoint `checkpoint`,
// intact (with its step), or none.
void keeping_last_checkpoint(const std::string& checkpoint, const std::function<void()>& write);

}  // namespace rosetta::train
