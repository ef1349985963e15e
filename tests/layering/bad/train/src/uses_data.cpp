// A file that breaks the layering rule on purpose: tests/layering/check_layers.cmake must fail on
// this tree (CTest "layers: the check fails on a train file that uses data"). Never compiled.
#include "rosetta/data/tokenizer.h"
#include "rosetta/nn/transformer.h"
#include "rosetta/train/trainer.h"

namespace rosetta::train {
inline int vocabulary(const data::Tokenizer& t) { return int(t.vocab_size()); }
}  // namespace rosetta::train
