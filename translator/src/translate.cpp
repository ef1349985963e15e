// Translating lines: sorted by length into batches decoded one per thread (translate_lines), and
// chunk by chunk as they arrive, written in input order as each chunk is done (translate_stream).
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <sstream>

#include "rosetta/core/ops.h"
#include "rosetta/translator/translator.h"

namespace rosetta::translator {

namespace {

// Source ids of `lines`, each cut to the model's `limit` (counted in *cut). A line the codec
// rejects throws "<where>line N: ...", N = first + its index + 1.
std::vector<std::vector<int32_t>> encode_lines(const Codec& codec, const std::vector<std::string>& lines,
                                               int64_t limit, const std::string& where, int64_t first,
                                               int64_t* cut) {
  std::vector<std::vector<int32_t>> ids(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    try {
      ids[i] = codec.encode_source(lines[i]);
    } catch (const Error& e) {
      ROSETTA_FAIL(where, "line ", first + int64_t(i) + 1, ": ", e.what());
    }
    if (int64_t(ids[i].size()) > limit) {
      ids[i].resize(size_t(limit));
      ++*cut;
    }
  }
  return ids;
}

// The hypotheses of sources `ids`, in their order (translate_lines' batching).
std::vector<std::vector<nn::Hypothesis>> decode_sources(const nn::Transformer& model,
                                                        const std::vector<std::vector<int32_t>>& ids,
                                                        const nn::SearchOptions& options, int64_t batch_tokens,
                                                        const BatchCheck& check_batch, const BatchDone& batch_done) {
  // Longest first, so batches hold similar lengths and padding stays small. Empty lines are
  // not translated: they give an empty hypothesis (an empty output line).
  std::vector<size_t> order;
  for (size_t i = 0; i < ids.size(); ++i)
    if (!ids[i].empty()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() > ids[b].size(); });
  std::vector<std::vector<nn::Hypothesis>> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i].empty()) out[i] = {nn::Hypothesis{}};
  if (batch_done && order.size() < ids.size()) batch_done(int64_t(ids.size() - order.size()));  // the empty ones
  // Batches of rows [begin, end) of `order`, their sources padded to `len`.
  struct Span {
    size_t begin, end;
    int64_t len;
  };
  std::vector<Span> batches;
  for (size_t at = 0; at < order.size(); at = batches.back().end) {
    const int64_t S = std::max<int64_t>(int64_t(ids[order[at]].size()), 1);
    const size_t B = size_t(std::clamp<int64_t>(batch_tokens / S, 1, kMaxBatchRows));
    batches.push_back({at, std::min(order.size(), at + B), S});
  }
  // One batch per thread at once: a decoding step's operations are small, and sharing each out
  // costs a barrier (a wake-up of the other threads) for little work; measured on 2 threads,
  // they made a translation only 1.1-1.2x faster than 1 thread.
  const int decoders = int(std::min<size_t>(size_t(std::max(get_num_threads(), 1)), batches.size()));
  if (check_batch)
    for (const Span& b : batches) check_batch(int64_t(b.end - b.begin), b.len, decoders);
  std::mutex done_mutex;  // batch_done is called one call at a time
  auto decode = [&](const Span& b) {
    std::vector<int32_t> flat((b.end - b.begin) * size_t(b.len), model.options().pad_id());
    for (size_t r = b.begin; r < b.end; ++r)
      std::copy(ids[order[r]].begin(), ids[order[r]].end(), flat.begin() + (r - b.begin) * b.len);
    const auto hyps = nn::search(model, Tensor::from_vector(flat, {int64_t(b.end - b.begin), b.len}), options);
    for (size_t r = b.begin; r < b.end; ++r) out[order[r]] = hyps[r - b.begin];
    if (batch_done) {
      const std::lock_guard<std::mutex> lock(done_mutex);
      batch_done(int64_t(b.end - b.begin));
    }
  };
  if (decoders <= 1) {
    const PackedWeightsScope packed_weights;  // the weights packed once for all batches
    for (const Span& b : batches) decode(b);
    return out;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
#pragma omp parallel num_threads(decoders)
  {
    try {
      const PackedWeightsScope packed_weights;  // per thread: packed once for its batches
      for (size_t i; (i = next.fetch_add(1)) < batches.size();) decode(batches[i]);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = batches.size();  // the other threads stop after their batch
    }
  }
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace

std::vector<std::vector<nn::Hypothesis>> translate_lines(const nn::Transformer& model, const Codec& codec,
                                                         const std::vector<std::string>& lines,
                                                         const nn::SearchOptions& options, int64_t batch_tokens,
                                                         int64_t* truncated, const BatchCheck& check_batch,
                                                         const BatchDone& batch_done) {
  int64_t cut = 0;
  const auto ids = encode_lines(codec, lines, model.options().max_len(), "", 0, &cut);
  if (truncated) *truncated = cut;
  return decode_sources(model, ids, options, batch_tokens, check_batch, batch_done);
}

StreamCounts translate_stream(const nn::Transformer& model, const Codec& codec, data::LineStream& in,
                              const nn::SearchOptions& options, int64_t batch_tokens, const StreamOptions& stream,
                              const StreamCallbacks& callbacks) {
  ROSETTA_CHECK(stream.chunk_lines() > 0, "translate_stream: chunk_lines must be positive");
  ROSETTA_CHECK(bool(callbacks.emit), "translate_stream: no emit callback");
  // Packed once for the whole stream on this thread: a chunk of one line (a line typed at a
  // terminal) decodes here, and would otherwise pack every weight again for it.
  const PackedWeightsScope packed_weights;
  StreamCounts counts;
  std::vector<std::string> chunk;
  for (std::string line;;) {
    chunk.clear();
    // The first line of a chunk is waited for; then, streaming, only lines already there.
    while (int64_t(chunk.size()) < stream.chunk_lines() && (chunk.empty() || !stream.interactive() || in.ready()) &&
           in.next(line))
      chunk.push_back(std::move(line));
    if (chunk.empty()) break;
    const auto ids = encode_lines(codec, chunk, model.options().max_len(), in.name() + ": ", counts.lines,
                                  &counts.truncated);
    const auto hyps = decode_sources(model, ids, options, batch_tokens, callbacks.check_batch, callbacks.batch_done);
    for (size_t i = 0; i < chunk.size(); ++i) callbacks.emit(counts.lines + int64_t(i), chunk[i], hyps[i]);
    counts.lines += int64_t(chunk.size());
  }
  return counts;
}

std::string hypothesis_lines(const Codec& codec, int n_best, int64_t index, const std::vector<nn::Hypothesis>& hyps) {
  if (n_best == 0) return (hyps.empty() ? "" : codec.decode_target(hyps[0].tokens)) + "\n";
  std::ostringstream out;
  for (const auto& h : hyps) out << index << " ||| " << codec.decode_target(h.tokens) << " ||| " << h.score << "\n";
  return out.str();
}

}  // namespace rosetta::translator
