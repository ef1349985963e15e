// The GradOut contract of every backward kernel (out = beta * out + gradient): beta 0 overwrites
// without reading (a destination full of NaN gives no NaN), beta 1 adds bit for bit what writing
// a fresh tensor and adding it with add_ gives (so training is unchanged by writing in place),
// other betas scale.
#include <cmath>
#include <functional>

#include "support.h"

using namespace rosetta;
using rosetta::test::AllClose;

namespace {

using Kernel = std::function<void(const GradOut&)>;

// exact: beta 1 must equal the fresh result added with add_, bit for bit (false where the
// kernel sums several contributions into one element, so the order of additions differs).
void check_contract(const Shape& shape, const Kernel& kernel, bool exact = true) {
  Generator g(5);
  const Tensor fresh = Tensor::full(shape, NAN);
  kernel({fresh, 0.0});
  for (float v : fresh.to_vector<float>()) REQUIRE_FALSE(std::isnan(v));

  const Tensor init = g.normal(shape);
  const Tensor added = init.clone();
  kernel({added, 1.0});
  Tensor expect = init.clone();
  add_(expect, fresh);
  if (exact) REQUIRE_THAT(added, AllClose(expect, 0, 0));
  else REQUIRE_THAT(added, AllClose(expect, 1e-6, 1e-6));

  const Tensor scaled = init.clone();
  kernel({scaled, 0.5});
  REQUIRE_THAT(scaled, AllClose(add(affine(init, 0.5, 0), fresh), 1e-6, 1e-6));

  kernel({});  // not wanted: nothing to write, nothing thrown
}

}  // namespace

TEST_CASE("elementwise backward kernels take beta", "[core]") {
  Generator g(1);
  const Tensor x = g.normal({5, 70}), dy = g.normal({5, 70}), y = unary(UnaryOp::tanh, x);
  check_contract(x.shape(), [&](const GradOut& d) { unary_backward(UnaryOp::tanh, x, y, dy, d); });
  check_contract(x.shape(), [&](const GradOut& d) { unary_backward(UnaryOp::gelu, x, Tensor(), dy, d, 2.0); });
  check_contract(x.shape(), [&](const GradOut& d) { dropout_backward(dy, 0.3, 7, 11, d); });

  // Binary ops with a broadcast operand: its gradient is summed to its shape.
  const Tensor a = g.uniform({5, 70}, 0.5, 2.0), b = g.uniform({70}, 0.5, 2.0);
  for (BinaryOp op : {BinaryOp::mul, BinaryOp::div, BinaryOp::pow}) {
    const Tensor out = binary(op, a, b);
    for (int which : {0, 1}) {
      INFO("op " << int(op) << " operand " << which);
      check_contract((which == 0 ? a : b).shape(),
                     [&](const GradOut& d) { binary_backward(op, which, a, b, out, dy, d); });
    }
  }
  const Tensor cond = g.randint({5, 1}, 0, 2);
  for (bool taken : {true, false}) {
    check_contract(dy.shape(), [&](const GradOut& d) { where_backward(cond, taken, dy, d); });
    check_contract({70}, [&](const GradOut& d) { where_backward(cond, taken, dy, d); });
  }
}

TEST_CASE("reduction backward kernels take beta", "[core]") {
  Generator g(2);
  const Tensor x = g.normal({2, 3, 40});
  check_contract({3, 1}, [&](const GradOut& d) { expand_backward(x, d, -1.0); });
  check_contract({40}, [&](const GradOut& d) { expand_backward(x, d); });
  check_contract(x.shape(), [&](const GradOut& d) { expand_backward(x, d, 0.5); });
  REQUIRE_THAT(sum_to(x, Shape{3, 1}), AllClose(sum(sum(x, 0, false), 1, true), 0, 0));
  const Tensor idx = argmax(x, 1, true), dy = g.normal({2, 1, 40});
  check_contract(x.shape(), [&](const GradOut& d) { max_backward(dy, idx, 1, d); });
}

TEST_CASE("softmax, cross-entropy, embedding and layer norm backward kernels take beta", "[core]") {
  Generator g(3);
  const Tensor x = g.normal({6, 33}, 0, 2), dy = g.normal({6, 33});
  const Tensor sm = softmax(x), lsm = log_softmax(x);
  check_contract(x.shape(), [&](const GradOut& d) { softmax_backward(sm, dy, d); });
  check_contract(x.shape(), [&](const GradOut& d) { log_softmax_backward(lsm, dy, d); });

  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{3, 0, 32, 5, 0, 7});
  const CrossEntropyResult r = cross_entropy_forward(x, targets, 0.1, 0);
  auto ce = [&](const GradOut& d) { cross_entropy_backward(x, targets, r.lse, 0.1, 0, r.count, 1.5, d); };
  check_contract(x.shape(), ce);
  // Written over the logits themselves: the same gradient.
  const Tensor apart = Tensor::empty(x.shape()), over = x.clone();
  ce({apart});
  cross_entropy_backward(over, targets, r.lse, 0.1, 0, r.count, 1.5, {over});
  REQUIRE_THAT(over, AllClose(apart, 0, 0));
  REQUIRE_THROWS_WITH(cross_entropy_backward(over, targets, r.lse, 0.1, 0, r.count, 1.5, {over, 1.0}),
                      Catch::Contains("only beta 0"));

  // Repeated ids add several rows into one: the order of additions differs from a fresh table's.
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{2, 0, 2, 4, 1, 2}, {2, 3});
  const Tensor rows = g.normal({2, 3, 8});
  check_contract({5, 8}, [&](const GradOut& d) { index_select_backward(ids, rows, d, 1); }, false);

  const Tensor h = g.normal({70, 16}, 1, 2), gamma = g.normal({16}), beta = g.normal({16}),
               dh = g.normal({70, 16});
  const LayerNormResult ln = layer_norm_forward(h, gamma, beta, 1e-5);
  check_contract(h.shape(), [&](const GradOut& d) { layer_norm_backward(dh, h, ln.mean, ln.rstd, gamma, d, {}, {}); });
  check_contract({16}, [&](const GradOut& d) { layer_norm_backward(dh, h, ln.mean, ln.rstd, gamma, {}, d, {}); });
  check_contract({16}, [&](const GradOut& d) { layer_norm_backward(dh, h, ln.mean, ln.rstd, gamma, {}, {}, d); });
}

TEST_CASE("a backward kernel names a destination of the wrong shape or layout", "[core]") {
  const Tensor x = Tensor::ones({3, 4}), dy = Tensor::ones({3, 4});
  REQUIRE_THROWS_WITH(unary_backward(UnaryOp::exp, Tensor(), x, dy, {Tensor::empty({4, 3})}),
                      Catch::Contains("[4, 3]"));
  REQUIRE_THROWS_WITH(softmax_backward(x, dy, {Tensor::empty({4, 3}).transpose(0, 1)}),
                      Catch::Contains("contiguous"));
}
