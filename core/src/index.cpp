// Row gathers and scatters for embeddings: index_select copies table rows by id, its backward
// adds rows back (its parallel split is over columns, so repeated ids never race).
#include <cstring>

#include "rosetta/core/ops.h"
#include "strided.h"

namespace rosetta {

namespace {
void check_ids(const Tensor& ids, int64_t V, const char* op) {
  ROSETTA_CHECK(ids.dtype() == DType::i32, op, ": ids must be I32, got ", dtype_name(ids.dtype()));
  const Tensor c = ids.contiguous();
  const int32_t* p = c.data<int32_t>();
  for (int64_t i = 0; i < c.numel(); ++i)
    ROSETTA_CHECK(p[i] >= 0 && p[i] < V, op, ": id ", p[i], " at position ", i, " outside [0, ",
                  V, ")");
}
}  // namespace

Tensor index_select(const Tensor& table_in, const Tensor& ids_in) {
  ROSETTA_CHECK(table_in.dim() == 2, "index_select: table must be [V, D], got ", table_in.shape());
  const int64_t V = table_in.shape()[0], D = table_in.shape()[1];
  check_ids(ids_in, V, "index_select");
  const Tensor table = table_in.contiguous(), ids = ids_in.contiguous();
  Shape out_shape = ids.shape();
  out_shape.push_back(D);
  Tensor out = Tensor::empty(out_shape, table.dtype());
  const int32_t* pi = ids.data<int32_t>();
  const size_t row_bytes = size_t(D) * dtype_size(table.dtype());
  const char* src = static_cast<const char*>(table.storage()->data()) +
                    table.offset() * dtype_size(table.dtype());
  char* dst = static_cast<char*>(out.storage()->data());
  detail::parallel_rows(ids.numel(), D, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(dst + i * row_bytes, src + pi[i] * row_bytes, row_bytes);
  });
  return out;
}

void index_select_backward(const Tensor& ids_in, const Tensor& dy_in, const GradOut& dtable, int32_t skip_id) {
  if (!dtable.out.defined()) return;
  Tensor table = dtable.out;
  ROSETTA_CHECK(table.dim() == 2 && table.is_contiguous(),
                "index_select_backward: gradient table must be a contiguous [V, D], got ", table.shape());
  const int64_t V = table.shape()[0], D = table.shape()[1];
  check_ids(ids_in, V, "index_select_backward");
  const Tensor ids = ids_in.contiguous(), dy = dy_in.contiguous();
  ROSETTA_CHECK(dy.numel() == ids.numel() * D, "index_select_backward: gradient ", dy.shape(),
                " does not match ids ", ids.shape(), " x ", D);
  ROSETTA_CHECK(dy.dtype() == table.dtype(), "index_select_backward: dtypes differ");
  // Rows no id selects are beta * out.
  if (dtable.beta == 0) table.zero_();
  else if (dtable.beta != 1) scale_(table, dtable.beta);
  const int32_t* pi = ids.data<int32_t>();
  const int64_t n = ids.numel();
  dispatch_float(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* ps = dy.data<T>();
    T* pg = table.data<T>();
    detail::parallel_rows(D, n, [&](int64_t c0, int64_t c1) {
      for (int64_t i = 0; i < n; ++i) {
        if (pi[i] == skip_id) continue;
        T* g = pg + pi[i] * D;
        const T* s = ps + i * D;
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) g[c] += s[c];
      }
    });
  });
  table.bump_version();
}

Tensor gather_last(const Tensor& x_in, const Tensor& idx_in) {
  ROSETTA_CHECK(x_in.dim() == idx_in.dim() + 1, "gather_last: x ", x_in.shape(),
                " needs one more dimension than idx ", idx_in.shape());
  const int64_t V = x_in.shape().back();
  check_ids(idx_in, V, "gather_last");
  const Tensor x = x_in.contiguous(), idx = idx_in.contiguous();
  Shape rows = x.shape();
  rows.resize(rows.size() - 1);
  ROSETTA_CHECK(rows == idx.shape(), "gather_last: x ", x.shape(), " and idx ", idx.shape(),
                " do not match");
  return dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor out = Tensor::empty(idx.shape(), x.dtype());
    const T* px = x.data<T>();
    const int32_t* pi = idx.data<int32_t>();
    T* po = out.data<T>();
    for (int64_t i = 0; i < idx.numel(); ++i) po[i] = px[i * V + pi[i]];
    return out;
  });
}

namespace ref {
Tensor index_select(const Tensor& table, const Tensor& ids) {
  const int64_t D = table.shape()[1];
  Shape out_shape = ids.shape();
  out_shape.push_back(D);
  Tensor out = Tensor::empty(out_shape, DType::f64);
  double* po = out.data<double>();
  int64_t k = 0;
  detail::for_each_index(ids.shape(), [&](const std::vector<int64_t>& idx) {
    const int64_t row = int64_t(ids.at(idx));
    for (int64_t d = 0; d < D; ++d) po[k++] = table.at({row, d});
  });
  return out.to(table.dtype());
}
}  // namespace ref

}  // namespace rosetta
