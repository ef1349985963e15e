#include "rosetta/core/tensor.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <sstream>

#include "rosetta/core/ops.h"
#include "strided.h"

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
}

namespace rosetta {

// ---------------------------------------------------------------- Shape helpers

void Shape::insert(int pos, int64_t v) {
  ROSETTA_CHECK(n_ < kMaxDims, "Shape: more than ", kMaxDims, " dimensions");
  for (int i = n_; i > pos; --i) d_[i] = d_[i - 1];
  d_[pos] = v;
  ++n_;
}

void Shape::erase(int pos) {
  for (int i = pos; i + 1 < n_; ++i) d_[i] = d_[i + 1];
  --n_;
}

void Shape::resize(int n, int64_t fill) {
  ROSETTA_CHECK(n <= kMaxDims, "Shape: more than ", kMaxDims, " dimensions");
  for (int i = n_; i < n; ++i) d_[i] = fill;
  n_ = n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < n_; ++i) s += (i ? ", " : "") + std::to_string(d_[i]);
  return s + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape s;
  s.resize(shape.size());
  int64_t acc = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const int n = std::max(a.size(), b.size());
  Shape out;
  out.resize(n);
  for (int i = 0; i < n; ++i) {
    const int ia = i - (n - a.size()), ib = i - (n - b.size());
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    ROSETTA_CHECK(da == db || da == 1 || db == 1, "shapes ", a, " and ", b, " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int normalize_axis(int axis, int ndim) {
  const int a = axis < 0 ? axis + ndim : axis;
  ROSETTA_CHECK(a >= 0 && a < ndim, "axis ", axis, " out of range for a tensor of ", ndim,
                " dimensions");
  return a;
}

// ---------------------------------------------------------------- creation

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) {
    ROSETTA_CHECK(d >= 0, "empty: negative size in shape ", shape);
    ROSETTA_CHECK(d == 0 || n <= (int64_t(1) << 48) / std::max<int64_t>(d, 1),
                  "empty: shape ", shape, " is too large");
    n *= std::max<int64_t>(d, 1);
  }
  auto storage = std::make_shared<Storage>(size_t(shape.numel()) * dtype_size(dtype));
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::empty_permuted(const Shape& shape, const std::vector<int>& order, DType dtype) {
  ROSETTA_CHECK(int(order.size()) == shape.size(), "empty_permuted: order of ", order.size(),
                " axes for shape ", shape);
  Shape stored;
  std::vector<int> inverse(order.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) {
    const int a = normalize_axis(order[i], shape.size());
    ROSETTA_CHECK(inverse[size_t(a)] < 0, "empty_permuted: axis ", order[i], " repeated");
    inverse[size_t(a)] = int(i);
    stored.push_back(shape[a]);
  }
  return empty(stored, dtype).permute(inverse);
}

Tensor Tensor::empty_like(const Tensor& t) {
  std::vector<int> order;
  return t.is_dense(&order) ? empty_permuted(t.shape(), order, t.dtype())
                            : empty(t.shape(), t.dtype());
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t = empty({n}, dtype);
  if (dtype == DType::i32) {
    int32_t* p = t.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = int32_t(i);
  } else {
    dispatch_float(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = t.data<T>();
      for (int64_t i = 0; i < n; ++i) p[i] = T(i);
    });
  }
  return t;
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  ROSETTA_CHECK(int64_t(values.size()) == shape.numel(), "from_vector: ", values.size(),
                " values do not fill shape ", shape);
  Tensor t = empty(shape, dtype_of<T>());
  if (!values.empty()) std::memcpy(t.data<T>(), values.data(), values.size() * sizeof(T));
  return t;
}
template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, const Shape&);

// ---------------------------------------------------------------- properties

int64_t Tensor::size(int axis) const { return shape_[normalize_axis(axis, dim())]; }

bool Tensor::is_dense(std::vector<int>* order_out) const {
  // Axes by decreasing stride; dense when each stride is the product of the sizes inside it
  // (size-1 axes may sit anywhere).
  std::vector<int> order(static_cast<size_t>(dim()));
  for (int i = 0; i < dim(); ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return strides_[a] > strides_[b]; });
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (shape_[*it] == 1) continue;
    if (strides_[*it] != expected) return false;
    expected *= shape_[*it];
  }
  if (order_out) *order_out = std::move(order);
  return true;
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

// ---------------------------------------------------------------- views

namespace {
// Resolves a single -1 in `shape` against `numel`.
Shape infer_shape(Shape shape, int64_t numel, const Shape& from) {
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      ROSETTA_CHECK(infer < 0, "view: more than one -1 in ", shape);
      infer = i;
    } else {
      ROSETTA_CHECK(shape[i] >= 0, "view: invalid size in ", shape);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    ROSETTA_CHECK(known > 0 && numel % known == 0, "view: cannot view ", from, " as ", shape);
    shape[infer] = numel / known;
  }
  ROSETTA_CHECK(shape.numel() == numel, "view: cannot view ", from, " (", numel,
                " elements) as ", shape);
  return shape;
}
}  // namespace

