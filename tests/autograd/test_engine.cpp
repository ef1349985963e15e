// The backward engine: accumulation, no-grad mode, detach, graph release, in-place detection.
#include <limits>

#include "rosetta/autograd/autograd.h"
#include "support.h"

using namespace rosetta;
using rosetta::test::AllClose;

namespace {
// Buffers the caching allocator handed out (from its cache or the system) while f ran.
template <class F>
int64_t allocations_during(F&& f) {
  const AllocatorStats before = allocator_stats();
  f();
  const AllocatorStats after = allocator_stats();
  return int64_t(after.cache_hits + after.system_allocs) -
         int64_t(before.cache_hits + before.system_allocs);
}
}  // namespace

TEST_CASE("gradients accumulate across uses and across backward calls", "[autograd]") {
  Var x(Tensor::from_vector(std::vector<float>{1, 2, 3}), true);
  Var y = sum(x * x + x);  // dy/dx = 2x + 1
  y.backward();
  REQUIRE(x.grad().to_vector<float>() == std::vector<float>{3, 5, 7});
  sum(x * 2.0).backward();  // accumulates: + 2
  REQUIRE(x.grad().to_vector<float>() == std::vector<float>{5, 7, 9});
  x.zero_grad();
  REQUIRE_FALSE(x.grad().defined());
}

TEST_CASE("requires_grad propagates, no-grad mode records nothing", "[autograd]") {
  Var a(Tensor::ones({2}), true), b(Tensor::ones({2}), false);
  REQUIRE((a + b).requires_grad());
  REQUIRE_FALSE((b * b).requires_grad());
  {
    NoGradGuard guard;
    Var c = a * a;
    REQUIRE_FALSE(c.requires_grad());
    REQUIRE(c.is_leaf());
    REQUIRE_THROWS_WITH(sum(c).backward(), Catch::Contains("does not require a gradient"));
  }
  REQUIRE(grad_enabled());
  Var d = (a * 3.0).detach();
  REQUIRE_FALSE(d.requires_grad());
  REQUIRE(d.data().same_storage((a * 3.0).data()) == false);
}

TEST_CASE("backward needs a scalar or an upstream gradient", "[autograd]") {
  Var a(Tensor::ones({2, 2}), true);
  Var y = a * 2.0;
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("not a scalar"));
  REQUIRE_THROWS_WITH(y.backward(Tensor::ones({3})), Catch::Contains("[3]"));
  y.backward(Tensor::full({2, 2}, 0.5));
  REQUIRE(a.grad().to_vector<float>() == std::vector<float>{1, 1, 1, 1});
}

TEST_CASE("the graph is released after backward unless retained", "[autograd]") {
  Var a(Tensor::full({2}, 3.0), true);
  Var y = sum(a * a);
  y.backward(/*retain_graph=*/true);
  y.backward();
  REQUIRE(a.grad().to_vector<float>() == std::vector<float>{12, 12});
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("already released"));
}

TEST_CASE("in-place writes to saved tensors are detected", "[autograd]") {
  Var a(Tensor::full({2}, 3.0), true);
  Var b(Tensor::full({2}, 4.0), true);
  Var y = sum(a * b);
  Tensor handle = b.data();
  handle.fill_(0);  // b was saved by mul
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("modified in place"));
}

TEST_CASE("a tensor used twice gets both contributions (diamond)", "[autograd]") {
  Var x(Tensor::from_vector(std::vector<double>{0.5, -1.0}), true);
  Var h = tanh(x);
  Var y = sum(h * h + h);  // d/dx = (2h + 1)(1 - h^2)
  y.backward();
  const auto hx = h.data().to_vector<double>();
  for (int i = 0; i < 2; ++i)
    REQUIRE_THAT(x.grad().at({i}),
                 Catch::Matchers::WithinRel((2 * hx[i] + 1) * (1 - hx[i] * hx[i]), 1e-12));
}

