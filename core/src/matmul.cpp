// Matrix products on OpenBLAS and rosetta's own kernels (kernels/). A view whose last two axes
// are row-major or column-major goes to BLAS as it is (a transposed view becomes CblasTrans with
// its own leading dimension); only other layouts are copied. Batched products loop over the
// broadcast batch: small matrices run one GEMM per OpenMP thread (OpenBLAS runs single-threaded
// inside a parallel region), large ones one after another with BLAS's own threads. Under bf16
// precision products run on the bf16 kernels (kernels/bf16.h); inside a PackedWeightsScope
// (packed_weights.cpp) products by weights run on weights packed once, in fp32 (kernels/f32.h)
// or int8 (kernels/int8.h).
#include <omp.h>

#include <algorithm>

#include "backward.h"
#include "matmul_routes.h"
#include "rosetta/core/cpu.h"
#include "strided.h"

namespace rosetta {

using detail::layout_of;
using detail::MatLayout;

MatLayout detail::layout_of(const Tensor& t) {
  const int64_t rows = t.shape().back(-2), cols = t.shape().back(-1);
  const int64_t rs = t.strides().back(-2), cs = t.strides().back(-1);
  MatLayout m;
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1))) {
    m = {true, CblasNoTrans, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  } else if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1))) {
    m = {true, CblasTrans, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
  }
  return m;
}

namespace {

// Below this many multiply-adds, a GEMM runs on one thread: OpenBLAS splits even a 512 x 64 x 64
// product over every thread, and waking and synchronising them costs more than it saves (such a
// product ran slower on two threads than on one).
constexpr int64_t kSingleThreadGemm = int64_t(1) << 24;

// Runs f() with OpenBLAS on one thread when the product is small (the OpenMP build of OpenBLAS
// uses omp_get_max_threads() threads).
template <class F>
void sized_gemm(int64_t M, int64_t N, int64_t K, F f) {
  const int threads = omp_get_max_threads();
  if (threads == 1 || M * N * K >= kSingleThreadGemm || omp_in_parallel()) return f();
  omp_set_num_threads(1);
  f();
  omp_set_num_threads(threads);
}

// Below this many multiply-adds a bf16 product is no faster than OpenBLAS's sgemm (packing
// dominates: 16 x 64 x 16 ran at 0.87x, 32 x 64 x 32 at 1.3x, 8 x 256 x 256 at 2x; Zen 4), and
// runs in fp32.
constexpr int64_t kMinBf16Gemm = 32 * 32 * 32;

}  // namespace

bool detail::bf16_product(int64_t M, int64_t N, int64_t K, std::initializer_list<const Tensor*> tensors) {
  if (matmul_precision() != Precision::bf16 || M * N * K < kMinBf16Gemm) return false;
  for (const Tensor* t : tensors)
    if (t->dtype() != DType::f32) return false;
  return true;
}

int detail::bf16_threads(int64_t M, int64_t N, int64_t K) {
  if (M * N * K < kSingleThreadGemm) return 1;
  return omp_in_parallel() ? nested_gemm_threads() : omp_get_max_threads();
}

bool detail::bf16_gemm(int64_t M, int64_t N, int64_t K) { return gemm_bf16_available() && bf16_product(M, N, K); }

void detail::gemm_bf16_sharing(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* a,
                               int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                               const float* bias, const float* gate, int64_t ldg) {
  const int threads = bf16_threads(M, N, K);
  if (const PackedB* packed = shared_packing(b, ldb, K, N, tb))
    return gemm_bf16_packed(ta, M, alpha, a, lda, *packed, beta, c, ldc, threads, bias, gate, ldg);
  gemm_bf16(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, threads, bias, nullptr, gate, ldg);
}

namespace {
using detail::bf16_product;
using detail::bf16_threads;

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K, double alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, double beta, float* c,
          int64_t ldc) {
  if (bf16_product(M, N, K))
    return detail::gemm_bf16_sharing(ta == CblasTrans, tb == CblasTrans, M, N, K, float(alpha), a, lda, b, ldb,
                                     float(beta), c, ldc);
  sized_gemm(M, N, K, [&] {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, float(alpha), a, lda, b, ldb, float(beta), c, ldc);
  });
}
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
          int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Below this many multiply-adds per GEMM, batches run one GEMM per thread, if the batch as a
