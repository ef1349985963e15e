// translate_lines: batches decoded side by side, one per thread, give what one thread gives.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "rosetta/core/random.h"
#include "rosetta/core/tensor.h"
#include "rosetta/nn/nn.h"
#include "rosetta/translator/translator.h"
#include "copy_translator.h"

using namespace rosetta;

namespace {
// Restores the thread count a test changed.
struct ThreadsScope {
  int saved = get_num_threads();
  ~ThreadsScope() { set_num_threads(saved); }
};
}  // namespace

TEST_CASE("translate_lines gives the same hypotheses on any number of threads", "[translate]") {
  const ThreadsScope threads;
  const int64_t symbols = 10;
  const translator::Translator t = test::copy_translator(21, 2, 64);  // symbols 0-9
  const translator::Codec& codec = t.codec;
  const nn::Transformer& model = *t.model;
  // 40 lines of 1-12 symbols (0-9) and an empty one: batches of 16 source tokens make many batches.
  std::vector<std::string> lines;
  Generator pick(3);
  for (int i = 0; i < 40; ++i) {
    const int64_t n = 1 + (i * 7) % 12;
    std::string line;
    for (int64_t k = 0; k < n; ++k) {
      if (k) line += ' ';
      line += std::to_string(int64_t(pick.uniform({1}, 0.0, double(symbols) - 1e-9).item()));
    }
    lines.push_back(line);
  }
  lines.insert(lines.begin() + 5, "");
  const auto options = nn::SearchOptions().beam(3).n_best(2);
  std::vector<int> decoders_seen;
  const translator::BatchCheck check = [&](int64_t rows, int64_t src_len, int decoders) {
    CHECK(rows * src_len <= std::max<int64_t>(16, src_len));
    decoders_seen.push_back(decoders);
  };
  set_num_threads(1);
  const auto one = translator::translate_lines(model, codec, lines, options, 16, nullptr, check);
  REQUIRE(decoders_seen.size() > 4);
  CHECK(decoders_seen.front() == 1);
  decoders_seen.clear();
  set_num_threads(3);
  const auto three = translator::translate_lines(model, codec, lines, options, 16, nullptr, check);
  CHECK(decoders_seen.front() == 3);
  REQUIRE(one.size() == lines.size());
  REQUIRE(three.size() == lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO("line " << i << ": " << lines[i]);
    REQUIRE(one[i].size() == three[i].size());
    for (size_t h = 0; h < one[i].size(); ++h) {
      CHECK(one[i][h].tokens == three[i][h].tokens);
      CHECK(one[i][h].score == three[i][h].score);
    }
  }
  CHECK(one[5].size() == 1);
  CHECK(one[5][0].tokens.empty());
  // A check that refuses stops the job before anything is decoded, on any number of threads.
  const translator::BatchCheck refuse = [](int64_t, int64_t, int) { throw Error("too large"); };
  CHECK_THROWS_WITH(translator::translate_lines(model, codec, lines, options, 16, nullptr, refuse),
                    Catch::Contains("too large"));
}
