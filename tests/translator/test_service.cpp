// TranslationService: submissions from many threads get translate_lines' translations, each its
// own and in order; batches mix submissions (or not, across_requests false); the queue's limits,
// close(), cancellation and failures; split_sentences / join_sentences.
#include <catch2/catch.hpp>

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rosetta/core/cpu.h"
#include "rosetta/core/random.h"
#include "rosetta/core/tensor.h"
#include "rosetta/nn/nn.h"
#include "rosetta/translator/service.h"
#include "copy_translator.h"

using namespace rosetta;
using translator::ServiceOptions;
using translator::TranslationService;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

namespace {

// An untrained copy-task model whose max_len 16 cuts the longest test sentences (20 symbols).
translator::Translator copy_model() { return test::copy_translator(21, 2, 16); }

// `count` sentences of 1-12 symbols, every 9th empty, every 10th of 20 symbols (cut to 16).
Strings some_sentences(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  Strings out;
  for (size_t i = 0; i < count; ++i) {
    const size_t n = i % 9 == 4 ? 0 : i % 10 == 7 ? 20 : 1 + rng() % 12;
    std::string s;
    for (size_t k = 0; k < n; ++k) s.append(k ? " " : "").append(std::to_string(rng() % 10));
    out.push_back(s);
  }
  return out;
}

// What `rosetta translate` writes for each sentence (translate_lines, hypothesis_lines), without the '\n'.
Strings reference(const translator::Translator& t, const Strings& lines, int beam, int64_t batch_tokens) {
  const auto hyps = t.translate(lines, nn::SearchOptions().beam(beam), batch_tokens);
  Strings out;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const std::string line = translator::hypothesis_lines(t.codec, 0, int64_t(i), hyps[i]);
    out.push_back(line.substr(0, line.size() - 1));
  }
  return out;
}

// The service's options with a search of `beam`.
ServiceOptions with_beam(int beam) { return ServiceOptions().search(nn::SearchOptions().beam(beam)); }

// True when the future holds an exception of type E.
template <class E>
bool throws(std::future<Strings>& f) {
  try {
    f.get();
  } catch (const E&) {
    return true;
  }
  return false;
}

int64_t threads_of_this_process() {
  int64_t n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("submissions from 16 threads get translate_lines' translations, each its own, in order", "[service]") {
  const auto t = copy_model();
  const Strings lines = some_sentences(160, 7);
  const Strings expected = reference(t, lines, 3, 64);
  TranslationService service(t, with_beam(3).batch_tokens(64).threads(2).max_wait_ms(2));
  // Thread c sends 4 submissions of 1-9 sentences (every 5th an empty submission), half of them
  // through the callback; the answers are checked here afterwards (Catch2 asserts on this thread only).
  const int callers = 16, each = 4;
  std::vector<std::vector<size_t>> asked(callers * each);
  std::vector<Strings> answered(callers * each);
  std::vector<int> calls(callers * each, 0);
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      for (int k = 0; k < each; ++k) {
        const size_t s = size_t(c * each + k);
        const size_t n = s % 5 == 3 ? 0 : 1 + (s * 7) % 9;
        Strings question;
        for (size_t j = 0; j < n; ++j) {
          asked[s].push_back((s * 13 + j * 5) % lines.size());
          question.push_back(lines[asked[s].back()]);
        }
        if (c % 2) {
          std::promise<void> returned;
          service.submit(question, [&, s](Strings answer, std::exception_ptr error) {
            ++calls[s];
            if (!error) answered[s] = std::move(answer);
            returned.set_value();
          });
          returned.get_future().wait();
        } else {
          answered[s] = service.submit(question).get();
          calls[s] = 1;
        }
      }
    });
  for (auto& th : threads) th.join();
  int64_t total = 0;
  for (size_t s = 0; s < asked.size(); ++s) {
    INFO("submission " << s);
    CHECK(calls[s] == 1);
    REQUIRE(answered[s].size() == asked[s].size());
    for (size_t j = 0; j < asked[s].size(); ++j) CHECK(answered[s][j] == expected[asked[s][j]]);
    total += int64_t(asked[s].size());
  }
  const auto stats = service.stats();
  CHECK(stats.submitted == callers * each);
  CHECK(stats.sentences == total);
  CHECK(stats.cancelled == 0);
  CHECK(stats.pending == 0);
  CHECK(stats.decoding == 0);
  REQUIRE(stats.batch_rows_buckets.size() == 9);  // 1, 2, 4, ..., 256 rows
  CHECK(stats.batch_rows_buckets.back() == stats.batches);
  for (size_t b = 1; b < stats.batch_rows_buckets.size(); ++b)
    CHECK(stats.batch_rows_buckets[b - 1] <= stats.batch_rows_buckets[b]);
}