TEST_CASE("gradient buffers are accumulated in place", "[autograd]") {
  Generator g(3);
  Var w(g.normal({4, 3}), true);
  Tensor buffer = Tensor::zeros({4, 3});
  w.bind_grad_buffer(buffer);
  Var x(g.normal({5, 3}));
  sum(linear(x, w, Var())).backward();
  REQUIRE(w.grad().same_storage(buffer));
  const Tensor first = buffer.clone();
  REQUIRE_THAT(first, AllClose(sum(x.data(), 0, true).expand({4, 3})));
  sum(linear(x, w, Var())).backward();
  REQUIRE_THAT(buffer, AllClose(affine(first, 2, 0)));
  w.zero_grad();
  REQUIRE(w.grad().same_storage(buffer));
  REQUIRE(sum_all(buffer).item() == 0);
}

TEST_CASE("two uses of one leaf add into its bound buffer, also through a retained graph", "[autograd]") {
  Generator g(4);
  const Tensor table = g.normal({6, 4}), x = g.normal({3, 4});
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, 5, 1});
  // Tied embedding and output projection, as in the translator.
  auto loss_of = [&](const Var& w) {
    return mean(square(linear(tanh(embedding(w, ids) + Var(x)), w, Var())));
  };
  Var own(table.clone(), true);
  loss_of(own).backward();

  Var bound(table.clone(), true);
  Tensor buffer = Tensor::zeros({6, 4});
  bound.bind_grad_buffer(buffer);
  const Tensor held = g.normal({6, 4});
  buffer.copy_(held);  // what an earlier micro-batch left
  const Var loss = loss_of(bound);
  loss.backward(/*retain_graph=*/true);
  REQUIRE(bound.grad().same_storage(buffer));
  REQUIRE_THAT(buffer, AllClose(add(held, own.grad()), 1e-6, 1e-6));
  loss.backward();
  REQUIRE_THAT(buffer, AllClose(add(held, affine(own.grad(), 2, 0)), 1e-6, 1e-6));
  REQUIRE_THROWS_WITH(Var(table.clone(), true).bind_grad_buffer(Tensor::zeros({4, 6}).transpose(0, 1)),
                      Catch::Contains("not contiguous"));
}

// zero_grad_lazily: the buffer keeps whatever it held (here NaN, where an add would show), and
// the next gradient is written over it, through every way a gradient reaches a leaf: a product's
// weight gradient and an embedding's scatter (the tied table, whose second use adds to the
// first), a view passed on (an add of the same shape), an op with the leaf as two inputs.
TEST_CASE("a lazily zeroed gradient buffer is written over by the next gradient", "[autograd]") {
  Generator g(8);
  const Tensor table = g.normal({6, 4}), x = g.normal({3, 4}), s0 = g.normal({3, 4});
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, 5, 1});
  auto loss_of = [&](const Var& w, const Var& s) {
    return mean(square(linear(tanh(embedding(w, ids) + Var(x)), w, Var()))) + sum(s * s + s * 3.0);
  };
  Var own_w(table.clone(), true), own_s(s0.clone(), true);
  loss_of(own_w, own_s).backward();

  Var w(table.clone(), true), s(s0.clone(), true);
  Tensor wbuf = Tensor::zeros({6, 4}), sbuf = Tensor::zeros({3, 4});
  w.bind_grad_buffer(wbuf);
  s.bind_grad_buffer(sbuf);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int round = 0; round < 2; ++round) {
    wbuf.copy_(Tensor::full({6, 4}, nan));
    sbuf.copy_(Tensor::full({3, 4}, nan));
    w.zero_grad_lazily();
    s.zero_grad_lazily();
    REQUIRE(w.grad_is_stale());
    loss_of(w, s).backward();
    REQUIRE_FALSE(w.grad_is_stale());
    REQUIRE_FALSE(s.grad_is_stale());
    REQUIRE(w.grad().same_storage(wbuf));
    REQUIRE(wbuf.to_vector<float>() == own_w.grad().to_vector<float>());
    REQUIRE(sbuf.to_vector<float>() == own_s.grad().to_vector<float>());
  }
  // A pass-through gradient (a view of the upstream one) is copied over the stale buffer.
  Var v(s0.clone(), true);
  Tensor vbuf = Tensor::zeros({3, 4});
  v.bind_grad_buffer(vbuf);
  vbuf.copy_(Tensor::full({3, 4}, nan));
  v.zero_grad_lazily();
  (v + Var(x)).backward(s0);
  REQUIRE(vbuf.to_vector<float>() == s0.to_vector<float>());
  // Asked before any gradient arrived, a stale buffer gives its zeros.
  vbuf.copy_(Tensor::full({3, 4}, nan));
  v.zero_grad_lazily();
  REQUIRE(sum_all(v.grad()).item() == 0);
  REQUIRE_FALSE(v.grad_is_stale());
  // Not a buffer: dropped, as zero_grad does.
  own_w.zero_grad_lazily();
  REQUIRE_FALSE(own_w.grad().defined());
}

