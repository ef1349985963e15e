#include "rosetta/train/checkpoint.h"

#include <fcntl.h>  // AT_FDCWD
#include <stdio.h>  // renameat2, RENAME_EXCHANGE

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include "rosetta/core/io.h"

namespace rosetta::train {

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
void fnv_mix(uint64_t& h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
}
// A 64-bit hash of n bytes at 4-8 bytes a cycle (FNV-1a takes ~4 cycles a byte: 0.23 s for a
// small model's 187 MB checkpoint, every 200 updates): four lanes of 64-bit words, each word
// multiplied in, rotated and multiplied again (xxHash64's round and final mix), then the tail.
// Words are read little-endian, so that the hash is the same on any machine.
uint64_t data_hash(const unsigned char* p, size_t n) {
  constexpr uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull,
                     P4 = 0x85EBCA77C2B2AE63ull, P5 = 0x27D4EB2F165667C5ull;
  const auto word = [](const unsigned char* q) {
    uint64_t w;
    std::memcpy(&w, q, sizeof w);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    return w;
  };
  const auto round = [](uint64_t acc, uint64_t w) { return std::rotl(acc + w * P2, 31) * P1; };
  uint64_t v[4] = {P1 + P2, P2, 0, 0 - P1};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; ++l) v[l] = round(v[l], word(p + i + 8 * l));
  uint64_t h = std::rotl(v[0], 1) + std::rotl(v[1], 7) + std::rotl(v[2], 12) + std::rotl(v[3], 18) + uint64_t(n);
  for (; i + 8 <= n; i += 8) h = std::rotl(h ^ round(0, word(p + i)), 27) * P1 + P4;
  for (; i < n; ++i) h = std::rotl(h ^ (p[i] * P5), 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  return h ^ (h >> 32);
}

// The checksums written before data_hash (FNV-1a over every byte) are 16 hex digits; those since,
// this prefix and 16 hex digits. Files of either kind are verified.
constexpr const char* kChecksumV2 = "v2:";

std::string hex16(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The moving average of the weights: the optimizer's flat layout, under a name that weight
// loaders skip (optim.*), as the optimizer's state.
constexpr const char* kEmaKey = "optim.ema";

bool all_finite(const Tensor& flat) {
  const float* p = flat.data<float>();
  for (int64_t i = 0; i < flat.numel(); ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// This rank's dropout counters from a checkpoint of a job (train.dropout_counters: each rank's,
// comma-separated): its own when the job has as many ranks as the one that saved it, else the
// largest of each (another number of ranks continues with fresh positions of the streams);
// empty for a checkpoint of one process.
std::vector<uint64_t> rank_counters(const std::map<std::string, std::string>& metadata, const std::string& path,
                                    const ProcessGroup& group, size_t generators) {
  const auto it = metadata.find("train.dropout_counters");
  if (it == metadata.end()) return {};
  std::vector<std::vector<uint64_t>> ranks;
  std::istringstream all(it->second);
  for (std::string one; std::getline(all, one, ',');) {
    std::istringstream in(one);
    std::vector<uint64_t>& r = ranks.emplace_back();
    for (uint64_t c = 0; in >> c;) r.push_back(c);
    ROSETTA_CHECK(r.size() == generators && in.eof(), path, ": bad train.dropout_counters '", it->second, "'");
  }
  if (int(ranks.size()) == group.size()) return ranks[size_t(group.rank())];
  std::vector<uint64_t> largest(generators, 0);
  for (const auto& r : ranks)
    for (size_t i = 0; i < generators; ++i) largest[i] = std::max(largest[i], r[i]);
  return largest;
}

// Puts the complete checkpoint `next` in place as `path`, and the one it replaces, if any, as
// previous_checkpoint(path). At every moment `path` is a complete checkpoint and the previous
// one another complete file: never a second name of the same file (a hard link), which a
// failing disk would corrupt with it. The two are swapped in one step (renameat2's
// RENAME_EXCHANGE), then the old one renamed to the previous name; a crash between the two
// leaves it under `next` (a temporary name, removed by the next run) and the previous one as it
// was. Filesystems without the exchange get a copy of the old one first.
void rotate_in(const std::string& next, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return rename_atomic(next, path);
  const std::string previous = previous_checkpoint(path);
  if (::renameat2(AT_FDCWD, next.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0)
    return rename_atomic(next, previous);
  write_file_atomic(previous, read_regular_file(path));
  rename_atomic(next, path);
}

}  // namespace

std::string bytes_checksum(std::string_view bytes) {
  uint64_t h = kFnvOffset;
  fnv_mix(h, bytes.data(), bytes.size());
  return hex16(h);
}

namespace {
// FNV-1a over each tensor's name, dtype and shape in name order, and over its bytes (v2: over
// data_hash of them), as 16 hex digits (v2: after kChecksumV2).
std::string checksum(const std::vector<std::pair<std::string, Tensor>>& tensors, bool v2) {
  uint64_t h = kFnvOffset;
  auto mix = [&h](const void* data, size_t n) { fnv_mix(h, data, n); };
  std::vector<const std::pair<std::string, Tensor>*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (const auto* named : order) {
    const Tensor t = named->second.contiguous();
    mix(named->first.data(), named->first.size() + 1);  // with its terminating NUL
    const auto dtype = uint8_t(t.dtype());
    mix(&dtype, 1);
    for (int64_t d : t.shape()) mix(&d, sizeof d);
    const size_t elem = dtype_size(t.dtype());
    if (t.numel() == 0) continue;
    const auto* bytes = static_cast<const unsigned char*>(t.storage()->data()) + size_t(t.offset()) * elem;
    const size_t n = size_t(t.numel()) * elem;
    if (!v2) {
      mix(bytes, n);
      continue;
    }
    const uint64_t d = data_hash(bytes, n);
    mix(&d, sizeof d);
  }
  return (v2 ? kChecksumV2 : "") + hex16(h);
}
}  // namespace

std::string tensors_checksum(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  return checksum(tensors, true);
}

void verify_checksum(const SafeTensors& st, const std::string& path) {
  if (const auto sum = st.metadata.find(kChecksumKey); sum != st.metadata.end()) {
    const bool v2 = sum->second.rfind(kChecksumV2, 0) == 0;
    const std::string actual = checksum(st.tensors, v2);
    ROSETTA_CHECK(actual == sum->second, path, ": corrupted: the checksum of its tensors is ", actual,
                  ", the file says ", sum->second);
  }
}

void load_model_weights(nn::Module& model, const SafeTensors& st, const std::string& path) {
  verify_checksum(st, path);
  nn::NamedTensors weights;
  for (const auto& [name, t] : st.tensors)
    if (name.rfind("optim.", 0) != 0) weights.emplace_back(name, t);
  try {
    model.load_state_dict(weights);
  } catch (const Error& e) {
    ROSETTA_FAIL(path, ": ", e.what());
  }
}

std::map<std::string, std::string> load_model_weights(nn::Module& model, const std::string& path) {
  const SafeTensors st = load_safetensors(path);
  load_model_weights(model, st, path);
  return st.metadata;
}

void save_model_weights(const std::string& path, const nn::Module& model, std::map<std::string, std::string> metadata) {
  const nn::NamedTensors weights = model.state_dict();
  metadata[kChecksumKey] = tensors_checksum(weights);
  save_safetensors(path, weights, metadata);
}

void save_training_checkpoint(const std::string& path, const Trainer& trainer,
                              std::map<std::string, std::string> metadata, KeepPrevious keep) {
  const optim::Optimizer& opt = trainer.optimizer();
  ROSETTA_CHECK(all_finite(opt.flat_params()), "refusing to save a checkpoint with non-finite weights ",
                "(step ", trainer.steps(), "); the last good checkpoint is kept");
  nn::NamedTensors tensors = trainer.model().state_dict();
  for (auto& t : opt.state_tensors()) tensors.push_back(t);
  if (trainer.ema().defined()) tensors.emplace_back(kEmaKey, trainer.ema());
  for (auto& [k, v] : opt.state_metadata()) metadata[k] = v;
  std::string rng;
  for (const Generator* g : trainer.generators()) {
    if (!rng.empty()) rng += ' ';  // (not `a ? "" : " " + ...`: GCC 12 misreads that as an overlapping copy)
    rng += std::to_string(g->seed()) + " " + std::to_string(g->counter());
  }
  metadata["train.step"] = std::to_string(trainer.steps());
  metadata["train.dropout_rng"] = rng;
  if (!trainer.rank_dropout_counters().empty()) {  // several ranks: each one's own position
    std::string counters;
    for (const std::string& r : trainer.rank_dropout_counters()) {
      if (!counters.empty()) counters += ", ";
      counters += r;
    }
    metadata["train.dropout_counters"] = counters;
  }
  metadata["train.skipped_nonfinite"] = std::to_string(trainer.skipped());
  metadata[kChecksumKey] = tensors_checksum(tensors);
  if (keep == KeepPrevious::no) {
    save_safetensors(path, tensors, metadata);
    return;
  }
  const std::string next = path + ".tmp.next";  // a name the run directory's cleanup knows
  save_safetensors(next, tensors, metadata);
  rotate_in(next, path);
}

std::map<std::string, std::string> load_training_checkpoint(const SafeTensors& st, const std::string& path,
                                                            Trainer& trainer) {
  optim::Optimizer& opt = trainer.optimizer();
  load_model_weights(trainer.model(), st, path);  // verifies the checksum of all its tensors first
  try {
    opt.load_state([&](const std::string& n) { return st.find(n); }, st.metadata);
  } catch (const Error& e) {
    ROSETTA_FAIL(path, ": ", e.what());
  }
  if (const Tensor& ema = trainer.ema(); ema.defined()) {
    Tensor target = ema;  // a handle: written in place
    const Tensor* saved = st.find(kEmaKey);
    if (saved && saved->numel() == ema.numel()) target.copy_(*saved);
    else target.copy_(opt.flat_params());  // averaging turned on when resuming: it starts from the weights
  }
  const auto rng = st.metadata.find("train.dropout_rng");
  ROSETTA_CHECK(rng != st.metadata.end(), path, ": data position or random state missing");
  std::vector<std::pair<uint64_t, uint64_t>> states;  // the root's seed and counter, per generator
  std::istringstream in(rng->second);
  for (size_t i = 0; i < trainer.generators().size(); ++i) {
    uint64_t seed = 0, counter = 0;
    ROSETTA_CHECK(in >> seed >> counter, path, ": bad train.dropout_rng '", rng->second, "'");
    states.emplace_back(seed, counter);
  }
  const std::vector<uint64_t> counters = rank_counters(st.metadata, path, trainer.group(), states.size());
  for (size_t i = 0; i < states.size(); ++i)
    trainer.generators()[i]->set_state(rank_seed(states[i].first, trainer.group().rank()),
                                       counters.empty() ? states[i].second : counters[i]);
  const int64_t steps = metadata_int(st.metadata, "train.step", path);
  const int64_t skipped = metadata_int(st.metadata, "train.skipped_nonfinite", path);
  try {
    trainer.restore_progress(steps, skipped);
  } catch (const Error& e) {
    ROSETTA_FAIL(path, ": ", e.what());
  }
  return st.metadata;
}

std::map<std::string, std::string> load_training_checkpoint(const std::string& path, Trainer& trainer) {
  return load_training_checkpoint(load_safetensors(path), path, trainer);
}

std::string previous_checkpoint(const std::string& path) {
  constexpr std::string_view ext = ".safetensors";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + ".prev" + std::string(ext);
  return path + ".prev";
}


std::string set_aside_checkpoint(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  const std::string aside = path + ".skipped";
  fs::rename(path, aside, ec);
  ROSETTA_CHECK(!ec, path, ": cannot rename it to ", aside, ": ", ec.message());
  return aside;
}

CheckpointFallback load_with_fallback(const std::string& path, const std::function<void(const std::string&)>& load) {
  CheckpointFallback result;
  for (const std::string& candidate : {path, previous_checkpoint(path)}) {
    try {
      load(candidate);
      result.path = candidate;
      return result;
    } catch (const Error& e) {
      result.skipped.push_back(e.what());
    }
  }
  // Where no older checkpoint was kept (a run's first), the newer one's error alone. (Only the
  // message depends on this process's view of the directory: every process called `load` alike.)
  std::error_code ec;
  if (!std::filesystem::exists(previous_checkpoint(path), ec)) throw Error(result.skipped[0]);
  ROSETTA_FAIL(result.skipped[0], "; and the checkpoint before it: ", result.skipped[1]);
}

LoadedCheckpoint load_newest_training_checkpoint(const std::string& path, Trainer& trainer) {
  LoadedCheckpoint loaded;
  loaded.from = load_with_fallback(path, [&](const std::string& candidate) {
    loaded.metadata = load_training_checkpoint(candidate, trainer);
  });
  return loaded;
}

}  // namespace rosetta::train