TEST_CASE("batches mix submissions, unless across_requests is false", "[service]") {
  const auto t = copy_model();
  // 32 sentences of 4 symbols: batch_tokens 32 makes batches of 8 rows.
  Strings lines;
  for (int i = 0; i < 32; ++i)
    lines.push_back(std::to_string(i % 10) + " " + std::to_string(i / 10) + " " + std::to_string((i * 3) % 10) + " 7");
  const Strings expected = reference(t, lines, 2, 32);
  auto send_32 = [&](TranslationService& service) {
    std::vector<std::future<Strings>> futures(32);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < 32; ++i) threads.emplace_back([&, i] { futures[i] = service.submit({lines[i]}); });
    for (auto& th : threads) th.join();
    Strings got;
    for (auto& f : futures) got.push_back(f.get().at(0));
    return got;
  };
  SECTION("across requests: a partial batch waits (10 s here), so the 32 fill 4 batches of 8") {
    TranslationService service(t, with_beam(2).batch_tokens(32).threads(2).max_wait_ms(10000));
    const auto start = std::chrono::steady_clock::now();
    CHECK(send_32(service) == expected);
    CHECK(std::chrono::steady_clock::now() - start < 5s);  // no batch waited for max_wait
    const auto stats = service.stats();
    CHECK(stats.batches == 4);
    CHECK(stats.batch_rows_buckets[2] == 0);  // none of 4 rows or fewer
    CHECK(stats.batch_rows_buckets[3] == 4);  // all of 8
  }
  SECTION("one submission per batch: the 32 make 32 batches, taken without waiting") {
    TranslationService service(
        t, with_beam(2).batch_tokens(32).threads(2).max_wait_ms(10000).across_requests(false));
    const auto start = std::chrono::steady_clock::now();
    CHECK(send_32(service) == expected);
    CHECK(service.stats().batches == 32);
    CHECK(service.stats().batch_rows_buckets[0] == 32);
    // A submission of 10 is cut by the batch rule alone: 8 rows, then 2.
    const Strings ten(lines.begin(), lines.begin() + 10);
    CHECK(service.submit(ten).get() == Strings(expected.begin(), expected.begin() + 10));
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    const auto stats = service.stats();
    CHECK(stats.batches == 34);
    CHECK(stats.batch_rows_buckets[1] == 33);
    CHECK(stats.batch_rows_buckets[3] == 34);
  }
}

