// bf16 matrix products through the ops (matmul, matmul_into, matmul_bias_into) against float64
// references on the Transformer's views, the precision switch around them, and weights packed
// once for them (the kernels themselves, on every shape class and path: test_gemm_kernels.cpp;
// the fused ops: test_bf16_fused.cpp). References and bounds: bf16_checks.h.
#include <omp.h>

#include "bf16_checks.h"
#include "rosetta/core/internal/fused.h"

using namespace rosetta;
using rosetta::test::check_product;
using rosetta::test::randn;
using rosetta::test::rounded_bf16;
using rosetta::test::skipped_without_bf16;

TEST_CASE("bf16 products: every shape class of the Transformer, against float64", "[bf16]") {
  if (skipped_without_bf16()) return;
  const MatmulPrecisionScope bf16(Precision::bf16);
  Generator g(7);
  // Linear layers, y = x @ W^T (x [N, in], W [out, in]) and its gradients, as their views reach
  // the kernels: the feed-forward (256 -> 1024) and the output layer (256 -> vocab) at batch
  // sizes of a training shard and a decoding step, and odd sizes. (The kernels on every shape
  // class and path, against the reference: test_gemm_kernels.cpp.)
  for (const auto& [rows, in, out] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {600, 256, 1024}, {300, 256, 5000}, {37, 256, 333}, {1, 256, 5000}, {53, 71, 45}}) {
    INFO("linear " << rows << " x " << in << " -> " << out);
    const Tensor x = randn(g, {rows, in}), W = randn(g, {out, in}), dy = randn(g, {rows, out});
    check_product(matmul(x, W.transpose(0, 1)), x, W.transpose(0, 1));                    // forward (NT)
    check_product(matmul(dy, W), dy, W);                                                   // dx = dy @ W (NN)
    check_product(matmul(dy.transpose(0, 1), x), dy.transpose(0, 1), x);                   // dW = dy^T @ x (TN)
    check_product(matmul(x.transpose(0, 1).transpose(0, 1), W.transpose(0, 1)), x, W.transpose(0, 1));
  }
  // Attention, heads as permuted views of [B, T, H, Dh] (no copies): scores q @ k^T, context
  // probs @ v written into [B, T, H, Dh], and the four gradient products.
  for (const auto& [B, T, S, H, Dh] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>>{
           {4, 32, 32, 4, 64}, {3, 40, 27, 8, 64}, {2, 40, 33, 4, 32}}) {
    INFO("attention B " << B << " T " << T << " S " << S << " H " << H << " Dh " << Dh);
    const Tensor q = randn(g, {B, T, H, Dh}).permute({0, 2, 1, 3}), k = randn(g, {B, S, H, Dh}).permute({0, 2, 1, 3}),
                 v = randn(g, {B, S, H, Dh}).permute({0, 2, 1, 3}), p = randn(g, {B, H, T, S}),
                 dctx = randn(g, {B, H, T, Dh});
    const Tensor kt = k.transpose(-1, -2);
    Tensor scores = Tensor::empty({B, H, T, S});
    matmul_into(scores, q, kt, 0.125, 0.0);
    check_product(scores, q, kt, 0.125);
    Tensor ctx = Tensor::empty_permuted({B, H, T, Dh}, {0, 2, 1, 3});
    matmul_into(ctx, p, v);
    check_product(ctx, p, v);
    check_product(matmul(dctx, v.transpose(-1, -2)), dctx, v.transpose(-1, -2));  // dprobs
    check_product(matmul(p.transpose(-1, -2), dctx), p.transpose(-1, -2), dctx);  // dv
    check_product(matmul(p, k), p, k);                                            // dq
    check_product(matmul(p.transpose(-1, -2), q), p.transpose(-1, -2), q);        // dk
  }
}

