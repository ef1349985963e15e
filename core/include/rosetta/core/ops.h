// Kernels of the tensor core. Each returns a new contiguous tensor unless its name ends in `_`
// (in place) or it writes a gradient into a GradOut (the backward kernels). Every fast kernel
// has a naive reference in namespace rosetta::ref (same file), written for clarity, which the
// tests compare against.
//
// Dimension legend: N rows (any leading dims flattened), V vocabulary / classes,
// D features, M x K times K x N for matmul.
//
// The fused ops training runs where the products allow (a linear layer with its gradients, its
// relu and dropout, or its loss; inputs kept in bf16) are internal to rosetta and not installed
// (core/include/rosetta/core/internal/fused.h); autograd's functions reach them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rosetta/core/tensor.h"

namespace rosetta {

// Where a backward kernel writes a gradient: out = beta * out + gradient, as GEMM's C. beta 0
// overwrites `out` without reading it (it may be uninitialised); beta 1 adds to what it holds
// (a gradient buffer, or the gradient so far), so a kernel writes straight into its destination
// with no temporary and no second pass. `out` is contiguous, of the gradient's shape and dtype;
// an undefined `out` means the gradient is not wanted. Autograd hands these out (Node::grad_dest).
struct GradOut {
  Tensor out;
  double beta = 0;
};

// ------------------------------------------------------------------ elementwise (elementwise.cpp)

enum class UnaryOp { neg, exp, log, sqrt, tanh, sigmoid, relu, gelu, abs, square, reciprocal };
enum class BinaryOp { add, sub, mul, div, pow, maximum, minimum };

Tensor unary(UnaryOp op, const Tensor& x);
// dx = alpha * dy * f'(x), using x or the forward output y (whichever the derivative needs).
void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, const GradOut& dx,
                    double alpha = 1.0);
// NumPy broadcasting; both operands must have the same floating dtype.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// The gradient of operand `which` (0: a, 1: b) of y = binary(op, a, b), for op mul, div or pow:
//   mul: da = dy * b,  db = dy * a;   div: da = dy / b,  db = -dy / b * y;
//   pow: da = dy * b * a^(b-1),  db = dy * y * log(a)   (y is read by div's and pow's db only)
// summed over the axes the operand was broadcast along (to dst's shape).
void binary_backward(BinaryOp op, int which, const Tensor& a, const Tensor& b, const Tensor& y,
                     const Tensor& dy, const GradOut& dst);

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

// The gradient of where(cond, a, b) (taken = true: a's, where cond is non-zero; false: b's,
// where it is zero; also masked_fill's, with mask as cond and taken = false): dy at those
// places, 0 elsewhere, summed to dst's shape.
void where_backward(const Tensor& cond, bool taken, const Tensor& dy, const GradOut& dst);

// Inverted dropout without a stored mask: element i is kept (and scaled by 1/(1-p)) when
// dropout_keep(seed, offset + i, p), so applying the same (seed, offset) to the gradient
// reproduces the mask exactly. x must be floating; the result is contiguous.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);
// dropout(unary(UnaryOp::relu, x), p, seed, offset) in one pass, to the bit.
Tensor relu_dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);
// add(residual, dropout(x, p, seed, offset)) in one pass, to the bit (a residual connection);
// residual must have x's shape and dtype.
Tensor dropout_add(const Tensor& residual, const Tensor& x, double p, uint64_t seed, uint64_t offset);
// dx = dy * mask / (1 - p), the mask regenerated from (seed, offset).
void dropout_backward(const Tensor& dy, double p, uint64_t seed, uint64_t offset, const GradOut& dx);
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
// The gradient of max along `axis`: dy (keepdim shape) at the index idx (I32, argmax with
// keepdim) along that axis, 0 elsewhere; dx has the input's shape.
void max_backward(const Tensor& dy, const Tensor& idx, int axis, const GradOut& dx);
// Sums the broadcast dimensions of x away so that it has `shape` (the reverse of expand; x
// itself when it has that shape already).
Tensor sum_to(const Tensor& x, const Shape& shape);
// The gradient of expand: dx = alpha * dy summed to dx's shape. Also that of a broadcast add or
// sub, and with nothing to reduce, of a scaling.
void expand_backward(const Tensor& dy, const GradOut& dx, double alpha = 1.0);

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
// out = a @ b + bias, a [M, K], b [K, N], bias [N] added to every row (a linear layer's
// x W^T + b); an undefined bias adds nothing. bf16 products add the bias as they store the
// result; fp32 ones copy it into `out` and add the product to it.
void matmul_bias_into(Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias);

