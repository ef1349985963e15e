// Checkpoints: weights files with a checksum of their tensors, and training checkpoints that
// resume a Trainer bit for bit (model, optimizer state, moving average, dropout generators,
// progress), both safetensors with string metadata.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rosetta/core/safetensors.h"
#include "rosetta/nn/module.h"
#include "rosetta/train/trainer.h"

namespace rosetta::train {

// The metadata key of a checkpoint's checksum, and the checksum of its tensors: FNV-1a (64-bit)
// over each tensor's name, dtype, shape and a 64-bit hash of its bytes (four lanes of words,
// ~10x FNV-1a's speed over the bytes themselves), in name order, as "v2:" and 16 hex digits. A
// checkpoint whose metadata holds one is checked against it when loaded, so that flipped bytes
// in the data section are an error rather than silently wrong weights; files written before v2
// (16 hex digits alone: FNV-1a over the bytes) are checked as they were written.
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

// Whether a save keeps the checkpoint it replaces, as previous_checkpoint(path) (below).
enum class KeepPrevious : bool { no, yes };

// Writes a training checkpoint of `trainer` to `path` (atomically): the model's state dict, the
// optimizer's state, the moving average (optim.ema), the dropout generators and the progress
// (train.step, train.skipped_nonfinite, train.dropout_rng; under several ranks each rank's
// position, train.dropout_counters), plus `metadata` (the caller's: data position,
// configuration, ...) and the checksum. Refuses non-finite weights. Call
// trainer.synchronize() first on every rank of a job; the root writes.
//
// With KeepPrevious::yes the file it replaces stays as previous_checkpoint(path): the new one is
// written whole under a temporary name, swapped with the old one in one atomic step, and the old
// one renamed to the previous name (copied there first where the filesystem cannot swap). At
// every moment `path` holds the newest complete checkpoint and previous_checkpoint(path) an
// older one, in a file of its own (never a hard link to the newest, which one bad sector would
// corrupt with it); a failed write changes neither.
void save_training_checkpoint(const std::string& path, const Trainer& trainer,
                              std::map<std::string, std::string> metadata = {},
                              KeepPrevious keep = KeepPrevious::no);

// Restores `trainer` (built as the one that saved it) from the training checkpoint `st` read
// from `path`: weights (checksum verified), optimizer state, moving average (a checkpoint without
// one starts it from the weights), this rank's dropout streams, progress. Returns a copy of the
// metadata (the caller's data position, ...), so that `st` may be a temporary. Errors name the
// file.
std::map<std::string, std::string> load_training_checkpoint(const SafeTensors& st, const std::string& path,
                                                            Trainer& trainer);
// The same, reading `path`.
std::map<std::string, std::string> load_training_checkpoint(const std::string& path, Trainer& trainer);

// ------------------------------------------------------------------ the newest two, and fallback
//
// A run that keeps its newest two training checkpoints survives a newest one that turned out
// corrupted (a flipped bit, a copy cut short): it saves with KeepPrevious::yes, and when
// resuming, load_newest_training_checkpoint(path, trainer) takes the newest of the two that
// loads, and says which it skipped and why.

// "DIR/NAME.prev.safetensors" for "DIR/NAME.safetensors" (else `path` + ".prev").
std::string previous_checkpoint(const std::string& path);

// Which checkpoint a fallback loaded, and why it passed over the newer one.
struct CheckpointFallback {
  std::string path;                  // the file that loaded
  std::vector<std::string> skipped;  // one error (naming its file) per newer file passed over
};

// Renames a checkpoint that a fallback passed over to `path` + ".skipped" (replacing an older
// one), where it stays for a person to look at; returns that name. A run that goes on saving to
// `path` calls it once it has loaded the previous one: otherwise its next save would keep the bad
// file as the previous checkpoint. Nothing to do when `path` does not exist (returns "").
std::string set_aside_checkpoint(const std::string& path);

// Calls `load(candidate)` with `path`, and when that throws rosetta::Error, with
// previous_checkpoint(path). Returns the first that loaded; throws, naming both files and both
// errors, when neither does (the first's error alone when there is no previous file). `load` must leave nothing half-restored that a later successful load
// does not overwrite (a Trainer restores all of its state); in a job of several processes it must
// throw on every process or on none.
CheckpointFallback load_with_fallback(const std::string& path, const std::function<void(const std::string&)>& load);

// load_training_checkpoint of the newest of `path` and previous_checkpoint(path) that loads.
struct LoadedCheckpoint {
  CheckpointFallback from;
  std::map<std::string, std::string> metadata;
};
LoadedCheckpoint load_newest_training_checkpoint(const std::string& path, Trainer& trainer);

}  // namespace rosetta::train
