// The nn layer: Module, layers, attention, the Transformer.
#pragma once

#include "rosetta/nn/attention.h"
#include "rosetta/nn/layers.h"
#include "rosetta/nn/module.h"
#include "rosetta/nn/search.h"
#include "rosetta/nn/transformer.h"