TEST_CASE("the service refuses past max_pending and after close, and close waits for what it accepted",
          "[service]") {
  const auto t = copy_model();
  const Strings lines = {"1 2 3", "4 5", "6", "7 8 9 0", "1 1"};
  const Strings expected = reference(t, lines, 1, 2048);
  // One decoder; a partial batch would wait a minute: nothing is decoded before close().
  TranslationService service(t, with_beam(1).threads(1).max_wait_ms(60000).max_pending(4));
  auto first = service.submit({lines[0], lines[1], lines[2]});
  CHECK(service.stats().pending == 3);
  CHECK_THROWS_AS(service.submit({lines[3], lines[4]}), translator::ServiceBusy);
  bool called = false;
  CHECK_THROWS_AS(service.submit({lines[3], lines[4]}, [&](Strings, std::exception_ptr) { called = true; }),
                  translator::ServiceBusy);
  CHECK_FALSE(called);
  // Empty sentences are not queued: answered at once, whatever the queue holds.
  auto empty = service.submit({"", ""});
  REQUIRE(empty.wait_for(0s) == std::future_status::ready);
  CHECK(empty.get() == Strings{"", ""});
  auto second = service.submit({lines[3]});
  CHECK(service.stats().pending == 4);
  CHECK(first.wait_for(50ms) == std::future_status::timeout);
  const auto start = std::chrono::steady_clock::now();
  service.close();
  CHECK(std::chrono::steady_clock::now() - start < 30s);
  REQUIRE(first.wait_for(0s) == std::future_status::ready);
  REQUIRE(second.wait_for(0s) == std::future_status::ready);
  CHECK(first.get() == Strings{expected[0], expected[1], expected[2]});
  CHECK(second.get() == Strings{expected[3]});
  CHECK(service.stats().batches == 1);
  CHECK(service.stats().submitted == 3);
  CHECK_THROWS_AS(service.submit({lines[4]}), translator::ServiceClosed);
  CHECK_THROWS_AS(service.submit({lines[4]}, [&](Strings, std::exception_ptr) { called = true; }),
                  translator::ServiceClosed);
  CHECK_FALSE(called);
  service.close();  // idempotent
}

TEST_CASE("a cancelled submission's pending sentences are dropped, and its callback is called once", "[service]") {
  const auto t = copy_model();
  const Strings expected = reference(t, {"1 2", "3 4 5"}, 1, 2048);
  TranslationService service(t, with_beam(1).threads(1).max_wait_ms(60000));
  auto flag_a = std::make_shared<std::atomic<bool>>(false), flag_b = std::make_shared<std::atomic<bool>>(false);
  std::atomic<int> a_calls{0};
  std::exception_ptr a_error;
  Strings a_answer{"unset"};
  service.submit({"1", "2 3", "4"},
                 [&](Strings answer, std::exception_ptr error) {
                   a_answer = std::move(answer);
                   a_error = error;
                   ++a_calls;
                 },
                 flag_a);
  auto b = service.submit({"5 6", "7"}, flag_b);
  auto c = service.submit({"1 2", "3 4 5"});
  // Cancelled before it is queued: the decoder, woken by the submission, drops it at once.
  auto d = service.submit({"8", "9"}, std::make_shared<std::atomic<bool>>(true));
  REQUIRE(d.wait_for(10s) == std::future_status::ready);
  CHECK(throws<translator::ServiceClosed>(d));
  CHECK(service.stats().cancelled == 2);
  CHECK(a_calls == 0);
  CHECK(c.wait_for(0s) == std::future_status::timeout);
  // Cancelled while pending: dropped when the decoder next looks (here, at close).
  *flag_a = true;
  *flag_b = true;
  service.close();
  CHECK(a_calls == 1);
  CHECK(a_answer.empty());
  REQUIRE(a_error);
  CHECK_THROWS_AS(std::rethrow_exception(a_error), translator::ServiceClosed);
  CHECK(throws<translator::ServiceClosed>(b));
  CHECK(c.get() == expected);
  const auto stats = service.stats();
  CHECK(stats.cancelled == 2 + 3 + 2);
  CHECK(stats.sentences == 2);
  CHECK(stats.batches == 1);
}

