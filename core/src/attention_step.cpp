// One query per row attending over keys and values found by index: the attention of a decoding
// step, where each beam's keys are rows of a shared buffer instead of a copy of its own.
#include <algorithm>
#include <limits>
#include <vector>

#include "rosetta/core/ops.h"
#include "softmax_row.h"
#include "strided.h"

namespace rosetta {

Tensor attend_gathered(const Tensor& q, const Tensor& keys, const Tensor& values, const Tensor& index,
                       double scale, Tensor* weights) {
  ROSETTA_CHECK(q.dim() == 3 && q.dtype() == DType::f32 && q.is_contiguous(),
                "attend_gathered: q must be a contiguous F32 [R, H, Dh], got ", q.shape());
  const int64_t R = q.shape()[0], H = q.shape()[1], Dh = q.shape()[2];
  for (const Tensor* kv : {&keys, &values})
    ROSETTA_CHECK(kv->dim() == 3 && kv->dtype() == DType::f32 && kv->is_contiguous() &&
                      kv->shape()[1] == H && kv->shape()[2] == Dh && kv->shape()[0] == keys.shape()[0],
                  "attend_gathered: keys and values must be contiguous F32 [N, ", H, ", ", Dh, "], got ",
                  keys.shape(), " and ", values.shape());
  ROSETTA_CHECK(index.dim() == 2 && index.dtype() == DType::i32 && index.shape()[0] == R &&
                    (index.shape()[1] <= 1 || index.strides()[1] == 1),
                "attend_gathered: index must be I32 [", R, ", n] with unit stride along n, got ", index.shape());
  const int64_t N = keys.shape()[0], n = index.shape()[1], row_stride = index.strides()[0];
  const int32_t* idx = index.data<int32_t>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t p = 0; p < n; ++p) {
      const int32_t j = idx[r * row_stride + p];
      ROSETTA_CHECK(j >= -1 && j < N, "attend_gathered: index ", j, " at [", r, ", ", p, "] outside [-1, ", N, ")");
    }
  Tensor out = Tensor::zeros({R, H, Dh}, DType::f32);
  if (weights) *weights = Tensor::zeros({R, H, n}, DType::f32);
  const float* pq = q.data<float>();
  const float* pk = keys.data<float>();
  const float* pv = values.data<float>();
  float* po = out.data<float>();
  float* pw = weights ? weights->data<float>() : nullptr;
  const float s = float(scale), ninf = -std::numeric_limits<float>::infinity();
  // Row by row, all heads at once: a key row [H, Dh] is read whole, once per position.
  detail::parallel_rows(R, 4 * n * H * Dh, [&](int64_t b, int64_t e) {
    std::vector<float> scratch(static_cast<size_t>(H * n));
    float* prob = scratch.data();  // [H, n]
    for (int64_t r = b; r < e; ++r) {
      const int32_t* row = idx + r * row_stride;
      const float* qr = pq + r * H * Dh;
      for (int64_t p = 0; p < n; ++p) {
        if (row[p] < 0) {  // hidden: exp(-inf) is 0 in the softmax below
          for (int64_t h = 0; h < H; ++h) prob[h * n + p] = ninf;
          continue;
        }
        const float* k = pk + int64_t(row[p]) * H * Dh;
        for (int64_t h = 0; h < H; ++h) {
          float dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t d = 0; d < Dh; ++d) dot += qr[h * Dh + d] * k[h * Dh + d];
          prob[h * n + p] = dot * s;
        }
      }
      for (int64_t h = 0; h < H; ++h) {
        float* ph = prob + h * n;
        detail::softmax_row<false>(ph, ph, n, nullptr, 0);  // all hidden: zeros
        if (pw) std::copy(ph, ph + n, pw + (r * H + h) * n);
      }
      float* o = po + r * H * Dh;
      for (int64_t p = 0; p < n; ++p) {
        if (row[p] < 0) continue;
        const float* v = pv + int64_t(row[p]) * H * Dh;
        for (int64_t h = 0; h < H; ++h) {
          const float w = prob[h * n + p];
#pragma omp simd
          for (int64_t d = 0; d < Dh; ++d) o[h * Dh + d] += w * v[h * Dh + d];
        }
      }
    }
  });
  return out;
}

}  // namespace rosetta