TEST_CASE("bf16 products: alpha, accumulation into the output, odd and empty sizes", "[bf16]") {
  if (skipped_without_bf16()) return;
  const MatmulPrecisionScope bf16(Precision::bf16);
  Generator g(11);
  for (const auto& [M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {13, 100, 33}, {37, 45, 71}, {2000, 61, 1}, {64, 64, 1031}, {25, 1200, 40}}) {
    INFO(M << " x " << N << " x " << K);
    const Tensor a = randn(g, {M, K}), b = randn(g, {K, N}), c0 = randn(g, {M, N});
    Tensor c = c0.clone();
    matmul_into(c, a, b, -0.5, 1.0);  // a gradient accumulated into a buffer: beta 1
    check_product(c, a, b, -0.5, 1.0, c0);
    Tensor d = c0.clone();
    matmul_into(d, a, b, 2.0, 0.25);
    check_product(d, a, b, 2.0, 0.25, c0);
  }
  // Products of fewer than 32^3 multiply-adds run in fp32 (packing would cost more than bf16
  // saves): exactly OpenBLAS's result.
  const Tensor sa = randn(g, {16, 64}), sb = randn(g, {64, 16});
  const std::vector<float> small_bf16 = matmul(sa, sb).to_vector<float>();
  {
    const MatmulPrecisionScope fp32(Precision::fp32);
    CHECK(matmul(sa, sb).to_vector<float>() == small_bf16);
  }
  // A linear layer's bias, added as the product is stored: the same as adding it afterwards.
  for (const auto& [M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{300, 70, 256}, {33, 1000, 40}}) {
    const Tensor x = randn(g, {M, K}), W = randn(g, {N, K}), bias = randn(g, {N});
    Tensor y = Tensor::empty({M, N});
    matmul_bias_into(y, x, W.transpose(0, 1), bias);
    Tensor plain = Tensor::full({M, N}, std::nan(""));
    matmul_into(plain, x, W.transpose(0, 1));
    CHECK(y.to_vector<float>() == add(plain, bias).to_vector<float>());
    Tensor zero = Tensor::zeros({M, N});
    matmul_bias_into(zero, x, W.transpose(0, 1), Tensor::zeros({N}));
    check_product(zero, x, W.transpose(0, 1));
  }
  // K = 0: out = beta * out.
  Tensor c = Tensor::full({40, 40}, 3.0);
  matmul_into(c, Tensor::empty({40, 0}), Tensor::empty({0, 40}), 1.0, 0.5);
  CHECK(c.to_vector<float>() == std::vector<float>(1600, 1.5f));
  // beta 0 never reads the output: NaN there does not leak into the result.
  Tensor n = Tensor::full({48, 48}, std::nan(""));
  const Tensor a = randn(g, {48, 48}), b = randn(g, {48, 48});
  matmul_into(n, a, b);
  check_product(n, a, b);
}

TEST_CASE("bf16 products are the same on any number of threads", "[bf16]") {
  if (skipped_without_bf16()) return;
  const MatmulPrecisionScope bf16(Precision::bf16);
  Generator g(3);
  const Tensor a = randn(g, {700, 512}), b = randn(g, {512, 300});
  const int threads = get_num_threads();
  set_num_threads(1);
  const std::vector<float> one = matmul(a, b).to_vector<float>();
  set_num_threads(std::max(2, threads));
  const std::vector<float> many = matmul(a, b).to_vector<float>();
  set_num_threads(threads);
  // Each element is summed by one thread in the same order, whichever split of C it falls in.
  CHECK(one == many);
}

TEST_CASE("bf16 precision leaves float64 products and fp32 ones outside its scope alone", "[bf16]") {
  Generator g(5);
  const Tensor a = randn(g, {64, 96}), b = randn(g, {96, 80});
  const Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64);
  const std::vector<double> f64_before = matmul(a64, b64).to_vector<double>();
  const std::vector<float> f32_before = matmul(a, b).to_vector<float>();
  REQUIRE(matmul_precision() == Precision::fp32);
  if (bf16_supported()) {
    const MatmulPrecisionScope bf16(Precision::bf16);
    CHECK(matmul_precision() == Precision::bf16);
    CHECK(matmul(a64, b64).to_vector<double>() == f64_before);  // gradchecks stay float64
    CHECK(matmul(a, b).to_vector<float>() != f32_before);       // bf16 rounding shows in fp32
  } else {
    CHECK_THROWS_WITH(set_matmul_precision(Precision::bf16), Catch::Contains(rosetta::test::kBf16Instructions));
  }
  CHECK(matmul_precision() == Precision::fp32);
  CHECK(matmul(a, b).to_vector<float>() == f32_before);
}

TEST_CASE("precision choices (--precision) resolve by the CPU, never to an emulation", "[bf16]") {
  std::string note = "stale";
  CHECK(resolve_precision("fp32", &note) == Precision::fp32);
  CHECK(note.empty());
  const bool fast = bf16_supported() && bf16_dot_speedup() >= kAutoBf16Speedup;
  for (const char* choice : {"bf16", "auto"}) {
    const Precision p = resolve_precision(choice, &note);
    if (fast) {
      CHECK(p == Precision::bf16);
      CHECK(note.empty());
    } else if (bf16_supported()) {  // slow bf16 dot products: auto is fp32, bf16 only when asked
      CHECK(p == (std::string(choice) == "bf16" ? Precision::bf16 : Precision::fp32));
      CHECK_THAT(note, Catch::Contains("multiply-add rate") && Catch::Contains("fp32"));
    } else {
      CHECK(p == Precision::fp32);
      CHECK_THAT(note, Catch::Contains(rosetta::test::kBf16Instructions) && Catch::Contains("fp32"));
    }
  }
  CHECK_THROWS_WITH(resolve_precision("fp16"), Catch::Contains("'fp16'"));
  CHECK(parse_precision("bf16") == Precision::bf16);
  CHECK_THROWS(parse_precision("auto"));
}

