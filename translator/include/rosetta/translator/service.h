// A translator as a service: sentences submitted by many callers at once are decoded together,
// in batches formed across callers by length, and each caller gets its translations as soon as
// its last sentence is done. No HTTP here: `rosetta serve` (apps/) puts LibreTranslate's API in
// front of it, and a C++ program can use it as it is.
//
//   TranslationService service(translator, ServiceOptions().search(nn::SearchOptions().beam(4)));
//   std::future<std::vector<std::string>> f = service.submit({"Das Wetter ist schön."});
//   std::string en = f.get()[0];
//
// Mechanism: each sentence is encoded when submitted (cut to the model's max_len, as
// translate_lines cuts it) and joins one queue of pending sentences, ordered by arrival; an
// empty one (no source token) gives "" without being decoded. Decoders (`threads` of them, each
// a thread of its own that decodes one batch at a time and keeps its packed weights for its
// life) take the next batch when free: the pending sentences sorted by length, longest first, as
// many rows as translate_lines' rule gives for the longest (batch_tokens / its length, 1 to
// kMaxBatchRows); once the oldest pending sentence has waited `fair_after_ms`, it leads the
// batch instead, with the sentences closest to it in length. A decoder takes a batch that is not
// full only once the oldest pending sentence has waited `max_wait_ms` (or the service is
// closing), so that a burst of small requests fills batches. The translations equal
// translate_lines' for the same sentences and search options up to the batch they share (fp32
// rounding in the scores; the same hypotheses in practice: tests/translator/test_service.cpp).
//
// Threads: the decoders are the threads of one OpenMP team, started on a thread of the service's
// own, and run every operation inside a batch on their own thread (as translate_lines' decoders
// do: OpenMP loops and OpenBLAS see a parallel region and stay on one thread), so the service
// uses `threads` cores, no more. The precision of the matrix products is the process's
// (set_matmul_precision, not per thread): the service records it when constructed, and a batch
// that finds it changed fails its submissions with rosetta::Error (set it before, not while the
// service runs).
//
// Failures: a batch that throws (out of memory, say) fails its submissions, whose other
// sentences are then dropped, and its decoder goes on with the next batch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rosetta/core/cpu.h"
#include "rosetta/nn/module.h"  // ROSETTA_ARG
#include "rosetta/nn/search.h"
#include "rosetta/translator/translator.h"

namespace rosetta::translator {

struct ServiceOptions {
  // The search, as translate's flags set it (DecodeArgs::options() in apps/). n_best is not
  // used: a sentence gets its best hypothesis, as translate gives without --n-best.
  ROSETTA_ARG(nn::SearchOptions, search) = nn::SearchOptions().beam(kDefaultBeam);
  // Source tokens per decoding batch (translate's --batch-tokens).
  ROSETTA_ARG(int64_t, batch_tokens) = 2048;
  // Decoders: threads that each decode one batch at a time (0: get_num_threads() of the thread
  // that constructs the service).
  ROSETTA_ARG(int, threads) = 0;
  // How long a sentence may wait for a batch to fill before a decoder takes a batch that is not
  // full (across_requests only: a submission's own batches cannot fill more, so they are taken at once).
  ROSETTA_ARG(int, max_wait_ms) = 5;
  // Fairness: a pending sentence that has waited this long leads the next batch, with the
  // pending sentences closest to it in length, instead of the longest ones; so that a stream of
  // longer sentences cannot keep a short one waiting behind it without end. (Below that age,
  // batches take the longest first, as translate_lines sorts them: the least padding.)
  ROSETTA_ARG(int, fair_after_ms) = 100;
  // Sentences pending at most (not yet taken by a decoder); a submit beyond it throws ServiceBusy.
  ROSETTA_ARG(int64_t, max_pending) = 8192;
  // false: batches never mix two submissions (each submit is decoded on its own, as a server
  // without batching across requests would): for comparisons.
  ROSETTA_ARG(bool, across_requests) = true;
  // The precision of the matrix products (fp32, bf16, int8) is set by the caller beforehand with
  // set_matmul_precision: the decoders use what is set when the service is constructed (a batch
  // that finds another fails: the setting is the process's, and must not change meanwhile).
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
  int64_t submitted = 0;          // submissions accepted (not those submit() threw for or the codec rejected)
  int64_t sentences = 0;          // sentences translated (empty ones included, failed batches not)
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
  // translations, in order, through the future. A sentence the codec rejects, or one holding a
  // '\n', sets the future's exception at once (rosetta::Error "sentence N: ...", N from 1, as
  // translate's "line N") and nothing of that submission is queued or returned.
  // `cancelled`, when given and set to true later (the caller went away), drops the submission's
  // sentences not yet decoding when a decoder next looks at the queue (within max_wait_ms where
  // one is free, else when one is done with its batch): they count in stats().cancelled, and the
  // future then holds ServiceClosed. A submission whose flag is set when its last sentence is done
  // gets ServiceClosed too, even where nothing was left to drop. Throws ServiceBusy where the
  // pending sentences (empty ones not counted) would exceed max_pending, ServiceClosed after
  // close().
  std::future<std::vector<std::string>> submit(std::vector<std::string> sentences,
                                              std::shared_ptr<std::atomic<bool>> cancelled = nullptr);
  // The same, with a callback instead of a future (for an event loop that must not block):
  // `done` is called exactly once for every submission accepted, cancelled or failed ones
  // included, on a decoder's thread (or on this one, for a submission with nothing to decode or
  // one the codec rejects), with the translations, or with an exception_ptr and no translations.
  // Throws as submit() does, without calling `done`. `done` must not throw (what it throws is
  // dropped), and must not call close() or destroy the service (that would wait for itself).
  using Done = std::function<void(std::vector<std::string> translations, std::exception_ptr error)>;
  void submit(std::vector<std::string> sentences, Done done, std::shared_ptr<std::atomic<bool>> cancelled = nullptr);