// whole has at least kParallelBatch (a parallel region costs ~50 us here: more than 128 GEMMs of
// 16 x 16 x 16, one attention product of the tiny preset, take).
constexpr int64_t kSmallGemm = 128 * 128 * 128;
constexpr int64_t kParallelBatch = int64_t(1) << 22;

// Small products over a batch (attention's, one per sentence and head) read each operand in short
// runs (a head's 32 rows of 64 floats) that the hardware prefetchers do not follow: cold in
// memory, as the backward pass finds them, the 32 x 32 x 64 products ran at ~40% of their speed
// on cached operands, and prefetching each product's operands one product ahead did not help
// (Zen 4, bf16). One sequential pass over an operand's memory first (a load per cache line)
// streams it into the caches at the memory's full speed: in the small preset's training step,
// attention's products 55-62 -> 82-90 GFLOP/s per thread, the pass's own time included.
// Operands larger than kWarmMax (beyond what the caches would keep) are left as they are.
constexpr int64_t kWarmMax = int64_t(8) << 20;

template <class T>
void warm_span(const Tensor& t) {
  int64_t span = 1;
  for (int d = 0; d < t.dim(); ++d) {
    if (t.shape()[d] == 0 || t.strides()[d] < 0) return;
    span += (t.shape()[d] - 1) * t.strides()[d];
  }
  const int64_t bytes = span * int64_t(sizeof(T));
  if (bytes > kWarmMax) return;
  const auto* p = reinterpret_cast<const unsigned char*>(t.data<T>());
  unsigned sum = 0;
  for (int64_t o = 0; o < bytes; o += 64) sum += p[o];
  asm volatile("" : : "r"(sum));  // the loads are the point
}

Shape batch_shape(const Tensor& t) {
  Shape s = t.shape();
  s.resize(s.size() - 2);
  return s;
}

}  // namespace

void matmul_into(Tensor& out, const Tensor& a_in, const Tensor& b_in, double alpha, double beta) {
  ROSETTA_CHECK(a_in.dim() >= 2 && b_in.dim() >= 2, "matmul: operands must have at least 2 ",
                "dimensions, got ", a_in.shape(), " and ", b_in.shape());
  ROSETTA_CHECK(a_in.dtype() == b_in.dtype() && out.dtype() == a_in.dtype(),
                "matmul: dtypes differ (", dtype_name(a_in.dtype()), ", ",
                dtype_name(b_in.dtype()), ")");
  const int64_t M = a_in.shape().back(-2), K = a_in.shape().back(-1), N = b_in.shape().back(-1);
  ROSETTA_CHECK(b_in.shape().back(-2) == K, "matmul: shapes ", a_in.shape(), " and ",
                b_in.shape(), " do not match (", K, " != ", b_in.shape().back(-2), ")");
  const Shape batch = broadcast_shapes(batch_shape(a_in), batch_shape(b_in));
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  ROSETTA_CHECK(out.shape() == out_shape, "matmul_into: output ", out.shape(), " must be ",
                out_shape);
  if (out.numel() == 0) return;
  // Any batch strides (a permuted view, e.g. attention heads written straight into [B, T, H, Dh]),
  // but each matrix row-major, as BLAS writes it.
  const MatLayout lc = layout_of(out);
  ROSETTA_CHECK(lc.ok && lc.trans == CblasNoTrans, "matmul_into: output of shape ", out.shape(),
                " and strides ", out.strides(), " does not hold row-major matrices");

  Tensor a = a_in, b = b_in, c = out;
  // A batched `a` times a plain matrix `b` is one tall GEMM when a's and the output's rows are
  // evenly spaced.
  if (b.dim() == 2 && a.dim() > 2 && a.strides().back(-1) == 1) {
    try {
      const Tensor a2 = a.view({-1, K}), c2 = out.view({-1, N});
      a = a2;
      c = c2;
    } catch (const Error&) {
    }
  }
  if (!layout_of(a).ok) a = a.contiguous();
  if (!layout_of(b).ok) b = b.contiguous();
  const MatLayout la = layout_of(a), lb = layout_of(b);

  dispatch_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pc = c.data<T>();
    if (a.dim() == 2 && b.dim() == 2) {  // single GEMM (possibly folded batch)
      gemm(la.trans, lb.trans, a.shape()[0], N, K, alpha, a.data<T>(), la.ld, b.data<T>(), lb.ld,
           beta, pc, layout_of(c).ld);
      return;
    }
    const Shape bsa = a.dim() > 2 ? batch_shape(a) : Shape{}, bsb = batch_shape(b);
    // Batch strides of a and b broadcast to the output batch (0 where broadcast), and the
    // output's own.
    Shape sa, sb, sc = c.strides();
    sc.resize(sc.size() - 2);
    {
      Shape ea = a.strides(), eb = b.strides();
      ea.resize(ea.size() - 2);
      eb.resize(eb.size() - 2);
      sa.resize(batch.size(), 0);
      sb.resize(batch.size(), 0);
      for (int d = 0; d < batch.size(); ++d) {
        const int da = d - (batch.size() - bsa.size()), db = d - (batch.size() - bsb.size());
        if (da >= 0 && bsa[da] != 1) sa[d] = ea[da];
        if (db >= 0 && bsb[db] != 1) sb[d] = eb[db];
      }
    }
    const int64_t nb = batch.numel();
    const T *pa = a.data<T>(), *pb = b.data<T>();
    auto one = [&](int64_t i) {
      int64_t rem = i, oa = 0, ob = 0, oc = 0;
      for (int d = batch.size() - 1; d >= 0; --d) {
        const int64_t k = rem % batch[d];
        rem /= batch[d];
        oa += k * sa[d];
        ob += k * sb[d];
        oc += k * sc[d];
      }
      gemm(la.trans, lb.trans, M, N, K, alpha, pa + oa, la.ld, pb + ob, lb.ld, beta, pc + oc,
           lc.ld);
    };
    if (M * N * K < kSmallGemm && nb > 1) {  // loads only: no value changes
      warm_span<T>(a);
      warm_span<T>(b);
    }
    if (M * N * K < kSmallGemm && nb > 1 && nb * M * N * K >= kParallelBatch && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < nb; ++i) one(i);
    } else {
      for (int64_t i = 0; i < nb; ++i) one(i);
    }
  });
  out.bump_version();
}