TEST_CASE("auto is bf16 only where the CPU's bf16 dot products outrun its fp32 FMAs", "[bf16][cpu]") {
  // The rule: having AVX512_BF16 is not enough (an Emerald Rapids Xeon runs VDPBF16PS at half its
  // FMAs' multiply-add rate, and its bf16 products lost to fp32 ones by 30%).
  CHECK(auto_precision(true, 2.0) == Precision::bf16);
  CHECK(auto_precision(true, kAutoBf16Speedup) == Precision::bf16);
  CHECK(auto_precision(true, 1.0) == Precision::fp32);
  CHECK(auto_precision(true, 1.4) == Precision::fp32);
  CHECK(auto_precision(false, 2.0) == Precision::fp32);
  // The measurement: once, cached, and a rate only where the instruction exists (2.0 on a Zen 4,
  // 0.5 on that Xeon's VDPBF16PS; two bf16 products per lane make ~2 the most a CPU can show
  // with it; AMX tiles do 8,192 multiply-adds an instruction, 16x the FMAs' rate on paper;
  // ARM64's BFMMLA does 16 an instruction, FMLA 4: 4x on paper at the same rate of instructions;
  // the ARM64 tests run under qemu-user too, which runs BFMMLA in software at ~0.15x (qemu 7.2):
  // a rate, not one of silicon).
#if defined(__aarch64__)
  constexpr double kLeastDots = 0.05, kMostDots = 8.0;
#else
  constexpr double kLeastDots = 0.2, kMostDots = 4.0;
#endif
  const double s = bf16_dot_speedup();
  CHECK(bf16_dot_speedup() == s);
  if (bf16_supported()) {
    CHECK(s > kLeastDots);
    CHECK(s < (bf16_uses_amx() ? 64.0 : kMostDots));
    if (bf16_uses_amx()) CHECK_THAT(kernels_summary(), Catch::Contains("AMX tiles"));
    CHECK_THAT(kernels_summary(), Catch::Contains("multiply-add rate of fp32 FMAs"));
  } else {
    CHECK(s == 0);
  }
}

TEST_CASE("CPU features and OpenBLAS's kernels are named", "[bf16][cpu]") {
  const CpuFeatures& f = cpu_features();
  if (f.avx512_bf16) CHECK(f.avx512f);
  if (f.avx2) CHECK(f.avx);
  CHECK(blas_core_isa("Prescott") == IsaLevel::sse3);
  CHECK(blas_core_isa("haswell") == IsaLevel::avx2);
  CHECK(blas_core_isa("Zen") == IsaLevel::avx2);
  CHECK(blas_core_isa("SkylakeX") == IsaLevel::avx512);
  CHECK(blas_core_isa("Cooperlake") == IsaLevel::avx512);
  CHECK(blas_core_isa("nonsense") == IsaLevel::generic);
  // The core chosen for a CPU is one its ISA runs, and the best of them.
  CpuFeatures avx2{};
  avx2.sse3 = avx2.avx = avx2.avx2 = avx2.fma = true;
  CHECK(blas_core_for(avx2) == "Haswell");
  CpuFeatures zen4 = avx2;
  zen4.avx512f = zen4.avx512bw = zen4.avx512vl = zen4.avx512dq = zen4.avx512_bf16 = true;
  CHECK(blas_core_for(zen4) == "Cooperlake");
  zen4.avx512_bf16 = false;
  CHECK(blas_core_for(zen4) == "SkylakeX");
  const BlasKernels k = blas_kernels();
  CHECK(k.core == blas_core_name());
  CHECK(k.cpu_isa == cpu_isa_level());
  CHECK_THAT(kernels_summary(), Catch::Contains("OpenBLAS " + k.core));
}

