// Kernels of the tensor core. Each returns a new contiguous tensor unless its name ends in `_`
// (in place). Every fast kernel has a naive reference in namespace rosetta::ref (same file),
// written for clarity, which the tests compare against.
//
// Dimension legend: N rows (any leading dims flattened), V vocabulary / classes,
// D features, M x K times K x N for matmul.
#pragma once

#include <cstdint>
#include <vector>

#include "rosetta/core/tensor.h"

namespace rosetta {

// ------------------------------------------------------------------ elementwise (elementwise.cpp)

enum class UnaryOp { neg, exp, log, sqrt, tanh, sigmoid, relu, gelu, abs, square, reciprocal };
enum class BinaryOp { add, sub, mul, div, pow, maximum, minimum };

Tensor unary(UnaryOp op, const Tensor& x);
// dx = dy * f'(x), using x or the forward output y (whichever the derivative needs).
Tensor unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy);
// NumPy broadcasting; both operands must have the same floating dtype.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);

inline Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::div, a, b); }

// y = x * scale + shift
Tensor affine(const Tensor& x, double scale, double shift);
// y = x ^ p
Tensor pow_scalar(const Tensor& x, double p);
// dst += alpha * src, src broadcast to dst's shape. The gradient-accumulation primitive.
void add_(Tensor& dst, const Tensor& src, double alpha = 1.0);
// dst *= s
void scale_(Tensor& dst, double s);
// out = cond ? a : b, with cond an i32 tensor (non-zero = true); all three broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` where mask (i32, broadcast to x) is non-zero. value may be +-infinity.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// Concatenation along an existing axis.
Tensor cat(const std::vector<Tensor>& parts, int axis);

// Inverted dropout without a stored mask: element i is kept (and scaled by 1/(1-p)) when
// dropout_keep(seed, offset + i, p), so applying the same (seed, offset) to the gradient
// reproduces the mask exactly. x must be floating; the result is contiguous.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);
// The keep decision: a 32-bit hash of (seed, counter) compared with p * 2^32.
inline bool dropout_keep(uint64_t seed, uint64_t counter, double p);

// ------------------------------------------------------------------ reductions (reduce.cpp)

Tensor sum(const Tensor& x, int axis, bool keepdim = false);
Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor sum_all(const Tensor& x);  // 0-d tensor
Tensor mean(const Tensor& x, int axis, bool keepdim = false);
Tensor mean_all(const Tensor& x);
Tensor max(const Tensor& x, int axis, bool keepdim = false);
Tensor argmax(const Tensor& x, int axis, bool keepdim = false);  // i32
// Zeros of `shape` with src written at index idx along `axis` (src, idx: `shape` with that axis
// of size 1; idx I32). The gradient of max.
Tensor scatter_axis(const Tensor& src, const Tensor& idx, int axis, const Shape& shape);
// Sums the broadcast dimensions of x away so that it has `shape` (the reverse of expand).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ------------------------------------------------------------------ matmul (matmul.cpp)

// a [..., M, K] @ b [..., K, N] -> [..., M, N]. Batch dims broadcast; a 2-D operand is shared
// by every batch. Transposed views go to BLAS as transpose flags, not copies.
Tensor matmul(const Tensor& a, const Tensor& b);
// out = alpha * a @ b + beta * out, out a [..., M, N] of the broadcast batch shape whose
// matrices are row-major (rows with unit stride; any batch strides, so a permuted view works:
// attention writes its heads straight into [B, T, H, Dh]). beta = 1 accumulates (used by
// backward to add into a gradient without a temporary).
void matmul_into(Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1.0,
                 double beta = 0.0);

// ------------------------------------------------------------------ softmax family (softmax.cpp)

// Over the last axis; numerically stable; -inf entries allowed; a row that is all -inf gives
// zeros (softmax) and -inf (log_softmax), never NaN.
Tensor softmax(const Tensor& x);
// Softmax over the entries where mask (I32, broadcast to x) is zero; masked entries get 0.
// Equal to softmax(masked_fill(x, mask, -inf)) in one pass.
Tensor softmax(const Tensor& x, const Tensor& mask);
Tensor log_softmax(const Tensor& x);
// Given y = softmax(x): dx = y * (dy - sum(dy * y)).
Tensor softmax_backward(const Tensor& y, const Tensor& dy);
// Given y = log_softmax(x): dx = dy - exp(y) * sum(dy).
Tensor log_softmax_backward(const Tensor& y, const Tensor& dy);