// The gradient of an intermediate used twice: the first contribution is a fresh tensor, the
// second is written into it in place (beta 1), not into a second tensor added afterwards.
TEST_CASE("a second contribution is written into the gradient in place", "[autograd]") {
  const int64_t N = 1 << 16;
  Var x(Tensor::full({N}, 0.5), true);
  Var h = x * 2.0;
  Var y = tanh(h) + exp(h);
  const Tensor upstream = Tensor::ones({N});
  const int64_t allocations = allocations_during([&] { y.backward(upstream); });
  INFO("allocations " << allocations);
  REQUIRE(allocations <= 2);  // h's gradient and x's; adding exp's into h's took a third
  const double t = std::tanh(1.0);
  REQUIRE_THAT(x.grad().at({7}), Catch::Matchers::WithinRel(2 * (1 - t * t + std::exp(1.0)), 1e-5));
}

// An intermediate's gradient is read only by its node's backward, so a view of the upstream
// gradient is passed on as it is; a leaf's gradient gets storage of its own, since the user and
// the optimizer write into it.
TEST_CASE("views pass gradients on without copies, a leaf's gradient is its own", "[autograd]") {
  const int64_t N = 1 << 16;
  Var x(Tensor::ones({N}), true);
  Var v = x * 2.0;
  for (int i = 0; i < 8; ++i) v = reshape(reshape(v, {256, N / 256}), {N});
  Var y = v * 3.0;
  const Tensor upstream = Tensor::ones({N});
  const int64_t allocations = allocations_during([&] { y.backward(upstream); });
  INFO("allocations " << allocations);
  REQUIRE(allocations <= 4);  // the two products' gradients (and the upstream's copy), not 16 more
  REQUIRE_THAT(x.grad(), AllClose(Tensor::full({N}, 6.0), 0, 0));

  Var leaf(Tensor::ones({4, 4}), true);
  const Tensor go = Tensor::full({16}, 5.0);
  reshape(leaf, {16}).backward(go);
  REQUIRE_FALSE(leaf.grad().same_storage(go));
  Tensor leaf_grad = leaf.grad();
  leaf_grad.fill_(0);
  REQUIRE_THAT(go, AllClose(Tensor::full({16}, 5.0), 0, 0));
}

