// Every GEMM micro-kernel this CPU can run, held to the plain reference GEMMs of
// core/src/kernels/reference.h on the shape classes the model uses: fp32 by packed weights
// (AVX-512, AVX2; ARM64: NEON), bf16 (AVX512_BF16; AMX tiles where the CPU has them, and AMX
// modelled in plain code wherever it has AVX512_BF16; ARM64: BFMMLA), int8 (AMX-INT8, AVX512_VNNI, AVX-VNNI,
// AVX2, and the models; ARM64: I8MM, DOTPROD). Each kernel is named directly
// (dispatch.h: *_kernels_here()), so one process tests them all, whatever the environment chose.
// The ops above them (matmul, the fused ops, the packed weights' scopes) are tested in
// test_bf16*.cpp, test_int8.cpp and test_packed_f32.cpp.
//
// Bounds, with mag = sum_k |a_ik b_kj| (the reference's magnitude):
// - fp32: |c - ref| <= (K + 2) 2^-23 (mag + |bias|): fp32 summation of the exact product.
// - bf16: against the float64 product of the operands rounded to bf16 (what the kernels
//   multiply), fp32 summation only: |c - ref| <= (K + 2) 2^-23 (1.02 |alpha| mag + |bias| + |beta c0|),
//   which catches any element packed or stored wrong.
// - int8: bit for bit the reference's exact int32 sums, scaled back as the scheme says; with a bias,
//   within the rounding of its addition.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rosetta/core/cpu.h"
#include "kernels/bf16_kernel.h"
#include "kernels/f32_kernel.h"
#include "kernels/int8_kernel.h"
#include "kernels/reference.h"
#include "rosetta/core/random.h"

using namespace rosetta;
using namespace rosetta::detail;

namespace {

// {M, N, K} of C = op(A) op(B): a decoding step's output layer (one row, a vocabulary), a
// beam's projection, odd sizes off every tile with odd k, k of 1 with M and N under a tile (N
// ending 7 lanes into a vector of 8 and of 16), k over
// two blocks of 512 and a tail with M over one A block of 192 rows, k over AMX's block of 2048, a
// feed-forward layer, N over one B panel of 8,192 columns with short k.
struct Mnk {
  int64_t M, N, K;
};
const std::vector<Mnk> kShapes{{1, 5000, 256}, {8, 256, 256},   {13, 37, 71},   {5, 23, 1},
                               {200, 96, 1031}, {64, 33, 2100}, {100, 1024, 256}, {37, 9000, 48}};

std::vector<float> randn(Generator& g, int64_t n, double sd = 1.0) {
  return g.normal({std::max<int64_t>(n, 1)}, 0.0, sd).to_vector<float>();
}

// A stored with rows of K + 3 values (not contiguous), or with `trans` as op(A)'s transpose
// [K, M] (rows of M + 1); B as [K, N], or with `trans` [N, K] (a Linear's weight).
struct Operands {
  int64_t M, N, K, lda, ldb;
  bool ta, tb;
  std::vector<float> a, b, bias;
  reference::Operand ra() const { return {a.data(), lda, ta}; }
  reference::Operand rb() const { return {b.data(), ldb, tb}; }
};
Operands operands(Generator& g, const Mnk& s, bool ta, bool tb) {
  Operands o{s.M, s.N, s.K, ta ? s.M + 1 : s.K + 3, tb ? s.K : s.N, ta, tb, {}, {}, {}};
  o.a = randn(g, ta ? s.K * o.lda : s.M * o.lda);
  o.b = randn(g, tb ? s.N * s.K : s.K * s.N, 0.1);
  o.bias = randn(g, s.N);
  return o;
}

// The same bits (NaN included), without printing millions of values where they differ.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::string where(const Mnk& s, int64_t i, int64_t j) {
  return std::to_string(s.M) + " x " + std::to_string(s.N) + " x " + std::to_string(s.K) + ", element (" +
         std::to_string(i) + ", " + std::to_string(j) + ")";
}

}  // namespace

