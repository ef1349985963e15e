// Checkpoints: weights files with a checksum of their tensors, and training checkpoints that
// resume a Trainer bit for bit (model, optimizer state, moving average, dropout generators,
// progress), both safetensors with string metadata.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rosetta/core/safetensors.h"
#include "rosetta/nn/module.h"
#include "rosetta/train/trainer.h"

namespace rosetta::train {

// The metadata key of a checkpoint's checksum, and the checksum of its tensors: FNV-1a (64-bit)
// over each tensor's name, dtype, shape and bytes, in name order, as 16 hex digits. A checkpoint
// whose metadata holds one is checked against it when loaded, so that flipped bytes in the data
// section are an error rather than silently wrong weights.
inline constexpr const char* kChecksumKey = "rosetta.checksum";
std::string tensors_checksum(const std::vector<std::pair<std::string, Tensor>>& tensors);
// FNV-1a (64-bit) of bytes, as 16 hex digits.
std::string bytes_checksum(std::string_view bytes);

// Throws naming `path` when `st`'s metadata holds a checksum its tensors do not match.
void verify_checksum(const SafeTensors& st, const std::string& path);

// Loads the model weights of a checkpoint or weights file `st`, read from `path` (entries named
// optim.* are skipped), after verify_checksum. Errors name the file.
void load_model_weights(nn::Module& model, const SafeTensors& st, const std::string& path);
// The same, reading `path`.
std::map<std::string, std::string> load_model_weights(nn::Module& model, const std::string& path);

// Writes `model`'s weights to `path` (atomically), with `metadata` and the checksum.
void save_model_weights(const std::string& path, const nn::Module& model,
                        std::map<std::string, std::string> metadata = {});

// Writes a training checkpoint of `trainer` to `path` (atomically): the model's state dict, the
// optimizer's state, the moving average (optim.ema), the dropout generators and the progress
// (train.step, train.skipped_nonfinite, train.dropout_rng), plus `metadata` (the caller's: data
// position, configuration, ...) and the checksum. Refuses non-finite weights. Call
// trainer.synchronize() first on every rank of a job; the root writes.
void save_training_checkpoint(const std::string& path, const Trainer& trainer,
                              std::map<std::string, std::string> metadata = {});

// Restores `trainer` (built as the one that saved it) from the training checkpoint `st` read
// from `path`: weights (checksum verified), optimizer state, moving average (a checkpoint without
// one starts it from the weights), this rank's dropout streams, progress. Returns the metadata.
// Errors name the file.
const std::map<std::string, std::string>& load_training_checkpoint(const SafeTensors& st, const std::string& path,
                                                                   Trainer& trainer);

}  // namespace rosetta::train
