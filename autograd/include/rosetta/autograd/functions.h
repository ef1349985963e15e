// Differentiable ops on Var. Each records a graph node (when an input requires a gradient)
// whose backward accumulates into its inputs' gradients. Binary ops broadcast like NumPy.
//
// Files: elementwise.cpp (arithmetic, unary maps, where/masked_fill), reduce.cpp (sum, mean,
// max), movement.cpp (reshape, transpose, slice, cat, expand), matmul.cpp (matmul, linear),
// nn_ops.cpp (softmax, layer norm, dropout, embedding, cross-entropy).
#pragma once

#include <vector>

#include "rosetta/autograd/var.h"
#include "rosetta/core/random.h"

namespace rosetta {

// ---------------------------------------------------------------- elementwise
Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var div(const Var& a, const Var& b);
Var pow(const Var& a, const Var& b);  // a > 0 where b's gradient is needed
Var neg(const Var& x);
Var add_scalar(const Var& x, double s);
Var mul_scalar(const Var& x, double s);
Var pow_scalar(const Var& x, double p);
Var exp(const Var& x);
Var log(const Var& x);
Var sqrt(const Var& x);
Var tanh(const Var& x);
Var sigmoid(const Var& x);
Var relu(const Var& x);
Var gelu(const Var& x);  // exact (erf) form
Var square(const Var& x);
// out = cond ? a : b (cond: I32, non-zero = true), broadcasting.
Var where(const Tensor& cond, const Var& a, const Var& b);
// x with `value` (may be -inf) where mask (I32, broadcast to x) is non-zero; no gradient flows
// to the filled positions.
Var masked_fill(const Var& x, const Tensor& mask, double value);

inline Var operator+(const Var& a, const Var& b) { return add(a, b); }
inline Var operator-(const Var& a, const Var& b) { return sub(a, b); }
inline Var operator*(const Var& a, const Var& b) { return mul(a, b); }
inline Var operator/(const Var& a, const Var& b) { return div(a, b); }
inline Var operator-(const Var& x) { return neg(x); }
inline Var operator+(const Var& x, double s) { return add_scalar(x, s); }
inline Var operator-(const Var& x, double s) { return add_scalar(x, -s); }
inline Var operator*(const Var& x, double s) { return mul_scalar(x, s); }
inline Var operator*(double s, const Var& x) { return mul_scalar(x, s); }
inline Var operator/(const Var& x, double s) { return mul_scalar(x, 1.0 / s); }

// ---------------------------------------------------------------- reductions
Var sum(const Var& x);  // all elements -> 0-d
Var sum(const Var& x, int axis, bool keepdim = false);
Var mean(const Var& x);
Var mean(const Var& x, int axis, bool keepdim = false);
// Maximum along an axis; the gradient goes to the first maximum.
Var max(const Var& x, int axis, bool keepdim = false);

// ---------------------------------------------------------------- movement (views)
Var reshape(const Var& x, const Shape& shape);
Var transpose(const Var& x, int a, int b);
Var permute(const Var& x, const std::vector<int>& order);
Var slice(const Var& x, int axis, int64_t start, int64_t stop, int64_t step = 1);
Var narrow(const Var& x, int axis, int64_t start, int64_t length);
Var select(const Var& x, int axis, int64_t index);
Var expand(const Var& x, const Shape& shape);
Var unsqueeze(const Var& x, int axis);
Var squeeze(const Var& x, int axis);
Var cat(const std::vector<Var>& parts, int axis);
Var contiguous(const Var& x);

// ---------------------------------------------------------------- matmul
// alpha * a [..., M, K] @ b [..., K, N]; batch dims broadcast. `memory_order` lays the result's
// axes out in memory in that order, outermost first (Tensor::empty_permuted; {} is row-major):
// attention computes its heads [B, H, T, Dh] in the order {0, 2, 1, 3}, so that merging them
// into [B, T, H * Dh] is a view. The gradient of an operand that is a transposed or permuted
// view comes in that view's memory order, so that its way back through the view copies nothing.
Var matmul(const Var& a, const Var& b, double alpha = 1.0,
           const std::vector<int>& memory_order = {});
// x [..., in] @ weight[out, in]^T + bias[out]: one GEMM, and weight's gradient is accumulated
// straight into its buffer. bias may be undefined.
Var linear(const Var& x, const Var& weight, const Var& bias);
// linear(relu_dropout(h, p, gen, training), weight, bias) as one op, with the same values,
// gradients and draws from gen (a feed-forward block's second half). Where the products are
// bf16, h's gradient is masked and scaled as its product is stored, not in a pass of its own.
Var relu_dropout_linear(const Var& h, double p, Generator& gen, bool training, const Var& weight,
                        const Var& bias);
// relu_dropout_linear(linear(x, w1, b1), p, gen, training, w2, b2) (a feed-forward block) as one
// op, with the same values, gradients and draws from gen. Where both layers keep their inputs in
// bf16 (the products bf16, the weights wanting gradients) and the bf16 kernels sum x's width in
// one block, the hidden activation is written in bf16 by the first product itself
// (linear_relu_dropout_bf16): never in fp32.
Var linear_relu_dropout_linear(const Var& x, const Var& w1, const Var& b1, double p, Generator& gen, bool training,
                               const Var& w2, const Var& b2);

// ---------------------------------------------------------------- nn ops (fused)
Var softmax(const Var& x);      // over the last axis; fully -inf rows give zeros
// Softmax over the entries where mask (I32, broadcast to x) is zero: masked_fill(x, mask,
// -inf) and softmax in one pass.
Var softmax(const Var& x, const Tensor& mask);
Var log_softmax(const Var& x);  // over the last axis
Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps = 1e-5);
// Inverted dropout: zeroes with probability p and scales the rest by 1/(1-p); identity when
// !training or p == 0. The mask comes from `gen`, so a seed reproduces it.
Var dropout(const Var& x, double p, Generator& gen, bool training);
// dropout(relu(x)) as one op, with the same values and gradients (and the same draws from
// `gen`), that saves only its output: half the memory of the two ops in a feed-forward block.
Var relu_dropout(const Var& x, double p, Generator& gen, bool training);
// residual + dropout(x) as one op (a residual connection), with the same values and gradients
// (and the same draws from gen) as the two.
Var dropout_add(const Var& residual, const Var& x, double p, Generator& gen, bool training);
// weight [V, D], ids I32 of shape S -> [S..., D]. Rows of padding_idx get no gradient (-1: none).
Var embedding(const Var& weight, const Tensor& ids, int32_t padding_idx = -1);
// Mean label-smoothed cross-entropy of logits [..., V] against targets [...] (I32), skipping
// targets equal to ignore_index; fused with log-softmax.
Var cross_entropy(const Var& logits, const Tensor& targets, double label_smoothing = 0.0,
                  int32_t ignore_index = -1);
// cross_entropy(linear(x, weight, bias), targets, ...) for an output layer: x [..., K], weight
// [V, K], bias [V] (or undefined), targets [...]. Under bf16 products (MatmulPrecisionScope) one
// op that never holds the logits [..., V] whole and keeps their gradient in bf16 (the same loss,
// gradients within bf16 rounding of the two ops'); the two ops otherwise (fp32: the same bits).
Var linear_cross_entropy(const Var& x, const Var& weight, const Var& bias, const Tensor& targets,
                         double label_smoothing = 0.0, int32_t ignore_index = -1);

}  // namespace rosetta