TEST_CASE("fp32 kernels on packed weights: every kernel against the reference, the same bits on each", "[kernels]") {
  const std::vector<const F32Kernel*> kernels = f32_kernels_here();
  if (kernels.empty()) {
    WARN("skipped: no fp32 kernel runs here (no AVX2 and FMA, no NEON): " + cpu_isa_name());
    return;
  }
  Generator g(3);
  for (const Mnk& s : kShapes)
    for (const bool tb : {true, false}) {
      const Operands o = operands(g, s, false, tb);
      const reference::Product want = reference::gemm(s.M, s.N, s.K, o.ra(), o.rb());
      PackedBF32 packed;
      pack_b_f32(tb, s.K, s.N, o.b.data(), o.ldb, packed);
      std::vector<float> first;
      for (const F32Kernel* k : kernels)
        for (const int threads : {1, 2}) {
          INFO(k->name << " kernel, " << threads << " threads, B " << (tb ? "[N, K]" : "[K, N]"));
          std::vector<float> c(size_t(s.M * (s.N + 1)), std::nanf(""));
          gemm_f32_packed(s.M, o.a.data(), o.lda, packed, c.data(), s.N + 1, threads, o.bias.data(), k);
          for (int64_t i = 0; i < s.M; ++i)
            for (int64_t j = 0; j < s.N; ++j) {
              const size_t r = size_t(i * s.N + j);
              const double got = c[size_t(i * (s.N + 1) + j)], exact = want.value[r] + o.bias[size_t(j)];
              if (!(std::abs(got - exact) <= double(s.K + 2) * 0x1p-23 * (want.magnitude[r] + std::abs(o.bias[size_t(j)]))))
                FAIL(where(s, i, j) << ": " << got << " against " << exact);
            }
          for (int64_t i = 0; i < s.M; ++i)  // C's padding is never written
            if (!std::isnan(c[size_t(i * (s.N + 1) + s.N)])) FAIL(where(s, i, s.N) << ": written past N");
          // Each element is summed in one order by every kernel, on any number of threads.
          if (first.empty()) first = c;
          else CHECK(same_bits(c, first));
        }
    }
}