TEST_CASE("a sentence that has waited fair_after_ms leads the next batch, before that the longest go first",
          "[service]") {
  const auto t = copy_model();
  const std::string short_one = "1", long_one = "1 2 3 4 5 6 7 8 9 0";
  for (const bool aged : {false, true}) {
    CAPTURE(aged);
    // One decoder, held in the first submission's callback while the rest queue up: one short
    // sentence, then ten long ones. Batches of 10 source tokens hold one long sentence each.
    TranslationService service(t, with_beam(1)
                                      .batch_tokens(10)
                                      .threads(1)
                                      .max_wait_ms(0)
                                      .fair_after_ms(aged ? 20 : 60000));
    std::promise<void> entered, release;
    auto in_callback = entered.get_future();
    std::shared_future<void> released = release.get_future().share();
    service.submit({"5"}, [&](Strings, std::exception_ptr) {
      entered.set_value();
      released.wait();
    });
    REQUIRE(in_callback.wait_for(30s) == std::future_status::ready);
    std::mutex order_lock;
    Strings order;
    auto note = [&](const std::string& name) {
      return [&, name](Strings, std::exception_ptr) {
        const std::lock_guard<std::mutex> hold(order_lock);
        order.push_back(name);
      };
    };
    service.submit({short_one}, note("short"));
    for (int i = 0; i < 10; ++i) service.submit({long_one}, note("long"));
    if (aged) std::this_thread::sleep_for(60ms);
    release.set_value();
    service.close();
    REQUIRE(order.size() == 11);
    CHECK((aged ? order.front() : order.back()) == "short");
  }
}

TEST_CASE("a sentence the codec rejects fails its submission only, and a failed batch its own", "[service]") {
  const auto t = copy_model();
  const Strings expected = reference(t, {"1 2", "3"}, 1, 2048);
  TranslationService service(t, with_beam(1).threads(1).max_wait_ms(1));
  auto bad = service.submit({"1 2", "x", "3"});
  auto good = service.submit({"1 2", "3"});
  REQUIRE(bad.wait_for(0s) == std::future_status::ready);  // set by submit itself
  CHECK_THROWS_WITH(bad.get(), Catch::Contains("sentence 2: copy task: 'x'"));
  auto broken = service.submit({"1", "2\n3"});
  CHECK_THROWS_WITH(broken.get(), Catch::Contains("sentence 2: holds a line break"));
  std::thread::id called_on;
  int calls = 0;
  service.submit({"y"}, [&](Strings, std::exception_ptr error) {
    called_on = std::this_thread::get_id();
    calls += error ? 1 : 100;
  });
  CHECK(calls == 1);
  CHECK(called_on == std::this_thread::get_id());
  CHECK(good.get() == expected);
  CHECK(service.stats().submitted == 1);
  // A batch that throws (here: the process's precision changed under the service) fails its
  // submission, and its decoder goes on with the next.
  if (int8_supported()) {
    std::future<Strings> failed;
    {
      const MatmulPrecisionScope other(Precision::int8);
      failed = service.submit({"1 2", "3"});
      REQUIRE(failed.wait_for(10s) == std::future_status::ready);
    }
    CHECK_THROWS_WITH(failed.get(), Catch::Contains(std::string("precision changed from ") +
                                                    precision_name(matmul_precision()) + " to int8"));
    CHECK(service.submit({"1 2", "3"}).get() == expected);
    CHECK(service.stats().batches == 2);
  }
}

TEST_CASE("the decoders run on threads of their own, one each: the operations inside a batch do not fan out",
          "[service]") {
  // A feed-forward layer wide enough that, in a batch of 256 sentences, the activations pass
  // the size at which the library's OpenMP loops split work over threads.
  translator::Translator t;
  t.codec = translator::Codec::symbols(10);
  Generator g(4);
  t.model = std::make_unique<nn::Transformer>(
      nn::TransformerOptions().src_vocab(14).tgt_vocab(14).d_model(32).heads(2).ff(1024).encoder_layers(1)
          .decoder_layers(1).dropout(0.0).max_len(16),
      g);
  t.model->eval();
  Strings lines;
  for (int i = 0; i < 256; ++i) {
    std::string s;
    for (int k = 0; k < 16; ++k) s.append(k ? " " : "").append(std::to_string((i + k * k) % 10));
    lines.push_back(s);
  }
  const Strings expected = reference(t, lines, 1, 4096);  // this thread's OpenMP threads exist from here
  const int64_t before = threads_of_this_process();
  int64_t during = 0;
  {
    TranslationService service(t, with_beam(1).batch_tokens(4096).threads(3).max_wait_ms(1));
    CHECK(service.submit(lines).get() == expected);
    CHECK(service.stats().batches == 1);
    during = threads_of_this_process();
  }
  // The service's own thread (the team's first decoder) and the two others of its team; decoders
  // whose loops started OpenMP threads of their own would add more.
  CHECK(during == before + 3);
}

