// The files training writes beside its checkpoints (train/checkpoint.h, train/metrics.h): weights
// files with their checksums, which load only into a model of the same architecture, and the
// metrics log.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "rosetta/core/io.h"
#include "rosetta/core/safetensors.h"
#include "rosetta/train/checkpoint.h"
#include "rosetta/train/metrics.h"
#include "support.h"
#include "trainer_support.h"

using rosetta::test::AllClose;


TEST_CASE("weights files carry a checksum and load into a model of the same architecture", "[train]") {
  const std::string dir = temp_dir("weights");
  const std::string path = dir + "/w.safetensors";
  Generator g(1);
  Mlp a(g, 1);
  train::save_model_weights(path, a, {{"note", "x"}});
  Generator h(2);
  Mlp b(h, 2);
  const auto meta = train::load_model_weights(b, path);
  REQUIRE(meta.at("note") == "x");
  REQUIRE(meta.count(train::kChecksumKey));
  for (size_t i = 0; i < a.parameters().size(); ++i)
    REQUIRE_THAT(b.parameters()[i].data(), AllClose(a.parameters()[i].data(), 0, 0));
  nn::Linear other(nn::LinearOptions(6, 5), g);
  REQUIRE_THROWS_WITH(train::load_model_weights(other, path), Catch::Contains(path));
  fs::remove_all(dir);
}

// The checksum files written before "v2:" carry: FNV-1a over each tensor's name (with its NUL),
// dtype, shape and bytes, in name order, as 16 hex digits.
std::string fnv_checksum(std::vector<std::pair<std::string, Tensor>> tensors) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto mix = [&h](const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ull;
  };
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [name, tensor] : tensors) {
    const Tensor t = tensor.contiguous();
    mix(name.c_str(), name.size() + 1);
    const auto dtype = uint8_t(t.dtype());
    mix(&dtype, 1);
    for (int64_t d : t.shape()) mix(&d, sizeof d);
    mix(t.data<float>(), size_t(t.numel()) * sizeof(float));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

TEST_CASE("checksums: v2 finds a flipped byte anywhere, files with the FNV-1a checksum of before still load", "[train]") {
  const std::string dir = temp_dir("checksums");
  Generator g(4);
  // Sizes around the hash's 32-byte stripes and 8-byte words: every tail path.
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (int64_t n : {1, 2, 7, 8, 9, 33, 1000})
    tensors.emplace_back("t" + std::to_string(n), g.normal({n}, 0.0, 1.0));
  const std::string sum = train::tensors_checksum(tensors);
  REQUIRE(sum.rfind("v2:", 0) == 0);
  REQUIRE(sum.size() == 19);
  REQUIRE(train::tensors_checksum(tensors) == sum);  // a function of the tensors alone
  auto renamed = tensors;
  renamed[0].first = "u1";
  CHECK(train::tensors_checksum(renamed) != sum);
  for (auto& [name, t] : tensors)
    for (int64_t i = 0; i < t.numel(); i += 3) {  // a bit of every third value of every tensor
      uint32_t bits;
      std::memcpy(&bits, t.data<float>() + i, 4);
      const uint32_t flipped = bits ^ (1u << (i % 32));
      std::memcpy(t.data<float>() + i, &flipped, 4);
      if (train::tensors_checksum(tensors) == sum) FAIL("a flipped bit at " << name << "[" << i << "] went unseen");
      std::memcpy(t.data<float>() + i, &bits, 4);
    }
  REQUIRE(train::tensors_checksum(tensors) == sum);

  // A file that carries the old checksum loads; with a flipped byte it is refused.
  const std::string path = dir + "/old.safetensors";
  Mlp a(g, 1);
  const nn::NamedTensors weights = a.state_dict();
  save_safetensors(path, weights, {{train::kChecksumKey, fnv_checksum(weights)}});
  Generator h(2);
  Mlp b(h, 2);
  train::load_model_weights(b, path);
  for (size_t i = 0; i < a.parameters().size(); ++i)
    REQUIRE_THAT(b.parameters()[i].data(), AllClose(a.parameters()[i].data(), 0, 0));
  std::string bytes = read_file(path);
  bytes[bytes.size() - 3] ^= 0x10;
  write_file_atomic(path, bytes);
  REQUIRE_THROWS_WITH(train::load_model_weights(b, path), Catch::Contains(path) && Catch::Contains("corrupted"));
  fs::remove_all(dir);
}

TEST_CASE("the metrics log writes one JSON object per line and truncates to a step", "[train]") {
  REQUIRE(train::MetricsLog::format({{"step", int64_t(3)}, {"loss", 1.5}, {"kind", std::string("train")},
                                     {"bad", std::nan("")}}) == R"({"step":3,"loss":1.5,"kind":"train","bad":null})");  // the caller's order
  const std::string dir = temp_dir("metrics");
  const std::string path = dir + "/metrics.jsonl";
  {
    train::MetricsLog log(path);
    for (int64_t s = 1; s <= 4; ++s) log.write({{"step", s}, {"loss", 1.0 / double(s)}});
  }
  std::ofstream(path, std::ios::app) << "{\"step\": 5, \"lo";  // cut off by a crash
  train::MetricsLog::truncate(path, 2);
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  REQUIRE(lines == 2);
  REQUIRE_THROWS_WITH(train::MetricsLog(dir + "/no/such/dir/m.jsonl"), Catch::Contains("no/such/dir/m.jsonl"));
  fs::remove_all(dir);
}