namespace {
// out = a @ b + bias by a weight b packed once per PackedWeightsScope, where a scope is open, the
// operands suit the kernels, and the precision is int8 (gemm_int8) or fp32 on AVX-512 or AVX2
// (gemm_f32_packed); false (nothing done) otherwise.
bool packed_product_into(Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  PackedWeightsScope::Cache* cache = PackedWeightsScope::Cache::current();
  const Precision p = matmul_precision();
  if (!cache || !(p == Precision::int8 || (p == Precision::fp32 && detail::gemm_f32_packed_available())))
    return false;
  const int64_t M = a.shape()[0], K = a.shape()[1], N = b.shape()[1];
  const bool has_bias = bias.defined();
  if (out.dtype() != DType::f32 || a.dtype() != DType::f32 || b.dtype() != DType::f32) return false;
  if ((has_bias && (bias.dtype() != DType::f32 || !bias.is_contiguous())) || out.shape() != Shape{M, N}) return false;
  const MatLayout la = layout_of(a), lb = layout_of(b), lc = layout_of(out);
  if (!la.ok || !lb.ok || !lc.ok || la.trans == CblasTrans || lc.trans == CblasTrans) return false;
  const int threads = bf16_threads(M, N, K);
  const float* bias_data = has_bias ? bias.data<float>() : nullptr;
  using Cache = PackedWeightsScope::Cache;
  if (p == Precision::int8) {
    const detail::PackedBInt8& w = Cache::find_or_pack(
        cache->packed_int8, b, K, N, lb, [](bool t, int64_t k, int64_t n, const float* w, int64_t ld,
                                            detail::PackedBInt8& out) { detail::pack_b_int8(t, k, n, w, ld, out); });
    detail::gemm_int8_packed(M, a.data<float>(), la.ld, w, out.data<float>(), lc.ld, threads, bias_data);
  } else {
    const detail::PackedBF32& w = Cache::find_or_pack(cache->packed_f32, b, K, N, lb, detail::pack_b_f32);
    detail::gemm_f32_packed(M, a.data<float>(), la.ld, w, out.data<float>(), lc.ld, threads, bias_data);
  }
  out.bump_version();
  return true;
}
}  // namespace

