// Internal helper shared by the corpus builders (Ding, messages).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "rosetta/data/corpus.h"
#include "rosetta/data/ding.h"  // Split

namespace rosetta::data {

// Writes `pairs` to dir/name through dir/name.tmp and a rename, so a reader never sees half a
// file and running a builder twice gives the same files.
void write_tsv_atomically(const std::filesystem::path& dir, const std::string& name,
                          const std::vector<SentencePair>& pairs);

// Creates `dir` and writes the split's train.tsv, valid.tsv and test.tsv there (atomically, as
// above).
void write_split_atomically(const std::filesystem::path& dir, const Split& split);

}  // namespace rosetta::data
