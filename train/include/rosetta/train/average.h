// Checkpoint averaging: the elementwise mean of the model weights of several snapshots of one
// run (`rosetta average`).
//
// Averaging the weights of the last few checkpoints of a run (Vaswani et al. 2017 averaged the
// last 5 or 20) smooths out the noise of the final updates and usually scores a little better
// than any one of them. Only snapshots of the same model can be averaged: same tensors and
// shapes, and the same metadata under model.* and run.*, the keys that say which model the
// weights belong to (a model's options; a translator's task and tokenizers); the inputs are
// checked for that.
#pragma once

#include <string>
#include <vector>

namespace rosetta::train {

// One file to average, and its training step for average.steps: from its name for a run's
// step-<STEP>.safetensors, else (empty) its train.step metadata.
struct AverageInput {
  std::string path, step;
};

// Writes the mean of the model weights of `inputs` (oldest first; every tensor but the
// optimizer's) to `out`, atomically, in the weights-only format of best.safetensors: the
// metadata of the newest input but what would be false of the mean (valid.*, optim.*), with
// average.steps (the steps averaged, comma-separated) and a checksum of the averaged tensors.
// Each input's checksum is verified. Files are read one at a time and summed in double, so
// memory holds one input and the sums, not every input; one input gives its own weights back
// exactly. Throws naming the file when inputs are not of the same model. Returns average.steps.
std::string average_weight_files(const std::vector<AverageInput>& inputs, const std::string& out);

}  // namespace rosetta::train
