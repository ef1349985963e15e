// libFuzzer target for the safetensors parser: any input must either parse or throw
// rosetta::Error; anything else (a crash, a sanitizer report, another exception) is a bug.
//
// Build and run by hand from the repo root (not wired into CMake):
//   clang++-14 -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined \
//     -fno-sanitize-recover=undefined -fopenmp \
//     -Icore/include -I/usr/include/x86_64-linux-gnu/openblas-openmp \
//     tests/fuzz/fuzz_safetensors.cpp core/src/safetensors.cpp core/src/io.cpp \
//     core/src/tensor.cpp core/src/storage.cpp \
//     -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas \
//     -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -o /tmp/fuzz_safetensors
//   mkdir -p /tmp/fuzz_corpus
//   /tmp/fuzz_safetensors -max_total_time=30 -dict=tests/fuzz/safetensors.dict \
//     /tmp/fuzz_corpus tests/fuzz/corpus/safetensors
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rosetta/core/check.h"
#include "rosetta/core/safetensors.h"

namespace {

void parse(std::string_view bytes) {
  try {
    const rosetta::SafeTensors st = rosetta::parse_safetensors(bytes, "fuzz.safetensors");
    // Touch what was parsed, so the sanitizers see any bad tensor.
    for (const auto& [name, t] : st.tensors) {
      if (t.numel() > 0) (void)t.contiguous().storage()->data();
      (void)st.find(name);
    }
  } catch (const rosetta::Error&) {
    // Rejected input: the expected outcome for most inputs.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // 1. The input as a whole file.
  parse(input);
  // 2. "header JSON \0 data section", with the length prefix added here: random mutations rarely
  //    keep the prefix consistent with the header, so this form reaches the field checks more
  //    often (seeds: corpus/safetensors/*.split).
  const size_t nul = input.find('\0');
  if (nul != std::string_view::npos) {
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = char((uint64_t(nul) >> (8 * i)) & 0xFF);
    file.append(input.substr(0, nul));
    file.append(input.substr(nul + 1));
    parse(file);
  }
  return 0;
}
