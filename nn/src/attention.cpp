#include "rosetta/nn/attention.h"

#include <cmath>
#include <limits>

namespace rosetta::nn {

Tensor key_padding_mask(const Tensor& ids_in, int32_t pad) {
  ROSETTA_CHECK(ids_in.dim() == 2 && ids_in.dtype() == DType::i32,
                "key_padding_mask: ids must be I32 [B, S], got ", ids_in.shape());
  const Tensor ids = ids_in.contiguous();
  const int64_t B = ids.shape()[0], S = ids.shape()[1];
  Tensor m = Tensor::empty({B, 1, 1, S}, DType::i32);
  const int32_t* p = ids.data<int32_t>();
  int32_t* o = m.data<int32_t>();
  for (int64_t i = 0; i < B * S; ++i) o[i] = p[i] == pad;
  return m;
}

Tensor causal_mask(int64_t T) {
  Tensor m = Tensor::empty({1, 1, T, T}, DType::i32);
  int32_t* o = m.data<int32_t>();
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) o[i * T + j] = j > i;
  return m;
}

Tensor combine_masks(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out = Tensor::empty(shape, DType::i32);
  out.copy_(a);
  const Tensor eb = b.expand(shape).contiguous();
  int32_t* o = out.data<int32_t>();
  const int32_t* pb = eb.data<int32_t>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = o[i] || pb[i];
  return out;
}

MultiHeadAttention::MultiHeadAttention(int64_t dim, int64_t heads, double p,
                                       std::shared_ptr<Generator> dropout_gen, Generator& init_gen)
    : heads_(heads), head_dim_(heads > 0 ? dim / heads : 0) {
  ROSETTA_CHECK(heads > 0 && dim > 0 && dim % heads == 0, "MultiHeadAttention: d_model ", dim,
                " is not divisible by heads ", heads);
  q_proj = register_module("q_proj", std::make_shared<Linear>(LinearOptions(dim, dim), init_gen));
  k_proj = register_module("k_proj", std::make_shared<Linear>(LinearOptions(dim, dim), init_gen));
  v_proj = register_module("v_proj", std::make_shared<Linear>(LinearOptions(dim, dim), init_gen));
  out_proj = register_module("out_proj", std::make_shared<Linear>(LinearOptions(dim, dim), init_gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(p, std::move(dropout_gen)));
}

Var MultiHeadAttention::split_heads(const Var& x) const {
  const int64_t B = x.size(0), T = x.size(1);
  return permute(reshape(x, {B, T, heads_, head_dim_}), {0, 2, 1, 3});
}

Var MultiHeadAttention::attend(const Var& q, const Var& k, const Var& v, const Tensor& mask,
                               Tensor* weights) const {
  const int64_t B = q.size(0), T = q.size(2);
  // The 1/sqrt(Dh) scale rides on the GEMM's alpha; the mask is applied inside the softmax.
  const Var scores = matmul(q, transpose(k, -1, -2), 1.0 / std::sqrt(double(head_dim_)));
  Var probs = softmax(scores, mask);
  if (weights) *weights = probs.data();
  // [B, H, T, Dh] laid out as [B, T, H, Dh]: merging the heads is a view, not a copy.
  Var ctx = matmul(dropout_->forward(probs), v, 1.0, {0, 2, 1, 3});
  ctx = reshape(permute(ctx, {0, 2, 1, 3}), {B, T, heads_ * head_dim_});  // [B, T, D]
  return out_proj->forward(ctx);
}

Var MultiHeadAttention::forward(const Var& query, const Var& key_value, const Tensor& mask,
                                Tensor* weights) const {
  ROSETTA_CHECK(query.dim() == 3 && key_value.dim() == 3 && query.size(2) == key_value.size(2) &&
                    query.size(0) == key_value.size(0),
                "MultiHeadAttention: query ", query.shape(), " and key/value ", key_value.shape(),
                " must be [B, T, D] and [B, S, D]");
  const Var q = split_heads(q_proj->forward(query));
  const Var k = split_heads(k_proj->forward(key_value));
  const Var v = split_heads(v_proj->forward(key_value));
  return attend(q, k, v, mask, weights);
}

}  // namespace rosetta::nn
