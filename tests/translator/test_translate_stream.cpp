// translate_stream: lines translated chunk by chunk give translate_lines' hypotheses (their
// scores to fp32 rounding), emitted in input order, whatever the chunks; errors name the stream
// and the line.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "rosetta/core/random.h"
#include "rosetta/core/tensor.h"
#include "rosetta/data/line_stream.h"
#include "rosetta/nn/nn.h"
#include "rosetta/translator/translator.h"
#include "copy_translator.h"

using namespace rosetta;
namespace fs = std::filesystem;

namespace {
struct ThreadsScope {
  int saved = get_num_threads();
  ~ThreadsScope() { set_num_threads(saved); }
};

// A file removed when the test ends.
struct TempFile {
  fs::path path = fs::temp_directory_path() / ("rosetta_stream_" + std::to_string(std::random_device{}()));
  explicit TempFile(const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

const int64_t kSymbols = 10;

// The model every test here translates with (its sources up to 64 symbols are not cut).
translator::Translator small_model() { return test::copy_translator(21, 2, 64); }

// 40 lines of 1-12 symbols and, at line 6, an empty one.
std::vector<std::string> some_lines() {
  std::vector<std::string> lines;
  Generator pick(3);
  for (int i = 0; i < 40; ++i) {
    std::string line;
    for (int64_t k = 0, n = 1 + (i * 7) % 12; k < n; ++k)
      line.append(k ? " " : "").append(std::to_string(int64_t(pick.uniform({1}, 0.0, double(kSymbols) - 1e-9).item())));
    lines.push_back(line);
  }
  lines.insert(lines.begin() + 5, "");
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}
}  // namespace

TEST_CASE("translate_stream gives translate_lines' hypotheses in input order, chunk by chunk", "[translate]") {
  const ThreadsScope threads;
  set_num_threads(2);
  const translator::Translator t = small_model();
  const translator::Codec& codec = t.codec;
  const nn::Transformer& model = *t.model;
  const std::vector<std::string> lines = some_lines();
  const auto options = nn::SearchOptions().beam(3).n_best(2);
  const auto whole = translator::translate_lines(model, codec, lines, options, 16);
  const TempFile file(joined(lines));
  for (const int64_t chunk : {int64_t(1), int64_t(7), int64_t(4096)}) {
    for (const bool interactive : {false, true}) {
      INFO("chunk_lines " << chunk << (interactive ? ", interactive" : ""));
      data::LineStream in(file.path);
      std::vector<int64_t> indices;
      int64_t done = 0;
      translator::StreamCallbacks callbacks;
      callbacks.emit = [&](int64_t index, const std::string& source, const std::vector<nn::Hypothesis>& hyps) {
        REQUIRE(size_t(index) < lines.size());
        CHECK(source == lines[size_t(index)]);
        REQUIRE(hyps.size() == whole[size_t(index)].size());
        // The same hypotheses; their scores equal to fp32 rounding. Not bit for bit: a chunk
        // changes the batches a sentence shares and so the padded length of the products that
        // run on OpenBLAS, and some of its kernel sets (Prescott, Haswell: seen on a Xeon whose
        // model OpenBLAS does not know) sum an element in an order that depends on the
        // product's size (1 ulp apart there); its AVX-512 ones, and rosetta's own, do not.
        for (size_t h = 0; h < hyps.size(); ++h) {
          CHECK(hyps[h].tokens == whole[size_t(index)][h].tokens);
          CHECK_THAT(hyps[h].score, Catch::Matchers::WithinRel(whole[size_t(index)][h].score, 1e-6));
        }
        CHECK(done >= index + 1);  // every line is counted done before it is emitted
        indices.push_back(index);
      };
      callbacks.batch_done = [&](int64_t n) { done += n; };
      const auto counts = translator::translate_stream(
          model, codec, in, options, 16, translator::StreamOptions().chunk_lines(chunk).interactive(interactive),
          callbacks);
      CHECK(counts.lines == int64_t(lines.size()));
      CHECK(counts.truncated == 0);
      CHECK(done == int64_t(lines.size()));
      REQUIRE(indices.size() == lines.size());
      for (size_t i = 0; i < indices.size(); ++i) CHECK(indices[i] == int64_t(i));
    }
  }
}

TEST_CASE("translate_stream names the line a codec rejects and counts truncated sources", "[translate]") {
  const translator::Translator t = small_model();
  const translator::Codec& codec = t.codec;
  const nn::Transformer& model = *t.model;
  std::string longer;
  for (int i = 0; i < 70; ++i) longer += "1 ";
  const TempFile good("1 2\n" + longer + "\n");
  data::LineStream in(good.path);
  translator::StreamCallbacks callbacks;
  callbacks.emit = [](int64_t, const std::string&, const std::vector<nn::Hypothesis>&) {};
  const auto counts = translator::translate_stream(model, codec, in, nn::SearchOptions(), 64,
                                                   translator::StreamOptions(), callbacks);
  CHECK(counts.lines == 2);
  CHECK(counts.truncated == 1);  // 70 symbols, the model takes 64
  // Line 5, the second of the second chunk, names its number in the whole input.
  const TempFile bad("1\n2\n3\n4\n1 x\n");
  data::LineStream bad_in(bad.path);
  int64_t emitted = 0;
  callbacks.emit = [&](int64_t, const std::string&, const std::vector<nn::Hypothesis>&) { ++emitted; };
  CHECK_THROWS_WITH(translator::translate_stream(model, codec, bad_in, nn::SearchOptions(), 64,
                                                 translator::StreamOptions().chunk_lines(3), callbacks),
                    Catch::Contains(bad.path.string() + ": line 5: copy task: 'x'"));
  CHECK(emitted == 3);  // the first chunk was out before the second was read
}

TEST_CASE("hypothesis_lines writes the best translation, or the n best with their index and score", "[translate]") {
  const translator::Codec codec = translator::Codec::symbols(10);
  // Ids 4.. are the symbols 0..; the ids below (pad, unk, bos, eos) are not written.
  const std::vector<nn::Hypothesis> hyps{{{5, 6, 3}, -0.25, -0.75}, {{7}, -1.5, -1.5}};
  CHECK(translator::hypothesis_lines(codec, 0, 3, hyps) == "1 2\n");
  CHECK(translator::hypothesis_lines(codec, 0, 3, {}) == "\n");
  CHECK(translator::hypothesis_lines(codec, 2, 3, hyps) == "3 ||| 1 2 ||| -0.25\n3 ||| 3 ||| -1.5\n");
}
