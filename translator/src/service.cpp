// The batching translation service (service.h): one queue of pending sentences, decoders that
// each take the next batch when free, and each submission answered once its last sentence is done.
//
// The state, all under mutex_: pending_ (sentences not yet taken, by arrival), the Jobs they
// point to (a submission: translations by index, `left` = sentences neither translated nor
// dropped), unfinished_ (submissions whose callback has not returned: what close() waits for).
// A job's callback is called outside the lock, once `left` reaches 0, by whoever brought it there.
#include "rosetta/translator/service.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "rosetta/core/check.h"
#include "rosetta/core/ops.h"

namespace rosetta::translator {

struct TranslationService::Job {
  std::vector<std::string> translations;  // by sentence index; "" for the empty ones
  int64_t left = 0;                       // sentences neither translated nor dropped
  bool dropped = false;                   // some sentence dropped: it was cancelled
  std::exception_ptr error;               // the first failure of one of its batches
  std::shared_ptr<std::atomic<bool>> cancelled;
  Done done;
  bool is_cancelled() const { return cancelled && cancelled->load(); }
};

struct TranslationService::Item {
  std::shared_ptr<Job> job;
  size_t index = 0;          // in its submission
  std::vector<int32_t> ids;  // source ids, cut to the model's max_len; never empty
  Clock::time_point arrived;
};

namespace {

// batch_rows_buckets: batches of at most 1, 2, 4, ..., kMaxBatchRows rows.
constexpr size_t row_buckets() {
  size_t n = 1;
  for (int64_t rows = 1; rows < kMaxBatchRows; rows *= 2) ++n;
  return n;
}

}  // namespace

TranslationService::TranslationService(const Translator& translator, ServiceOptions options)
    : translator_(translator), options_(std::move(options)), precision_(matmul_precision()) {
  ROSETTA_CHECK(translator_.model != nullptr, "TranslationService: the translator has no model");
  ROSETTA_CHECK(!translator_.model->is_training(), "TranslationService: the model must be in eval mode");
  ROSETTA_CHECK(options_.search().beam() >= 1, "TranslationService: beam must be at least 1, got ",
                options_.search().beam());
  ROSETTA_CHECK(options_.batch_tokens() > 0, "TranslationService: batch_tokens must be positive, got ",
                options_.batch_tokens());
  ROSETTA_CHECK(options_.threads() >= 0, "TranslationService: threads must be 0 or more, got ", options_.threads());
  ROSETTA_CHECK(options_.max_wait_ms() >= 0, "TranslationService: max_wait_ms must be 0 or more, got ",
                options_.max_wait_ms());
  ROSETTA_CHECK(options_.fair_after_ms() >= 0, "TranslationService: fair_after_ms must be 0 or more, got ",
                options_.fair_after_ms());
  ROSETTA_CHECK(options_.max_pending() > 0, "TranslationService: max_pending must be positive, got ",
                options_.max_pending());
  // n_best 1: the service returns the best hypothesis, as translate does without --n-best.
  search_ = options_.search();
  search_.n_best(1);
  stats_.batch_rows_buckets.assign(row_buckets(), 0);
  const int threads = options_.threads() > 0 ? options_.threads() : std::max(get_num_threads(), 1);
  decoders_ = std::thread([this, threads] { run_decoders(threads); });
}

TranslationService::~TranslationService() {
  close();
  if (decoders_.joinable()) decoders_.join();
}

// The decoders are one OpenMP team, as translate_lines' are: inside the team's parallel region,
// the library's OpenMP loops (which check omp_in_parallel()) and OpenBLAS (which goes
// single-threaded inside one, and otherwise writes its process-wide thread count) stay on their
// thread. omp_set_num_threads(1) keeps any nested region there too, where nested parallelism is
// enabled (OMP_MAX_ACTIVE_LEVELS in the environment), and is what holds a team of one (an
// inactive region, where omp_in_parallel() is false) to one thread; OpenBLAS then sets its
// process-wide count to 1 on the first product, as the library's small products do on any thread.
void TranslationService::run_decoders(int threads) {
#pragma omp parallel num_threads(threads)
  {
    omp_set_num_threads(1);
    try {
      const PackedWeightsScope packed_weights;  // per decoder, for its life: weights packed once
      for (bool stopped = false; !stopped;) {
        try {
          decoder_loop();
          stopped = true;
        } catch (...) {
          // A failure outside a batch (memory, while forming one): the batch's own failures are
          // its submissions'. The decoder looks at the queue again.
        }
      }
    } catch (...) {
      // No scope for packed weights (out of memory): this decoder does not start, the others decode.
    }
  }
}

void TranslationService::decoder_loop() {
  std::vector<Item> batch;
  Jobs finished;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    std::optional<Clock::time_point> wake_at;
    const bool took = take_batch(batch, finished, wake_at);
    if (!took) {
      if (!finished.empty()) {
        deliver(lock, finished);
        continue;  // the lock was released: look again before waiting
      }
      if (closing_ && pending_.empty()) return;
      if (wake_at) {
        wake_.wait_until(lock, *wake_at);
      } else {
        wake_.wait(lock);
      }
      continue;
    }
    if (!pending_.empty()) wake_.notify_one();  // another decoder may take the rest
    deliver(lock, finished);                     // submissions the sweep completed: not after this batch
    lock.unlock();
    std::vector<std::string> texts;
    std::exception_ptr error;
    try {
      texts = decode(batch);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    const int64_t rows = int64_t(batch.size());
    stats_.decoding -= rows;
    if (!error) {
      ++stats_.batches;
      stats_.sentences += rows;
      for (size_t b = 0; b < stats_.batch_rows_buckets.size(); ++b)
        if (rows <= (int64_t(1) << b)) ++stats_.batch_rows_buckets[b];
    }
    for (size_t r = 0; r < batch.size(); ++r) {
      Job& job = *batch[r].job;
      if (error) {
        if (!job.error) job.error = error;
      } else {
        job.translations[batch[r].index] = std::move(texts[r]);
      }
      if (--job.left == 0) finished.push_back(batch[r].job);
    }
    batch.clear();
    deliver(lock, finished);
  }
}

bool TranslationService::take_batch(std::vector<Item>& batch, Jobs& finished,
                                    std::optional<Clock::time_point>& wake_at) {
  // Drop the sentences of cancelled or failed submissions.
  size_t kept = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Job& job = *pending_[i].job;
    const bool cancelled = job.is_cancelled();
    if (cancelled || job.error) {
      if (cancelled) {
        job.dropped = true;
        ++stats_.cancelled;
      }
      if (--job.left == 0) finished.push_back(pending_[i].job);
      continue;
    }
    if (kept != i) pending_[kept] = std::move(pending_[i]);
    ++kept;
  }
  pending_.erase(pending_.begin() + std::ptrdiff_t(kept), pending_.end());
  if (pending_.empty()) return false;

