// Internal helper shared by the corpus builders (Ding, messages).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "rosetta/data/corpus.h"

namespace rosetta::data {

// Writes `pairs` to dir/name through dir/name.tmp and a rename, so a reader never sees half a
// file and running a builder twice gives the same files.
void write_tsv_atomically(const std::filesystem::path& dir, const std::string& name,
                          const std::vector<SentencePair>& pairs);

}  // namespace rosetta::data
