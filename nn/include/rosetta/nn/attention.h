// Multi-head scaled dot-product attention.
//
// Dimension legend: B batch, T query length, S key length, D model width, H heads,
// Dh = D / H head width.
//
//   q = x Wq^T + bq  -> [B, H, T, Dh]       (a permuted view; no copy)
//   k = m Wk^T + bk  -> [B, H, S, Dh]
//   v = m Wv^T + bv  -> [B, H, S, Dh]
//   A = softmax(q k^T / sqrt(Dh) + mask)     [B, H, T, S], masked entries are -inf
//   y = concat_heads(dropout(A) v) Wo^T + bo [B, T, D]
#pragma once

#include <memory>

#include "rosetta/nn/layers.h"

namespace rosetta::nn {

// Masks are I32 tensors broadcastable to [B, H, T, S]; non-zero means "may not attend".
// [B, 1, 1, S]: 1 where ids (a [B, S] I32 batch) equal pad.
Tensor key_padding_mask(const Tensor& ids, int32_t pad);
// [1, 1, T, T]: 1 above the diagonal (query t may not see keys after t).
Tensor causal_mask(int64_t T);
// The union of two masks (either may be undefined), broadcast together.
Tensor combine_masks(const Tensor& a, const Tensor& b);

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t dim, int64_t heads, double dropout,
                     std::shared_ptr<Generator> dropout_gen, Generator& init_gen);

  // query [B, T, D] attends over key_value [B, S, D] (the same Var for self-attention).
  // `weights`, when given, receives the attention probabilities [B, H, T, S].
  Var forward(const Var& query, const Var& key_value, const Tensor& mask,
              Tensor* weights = nullptr) const;

  // The pieces of forward, for incremental decoding with cached keys and values.
  Var split_heads(const Var& x) const;  // [B, T, D] -> [B, H, T, Dh]
  Var attend(const Var& q, const Var& k, const Var& v, const Tensor& mask,
             Tensor* weights) const;  // heads in, [B, T, D] out (after out_proj)

  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return head_dim_; }

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;

 private:
  int64_t heads_, head_dim_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace rosetta::nn