// While one lives on this thread, matmul_bias_into keeps `b` (a weight) packed for its products
// (fp32 on AVX-512 or AVX2: rosetta's own kernel instead of OpenBLAS's sgemm, which repacks both
// operands on every call; bf16; int8: quantized) from its first use to the end of the scope, and reuses
// the packing while the weight is unchanged (same storage and version): decoding multiplies every
// step by the same weights. The weights must not be written through raw pointers meanwhile.
// int8 products run only inside one. A scope opened inside another on the same thread shares the
// outer one's packings (a translation of many batches packs its weights once).
class PackedWeightsScope {
 public:
  // The ISA of the fp32 kernel products by packed weights run on here ("AVX-512", "AVX2"), or ""
  // where they run on OpenBLAS's sgemm even inside a scope (no AVX2 and FMA).
  static std::string fp32_kernel_isa();

  PackedWeightsScope();
  ~PackedWeightsScope();
  PackedWeightsScope(const PackedWeightsScope&) = delete;
  PackedWeightsScope& operator=(const PackedWeightsScope&) = delete;
  struct Cache;  // opaque (core/src/matmul_routes.h)

 private:
  Cache* cache_;  // null in a nested scope
};

// bf16 packings of weights made once and read by many threads: model replicas (one per thread,
// train::ThreadReplicas) multiply by the same weights, and without these each packs them again
// for each of its products. pack() packs each 2-D weight w as the B of both x @ w^T and dy @ w
// (in parallel, on this thread's OpenMP team) where the matmul precision is bf16, and keeps the
// packings while the weights are unchanged (same data, storage and version); at other precisions
// it drops them (OpenBLAS packs its own). A thread inside a Use finds them in its bf16 products
// whose B is one of those weights, as given (not a view into one), with the same results as
// unpacked. The weights must not be written while a Use reads them.
class SharedPackedWeights {
 public:
  SharedPackedWeights();
  ~SharedPackedWeights();
  SharedPackedWeights(const SharedPackedWeights&) = delete;
  SharedPackedWeights& operator=(const SharedPackedWeights&) = delete;

  void pack(const std::vector<Tensor>& weights);
  void clear();
  // The weights packed (0 where none are).
  int64_t size() const;

  struct Entries;  // opaque (core/src/packed_weights.cpp)

  // This thread's bf16 products read `packed` until the Use ends (a Use inside another: the
  // inner one's, then the outer one's again).
  class Use {
   public:
    explicit Use(const SharedPackedWeights& packed);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    const Entries* saved_;
  };

 private:
  std::unique_ptr<Entries> entries_;
};

// ------------------------------------------------------------------ softmax family (softmax.cpp)

// Over the last axis; numerically stable; -inf entries allowed; a row that is all -inf gives
// zeros (softmax) and -inf (log_softmax), never NaN.
Tensor softmax(const Tensor& x);
// Softmax over the entries where mask (I32, broadcast to x) is zero; masked entries get 0.
// Equal to softmax(masked_fill(x, mask, -inf)) in one pass.
Tensor softmax(const Tensor& x, const Tensor& mask);
Tensor log_softmax(const Tensor& x);
// Given y = softmax(x): dx = y * (dy - sum(dy * y)).
void softmax_backward(const Tensor& y, const Tensor& dy, const GradOut& dx);
// Given y = log_softmax(x): dx = dy - exp(y) * sum(dy).
void log_softmax_backward(const Tensor& y, const Tensor& dy, const GradOut& dx);

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
// With beta 0, dlogits.out may be `logits` itself (each element is read before it is written):
// no second [N, V] buffer.
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            double smoothing, int32_t ignore_index, int64_t count, double g,
                            const GradOut& dlogits);

