// The train layer: training any nn::Module, one header per concern.
//
//   trainer.h        Trainer: one update from a batch (shards on thread replicas, gradients
//                    summed over MPI ranks, token-weighted losses, clipping, the non-finite
//                    policy, the schedule, a moving average of the weights); evaluate(); EmaWeights
//   replicas.h       ThreadReplicas, ThreadPlan: data parallelism over the threads of a process
//   process_group.h  ProcessGroup: the collectives of data parallelism over processes (MPI)
//   checkpoint.h     weights files and training checkpoints that resume bit for bit (checksums;
//                    the newest two kept, with fallback on the older)
//   metrics.h        MetricsLog: one JSON record per line, flushed as written
//   average.h        the mean of several weights files of one model
//   resources.h      MemoryPlan, MemoryBudget (memory before it runs out); keeping_last_checkpoint
//   run_lock.h       RunLock: one trainer per run directory
//
// It knows no data, tokenizer or model in particular: the translator is built on it
// (rosetta/translator/), and so is examples/charlm. Link rosetta::train.
#pragma once

#include "rosetta/train/average.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/metrics.h"
#include "rosetta/train/process_group.h"
#include "rosetta/train/replicas.h"
#include "rosetta/train/resources.h"
#include "rosetta/train/run_lock.h"
#include "rosetta/train/trainer.h"