TEST_CASE("split_sentences splits after sentence ends followed by whitespace, and at line breaks", "[service]") {
  using translator::split_sentences;
  auto s = split_sentences("Hallo Welt. Wie geht's?");
  CHECK(s.sentences == Strings{"Hallo Welt.", "Wie geht's?"});
  CHECK(s.separators == Strings{" "});
  CHECK(s.leading.empty());
  CHECK(s.trailing.empty());
  CHECK(split_sentences("Es kostet 3.5 Euro auf example.com. Gut!").sentences ==
        Strings{"Es kostet 3.5 Euro auf example.com.", "Gut!"});
  CHECK(split_sentences("Er sagte: „Ja.“ Dann (wirklich?) ging er… weg").sentences ==
        Strings{"Er sagte: „Ja.“", "Dann (wirklich?)", "ging er…", "weg"});
  CHECK(split_sentences("z. B. das").sentences == Strings{"z.", "B.", "das"});  // the known limit
  s = split_sentences("  Eins.\n\nZwei ohne Punkt\r\nDrei  \n");
  CHECK(s.leading == "  ");
  CHECK(s.sentences == Strings{"Eins.", "Zwei ohne Punkt", "Drei"});
  CHECK(s.separators == Strings{"\n\n", "\r\n"});
  CHECK(s.trailing == "  \n");
  s = split_sentences(" \n\t ");
  CHECK(s.sentences.empty());
  CHECK(s.separators.empty());
  CHECK(s.leading == " \n\t ");
  CHECK(join_sentences(split_sentences(" Eins. Zwei!\n"), {"One.", "Two!"}) == " One. Two!\n");
  CHECK_THROWS_WITH(join_sentences(split_sentences("Eins. Zwei."), {"One."}), Catch::Contains("1 translations for 2"));
}

TEST_CASE("join_sentences(split_sentences(text)) gives the text back, whatever the text", "[service]") {
  Strings texts = {"", " ", "\n", "\n\n\n", "a", "a.", "a. ", " a.b. c ", "Ende.\n", "\r\n", "x\r\n\r\ny\r\n",
                   "\n\n  Absatz eins.  Noch einer!\n\n\nAbsatz zwei?\n", "…", "„Was?“ „Nichts.“", "3.5. 4",
                   "Grüße, Jürgen. Schön… ", "\t\tTab.\tTab.", ". . .", "\"Quote.\" (Paren.) [x.]"};
  // And random texts from pieces chosen to meet at every kind of boundary.
  const Strings pieces = {"a", "Wort", ".", "!", "?", "…", "“", "»", ")", "\"", " ", "  ", "\n", "\r\n", "\t",
                          "3.5", "ä", "ß"};
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (size_t n = rng() % 12; n > 0; --n) text += pieces[rng() % pieces.size()];
    texts.push_back(text);
  }
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; };
  auto all_space = [&](const std::string& s) { return std::all_of(s.begin(), s.end(), space); };
  for (const std::string& text : texts) {
    INFO("text \"" << text << "\"");
    const auto s = translator::split_sentences(text);
    REQUIRE(join_sentences(s, s.sentences) == text);
    CHECK(s.separators.size() == (s.sentences.empty() ? 0 : s.sentences.size() - 1));
    CHECK(all_space(s.leading));
    CHECK(all_space(s.trailing));
    for (const auto& sep : s.separators) CHECK((!sep.empty() && all_space(sep)));
    for (const auto& sentence : s.sentences) {
      REQUIRE_FALSE(sentence.empty());
      CHECK(sentence.find('\n') == std::string::npos);
      CHECK_FALSE(space(sentence.front()));
      CHECK_FALSE(space(sentence.back()));
    }
  }
}