namespace {

// One bf16 product on `kernel` through every epilogue option but the relu and dropout, checked
// against the reference: NT with a bias and A kept as rounded (a linear layer's forward), NN with
// alpha, beta and an fp32 gate (a relu's input gradient added to a buffer), TN with beta and A's
// row sums (a weight gradient and its bias's), and bf16 operands with a bf16 gate (the output
// layer's backward); B packed once, and on 1 and 2 threads, the same bits.
void check_bf16(const Bf16Kernel& kernel, Generator& g, const Mnk& s, int variant) {
  const bool ta = variant == 2 || variant == 3, tb = variant == 0;
  const Operands o = operands(g, s, ta, tb);
  const reference::Product want = reference::gemm(s.M, s.N, s.K, o.ra(), o.rb(), true);
  const float alpha = variant == 1 ? 1.25f : variant == 3 ? -0.5f : 1.0f;
  const float beta = variant == 1 ? 1.0f : variant == 2 ? 0.5f : 0.0f;
  const int64_t ldc = s.N + 2;
  const std::vector<float> c0 = randn(g, s.M * ldc), gate = randn(g, s.M * ldc);
  std::vector<uint16_t> a16, b16, gate16;
  for (float v : o.a) a16.push_back(uint16_t(std::bit_cast<uint32_t>(reference::round_bf16(v)) >> 16));
  for (float v : o.b) b16.push_back(uint16_t(std::bit_cast<uint32_t>(reference::round_bf16(v)) >> 16));
  for (float v : gate) gate16.push_back(uint16_t(std::bit_cast<uint32_t>(reference::round_bf16(v)) >> 16));
  std::vector<float> sums(size_t(s.M), std::nanf(""));
  std::vector<uint16_t> rounded(size_t(s.M * s.K), 1);
  Bf16Gemm p{.M = s.M,
             .N = s.N,
             .K = s.K,
             .a = {.trans = ta, .f32 = o.a.data(), .ld = o.lda},
             .b = {.trans = tb, .f32 = o.b.data(), .ld = o.ldb},
             .out = {.ldc = ldc, .alpha = alpha, .beta = beta}};
  if (variant == 0) {
    p.out.bias = o.bias.data();
    p.a_out = {.rounded = rounded.data(), .ld_rounded = s.K};
  } else if (variant == 1) {
    p.out.gate = gate.data();
    p.out.ldg = ldc;
  } else if (variant == 2) {
    p.a_out.row_sums = sums.data();
  } else {
    p.a = {.trans = ta, .bf16 = a16.data(), .ld = o.lda};
    p.b = {.trans = tb, .bf16 = b16.data(), .ld = o.ldb};
    p.out.gate16 = gate16.data();
    p.out.ldg = ldc;
  }
  PackedB packed;
  pack_b_bf16(tb, s.K, s.N, o.b.data(), o.ldb, packed, &kernel);
  std::vector<float> first;
  for (const bool use_packed : {false, true})
    for (const int threads : {1, 2}) {
      if (use_packed && variant == 3) continue;  // a packed B is packed from fp32
      INFO(kernel.name << " kernel, variant " << variant << (use_packed ? ", B packed" : "") << ", " << threads
                       << " threads");
      std::vector<float> c = c0;
      if (beta == 0)  // never read
        for (int64_t i = 0; i < s.M; ++i) std::fill(c.begin() + i * ldc, c.begin() + i * ldc + s.N, std::nanf(""));
      p.out.c = c.data();
      p.b_packed = use_packed ? &packed : nullptr;
      gemm_bf16(p, threads, &kernel);
      for (int64_t i = 0; i < s.M; ++i)
        for (int64_t j = 0; j < s.N; ++j) {
          const size_t r = size_t(i * s.N + j), at = size_t(i * ldc + j);
          const double bias = variant == 0 ? o.bias[size_t(j)] : 0.0;
          const double exact = alpha * want.value[r] + bias + beta * c0[at];
          const double bound = double(s.K + 2) * 0x1p-23 *
                               (1.02 * std::abs(alpha) * want.magnitude[r] + std::abs(bias) + std::abs(beta * c0[at]));
          const double gv = variant == 1 ? gate[at] : variant == 3 ? reference::round_bf16(gate[at]) : 1.0;
          if (!(gv > 0) ? c[at] != 0.0f : !(std::abs(c[at] - exact) <= bound + 1e-30))
            FAIL(where(s, i, j) << ": " << c[at] << " against " << exact << " (gate " << gv << ")");
        }
      for (int64_t i = 0; i < s.M; ++i)  // C's padding is never written
        for (int64_t j = s.N; j < ldc; ++j)
          if (std::bit_cast<uint32_t>(c[size_t(i * ldc + j)]) != std::bit_cast<uint32_t>(c0[size_t(i * ldc + j)]))
            FAIL(where(s, i, j) << ": written past N");
      if (variant == 0)  // A as the product rounded it
        for (int64_t i = 0; i < s.M; ++i)
          for (int64_t k = 0; k < s.K; ++k)
            if (rounded[size_t(i * s.K + k)] != uint16_t(std::bit_cast<uint32_t>(reference::round_bf16(o.ra().at(i, k))) >> 16))
              FAIL(where(s, i, k) << " of A: not rounded as packed");
      if (variant == 2)  // op(A)'s row sums, fp32 sums of the values as read
        for (int64_t i = 0; i < s.M; ++i) {
          double exact = 0, mag = 0;
          for (int64_t k = 0; k < s.K; ++k) {
            exact += o.ra().at(i, k);
            mag += std::abs(o.ra().at(i, k));
          }
          if (!(std::abs(sums[size_t(i)] - exact) <= double(s.K) * 0x1p-23 * mag + 1e-30))
            FAIL("row sum " << i << " of " << where(s, i, 0) << ": " << sums[size_t(i)] << " against " << exact);
        }
      if (first.empty()) first = c;
      else CHECK(same_bits(c, first));
    }
}

// The relu and dropout epilogue (a feed-forward's hidden layer straight into bf16) on `kernel`:
// each element is relu(product + bias) times the dropout's draw, rounded to bf16; exactly 0
// where the draw drops it or the product is clearly negative.
void check_relu_dropout(const Bf16Kernel& kernel, Generator& g, const Mnk& s) {
  const Operands o = operands(g, s, false, true);
  const reference::Product want = reference::gemm(s.M, s.N, s.K, o.ra(), o.rb(), true);
  const double p = 0.25;
  const uint64_t seed = 77, offset = (uint64_t(1) << 32) - 1000;  // the counter's high half changes inside
  const int64_t ld = s.N + (s.N % 2);
  for (const int threads : {1, 2}) {
    INFO(kernel.name << " kernel, relu and dropout epilogue, " << threads << " threads");
    std::vector<uint16_t> out(size_t(s.M * ld), 0x7FC0);
    const ReluDropout16 rd{.out = out.data(), .ld = ld, .key = dropout_key(seed),
                           .threshold = uint32_t(dropout_threshold(p)), .scale = float(1.0 / (1.0 - p)), .offset = offset};
    gemm_bf16({.M = s.M,
               .N = s.N,
               .K = s.K,
               .a = {.f32 = o.a.data(), .ld = o.lda},
               .b = {.trans = true, .f32 = o.b.data(), .ld = o.ldb},
               .out = {.bias = o.bias.data(), .relu_dropout = &rd}},
              threads, &kernel);
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = 0; j < s.N; ++j) {
        const size_t r = size_t(i * s.N + j);
        const double v = want.value[r] + o.bias[size_t(j)];
        const double bound = double(s.K + 2) * 0x1p-23 * (1.02 * want.magnitude[r] + std::abs(o.bias[size_t(j)]));
        const bool keep = dropout_keep(seed, offset + uint64_t(r), p);
        const double got = std::bit_cast<float>(uint32_t(out[size_t(i * ld + j)]) << 16);
        const double exact = keep && v > 0 ? v / (1.0 - p) : 0.0;
        const bool zero = !keep || v < -bound;
        if (zero ? got != 0.0 : !(std::abs(got - exact) <= 0x1p-8 * std::abs(exact) + 2 * bound))
          FAIL(where(s, i, j) << ": " << got << " against " << exact << (keep ? "" : " (dropped)"));
      }
  }
}

}  // namespace

