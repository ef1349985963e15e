// The bf16 GEMM behind --precision bf16, against OpenBLAS's sgemm and oneDNN's bf16 matmul, on
// the products of the default translator and the benchmark presets, after a table of decoding's
// products by packed weights (fp32, bf16, int8) (bench/gemm.sh builds and
// runs it; oneDNN only where Debian's libdnnl-dev is installed: it is a benchmark here, not a
// dependency).
//
// Each figure is GFLOP/s (2 M N K per product), the best of several runs, with fp32 operands
// and an fp32 result as the framework has them:
//   sgemm        cblas_sgemm (OpenBLAS, the core it picked)
//   rosetta bf16 rosetta::matmul_into under MatmulPrecisionScope(bf16): rounding the operands to
//                bf16 happens in its packing and is included
//   oneDNN bf16  dnnl::matmul with bf16 operands already converted (its best case), and with the
//                two fp32 -> bf16 reorders the framework would need before it (in brackets)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rosetta/core/cpu.h"
#include "rosetta/core/ops.h"
#include "rosetta/core/random.h"

#ifdef ROSETTA_BENCH_DNNL
#include <dnnl.hpp>
#endif

using namespace rosetta;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Shape3 {
  const char* what;
  int64_t M, N, K;
  bool ta, tb;  // op(A) = A^T, op(B) = B^T
};

template <class F>
double best_gflops(const Shape3& s, F&& f) {
  const double flop = 2.0 * double(s.M) * double(s.N) * double(s.K);
  const int reps = std::max(3, int(3e9 / flop));
  double best = 1e30;
  f();  // warm-up
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return flop / best / 1e9;
}

#ifdef ROSETTA_BENCH_DNNL
// {bf16 operands ready, including the fp32 -> bf16 reorders}
std::pair<double, double> dnnl_gflops(const Shape3& s, const float* a, const float* b) {
  using namespace dnnl;
  static engine eng(engine::kind::cpu, 0);
  static stream st(eng);
  const memory::dims ad{s.M, s.K}, bd{s.K, s.N}, cd{s.M, s.N};
  const auto at = s.ta ? memory::format_tag::ba : memory::format_tag::ab;
  const auto bt = s.tb ? memory::format_tag::ba : memory::format_tag::ab;
  const memory::desc a16(ad, memory::data_type::bf16, at), b16(bd, memory::data_type::bf16, bt),
      c32(cd, memory::data_type::f32, memory::format_tag::ab), a32(ad, memory::data_type::f32, at),
      b32(bd, memory::data_type::f32, bt);
  const dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a16, b16, c32), eng));
  memory A(a16, eng), B(b16, eng), C(c32, eng), Af(a32, eng, const_cast<float*>(a)), Bf(b32, eng, const_cast<float*>(b));
  const reorder ra(Af, A), rb(Bf, B);
  auto product = [&] {
    mm.execute(st, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
    st.wait();
  };
  auto with_reorders = [&] {
    ra.execute(st, Af, A);
    rb.execute(st, Bf, B);
    product();
  };
  with_reorders();
  return {best_gflops(s, product), best_gflops(s, with_reorders)};
}
#endif