void matmul_bias_into(Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  const bool has_bias = bias.defined();
  ROSETTA_CHECK(a.dim() == 2 && b.dim() == 2 && (!has_bias || (bias.dim() == 1 && bias.shape()[0] == b.shape()[1])),
                "matmul_bias_into: a ", a.shape(), ", b ", b.shape(), " and bias ", (has_bias ? bias.shape() : Shape{}),
                " are not [M, K], [K, N] and [N]");
  const int64_t M = a.shape()[0], K = a.shape()[1], N = b.shape()[1];
  if (packed_product_into(out, a, b, bias)) return;
  if (bf16_product(M, N, K, {&out, &a, &b}) && (!has_bias || bias.dtype() == DType::f32) && b.shape()[0] == K &&
      out.shape() == Shape{M, N}) {
    const MatLayout la = layout_of(a), lb = layout_of(b), lc = layout_of(out);
    if (la.ok && lb.ok && lc.ok && lc.trans == CblasNoTrans && (!has_bias || bias.is_contiguous())) {
      const float* bias_data = has_bias ? bias.data<float>() : nullptr;
      const int threads = bf16_threads(M, N, K);
      if (PackedWeightsScope::Cache* cache = PackedWeightsScope::Cache::current()) {
        const detail::PackedB& packed = PackedWeightsScope::Cache::find_or_pack(
            cache->packed, b, K, N, lb, [](bool t, int64_t k, int64_t n, const float* w, int64_t ld, detail::PackedB& out) {
              detail::pack_b_bf16(t, k, n, w, ld, out);
            });
        detail::gemm_bf16_packed(la.trans == CblasTrans, M, 1.0f, a.data<float>(), la.ld, packed, 0.0f,
                                 out.data<float>(), lc.ld, threads, bias_data);
      } else {
        detail::gemm_bf16_sharing(la.trans == CblasTrans, lb.trans == CblasTrans, M, N, K, 1.0f, a.data<float>(), la.ld,
                                  b.data<float>(), lb.ld, 0.0f, out.data<float>(), lc.ld, bias_data);
      }
      out.bump_version();
      return;
    }
  }
  if (!has_bias) return matmul_into(out, a, b);
  out.copy_(bias);
  matmul_into(out, a, b, 1.0, 1.0);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  ROSETTA_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: operands must have at least 2 ",
                "dimensions, got ", a.shape(), " and ", b.shape());
  ROSETTA_CHECK(b.shape().back(-2) == a.shape().back(-1), "matmul: shapes ", a.shape(), " and ",
                b.shape(), " do not match");
  Shape out_shape = broadcast_shapes(batch_shape(a), batch_shape(b));
  out_shape.push_back(a.shape().back(-2));
  out_shape.push_back(b.shape().back(-1));
  Tensor out = Tensor::empty(out_shape, a.dtype());
  matmul_into(out, a, b, 1.0, 0.0);
  return out;
}

namespace ref {

Tensor matmul(const Tensor& a, const Tensor& b) {
  const int64_t M = a.shape().back(-2), K = a.shape().back(-1), N = b.shape().back(-1);
  const Shape batch = broadcast_shapes(batch_shape(a), batch_shape(b));
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::zeros(out_shape, DType::f64);
  double* po = out.data<double>();
  int64_t flat = 0;
  detail::for_each_index(batch, [&](const std::vector<int64_t>& bi) {
    std::vector<int64_t> ia = detail::bcast_index(bi, batch_shape(a));
    std::vector<int64_t> ib = detail::bcast_index(bi, batch_shape(b));
    ia.resize(ia.size() + 2);
    ib.resize(ib.size() + 2);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) {
          ia[ia.size() - 2] = i;
          ia[ia.size() - 1] = k;
          ib[ib.size() - 2] = k;
          ib[ib.size() - 1] = j;
          s += a.at(ia) * b.at(ib);
        }
        po[flat++] = s;
      }
  });
  return out.to(a.dtype());
}

}  // namespace ref

}  // namespace rosetta
