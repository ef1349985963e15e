// Internal: the argument checks of the cross-entropy (softmax.cpp), shared by the output layer
// fused with it (linear_cross_entropy.cpp).
#pragma once

#include <cstdint>

#include "rosetta/core/tensor.h"

namespace rosetta::detail {

// Throws unless targets is I32 [N] and smoothing in [0, 1).
void check_ce_targets(int64_t N, const Tensor& targets, double smoothing);
// The rows of pt[0, N) whose target is not ignore_index; throws for a target outside [0, V).
int64_t count_ce_targets(const int32_t* pt, int64_t N, int64_t V, int32_t ignore_index);

}  // namespace rosetta::detail