// Fused log-softmax + label-smoothed cross-entropy over logits [N, V] and targets [N] (i32).
// loss_i = (1 - eps) * -log p[t_i] + eps * mean_j(-log p_j); rows with t_i == ignore_index are
// skipped; the result is the mean over the other rows (0 if there are none).
struct CrossEntropyResult {
  Tensor loss;    // 0-d
  Tensor lse;     // [N] log-sum-exp of each row, saved for backward
  int64_t count;  // rows not ignored
};
CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                         double smoothing, int32_t ignore_index);
// dlogits = g / count * (softmax(logits) - ((1 - eps) * onehot(t) + eps / V)), 0 on ignored rows.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                              double smoothing, int32_t ignore_index, int64_t count, double g);
// The same, written over `logits` (contiguous): no second [N, V] buffer.
void cross_entropy_backward_(Tensor& logits, const Tensor& targets, const Tensor& lse, double smoothing,
                             int32_t ignore_index, int64_t count, double g);

// ------------------------------------------------------------------ indexing (index.cpp)

// table [V, D], ids i32 of any shape S -> [S..., D].
Tensor index_select(const Tensor& table, const Tensor& ids);
// table_grad[ids[i]] += src[i] for each id (rows equal to skip_id are skipped; -1 = none).
void index_add_(Tensor& table_grad, const Tensor& ids, const Tensor& src, int32_t skip_id = -1);
// x [..., V], idx i32 [...] -> x[..., idx] (picks one entry per row of the last axis).
Tensor gather_last(const Tensor& x, const Tensor& idx);

// ------------------------------------------------------------------ layer norm (layernorm.cpp)

// Over the last axis D: y = (x - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps).
struct LayerNormResult {
  Tensor y;     // like x
  Tensor mean;  // [N]
  Tensor rstd;  // [N]
};
LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   double eps);
// xhat = (x - mean) * rstd; dgamma += sum(dy * xhat); dbeta += sum(dy);
// dx = rstd * (dy*gamma - mean(dy*gamma) - xhat * mean(dy*gamma * xhat)).
// Any of dx, dgamma, dbeta may be null (not wanted); dgamma and dbeta accumulate.
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean,
                         const Tensor& rstd, const Tensor& gamma, Tensor* dx, Tensor* dgamma,
                         Tensor* dbeta);

// ------------------------------------------------------------------ inline helpers

namespace detail {
inline uint32_t fmix32(uint32_t h) {  // MurmurHash3's finaliser
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}
inline uint32_t dropout_hash(uint32_t key, uint64_t counter) {
  const uint32_t hi = fmix32(uint32_t(counter >> 32) ^ key);
  return fmix32(uint32_t(counter) * 0x9E3779B1u ^ hi);
}
inline uint32_t dropout_key(uint64_t seed) { return fmix32(uint32_t(seed) ^ fmix32(uint32_t(seed >> 32) + 0x5bd1e995u)); }
inline uint64_t dropout_threshold(double p) { return uint64_t(p * 4294967296.0); }
}  // namespace detail

inline bool dropout_keep(uint64_t seed, uint64_t counter, double p) {
  return detail::dropout_hash(detail::dropout_key(seed), counter) >= detail::dropout_threshold(p);
}

// ------------------------------------------------------------------ naive references

namespace ref {
Tensor unary(UnaryOp op, const Tensor& x);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor sum(const Tensor& x, int axis, bool keepdim);
Tensor max(const Tensor& x, int axis, bool keepdim);
Tensor argmax(const Tensor& x, int axis, bool keepdim);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor softmax(const Tensor& x);
// Softmax over the entries where mask (I32, broadcast to x) is zero; masked entries get 0.
// Equal to softmax(masked_fill(x, mask, -inf)) in one pass.
Tensor softmax(const Tensor& x, const Tensor& mask);
Tensor log_softmax(const Tensor& x);
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing,
                     int32_t ignore_index);
Tensor index_select(const Tensor& table, const Tensor& ids);
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps);
}  // namespace ref

}  // namespace rosetta
