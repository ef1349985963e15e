// The whole public API of rosetta in one include:
//
//   #include <rosetta/rosetta.h>      // link rosetta::rosetta
//
// core        Tensor (views on shared storage), kernels, Generator, safetensors, file I/O
// autograd    Var, the differentiable ops, NoGradGuard, gradcheck
// nn          Module, ModuleList, Sequential, Linear, Embedding, LayerNorm, MultiHeadAttention, Transformer
// optim       SGD, Adam/AdamW, learning-rate schedules, clip_grad_norm
// data        SentencePiece Tokenizer, corpora, token-budget batching, BLEU/chrF, Ding extraction
// train       Trainer (thread replicas, MPI ranks) for any nn::Module, training checkpoints,
//             metrics logs, the run lock, weight averaging, the memory budget
// translator  the translator's configuration and training run, Translator (decoding), its
//             validation by BLEU/chrF, memory plans, the sweep's bookkeeping, the batching
//             TranslationService
// report      the HTML run report and SVG charts
//
// Each layer's headers can also be included on their own (link the matching rosetta::<layer>).
#pragma once

#include "rosetta/version.h"

#include "rosetta/core/check.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/io.h"
#include "rosetta/core/ops.h"
#include "rosetta/core/random.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/core/shape.h"
#include "rosetta/core/start.h"
#include "rosetta/core/tensor.h"

#include "rosetta/autograd/autograd.h"

#include "rosetta/nn/nn.h"

#include "rosetta/optim/optim.h"

#include "rosetta/data/batch.h"
#include "rosetta/data/corpus.h"
#include "rosetta/data/ding.h"
#include "rosetta/data/messages.h"
#include "rosetta/data/metrics.h"
#include "rosetta/data/mo.h"
#include "rosetta/data/tokenizer.h"

#include "rosetta/train/train.h"

#include "rosetta/translator/config.h"
#include "rosetta/translator/memory_plan.h"
#include "rosetta/translator/run.h"
#include "rosetta/translator/run_data.h"
#include "rosetta/translator/service.h"
#include "rosetta/translator/sweep.h"
#include "rosetta/translator/translator.h"

#include "rosetta/report/escape.h"
#include "rosetta/report/report.h"
#include "rosetta/report/svg.h"
