// The nn layer: Module and its containers, layers, attention, the Transformer.
#pragma once

#include "rosetta/nn/attention.h"
#include "rosetta/nn/containers.h"
#include "rosetta/nn/layers.h"
#include "rosetta/nn/module.h"
#include "rosetta/nn/search.h"
#include "rosetta/nn/transformer.h"
