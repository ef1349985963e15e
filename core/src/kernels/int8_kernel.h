// What the int8 driver (int8_gemm.cpp) and its micro-kernels (int8_<isa>.cpp) share.
//
// The scheme (as CTranslate2's): weights quantized once per output column, to [-w_max, w_max]
// (127, or 63 where a kernel's products would otherwise saturate: Int8Kernel::w_max, AVX2's),
// activations per row as each product runs, to [-127, 127], products summed exactly in int32. A
// row of A goes in as the unsigned q_a + 128 (the u8 x s8 dot products of VPDPBUSD, VPMADDUBSW
// and TDPBUSD take one operand unsigned); the extra 128 * sum_k q_b[k][j] is known from the
// weights alone (PackedBInt8::comp) and taken off as the result is scaled back:
//   C[i][j] = (acc[i][j] - comp[j]) * (scale_a[i] * scale_b[j]) (+ bias[j]).
// ARM64's SDOT and SMMLA multiply signed by signed: their kernels (int8_neon_dot.cpp,
// int8_i8mm.cpp) store A as q itself and take no comp off, the same exact sums by another road.
// B is packed as slivers of kInt8Cols columns, word [p][j] = (q[4p][j], .., q[4p+3][j]), K
// rounded up to kInt8KStep with zeros; A's quantized rows stay row-major, K rounded up the same
// with shifted zeros, and rows rounded up to the kernel's MR with rows of shifted zeros.
#pragma once

#include <cstdint>

#include "int8.h"

namespace rosetta {
struct CpuFeatures;
}

namespace rosetta::detail {

constexpr int kInt8Cols = 32;   // columns of a packed sliver
constexpr int kInt8KStep = 64;  // K is padded to this (an AMX tile's 64 bytes of a row)

// One product as the kernels see it: A quantized (rows kp bytes apart, padded to a multiple of
// the kernel's MR rows) with its rows' scales, and the packed weights.
struct Int8Problem {
  int64_t M, kp;
  const uint8_t* a;
  const float* sa;
  const PackedBInt8* b;
  float* c;
  int64_t ldc;
  const float* bias;
};

// One ISA's kernel: what it is called, what it needs, how it quantizes A, and its loops over a
// part of C.
struct Int8Kernel {
  const char* name;  // the instructions, as the tests name the kernel
  int mr;            // rows of its micro-tile: A is padded to, and C split among threads in, whole tiles
  int w_max;         // the weights' range [-w_max, w_max] it needs packed (pack_b_int8): 127, or 63 (AVX2)
  bool (*runs_on)(const CpuFeatures& cpu);
  // Rows [0, M) of A as unsigned bytes (q + 128) in rows of kp bytes (zeros past K, 128
  // shifted), rows [M, Mp) all 128, and each row's scale (0 for rows past M, and for a row
  // whose max |a| is 0 or not finite): q = round-to-nearest-even(a * (127 / max |a|)),
  // scale = max |a| / 127, both in fp32. A kernel of signed products (ARM64's) stores q as
  // signed bytes, zeros for zeros, in the layout its compute reads (I8MM: rows in pairs).
  // The driver gives Mp * kp bytes either way.
  void (*quantize_rows)(int64_t M, int64_t Mp, int64_t K, int64_t kp, const float* a, int64_t lda, uint8_t* out,
                        float* scale);
  // C[m0:m1, n0:n1] on the calling thread (m0 and n0 multiples of mr and kInt8Cols).
  void (*compute)(const Int8Problem& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
};

extern const Int8Kernel int8_amx;              // int8_amx.cpp: TDPBUSD on AMX tiles
extern const Int8Kernel int8_amx_model;        // the same loops, the tile products in plain code
extern const Int8Kernel int8_avx512_vnni;      // int8_avx512_vnni.cpp
extern const Int8Kernel int8_avx_vnni;         // int8_avx2.cpp: VPDPBUSD on 256 bits (VEX)
extern const Int8Kernel int8_avx_vnni_model;   // the same loops with AVX512_VNNI's 256-bit form
extern const Int8Kernel int8_avx2;             // VPMADDUBSW and VPMADDWD, 7-bit weights
extern const Int8Kernel int8_i8mm;             // int8_i8mm.cpp: SMMLA (ARM64, Armv8.6 I8MM)
extern const Int8Kernel int8_neon_dot;         // int8_neon_dot.cpp: SDOT (ARM64, Armv8.2 DotProd)

}  // namespace rosetta::detail