  // The candidates: pending_[0, end), all of them or the oldest submission's.
  size_t end = pending_.size();
  if (!options_.across_requests()) {
    end = 1;
    while (end < pending_.size() && pending_[end].job == pending_[0].job) ++end;
  }
  auto length = [&](size_t i) { return int64_t(pending_[i].ids.size()); };
  int64_t longest = 1;
  for (size_t i = 0; i < end; ++i) longest = std::max(longest, length(i));
  // translate_lines' rule for a batch led by a sentence of `longest` tokens.
  const size_t rows = size_t(std::clamp<int64_t>(options_.batch_tokens() / longest, 1, kMaxBatchRows));
  if (end < rows && options_.across_requests() && !closing_) {
    const Clock::time_point due = pending_.front().arrived + std::chrono::milliseconds(options_.max_wait_ms());
    if (Clock::now() < due) {
      wake_at = due;
      return false;
    }
  }
  // Longest first, by arrival among equals; or, once the oldest has waited fair_after_ms, the
  // oldest and those closest to it in length, as many as the rule allows for the longest taken.
  std::vector<size_t> order(end);
  std::iota(order.begin(), order.end(), size_t(0));
  const bool fair = Clock::now() - pending_.front().arrived >= std::chrono::milliseconds(options_.fair_after_ms());
  if (fair) {
    const int64_t lead = length(0);
    auto distance = [&](size_t i) { return std::abs(length(i) - lead); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return distance(a) < distance(b); });
    size_t take = 0;
    for (int64_t taken_longest = 1; take < end; ++take) {
      const int64_t longer = std::max(taken_longest, length(order[take]));
      if (int64_t(take) + 1 > std::clamp<int64_t>(options_.batch_tokens() / longer, 1, kMaxBatchRows)) break;
      taken_longest = longer;
    }
    order.resize(take);
  } else {
    const size_t take = std::min(rows, end);
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(take), order.end(), [&](size_t a, size_t b) {
      return length(a) != length(b) ? length(a) > length(b) : a < b;
    });
    order.resize(take);
  }
  for (size_t i : order) batch.push_back(std::move(pending_[i]));
  std::sort(order.begin(), order.end());
  kept = 0;
  for (size_t i = 0, o = 0; i < pending_.size(); ++i) {
    if (o < order.size() && order[o] == i) {
      ++o;
      continue;
    }
    if (kept != i) pending_[kept] = std::move(pending_[i]);
    ++kept;
  }
  pending_.erase(pending_.begin() + std::ptrdiff_t(kept), pending_.end());
  stats_.decoding += int64_t(batch.size());
  return true;
}

