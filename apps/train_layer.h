// The CLI is a thin layer over rosetta::train (the trainer, checkpoints, metrics logs, the
// translator of a run directory): apps/ uses its names unqualified.
#pragma once

#include "rosetta/train/checkpoint.h"
#include "rosetta/train/metrics.h"
#include "rosetta/train/process_group.h"
#include "rosetta/train/trainer.h"
#include "rosetta/train/translator.h"

namespace rosetta::cli {
using namespace rosetta::train;

// ThreadReplicas::count on this process's threads for the --replicas flag (train, bench): a
// request above the threads is refused naming the flag.
inline int replicas_for_flag(int requested, int64_t rows, int64_t dim) {
  ROSETTA_CHECK(requested <= get_num_threads(), "--replicas ", requested, " exceeds the ", get_num_threads(),
                " threads of this process (one replica per thread; see --threads)");
  return ThreadReplicas::count(requested, get_num_threads(), rows, dim);
}
}  // namespace rosetta::cli