Tensor Tensor::view(const Shape& new_shape_in) const {
  const Shape new_shape = infer_shape(new_shape_in, numel(), shape_);
  // Match groups of old dims that are contiguous among themselves to groups of new dims
  // (the algorithm of numpy's _attempt_nocopy_reshape).
  Shape old_shape, old_strides;
  for (int i = 0; i < dim(); ++i)
    if (shape_[i] != 1) {
      old_shape.push_back(shape_[i]);
      old_strides.push_back(strides_[i]);
    }
  Shape new_strides;
  new_strides.resize(new_shape.size());
  int oi = 0, oj = 1, ni = 0, nj = 1;
  const int on = old_shape.size(), nn = new_shape.size();
  if (numel() == 0 || on == 0) return with_view(new_shape, contiguous_strides(new_shape), offset_);
  while (ni < nn && oi < on) {
    int64_t np = new_shape[ni], op = old_shape[oi];
    while (np != op) {
      if (np < op) np *= new_shape[nj++];
      else op *= old_shape[oj++];
    }
    for (int k = oi; k < oj - 1; ++k)
      ROSETTA_CHECK(old_strides[k] == old_shape[k + 1] * old_strides[k + 1], "view: shape ",
                    shape_, " with strides ", strides_, " cannot be viewed as ", new_shape,
                    " without a copy (use reshape)");
    new_strides[nj - 1] = old_strides[oj - 1];
    for (int k = nj - 1; k > ni; --k) new_strides[k - 1] = new_strides[k] * new_shape[k];
    ni = nj++;
    oi = oj++;
  }
  // Trailing size-1 dimensions.
  for (int k = ni; k < nn; ++k) new_strides[k] = 1;
  return with_view(new_shape, new_strides, offset_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  try {
    return view(shape);
  } catch (const Error&) {
    return contiguous().view(shape);
  }
}

Tensor Tensor::transpose(int a, int b) const {
  a = normalize_axis(a, dim());
  b = normalize_axis(b, dim());
  Shape sh = shape_, st = strides_;
  std::swap(sh[a], sh[b]);
  std::swap(st[a], st[b]);
  return with_view(sh, st, offset_);
}

Tensor Tensor::permute(const std::vector<int>& order) const {
  ROSETTA_CHECK(int(order.size()) == dim(), "permute: order of ", order.size(),
                " axes for a tensor of shape ", shape_);
  Shape sh, st;
  std::vector<bool> seen(dim(), false);
  for (int o : order) {
    const int a = normalize_axis(o, dim());
    ROSETTA_CHECK(!seen[a], "permute: axis ", o, " repeated");
    seen[a] = true;
    sh.push_back(shape_[a]);
    st.push_back(strides_[a]);
  }
  return with_view(sh, st, offset_);
}

Tensor Tensor::narrow(int axis, int64_t start, int64_t length) const {
  axis = normalize_axis(axis, dim());
  ROSETTA_CHECK(start >= 0 && length >= 0 && start + length <= shape_[axis], "narrow: [", start,
                ", ", start + length, ") out of range for axis ", axis, " of shape ", shape_);
  Shape sh = shape_;
  sh[axis] = length;
  return with_view(sh, strides_, offset_ + start * strides_[axis]);
}

Tensor Tensor::slice(int axis, int64_t start, int64_t stop, int64_t step) const {
  axis = normalize_axis(axis, dim());
  ROSETTA_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = shape_[axis];
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  start = std::clamp<int64_t>(start, 0, n);
  stop = std::clamp<int64_t>(stop, start, n);
  Shape sh = shape_, st = strides_;
  sh[axis] = (stop - start + step - 1) / step;
  st[axis] = strides_[axis] * step;
  return with_view(sh, st, offset_ + start * strides_[axis]);
}

Tensor Tensor::select(int axis, int64_t i) const {
  axis = normalize_axis(axis, dim());
  if (i < 0) i += shape_[axis];
  ROSETTA_CHECK(i >= 0 && i < shape_[axis], "select: index ", i, " out of range for axis ", axis,
                " of shape ", shape_);
  Shape sh = shape_, st = strides_;
  sh.erase(axis);
  st.erase(axis);
  return with_view(sh, st, offset_ + i * strides_[axis]);
}

Tensor Tensor::expand(const Shape& shape) const {
  ROSETTA_CHECK(shape.size() >= dim(), "expand: cannot expand ", shape_, " to ", shape);
  const int lead = shape.size() - dim();
  Shape st;
  st.resize(shape.size(), 0);
  for (int i = 0; i < dim(); ++i) {
    const int64_t target = shape[lead + i];
    if (shape_[i] == target) st[lead + i] = strides_[i];
    else {
      ROSETTA_CHECK(shape_[i] == 1, "expand: cannot expand ", shape_, " to ", shape);
      st[lead + i] = 0;
    }
  }
  return with_view(shape, st, offset_);
}

Tensor Tensor::unsqueeze(int axis) const {
  axis = normalize_axis(axis, dim() + 1);
  Shape sh = shape_, st = strides_;
  const int64_t stride = axis < dim() ? strides_[axis] * shape_[axis] : 1;
  sh.insert(axis, 1);
  st.insert(axis, stride);
  return with_view(sh, st, offset_);
}

Tensor Tensor::squeeze(int axis) const {
  axis = normalize_axis(axis, dim());
  ROSETTA_CHECK(shape_[axis] == 1, "squeeze: axis ", axis, " of shape ", shape_, " is not 1");
  Shape sh = shape_, st = strides_;
  sh.erase(axis);
  st.erase(axis);
  return with_view(sh, st, offset_);
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, dtype);
  out.copy_(*this);
  return out;
}

