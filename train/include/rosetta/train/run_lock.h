// One trainer per run directory. `rosetta train` (a new run or --resume) holds an advisory lock
// (flock) on DIR/train.lock for as long as it runs, taken before it reads or writes anything in
// DIR; a second trainer on DIR refuses at once, naming DIR and the owner's PID (written into the
// file). The kernel releases the lock when its process ends, however it ends: a trainer killed
// with SIGKILL leaves the file but no lock, and the next --resume proceeds. Readers (translate,
// eval, report, plot, average) take no lock: every file they read is written atomically.
#pragma once

#include <string>

#include "rosetta/core/lifetime.h"

namespace rosetta::train {

class RunLock {
 public:
  // Locks run directory `dir`. A missing `dir` is created when `create` (a new run), and removed
  // again, with the lock file, if the run ends while the lock file is all it holds (a run that
  // failed on its data leaves nothing behind); without `create`, or with an empty `dir`, nothing
  // is locked (the caller reports the missing directory). Throws rosetta::Error when another
  // process holds the lock, or when `dir` cannot be created or the lock file not opened.
  RunLock(const std::string& dir, bool create);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  static std::string path(const std::string& dir) { return dir + "/train.lock"; }
  // Empty, or why this process could not record itself (PID, host) in the lock file: the lock
  // still holds, but a trainer refused by it says "PID unknown". For the caller to warn about.
  const std::string& warning() const ROSETTA_LIFETIMEBOUND { return warning_; }

 private:
  std::string dir_;
  int fd_ = -1;
  bool created_dir_ = false;
  std::string warning_;
};

}  // namespace rosetta::train