  // No new submissions (they throw ServiceClosed); returns once every submission accepted before
  // is done: translated (pending sentences are decoded at once, without waiting for batches to
  // fill) or dropped, and its future set or its callback returned. Idempotent.
  void close();

  ServiceStats stats() const;
  const ServiceOptions& options() const { return options_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Job;   // a submission: its translations, how many sentences are left, its callback
  struct Item;  // a pending sentence: its job, index and source ids
  using Jobs = std::vector<std::shared_ptr<Job>>;

  // The decoders: an OpenMP team of `threads`, each running decoder_loop().
  void run_decoders(int threads);
  void decoder_loop();
  // Under mutex_: drops the pending sentences of cancelled or failed submissions, then moves
  // the next batch to `batch` (longest first, or led by the oldest: fair_after_ms) and returns
  // true, or returns false with `wake_at` set where a partial batch becomes due, or unset
  // where nothing is pending. Submissions left with nothing to wait for join `finished`.
  bool take_batch(std::vector<Item>& batch, Jobs& finished, std::optional<Clock::time_point>& wake_at);
  // The translations of `batch` (decoded outside mutex_; throws what decoding throws).
  std::vector<std::string> decode(const std::vector<Item>& batch) const;
  // Calls the callbacks of `finished` outside mutex_ (unlocks, then locks again) and empties it.
  void deliver(std::unique_lock<std::mutex>& lock, Jobs& finished);

  const Translator& translator_;
  ServiceOptions options_;
  nn::SearchOptions search_;
  Precision precision_;               // matmul_precision() at construction
  mutable std::mutex mutex_;          // guards everything below
  std::condition_variable wake_;      // decoders: work, or closing
  std::condition_variable drained_;   // close(): every accepted submission done
  std::vector<Item> pending_;         // by arrival; a submission's sentences next to each other, in order
  int64_t unfinished_ = 0;            // submissions accepted whose callback has not returned
  bool closing_ = false;
  ServiceStats stats_;                // pending is pending_.size(), filled in by stats()
  std::thread decoders_;              // the thread that starts the team and is its first decoder
};

// A text as sentences: split into lines at '\n', and each line into sentences after '.', '!',
// '?' or '…' (closing quotes and brackets after it included, e.g. `."` or `!)` or `.“`) followed
// by whitespace (ASCII: space, \t, \r, \n, \v, \f). Only whitespace splits, so "3.5" or
// "example.com" stay whole; abbreviations and ordinals do split ("z. B. das" gives "z.", "B." and
// "das"; "am 3. Mai" gives "am 3." and "Mai"): a known limit, no list of abbreviations is kept.
// `separators[i]` is the text between sentence i and i + 1 (whitespace, line breaks and blank
// lines), so that join_sentences gives the text back with each sentence replaced:
// join_sentences(s, s.sentences) == text for any text. A sentence is never empty, holds no '\n'
// and neither begins nor ends with whitespace.
struct SplitText {
  std::vector<std::string> sentences;
  std::vector<std::string> separators;  // sentences.size() - 1 of them, or none for no sentence
  // Whitespace before the first sentence and after the last; a text without a sentence (empty,
  // or whitespace only) is all `leading`.
  std::string leading, trailing;
};
SplitText split_sentences(const std::string& text);
// `split` with its sentences replaced by `translations` (as many; throws otherwise).
std::string join_sentences(const SplitText& split, const std::vector<std::string>& translations);

}  // namespace rosetta::translator
