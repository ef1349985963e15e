// What the matrix products of matmul.cpp, packed_weights.cpp and linear_grads.cpp share: how a
// view is handed to a GEMM, which products run in bf16, and the packings of weights this
// thread's products read. Internal to core.
#pragma once

#include <cblas.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <tuple>

#include "kernels/bf16.h"
#include "kernels/f32.h"
#include "kernels/int8.h"
#include "rosetta/core/ops.h"

namespace rosetta::detail {

// How BLAS sees the last two axes of a view: rows x cols with a leading dimension.
struct MatLayout {
  bool ok = false;
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int64_t ld = 0;
};
MatLayout layout_of(const Tensor& t);

// A product of M x N x K runs in bf16: bf16 precision, enough multiply-adds, and every tensor
// it reads or writes fp32 (raw pointers are fp32 already).
bool bf16_product(int64_t M, int64_t N, int64_t K, std::initializer_list<const Tensor*> tensors = {});

// detail::gemm_bf16 on bf16_threads, on B's shared packing where this thread has one
// (SharedPackedWeights::Use).
void gemm_bf16_sharing(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
                       const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr,
                       const float* gate = nullptr, int64_t ldg = 0);

}  // namespace rosetta::detail

namespace rosetta {

// The fp32, bf16 and int8 packings of weights kept by the outermost PackedWeightsScope of this
// thread.
struct PackedWeightsScope::Cache {
  struct Key {
    uint64_t storage, version;
    int64_t offset, K, N, ld;
    bool trans;
    bool operator<(const Key& o) const {
      return std::tie(storage, version, offset, K, N, ld, trans) < std::tie(o.storage, o.version, o.offset, o.K, o.N, o.ld, o.trans);
    }
  };
  std::map<Key, std::unique_ptr<detail::PackedB>> packed;
  std::map<Key, std::unique_ptr<detail::PackedBInt8>> packed_int8;
  std::map<Key, std::unique_ptr<detail::PackedBF32>> packed_f32;

  // This thread's (its outermost scope's), or null outside a scope.
  static Cache* current();

  // The packing of op(b) (K x N, layout lb) in `kept`, made by pack(trans, K, N, data, ld, out)
  // at its first use in this scope.
  template <class P, class Pack>
  static const P& find_or_pack(std::map<Key, std::unique_ptr<P>>& kept, const Tensor& b, int64_t K, int64_t N,
                               const detail::MatLayout& lb, Pack pack) {
    const Key key{b.storage_id(), b.version(), b.offset(), K, N, lb.ld, lb.trans == CblasTrans};
    std::unique_ptr<P>& p = kept[key];
    if (!p) {
      p = std::make_unique<P>();
      pack(key.trans, K, N, b.data<float>(), lb.ld, *p);
    }
    return *p;
  }
};

}  // namespace rosetta
