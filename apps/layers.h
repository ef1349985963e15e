// The CLI is a thin layer over the libraries: the training library (rosetta::train: trainer,
// checkpoints, metrics logs, memory budget), the translator (rosetta::translator: its
// configuration and run, decoding, memory plans, the sweep's bookkeeping) and the report
// (rosetta::report). apps/ uses their names unqualified.
#pragma once

#include "rosetta/train/checkpoint.h"
#include "rosetta/train/metrics.h"
#include "rosetta/train/process_group.h"
#include "rosetta/train/resources.h"
#include "rosetta/train/trainer.h"
#include "rosetta/translator/memory_plan.h"
#include "rosetta/translator/run.h"
#include "rosetta/translator/sweep.h"
#include "rosetta/translator/translator.h"
#include "rosetta/report/report.h"

namespace rosetta::cli {
using namespace rosetta::train;
using namespace rosetta::translator;
using namespace rosetta::report;
}  // namespace rosetta::cli