// Decoding's products by weights (x W^T + bias, W packed once per PackedWeightsScope): OpenBLAS's
// sgemm on the unpacked weight (what fp32 did before), rosetta's packed fp32 kernel (AVX-512 or AVX2),
// bf16 and int8 (multiply-adds counted as for fp32; the quantization of x included).
void decoding_table(int threads) {
  const std::vector<Shape3> shapes{
      {"one sentence's beams, projection", 4, 256, 256, false, true},
      {"projection", 128, 256, 256, false, true},
      {"FF in", 128, 1024, 256, false, true},
      {"FF out", 128, 256, 1024, false, true},
      {"output layer, V 5000", 128, 5000, 256, false, true},
  };
  std::printf("Decoding's products by packed weights (%s, %d thread(s), GFLOP/s)\n\n", cpu_isa_name().c_str(), threads);
  std::printf("| product | M x N x K | sgemm | rosetta fp32 packed | rosetta bf16 packed | rosetta int8 |\n");
  std::printf("|---|---|---|---|---|---|\n");
  Generator g(2);
  for (const Shape3& s : shapes) {
    const Tensor x = g.normal({s.M, s.K}), w = g.normal({s.N, s.K}, 0.0, 0.05), bias = g.normal({s.N});
    const Tensor wt = w.transpose(0, 1);
    Tensor y = Tensor::empty({s.M, s.N});
    const double sg = best_gflops(s, [&] { matmul_bias_into(y, x, wt, bias); });  // no scope: OpenBLAS
    auto packed = [&](Precision p) -> std::string {
      if ((p == Precision::bf16 && !bf16_supported()) || (p == Precision::int8 && !int8_supported()) ||
          (p == Precision::fp32 && PackedWeightsScope::fp32_kernel_isa().empty()))
        return "-";
      const MatmulPrecisionScope precision(p);
      const PackedWeightsScope scope;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f", best_gflops(s, [&] { matmul_bias_into(y, x, wt, bias); }));
      return buf;
    };
    std::printf("| %s | %lld x %lld x %lld | %.0f | %s | %s | %s |\n", s.what, (long long)s.M, (long long)s.N,
                (long long)s.K, sg, packed(Precision::fp32).c_str(), packed(Precision::bf16).c_str(),
                packed(Precision::int8).c_str());
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : get_num_threads();
  set_num_threads(threads);
  decoding_table(threads);
  if (!bf16_supported()) {
    std::printf("this CPU (%s) has no AVX512_BF16: no bf16 products to compare\n", cpu_isa_name().c_str());
    return 0;
  }
  // The default translator trains shards of ~1,250 target tokens per replica (2,500-token
  // batches on 2 replicas) at d_model 256, FF 1024, 5,000 pieces; the small preset 1,024 rows
  // at vocabulary 8,000; base 1,024 rows at d_model 512, FF 2048; attention 32 x 32 x 64 per head;
  // decoding 64 and 8 rows.
  const std::vector<Shape3> shapes{
      {"projection forward (x W^T)", 1250, 256, 256, false, true},
      {"FF in forward", 1250, 1024, 256, false, true},
      {"FF out forward", 1250, 256, 1024, false, true},
      {"output layer forward, V 5000", 1250, 5000, 256, false, true},
      {"FF out dx (dy W)", 1250, 1024, 256, false, false},
      {"output layer dx, V 5000", 1250, 256, 5000, false, false},
      {"FF in dW (dy^T x)", 1024, 256, 1250, true, false},
      {"output layer dW, V 5000", 5000, 256, 1250, true, false},
      {"base FF in forward", 1024, 2048, 512, false, true},
      {"base FF out dW", 512, 2048, 1024, true, false},
      {"small output layer, V 8000", 1024, 8000, 256, false, true},
      {"attention scores (q k^T)", 32, 32, 64, false, true},
      {"decoding step, 64 rows", 64, 256, 256, false, true},
      {"decoding step, 8 rows, V 5000", 8, 5000, 256, false, true},
      {"square 2048", 2048, 2048, 2048, false, true},
  };
  std::printf("%s, %d thread(s); OpenBLAS core %s\n\n", cpu_isa_name().c_str(), threads, blas_core_name().c_str());
  std::printf("| product | M x N x K | sgemm | rosetta bf16 | oneDNN bf16 (with reorders) | rosetta / sgemm |\n");
  std::printf("|---|---|---|---|---|---|\n");
  Generator g(1);
  for (const Shape3& s : shapes) {
    const Tensor a = g.normal({s.ta ? s.K : s.M, s.ta ? s.M : s.K}), b = g.normal({s.tb ? s.N : s.K, s.tb ? s.K : s.N});
    const Tensor opa = s.ta ? a.transpose(0, 1) : a, opb = s.tb ? b.transpose(0, 1) : b;
    Tensor c = Tensor::empty({s.M, s.N});
    const double sg = best_gflops(s, [&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, int(s.M),
                  int(s.N), int(s.K), 1.0f, a.data<float>(), int(a.shape()[1]), b.data<float>(), int(b.shape()[1]),
                  0.0f, c.data<float>(), int(s.N));
    });
    double bf = 0;
    {
      const MatmulPrecisionScope bf16(Precision::bf16);
      bf = best_gflops(s, [&] { matmul_into(c, opa, opb); });
    }
    std::string dn = "-";
#ifdef ROSETTA_BENCH_DNNL
    const auto [ready, reordered] = dnnl_gflops(s, a.data<float>(), b.data<float>());
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f (%.0f)", ready, reordered);
    dn = buf;
#endif
    std::printf("| %s | %lld x %lld x %lld | %.0f | %.0f | %s | %.2fx |\n", s.what, (long long)s.M, (long long)s.N,
                (long long)s.K, sg, bf, dn.c_str(), bf / sg);
  }
  return 0;
}
