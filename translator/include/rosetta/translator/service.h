// A translator as a service: sentences submitted by many callers at once are decoded together,
// in batches formed across callers by length, and each caller gets its translations as soon as
// its last sentence is done. No HTTP here: `rosetta serve` (apps/) puts LibreTranslate's API in
// front of it, and a C++ program can use it as it is.
//
//   TranslationService service(translator, ServiceOptions().beam(4));
//   std::future<std::vector<std::string>> f = service.submit({"Das Wetter ist schön."});
//   std::string en = f.get()[0];
//
// Mechanism: one queue of pending sentences, ordered by arrival. Decoders (`threads` of them,
// each a thread of its own that decodes one batch at a time on its own and keeps its packed
// weights for its life) take the next batch when free: the pending sentences sorted by length,
// longest first, as many as `batch_tokens` source tokens and kMaxBatchRows rows allow. A decoder
// takes a batch that is not full only once its oldest sentence has waited `max_wait_ms` (or the
// service is closing), so that a burst of small requests fills batches. The translations equal
// translate_lines' for the same sentences and search options up to the batch they share (fp32
// rounding in the scores; the same hypotheses in practice: tests/translator/test_service.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rosetta/core/cpu.h"
#include "rosetta/nn/module.h"  // ROSETTA_ARG
#include "rosetta/translator/translator.h"

namespace rosetta::translator {

struct ServiceOptions {
  // The search, as translate's flags set it.
  ROSETTA_ARG(int, beam) = kDefaultBeam;
  ROSETTA_ARG(double, length_penalty) = 1.0;
  ROSETTA_ARG(double, max_len_a) = 1.5;
  ROSETTA_ARG(int64_t, max_len_b) = 10;
  ROSETTA_ARG(int, no_repeat_ngram) = 0;
  // Source tokens per decoding batch (translate's --batch-tokens).
  ROSETTA_ARG(int64_t, batch_tokens) = 2048;
  // Decoders: threads that each decode one batch at a time (0: get_num_threads()).
  ROSETTA_ARG(int, threads) = 0;
  // How long a sentence may wait for a batch to fill before a decoder takes a batch that is not full.
  ROSETTA_ARG(int, max_wait_ms) = 5;
  // Sentences pending at most (not yet taken by a decoder); a submit beyond it throws ServiceBusy.
  ROSETTA_ARG(int64_t, max_pending) = 8192;
  // false: batches never mix two submissions (each submit is decoded on its own, as a server
  // without batching across requests would): for comparisons.
  ROSETTA_ARG(bool, across_requests) = true;
  // The precision of the matrix products (fp32, bf16, int8), set by the caller beforehand with
  // set_matmul_precision: the decoders use whatever is set when they start.
};

// submit() refused: the queue is full (ServiceBusy) or the service closes (ServiceClosed).
struct ServiceBusy : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ServiceClosed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a service has done so far: for /metrics and logs. Counters only grow.
struct ServiceStats {
  int64_t submitted = 0;          // submissions accepted
  int64_t sentences = 0;          // sentences translated
  int64_t cancelled = 0;          // sentences dropped, their caller gone
  int64_t batches = 0;            // batches decoded
  int64_t pending = 0;            // sentences waiting now (not a counter)
  int64_t decoding = 0;           // sentences being decoded now (not a counter)
  std::vector<int64_t> batch_rows_buckets;  // batches of at most 1, 2, 4, ..., kMaxBatchRows rows (cumulative)
};

class TranslationService {
 public:
  // Starts the decoders on `translator`, which must outlive the service and not change.
  TranslationService(const Translator& translator, ServiceOptions options);
  // close(), then waits for the decoders.
  ~TranslationService();
  TranslationService(const TranslationService&) = delete;
  TranslationService& operator=(const TranslationService&) = delete;

  // Queues `sentences` (each one line, no '\n'; an empty one translates to "") and returns their
  // translations, in order, through the future; a sentence the codec rejects sets the future's
  // exception (rosetta::Error naming it) and nothing else of that submission is returned.
  // `cancelled`, when given and set to true later (the caller went away), drops the submission's
  // sentences not yet decoding; its future then holds ServiceClosed. Throws ServiceBusy where the
  // pending sentences would exceed max_pending, ServiceClosed after close().
  std::future<std::vector<std::string>> submit(std::vector<std::string> sentences,
                                              std::shared_ptr<std::atomic<bool>> cancelled = nullptr);
  // The same, with a callback instead of a future (for an event loop that must not block):
  // `done` is called once, on a decoder's thread (or on this one, for an empty submission), with
  // the translations, or with an exception_ptr and no translations. Throws as submit() does,
  // without calling `done`.
  using Done = std::function<void(std::vector<std::string> translations, std::exception_ptr error)>;
  void submit(std::vector<std::string> sentences, Done done, std::shared_ptr<std::atomic<bool>> cancelled = nullptr);

  // No new submissions (they throw ServiceClosed); returns once every sentence accepted before
  // is translated and its future set. Idempotent.
  void close();

  ServiceStats stats() const;
  const ServiceOptions& options() const { return options_; }

 private:
  struct Job;
  struct Item;
  void decoder_loop();
  bool take_batch(std::unique_lock<std::mutex>& lock, std::vector<Item>& batch);

  const Translator& translator_;
  ServiceOptions options_;
  nn::SearchOptions search_;
  Precision precision_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;     // decoders: work or closing
  std::condition_variable drained_;  // close(): nothing pending or decoding
  std::deque<Item> pending_;
  bool closing_ = false;
  ServiceStats stats_;
  std::vector<std::thread> decoders_;
};

// A text as sentences: split into lines at '\n', and each line into sentences after '.', '!',
// '?' or '…' (closing quotes and brackets included) followed by whitespace; `separators[i]` is
// the text between sentence i and i + 1 (the whitespace or line break), so that join_sentences
// gives the text back with each sentence replaced. Whitespace around a sentence is not part of
// it; a blank line is kept as a separator.
struct SplitText {
  std::vector<std::string> sentences;
  std::vector<std::string> separators;  // sentences.size() - 1 of them, or none for no sentence
  std::string leading, trailing;        // whitespace before the first sentence and after the last
};
SplitText split_sentences(const std::string& text);
// `split` with its sentences replaced by `translations` (as many).
std::string join_sentences(const SplitText& split, const std::vector<std::string>& translations);

}  // namespace rosetta::translator
