// An untrained Transformer on the copy task's codec (symbols 0-9), in eval mode, for the tests of
// translation: its translations are fixed by its seed, and sources longer than `max_len` are cut.
#pragma once

#include <cstdint>
#include <memory>

#include "rosetta/core/random.h"
#include "rosetta/nn/nn.h"
#include "rosetta/translator/translator.h"

namespace rosetta::test {

inline translator::Translator copy_translator(uint64_t seed, int64_t decoder_layers, int64_t max_len) {
  translator::Translator t;
  t.codec = translator::Codec::symbols(10);
  Generator g(seed);
  t.model = std::make_unique<nn::Transformer>(nn::TransformerOptions()
                                                  .src_vocab(t.codec.src_vocab())
                                                  .tgt_vocab(t.codec.tgt_vocab())
                                                  .d_model(16)
                                                  .heads(2)
                                                  .ff(32)
                                                  .encoder_layers(1)
                                                  .decoder_layers(decoder_layers)
                                                  .dropout(0.0)
                                                  .max_len(max_len),
                                              g);
  t.model->eval();
  return t;
}

}  // namespace rosetta::test