TEST_CASE("bf16 weights packed once per PackedWeightsScope follow the weights they were packed from", "[bf16]") {
  if (skipped_without_bf16()) return;
  const MatmulPrecisionScope bf16(Precision::bf16);
  Generator g(13);
  const Tensor x = randn(g, {64, 96}), bias = randn(g, {80});
  Tensor W = randn(g, {80, 96});
  auto linear = [&](const Tensor& weight) {
    Tensor y = Tensor::empty({64, 80});
    matmul_bias_into(y, x, weight.transpose(0, 1), bias);
    return y.to_vector<float>();
  };
  const std::vector<float> unscoped = linear(W);
  const PackedWeightsScope scope;
  CHECK(linear(W) == unscoped);  // packed on first use
  CHECK(linear(W) == unscoped);  // and reused: the same packing, the same result
  scale_(W, 2.0);                // an in-place write bumps the version: packed again
  const std::vector<float> doubled = linear(W);
  CHECK(doubled != unscoped);
  for (size_t i = 0; i < doubled.size(); ++i) REQUIRE(doubled[i] - bias.to_vector<float>()[i % 80] ==
                                                      Approx(2.0 * (unscoped[i] - bias.to_vector<float>()[i % 80])).epsilon(1e-5));
  const Tensor other = W.clone();  // another storage with the same values: packed on its own
  CHECK(linear(other) == doubled);
}

TEST_CASE("bf16 weights packed once for many threads (SharedPackedWeights) give the unpacked results", "[bf16]") {
  if (skipped_without_bf16()) return;
  Generator g(17);
  // A weight [out, in] whose products run over several packed blocks of k (forward, K 2100: five
  // of the AVX-512 kernel's 512, two of the AMX tiles' 2048; dx, K 600: two of 512), sizes off
  // the micro-tile; a second one given twice (packed once).
  Tensor W = randn(g, {600, 2100}), V = randn(g, {96, 80});
  const Tensor x = randn(g, {70, 2100}), dy = randn(g, {70, 600}), bias = randn(g, {600});
  const Tensor y = unary(UnaryOp::relu, randn(g, {70, 2100}));
  SharedPackedWeights packed;
  {
    const MatmulPrecisionScope fp32(Precision::fp32);
    packed.pack({W, V});
    CHECK(packed.size() == 0);  // fp32: OpenBLAS packs its own
  }
  const MatmulPrecisionScope bf16(Precision::bf16);
  // Forward (x W^T + bias), a linear layer's dx (dy W), relu's gated dx, and a view into W,
  // which is not the weight as packed and is packed as before.
  auto products = [&] {
    Tensor fwd = Tensor::empty({70, 600}), gated = Tensor::empty({70, 2100});
    matmul_bias_into(fwd, x, W.transpose(0, 1), bias);
    relu_linear_input_grad(dy, W, y, 1.25, {gated, 0.0});
    std::vector<float> all = fwd.to_vector<float>();
    const Tensor of_v = matmul(x.narrow(1, 0, 80), V.transpose(0, 1));
    const Tensor of_view = matmul(dy.narrow(1, 0, 96), W.narrow(0, 0, 96));
    for (const Tensor& t : {matmul(dy, W), gated, of_v, of_view})
      for (float v : t.to_vector<float>()) all.push_back(v);
    return all;
  };
  const std::vector<float> unpacked = products();
  packed.pack({W, V, V});
  CHECK(packed.size() == 2);  // V given twice, packed once
  {
    const SharedPackedWeights::Use use(packed);
    CHECK(products() == unpacked);
  }
  // Read by several threads at once, as replicas do.
  std::vector<std::vector<float>> seen(3);
#pragma omp parallel for num_threads(3)
  for (int t = 0; t < 3; ++t) {
    const SharedPackedWeights::Use use(packed);
    seen[size_t(t)] = products();
  }
  for (const auto& s : seen) CHECK(s == unpacked);
  {
    // The packing is what the products read: a write through the raw pointer (no version bump,
    // against the contract) is not seen inside a Use, and is outside one.
    const std::vector<float> before = matmul(x, W.transpose(0, 1)).to_vector<float>();
    const std::vector<float> saved = W.to_vector<float>();
    std::fill(W.data<float>(), W.data<float>() + 600, 0.0f);
    CHECK(matmul(x, W.transpose(0, 1)).to_vector<float>() != before);
    {
      const SharedPackedWeights::Use use(packed);
      CHECK(matmul(x, W.transpose(0, 1)).to_vector<float>() == before);
    }
    std::copy(saved.begin(), saved.end(), W.data<float>());
  }
  // A changed weight (its version bumped) is packed again by the next pack().
  scale_(W, 2.0);
  const std::vector<float> doubled = products();
  CHECK(doubled != unpacked);
  packed.pack({W, V, V});
  {
    const SharedPackedWeights::Use use(packed);
    CHECK(products() == doubled);
  }
  packed.clear();
  CHECK(packed.size() == 0);
}