TEST_CASE("bf16 kernels: every kernel and epilogue against the reference", "[kernels]") {
  const std::vector<const Bf16Kernel*> kernels = bf16_kernels_here();
  if (kernels.empty()) {
    WARN("skipped: no bf16 kernel runs here (no AVX512_BF16; ARM64: no BF16): " + cpu_isa_name());
    return;
  }
  for (const Bf16Kernel* k : kernels) {
    Generator g(5);
    for (const Mnk& s : kShapes) {
      for (int variant = 0; variant < 4; ++variant) check_bf16(*k, g, s, variant);
      if (gemm_bf16_one_block(s.K, k)) check_relu_dropout(*k, g, s);
    }
  }
}

TEST_CASE("int8 kernels: bit for bit the reference's exact int32 sums, scaled back", "[kernels]") {
  const std::vector<const Int8Kernel*> kernels = int8_kernels_here();
  if (kernels.empty()) {
    WARN("skipped: no int8 kernel runs here (no AVX2; ARM64: no DOTPROD): " + cpu_isa_name());
    return;
  }
  Generator g(7);
  for (const Mnk& s : kShapes)
    for (const bool tb : {true, false}) {
      Operands o = operands(g, s, false, tb);
      if (s.M > 4) o.a[size_t(3 * o.lda + s.K / 2)] = INFINITY;  // row 3: the bias alone
      // Each kernel against the reference of its own weights' range (w_max: 127, or 63 on AVX2),
      // by the weights packed for it.
      const reference::Int8Product want127 = reference::gemm_int8(s.M, s.N, s.K, o.ra(), o.rb(), 127),
                                   want63 = reference::gemm_int8(s.M, s.N, s.K, o.ra(), o.rb(), 63);
      PackedBInt8 packed127, packed63;
      pack_b_int8(tb, s.K, s.N, o.b.data(), o.ldb, packed127, 127);
      pack_b_int8(tb, s.K, s.N, o.b.data(), o.ldb, packed63, 63);
      for (const Int8Kernel* k : kernels)
        for (const int threads : {1, 2})
          for (const bool with_bias : {false, true}) {
            INFO(k->name << " kernel, " << threads << " threads, B " << (tb ? "[N, K]" : "[K, N]")
                         << (with_bias ? ", bias" : ""));
            REQUIRE((k->w_max == 127 || k->w_max == 63));
            const reference::Int8Product& want = k->w_max == 127 ? want127 : want63;
            const PackedBInt8& packed = k->w_max == 127 ? packed127 : packed63;
            std::vector<float> c(size_t(s.M * s.N), std::nanf(""));
            gemm_int8_packed(s.M, o.a.data(), o.lda, packed, c.data(), s.N, threads,
                             with_bias ? o.bias.data() : nullptr, k);
            for (int64_t i = 0; i < s.M; ++i)
              for (int64_t j = 0; j < s.N; ++j) {
                const size_t r = size_t(i * s.N + j);
                const float bias = with_bias ? o.bias[size_t(j)] : 0.0f;
                if (s.M > 4 && i == 3) {
                  if (c[r] != bias) FAIL(where(s, i, j) << ": " << c[r] << " in a row with an infinity, not the bias");
                  continue;
                }
                if (!with_bias ? std::bit_cast<uint32_t>(c[r]) != std::bit_cast<uint32_t>(want.c[r])
                               : !(std::abs(double(c[r]) - (double(want.c[r]) + bias)) <=
                                   0x1p-23 * (std::abs(want.c[r]) + std::abs(bias))))
                  FAIL(where(s, i, j) << ": " << c[r] << " against " << want.c[r] << " + " << bias << " (int32 sum "
                                      << want.sums[r] << ")");
              }
          }
    }
}