std::vector<std::string> TranslationService::decode(const std::vector<Item>& batch) const {
  const Precision now = matmul_precision();
  ROSETTA_CHECK(now == precision_, "translation service: the matrix products' precision changed from ",
                precision_name(precision_), " to ", precision_name(now),
                " while it ran (set_matmul_precision is process-wide: set it before starting the service)");
  const nn::Transformer& model = *translator_.model;
  int64_t len = 1;
  for (const Item& item : batch) len = std::max(len, int64_t(item.ids.size()));
  const int64_t rows = int64_t(batch.size());
  std::vector<int32_t> flat(size_t(rows * len), model.options().pad_id());
  for (size_t r = 0; r < batch.size(); ++r)
    std::copy(batch[r].ids.begin(), batch[r].ids.end(), flat.begin() + std::ptrdiff_t(r * size_t(len)));
  const auto hyps = nn::search(model, Tensor::from_vector(flat, {rows, len}), search_);
  std::vector<std::string> texts(batch.size());
  for (size_t r = 0; r < batch.size(); ++r)
    texts[r] = hyps[r].empty() ? "" : translator_.codec.decode_target(hyps[r][0].tokens);
  return texts;
}

void TranslationService::deliver(std::unique_lock<std::mutex>& lock, Jobs& finished) {
  if (finished.empty()) return;
  lock.unlock();
  for (const auto& job : finished) {
    std::exception_ptr error = job->error;
    if (!error && (job->dropped || job->is_cancelled()))
      error = std::make_exception_ptr(ServiceClosed("translation service: the submission was cancelled"));
    try {
      if (error) {
        job->done({}, error);
      } else {
        job->done(std::move(job->translations), nullptr);
      }
    } catch (...) {
      // done must not throw (service.h); what it throws goes nowhere rather than ending the decoder.
    }
    job->done = nullptr;  // what it holds (a promise, a connection) goes now, not with the last Item
  }
  lock.lock();
  unfinished_ -= int64_t(finished.size());
  finished.clear();
  if (unfinished_ == 0) drained_.notify_all();
}

void TranslationService::submit(std::vector<std::string> sentences, Done done,
                                std::shared_ptr<std::atomic<bool>> cancelled) {
  ROSETTA_CHECK(bool(done), "TranslationService::submit: no callback");
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) throw ServiceClosed("translation service: closed");
  }
  // Encoded here, on the caller's thread, once: decoders only decode.
  auto job = std::make_shared<Job>();
  job->translations.resize(sentences.size());
  job->cancelled = std::move(cancelled);
  job->done = std::move(done);
  const int64_t limit = translator_.model->options().max_len();
  std::vector<Item> items;
  std::exception_ptr rejected;
  for (size_t i = 0; i < sentences.size() && !rejected; ++i) {
    Item item;
    try {
      ROSETTA_CHECK(sentences[i].find('\n') == std::string::npos,
                    "holds a line break (one sentence per entry: split_sentences)");
      item.ids = translator_.codec.encode_source(sentences[i]);
    } catch (const Error& e) {
      rejected = std::make_exception_ptr(Error(detail::concat("sentence ", i + 1, ": ", e.what())));
      break;
    }
    if (item.ids.empty()) continue;  // translates to ""
    if (int64_t(item.ids.size()) > limit) item.ids.resize(size_t(limit));
    item.job = job;
    item.index = i;
    items.push_back(std::move(item));
  }
  if (rejected) {
    job->done({}, rejected);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (closing_) throw ServiceClosed("translation service: closed");
  if (int64_t(pending_.size() + items.size()) > options_.max_pending())
    throw ServiceBusy(detail::concat("translation service: busy (", pending_.size(), " sentences pending, ",
                                     items.size(), " more would exceed max_pending ", options_.max_pending(), ")"));
  ++stats_.submitted;
  ++unfinished_;
  stats_.sentences += int64_t(sentences.size() - items.size());
  job->left = int64_t(items.size());
  if (items.empty()) {
    Jobs now{job};
    deliver(lock, now);
    return;
  }
  const Clock::time_point arrived = Clock::now();
  for (Item& item : items) {
    item.arrived = arrived;
    pending_.push_back(std::move(item));
  }
  wake_.notify_one();
}

std::future<std::vector<std::string>> TranslationService::submit(std::vector<std::string> sentences,
                                                                 std::shared_ptr<std::atomic<bool>> cancelled) {
  auto promise = std::make_shared<std::promise<std::vector<std::string>>>();
  auto future = promise->get_future();
  submit(
      std::move(sentences),
      [promise](std::vector<std::string> translations, std::exception_ptr error) {
        if (error) {
          promise->set_exception(error);
        } else {
          promise->set_value(std::move(translations));
        }
      },
      std::move(cancelled));
  return future;
}

void TranslationService::close() {
  std::unique_lock<std::mutex> lock(mutex_);
  closing_ = true;
  wake_.notify_all();
  drained_.wait(lock, [&] { return unfinished_ == 0; });
}

ServiceStats TranslationService::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  ServiceStats s = stats_;
  s.pending = int64_t(pending_.size());
  return s;
}

}  // namespace rosetta::translator