// ------------------------------------------------------------------ a decoding step's attention (attention_step.cpp)

// One query per row attending over keys and values found by index, for incremental decoding
// (no gradients): q [R, H, Dh]; keys and values [N, H, Dh] (contiguous F32); index I32 [R, n],
// unit stride along n: position p of row r is row index[r, p] of keys and values, or hidden
// where it is -1. Returns the context [R, H, Dh], softmax(scale * q . k) . v per row and head
// over the positions not hidden (zeros where all are), and the probabilities [R, H, n] in
// *weights when given. Beams that share a prefix or a source share its rows: following them is
// a copy of indices, not of keys.
Tensor attend_gathered(const Tensor& q, const Tensor& keys, const Tensor& values, const Tensor& index,
                       double scale, Tensor* weights = nullptr);

// ------------------------------------------------------------------ indexing (index.cpp)

// table [V, D], ids i32 of any shape S -> [S..., D].
Tensor index_select(const Tensor& table, const Tensor& ids);
// The gradient of index_select: dtable[ids[i]] += dy[i] for each id, rows of other ids 0
// (ids equal to skip_id are skipped; -1 = none).
void index_select_backward(const Tensor& ids, const Tensor& dy, const GradOut& dtable,
                           int32_t skip_id = -1);
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
// xhat = (x - mean) * rstd; dgamma = sum(dy * xhat); dbeta = sum(dy);
// dx = rstd * (dy*gamma - mean(dy*gamma) - xhat * mean(dy*gamma * xhat)).
// Any of dx, dgamma, dbeta may be undefined (not wanted).
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& mean,
                         const Tensor& rstd, const Tensor& gamma, const GradOut& dx,
                         const GradOut& dgamma, const GradOut& dbeta);

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
// Splits the counters offset + [b, e) into runs over which their high 32 bits stay the same and
// calls f(i, n, lo, hi) for each run [i, i + n): lo the counter's low 32 bits at i (lo + j does
// not wrap for j < n) and hi = fmix32(its high bits ^ key), so that dropout_hash(key, offset + i +
// j) is fmix32((lo + j) * 0x9E3779B1 ^ hi): a loop over a run needs 32-bit lanes only, and
// vectorises.
template <class F>
void for_counter_runs(uint32_t key, uint64_t offset, int64_t b, int64_t e, F&& f) {
  while (b < e) {
    const uint64_t c0 = offset + uint64_t(b);
    const uint32_t lo = uint32_t(c0);
    int64_t n = std::min<int64_t>(e - b, int64_t((uint64_t(1) << 32) - lo));
    n = std::min<int64_t>(n, int64_t(UINT32_MAX));
    f(b, uint32_t(n), lo, fmix32(uint32_t(c0 >> 32) ^ key));
    b += n;
  }
}
// The sum of partial(b, e) over [0, n) split as OpenMP's schedule(static) splits a loop (thread t
// of T takes the t-th of T near-equal contiguous chunks), on the calling thread's team when
// `parallel` (and not already inside a parallel region), the partials added in thread order
// starting from 0. A `reduction(+ : s)` clause adds them in the order the threads finish: on 3
// or more threads the same sum came out in different last bits from one call to the next. On 1
// or 2 threads the result is the reduction clause's, bit for bit.
double ordered_sum(int64_t n, bool parallel, const std::function<double(int64_t, int64_t)>& partial);
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
Tensor log_softmax(const Tensor& x);
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing,
                     int32_t ignore_index);
Tensor index_select(const Tensor& table, const Tensor& ids);
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps);
}  // namespace ref

}  // namespace rosetta