TEST_CASE("int8 kernels: the extreme bytes neither saturate nor overflow", "[kernels]") {
  // Rows of A at +max (byte 255 once shifted) and -max (byte 1), weights at +-w_max in every
  // column: each pair of products is the largest the kernel's range allows (AVX2's VPMADDUBSW:
  // 2 x 255 x 63, just under the int16 limit), the sums the largest K gives.
  const int64_t M = 6, N = 40, K = 1024;
  std::vector<float> a(size_t(M * K)), b(size_t(N * K));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) a[size_t(i * K + k)] = i % 3 == 0 ? 1.0f : i % 3 == 1 ? -1.0f : (k % 2 ? 1.0f : -1.0f);
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < K; ++k) b[size_t(j * K + k)] = j % 2 ? 0.5f : -0.5f;
  for (const Int8Kernel* k : int8_kernels_here()) {
    INFO(k->name << " kernel");
    const reference::Int8Product want = reference::gemm_int8(M, N, K, {a.data(), K, false}, {b.data(), K, true}, k->w_max);
    PackedBInt8 packed;
    pack_b_int8(true, K, N, b.data(), K, packed, k->w_max);
    std::vector<float> c(size_t(M * N));
    gemm_int8_packed(M, a.data(), K, packed, c.data(), N, 1, nullptr, k);
    CHECK(same_bits(c, want.c));
    CHECK(std::abs(want.sums[0]) == K * 127 * k->w_max);
  }
}