// Attention's way: heads are permuted views of a projection, their product is laid out so
// that merging the heads is a view. Forward and backward then copy nothing: the operands'
// gradients come in their views' memory order and leave through the views contiguous.
TEST_CASE("permuted matmul operands and outputs take and give gradients without copies", "[autograd]") {
  Generator g(3);
  const int64_t B = 2, T = 8, H = 4, Dh = 16;
  Var q_in(g.normal({B, T, H * Dh}), true), v_in(g.normal({B, T, H * Dh}), true);
  Var q = permute(reshape(q_in * 1.0, {B, T, H, Dh}), {0, 2, 1, 3});
  Var v = permute(reshape(v_in * 1.0, {B, T, H, Dh}), {0, 2, 1, 3});
  Var scores = matmul(q, transpose(v, -1, -2));                         // [B, H, T, T]
  Var ctx = matmul(scores, v, 1.0, {0, 2, 1, 3});                       // stored [B, T, H, Dh]
  Var merged = reshape(permute(ctx, {0, 2, 1, 3}), {B, T, H * Dh});
  REQUIRE(merged.data().same_storage(ctx.data()));
  const Tensor upstream = g.normal({B, T, H * Dh});
  const int64_t allocations = allocations_during([&] { merged.backward(upstream); });
  INFO("allocations " << allocations);
  // d scores, d q, d v twice (through scores and through ctx) and the two leaves' gradients:
  // 6. Copying every permuted gradient on its way took 9.
  REQUIRE(allocations <= 6);
  // Same gradients as the copying composition.
  Var q2_in(q_in.data().clone(), true), v2_in(v_in.data().clone(), true);
  Var q2 = permute(reshape(q2_in, {B, T, H, Dh}), {0, 2, 1, 3});
  Var v2 = permute(reshape(v2_in, {B, T, H, Dh}), {0, 2, 1, 3});
  Var ctx2 = matmul(matmul(q2, transpose(v2, -1, -2)), v2);
  reshape(contiguous(permute(ctx2, {0, 2, 1, 3})), {B, T, H * Dh}).backward(upstream);
  REQUIRE_THAT(q_in.grad(), AllClose(q2_in.grad(), 1e-5, 1e-5));
  REQUIRE_THAT(v_in.grad(), AllClose(v2_in.grad(), 1e-5, 1e-5));
}

TEST_CASE("deep chains do not overflow the stack", "[autograd]") {
  Var x(Tensor::ones({1}), true);
  Var y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  sum(y).backward();
  REQUIRE(x.grad().item() == 1);
  y = Var();  // freeing a long chain must not recurse too deeply either
}

// cross_entropy's backward writes the logits' gradient over the logits when nothing else holds
// them and the graph is being released; otherwise it allocates. Both give the same gradient.
TEST_CASE("cross_entropy's backward reuses the logits buffer only when nobody else holds it", "[autograd]") {
  Generator gen(11);
  const int64_t N = 64, V = 1000;
  const Tensor x0 = gen.normal({N, V}, 0, 1, DType::f32);
  std::vector<int32_t> t(N);
  for (int64_t i = 0; i < N; ++i) t[size_t(i)] = int32_t((i * 37) % V);
  t[3] = -1;  // an ignored row
  const Tensor targets = Tensor::from_vector(t);
  const size_t logits_bytes = size_t(N * V) * sizeof(float);
  auto peak_of_backward = [](const Var& loss, bool retain) {
    // The cache may serve a request with a block up to twice its size: start from an empty one,
    // whatever earlier tests left in it.
    release_cached_memory();
    reset_allocator_peak();
    const size_t before = allocator_stats().in_use_bytes;
    loss.backward(retain);
    return allocator_stats().peak_bytes - before;
  };

  // Held by the caller: left as it was.
  Var a(x0.clone(), true);
  Var logits = a * 2.0;
  const Tensor logits_before = logits.data().clone();
  const Var loss_a = cross_entropy(logits, targets, 0.1, -1);
  const size_t held_peak = peak_of_backward(loss_a, false);
  REQUIRE_THAT(logits.data(), AllClose(logits_before, 0, 0));

  // A temporary: reused, with the same gradient, bit for bit.
  Var b(x0.clone(), true);
  const Var loss_b = cross_entropy(b * 2.0, targets, 0.1, -1);  // the temporary b * 2.0 is gone here
  const size_t temp_peak = peak_of_backward(loss_b, false);
  REQUIRE_THAT(b.grad(), AllClose(a.grad(), 0, 0));
  REQUIRE(temp_peak + logits_bytes <= held_peak);

  // A retained graph keeps its saved logits intact for the next backward.
  Var c(x0.clone(), true);
  const Var loss = cross_entropy(c * 2.0, targets, 0.1, -1);
  loss.backward(true);
  loss.backward();
  REQUIRE_THAT(c.grad(), AllClose(affine(a.grad(), 2.0, 0.0), 1e-6, 0));
}