namespace {
template <class To, class From>
void copy_cast(const Tensor& dst, const Tensor& src) {
  if constexpr (std::is_same_v<To, From>) {
    // Rows contiguous on both sides (a permuted or broadcast view with its last axis intact,
    // such as attention heads or a bias repeated over rows): one memmove per row.
    if (dst.dim() > 0 && dst.strides().back() == 1 && src.strides().back() == 1) {
      To* d = dst.data<To>();
      const From* s = src.data<From>();
      detail::for_each_row<2>(dst.shape(), {&dst.strides(), &src.strides()},
                              [&](auto off, auto, int64_t n) {
                                std::memmove(d + off[0], s + off[1], size_t(n) * sizeof(To));
                              });
      return;
    }
  }
  detail::for_each_strided2(dst.shape(), dst.data<To>(), dst.strides(), src.data<From>(),
                            src.strides(), [](To* d, const From* s) { *d = To(*s); });
}
template <class To>
void copy_from_any(const Tensor& dst, const Tensor& src) {
  switch (src.dtype()) {
    case DType::f32: return copy_cast<To, float>(dst, src);
    case DType::f64: return copy_cast<To, double>(dst, src);
    case DType::i32: return copy_cast<To, int32_t>(dst, src);
  }
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src_in) {
  ROSETTA_CHECK(defined() && src_in.defined(), "copy_: undefined tensor");
  const Tensor src = src_in.expand(shape_);
  if (dtype_ == src.dtype() && is_contiguous() && src.is_contiguous()) {
    std::memcpy(static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_),
                static_cast<const char*>(src.storage_->data()) + src.offset_ * dtype_size(dtype_),
                size_t(numel()) * dtype_size(dtype_));
  } else {
    switch (dtype_) {
      case DType::f32: copy_from_any<float>(*this, src); break;
      case DType::f64: copy_from_any<double>(*this, src); break;
      case DType::i32: copy_from_any<int32_t>(*this, src); break;
    }
  }
  bump_version();
  return *this;
}

Tensor& Tensor::fill_(double value) {
  ROSETTA_CHECK(defined(), "fill_: undefined tensor");
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    const T v = T(value);
    if (is_contiguous()) {
      T* p = data<T>();
      detail::parallel_for(numel(), [p, v](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
    } else {
      detail::for_each_strided1(shape_, data<T>(), strides_, [v](T* d) { *d = v; });
    }
  };
  if (dtype_ == DType::i32) fill(int32_t{});
  else dispatch_float(dtype_, fill);
  bump_version();
  return *this;
}

// ---------------------------------------------------------------- element access

double Tensor::at(const std::vector<int64_t>& index) const {
  ROSETTA_CHECK(int(index.size()) == dim(), "at: ", index.size(), " indices for shape ", shape_);
  int64_t off = offset_;
  for (int i = 0; i < dim(); ++i) {
    ROSETTA_CHECK(index[i] >= 0 && index[i] < shape_[i], "at: index ", index[i],
                  " out of range for axis ", i, " of shape ", shape_);
    off += index[i] * strides_[i];
  }
  const void* base = storage_->data();
  switch (dtype_) {
    case DType::f32: return static_cast<const float*>(base)[off];
    case DType::f64: return static_cast<const double*>(base)[off];
    case DType::i32: return static_cast<const int32_t*>(base)[off];
  }
  return 0;
}

double Tensor::item() const {
  ROSETTA_CHECK(numel() == 1, "item: tensor of shape ", shape_, " has ", numel(), " elements");
  return contiguous().reshape(Shape{}).at({});
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor c = to(dtype_of<T>()).contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int32_t> Tensor::to_vector() const;

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(" << shape_ << ", " << dtype_name(dtype_);
  if (numel() <= 64) {
    os << ", [";
    const auto v = to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    os << "]";
  }
  return os.str() + ")";
}

// ---------------------------------------------------------------- threads

void set_num_threads(int n) {
  if (n <= 0) return;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

namespace {
thread_local int t_nested_gemm_threads = 1;
}
void set_nested_gemm_threads(int n) { t_nested_gemm_threads = std::max(n, 1); }
int nested_gemm_threads() { return t_nested_gemm_threads; }

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace rosetta
