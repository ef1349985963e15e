// The CLI is a thin layer over rosetta::train (the trainer, checkpoints, metrics logs, the
// translator of a run directory): apps/ uses its names unqualified.
#pragma once

#include "rosetta/train/checkpoint.h"
#include "rosetta/train/metrics.h"
#include "rosetta/train/process_group.h"
#include "rosetta/train/resources.h"
#include "rosetta/train/run.h"
#include "rosetta/train/sweep.h"
#include "rosetta/train/trainer.h"
#include "rosetta/train/translator.h"

namespace rosetta::cli {
using namespace rosetta::train;
}  // namespace rosetta::cli
