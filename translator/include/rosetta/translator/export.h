// A trained translator written for another engine: CTranslate2's model directory, so that a model
// trained with rosetta can be served with CTranslate2 (docs/export.md maps every tensor).
#pragma once

#include <string>

#include "rosetta/translator/translator.h"

namespace rosetta::translator {

// The types CTranslate2 keeps the weights in: float32, or int8 (each row of the products' weights
// and of the embeddings scaled to [-127, 127] and rounded, its scale kept beside it, as
// CTranslate2's own converters quantize).
enum class Ct2Quantization { float32, int8 };

// Writes the model of `t` as a CTranslate2 4.x model directory `out`: model.bin (a
// TransformerSpec, binary version 6, specification revision 7), config.json and the vocabulary
// (shared_vocabulary.json, or source_vocabulary.json and target_vocabulary.json: the pieces by
// id). `out` must not exist, or be an empty directory: the files are written into a new directory
// beside it and renamed to `out` once complete, so that `out` never holds half a model. Throws,
// before anything is written, for a model CTranslate2 does not compute as rosetta does (a
// post-norm one: rosetta's post-norm stacks end with a layer norm, CTranslate2's do not).
void export_ctranslate2(const Translator& t, const std::string& out,
                        Ct2Quantization quantization = Ct2Quantization::float32);

}  // namespace rosetta::translator
