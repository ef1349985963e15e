// rosetta serve's counting (apps/serve_api.h): the request-rate limiter, the histograms and the
// Prometheus text of /metrics.
#include <algorithm>
#include <sstream>

#include "serve_api.h"

namespace rosetta::cli::serve {

bool RateLimiter::allow(const std::string& client, Clock::time_point now) {
  if (per_minute_ <= 0) return true;
  const auto minute = std::chrono::minutes(1);
  if (now - last_sweep_ >= minute) {  // forget the clients silent for a minute
    std::erase_if(seen_, [&](const auto& kv) { return kv.second.empty() || now - kv.second.back() >= minute; });
    last_sweep_ = now;
  }
  auto& times = seen_[client];
  while (!times.empty() && now - times.front() >= minute) times.pop_front();
  if (int64_t(times.size()) >= per_minute_) return false;
  times.push_back(now);
  return true;
}

std::string RateLimiter::message() const { return "Slowdown: " + std::to_string(per_minute_) + " per 1 minute"; }

Histogram::Histogram(std::vector<double> upper_bounds) : bounds(std::move(upper_bounds)), counts(bounds.size() + 1) {}

void Histogram::observe(double value) {
  const size_t i = size_t(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++counts[i];
  sum += value;
}

int64_t Histogram::count() const {
  int64_t n = 0;
  for (const int64_t c : counts) n += c;
  return n;
}

namespace {

void metric_head(std::ostringstream& out, const std::string& name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

// A metric of one value: its HELP and TYPE lines, then `name value`.
void metric(std::ostringstream& out, const std::string& name, const char* type, const char* help, int64_t value) {
  metric_head(out, name, type, help);
  out << name << ' ' << value << '\n';
}

std::string number(double v) {
  std::ostringstream s;  // 6 significant digits: "0.005", "30"
  s << v;
  return s.str();
}

}  // namespace

std::string prometheus_text(const HttpCounters& http, const translator::ServiceStats& service, bool draining) {
  std::ostringstream out;
  const std::string p = "rosetta_serve_";
  metric_head(out, p + "requests_total", "counter",
              "Requests answered, by HTTP status (499: the client went away before its answer).");
  for (const auto& [status, n] : http.requests_by_status)
    out << p << "requests_total{status=\"" << status << "\"} " << n << '\n';
  metric(out, p + "sentences_total", "counter", "Sentences translated in answered requests.", http.sentences);
  metric(out, p + "cancelled_requests_total", "counter",
         "Requests whose client went away before the answer: their sentences not yet decoding were dropped.",
         http.client_gone);
  metric(out, p + "connections", "gauge", "Open connections.", http.connections);
  metric(out, p + "draining", "gauge", "1 after SIGTERM or SIGINT: no new connections, the accepted answered.",
         draining ? 1 : 0);
  metric(out, p + "submissions_total", "counter", "Submissions the translation service accepted.", service.submitted);
  metric(out, p + "decoded_sentences_total", "counter", "Sentences the translation service translated.",
         service.sentences);
  metric(out, p + "cancelled_sentences_total", "counter", "Sentences dropped from the queue, their client gone.",
         service.cancelled);
  metric(out, p + "queue_sentences", "gauge", "Sentences waiting for a decoder.", service.pending);
  metric(out, p + "decoding_sentences", "gauge", "Sentences being decoded.", service.decoding);
  // Rows of the batches decoded: the service counts batches of at most 1, 2, 4, ... rows,
  // cumulatively already; their sum is the sentences translated (serve submits no empty one).
  metric_head(out, p + "batch_rows", "histogram", "Sentences per decoding batch.");
  for (size_t i = 0; i < service.batch_rows_buckets.size(); ++i)
    out << p << "batch_rows_bucket{le=\"" << (int64_t(1) << i) << "\"} " << service.batch_rows_buckets[i] << '\n';
  out << p << "batch_rows_bucket{le=\"+Inf\"} " << service.batches << '\n';
  out << p << "batch_rows_sum " << service.sentences << '\n' << p << "batch_rows_count " << service.batches << '\n';
  metric_head(out, p + "request_duration_seconds", "histogram",
              "Time from a request's last byte read to its answer written, in seconds.");
  int64_t cumulative = 0;
  for (size_t i = 0; i < http.latency.bounds.size(); ++i) {
    cumulative += http.latency.counts[i];
    out << p << "request_duration_seconds_bucket{le=\"" << number(http.latency.bounds[i]) << "\"} " << cumulative
        << '\n';
  }
  out << p << "request_duration_seconds_bucket{le=\"+Inf\"} " << http.latency.count() << '\n';
  out << p << "request_duration_seconds_sum " << number(http.latency.sum) << '\n';
  out << p << "request_duration_seconds_count " << http.latency.count() << '\n';
  return out.str();
}

}  // namespace rosetta::cli::serve
