// The data of a training run: corpora read and checked, tokenizers trained (or those of the run
// being resumed), pairs tokenized and filtered by length, and the training-side noise
// (sampled segmentations) that train_translator draws per epoch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rosetta/data/corpus.h"
#include "rosetta/data/noise.h"
#include "rosetta/translator/config.h"
#include "rosetta/train/process_group.h"
#include "rosetta/translator/translator.h"

namespace rosetta::translator {

struct RunData {
  Codec codec;
  // Training pairs: the sentence pairs (--train-repeat times), then the extra pairs
  // (--extra-train), whose sources start with the tag kExtraTag when --extra-tag is on.
  std::vector<data::TokenPair> train, valid;
  std::vector<data::SentencePair> valid_text;  // validation pairs as text, for BLEU/chrF
  // Set with --sp-nbest > 1: new segmentations of `train` for every epoch.
  std::shared_ptr<const data::SegmentationSampler> sampler;
  // The tokenizers as src.model / tgt.model hold them (empty for the copy task); every
  // checkpoint records their checksums, so that swapped files are detected.
  std::string src_model, tgt_model;
  std::vector<std::string> notes;  // what reading the data found, for the caller to log once the run's log is open
};

// The source tag of extra pairs: bos, which no source holds otherwise (sources carry neither
// bos nor eos), so the model can tell dictionary phrases from sentences.
inline constexpr int32_t kExtraTag = 2;

// Random symbol sequences; the target is the source. Held-out sequences never occur in training.
void make_copy_task(const TrainConfig& c, RunData& d);

// Every rank reads the corpora; the root alone trains (or, resuming, loads) the tokenizers and
// sends them to the others, so all ranks tokenize identically and need no run directory. Nothing
// is written: a run whose data is bad leaves no run directory behind (write_tokenizers does).
void load_text_data(const TrainConfig& c, const RunPaths& run, bool resuming, const train::ProcessGroup& group,
                    RunData& d);

void write_tokenizers(const RunPaths& run, const RunData& d);

}  // namespace rosetta::translator
