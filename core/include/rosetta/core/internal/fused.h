// The fused ops of training, internal to rosetta: linear layers' products fused with their
// gradients, a relu and a dropout, or the loss, and the bf16 inputs they keep (Bf16Matrix). The
// layers above core (autograd's linear, relu_dropout_linear, linear_relu_dropout_linear and
// linear_cross_entropy) call them where the products allow; a user of the library reaches the
// same ops through those (rosetta/autograd/functions.h). Not installed: these names and their
// contracts may change with the kernels (core/src/kernels/README.md). Each gives the results of
// the unfused ops it stands for (ops.h), to the bit, or as its comment says; the tests hold them
// to those (tests/core/test_bf16_fused.cpp, tests/autograd/test_gradcheck.cpp).
#pragma once

#include <cstdint>

#include "rosetta/core/ops.h"

namespace rosetta {

// ------------------------------------------------------------------ a linear layer's gradients (linear_grads.cpp)

// A linear layer's parameter gradients from its output's gradient dy [M, N] and its input
// x [M, K]: dw.out [N, K] (row-major) gets dy^T @ x and dbias.out [N] the sums of dy's columns,
// each added as GradOut says; either may be undefined. Where both are wanted and the product is
// bf16, the sums are taken as dy is packed for the product (dy read once, summed in fp32);
// otherwise as matmul_into and expand_backward compute them.
void linear_param_grads(const Tensor& dy, const Tensor& x, const GradOut& dw, const GradOut& dbias);
// The gradient of a relu's input where a linear layer (weight w [N, K]) reads the relu's output
// y [M, K]: dx (+)= scale * (dy @ w where y > 0, else 0), dy [M, N]; scale 1 / (1 - p) for
// relu_dropout's output. Where the product is bf16 and dx is fresh (beta 0), the mask and the
// scale are applied as the product is stored; otherwise as matmul and unary_backward compute them.
void relu_linear_input_grad(const Tensor& dy, const Tensor& w, const Tensor& y, double scale, const GradOut& dx);

// ------------------------------------------------------------------ inputs kept in bf16 (bf16_activations.cpp)

// A matrix [rows, cols] of bf16 values (the upper halves of fp32 values, rounded to nearest even
// as the bf16 products round their operands) in I32 words of two values each; a row's last
// half-word is 0 where cols is odd. Linear layers whose products run in bf16 keep their inputs
// for the backward pass so: half the bytes of fp32, and the same results to the bit, since the
// backward products would have rounded the fp32 inputs to these same values.
struct Bf16Matrix {
  Tensor words;  // I32 [rows, (cols + 1) / 2]
  int64_t cols = 0;
  // rows x cols, uninitialised but for the pad half-words.
  static Bf16Matrix empty(int64_t rows, int64_t cols);
  bool defined() const { return words.defined(); }
  int64_t rows() const { return words.shape()[0]; }
  int64_t ld() const { return 2 * words.shape()[1]; }  // values from one row to the next
  const uint16_t* data() const { return reinterpret_cast<const uint16_t*>(words.data<int32_t>()); }
  uint16_t* data() { return reinterpret_cast<uint16_t*>(words.data<int32_t>()); }
  Tensor to_f32() const;  // F32 [rows, cols]: the bf16 values, exactly
};
// A linear layer of weight w [N, K] over `rows` rows runs its products in bf16 (bf16 precision
// on a CPU with bf16 products, a product large enough, w contiguous F32 [N, K]): where this is
// true, the functions below serve it. (linear_grads.cpp)
bool bf16_linear(int64_t rows, const Tensor& w);
// x @ w^T + bias for x [M, K] (rows with unit stride) as matmul_bias_into(out, x, w^T, bias)
// computes it, and x as the product rounded it into x16. Only where bf16_linear(M, w).
Tensor linear_keeping_bf16(const Tensor& x, const Tensor& w, const Tensor& bias, Bf16Matrix& x16);
// a @ w^T + bias for an input already in bf16 (the same as the fp32 input it came from).
Tensor linear_bf16(const Bf16Matrix& a, const Tensor& w, const Tensor& bias);
// relu_dropout(x, p, seed, offset) (relu(x) for p 0) of a 2-D x straight into bf16, as the
// products would round it: no fp32 result.
Bf16Matrix relu_dropout_bf16(const Tensor& x, double p, uint64_t seed, uint64_t offset);
// relu_dropout_bf16(linear_keeping_bf16(x, w, bias, x16), p, seed, offset), the same values to
// the bit, without the product in fp32: the relu and the dropout are applied as the bf16 product
// is stored (a feed-forward's hidden layer). Only where linear_relu_dropout_fusable(x, w).
Bf16Matrix linear_relu_dropout_bf16(const Tensor& x, const Tensor& w, const Tensor& bias, double p, uint64_t seed,
                                    uint64_t offset, Bf16Matrix& x16);
// bf16_linear(rows of x, w) for a 2-D F32 x whose K the bf16 kernels sum in one block.
bool linear_relu_dropout_fusable(const Tensor& x, const Tensor& w);
// linear_param_grads and relu_linear_input_grad for an input kept in bf16: the same results as
// for the fp32 input it came from where the products are bf16 (elsewhere it is widened to fp32).
void linear_param_grads(const Tensor& dy, const Bf16Matrix& x, const GradOut& dw, const GradOut& dbias);
void relu_linear_input_grad(const Tensor& dy, const Tensor& w, const Bf16Matrix& y, double scale, const GradOut& dx);

// ------------------------------------------------------------------ the output layer and its loss (linear_cross_entropy.cpp)

// The output layer and its cross-entropy in one, for bf16 products: the loss of
// cross_entropy_forward(x @ w^T + bias, targets, smoothing, ignore_index) with x [N, K], w [V, K]
// and bias [V] (or undefined), taken a block of rows at a time so that the logits [N, V] never
// exist whole: a block's logits stay in cache while its rows' losses and gradients are taken, and
// the gradient is kept in bf16, as the backward products would round it (half the bytes).
// Only where linear_cross_entropy_fusable(x, w, bias): bf16 precision (MatmulPrecisionScope) on
// a CPU with bf16 products, contiguous fp32 operands. (the check: linear_grads.cpp)
bool linear_cross_entropy_fusable(const Tensor& x, const Tensor& w, const Tensor& bias);
struct LinearCrossEntropyResult {
  Tensor loss;       // 0-d, as cross_entropy_forward's on the same (bf16-product) logits
  Bf16Matrix grad;   // the logits' gradient per unit of g / count, [N, V]
  Tensor bias_grad;  // [V]: the fp32 column sums of that gradient before rounding (with a bias)
  int64_t count;     // rows not ignored
  Bf16Matrix input;  // x, as the forward's product rounded it (what the weight's gradient reads)
};
LinearCrossEntropyResult linear_cross_entropy_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                                      const Tensor& targets, double smoothing, int32_t ignore_index);
// With s = g / count: dx (+)= s grad @ w, dw (+)= s grad^T @ input, dbias (+)= s bias_grad, each
// as its GradOut says (any may be undefined); w is the forward's.
void linear_cross_entropy_backward(const LinearCrossEntropyResult& r, const Tensor& w, double g, const GradOut& dx,
                                   const GradOut& dw, const GradOut& dbias);

}  // namespace rosetta