TEST_CASE("the kernels' dispatch: one per precision, each among those this CPU runs", "[kernels]") {
  const auto among = [](const auto* k, const auto& here) { return std::find(here.begin(), here.end(), k) != here.end(); };
  if (const F32Kernel* k = f32_kernel()) CHECK(among(k, f32_kernels_here()));
  else CHECK(f32_kernels_here().empty());
  if (const Bf16Kernel* k = bf16_kernel()) CHECK(among(k, bf16_kernels_here()));
  else CHECK(bf16_kernels_here().empty());
  if (const Int8Kernel* k = int8_kernel()) CHECK(among(k, int8_kernels_here()));
  else CHECK(int8_kernels_here().empty());
  // The AMX model runs wherever AVX512_BF16 does, so the AMX path is tested on every CPU with bf16;
  // the int8 AMX and AVX-VNNI loops wherever AVX512_VNNI does, and the AVX2 kernel wherever AVX2.
  if (bf16_avx512.runs_on(rosetta::cpu_features())) CHECK(among(&bf16_amx_model, bf16_kernels_here()));
  if (int8_avx512_vnni.runs_on(rosetta::cpu_features())) {
    CHECK(among(&int8_amx_model, int8_kernels_here()));
    CHECK(among(&int8_avx_vnni_model, int8_kernels_here()));
  }
  if (rosetta::cpu_features().avx2 && rosetta::cpu_features().fma) CHECK(among(&int8_avx2, int8_kernels_here()));
  // ARM64: NEON's fp32 kernel on every Armv8-A CPU, SDOT's where DotProd is, SMMLA's where I8MM is,
  // each chosen first where it runs (no other kernel of ARM64 is above it in its list).
  const CpuFeatures& cpu = rosetta::cpu_features();
  CHECK(among(&f32_neon, f32_kernels_here()) == cpu.neon);
  CHECK(among(&int8_neon_dot, int8_kernels_here()) == (cpu.neon && cpu.dotprod));
  CHECK(among(&int8_i8mm, int8_kernels_here()) == (cpu.neon && cpu.i8mm));
  CHECK(among(&bf16_bfmmla, bf16_kernels_here()) == (cpu.neon && cpu.bf16));
  if (cpu.neon) {
    CHECK_THAT(cpu_isa_name(), Catch::StartsWith("NEON"));
    if (!std::getenv("ROSETTA_PACKED_F32")) {
      CHECK(f32_kernel() == &f32_neon);
      CHECK(std::string(gemm_f32_packed_isa()) == "NEON");
    }
    if (!std::getenv("ROSETTA_INT8"))
      CHECK(int8_kernel() == (cpu.i8mm ? &int8_i8mm : cpu.dotprod ? &int8_neon_dot : nullptr));
  }
  CHECK(gemm_bf16_amx_modelled() == (bf16_kernel() == &bf16_amx_model));
  CHECK(std::string(gemm_f32_packed_isa()) == (f32_kernel() ? f32_kernel()->name : ""));
}

namespace {

// Values in [-1, 1) from integer arithmetic alone (no libm), so the same on every architecture.
std::vector<float> lcg_values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = float(int32_t(seed >> 32)) * 0x1p-31f;
  }
  return v;
}

// FNV-1a of the values' bits.
uint64_t bits_hash(const std::vector<float>& c) {
  uint64_t h = 1469598103934665603ull;
  for (const float x : c)
    for (int b = 0; b < 4; ++b) h = (h ^ ((std::bit_cast<uint32_t>(x) >> (8 * b)) & 0xFF)) * 1099511628211ull;
  return h;
}

}  // namespace

TEST_CASE("fp32 and int8 kernels give the same bits on every architecture", "[kernels]") {
  // Every fp32 kernel sums each element in one order (f32_kernel.h) and every int8 kernel sums
  // exactly, scaling back with the same fp32 operations (int8_kernel.h), so a product's bits are
  // a property of its inputs, not of the CPU: the hashes below are those of the x86-64 kernels
  // (AVX-512, AVX2; AVX512_VNNI, AVX-VNNI, the AMX model), which ARM64's (NEON; I8MM, DOTPROD)
  // must give too. A change to the order of the sums changes them on every architecture at once.
  const int64_t M = 37, N = 333, K = 1100;  // a tail of rows, of columns and of k, over a block of k
  const std::vector<float> a = lcg_values(M * K, 1), b = lcg_values(N * K, 2), bias = lcg_values(N, 3);
  std::vector<float> c(size_t(M * N));
  PackedBF32 packed;
  pack_b_f32(true, K, N, b.data(), K, packed);
  for (const F32Kernel* k : f32_kernels_here()) {
    INFO(k->name << " kernel");
    gemm_f32_packed(M, a.data(), K, packed, c.data(), N, 2, bias.data(), k);
    CHECK(bits_hash(c) == 0x3e13302bcccbc865ull);
  }
  PackedBInt8 packed8;
  pack_b_int8(true, K, N, b.data(), K, packed8, 127);
  for (const Int8Kernel* k : int8_kernels_here()) {
    if (k->w_max != 127) continue;  // AVX2's 7-bit weights are another product
    INFO(k->name << " kernel");
    gemm_int8_packed(M, a.data(), K, packed8, c.data(), N, 2, nullptr, k);
    CHECK(bits_hash(c) == 0x4491ccd7a8e1b772ull);
    gemm_int8_packed(M, a.data(), K, packed8, c.data(), N, 2, bias.data(), k);
    CHECK(bits_hash(c) == 0x26f80f5596db456bull);
  }
}
