// `rosetta serve`'s API without sockets: LibreTranslate's requests parsed and checked, its
// answers and errors built, the request-rate limit and the Prometheus text of /metrics. Pure
// functions of their arguments (the limiter of its calls and their times), so that the tests and
// the fuzzer reach all of it without a server; serve_http.cpp puts it on the network.
//
// The API is LibreTranslate's (libretranslate/app.py), so that its clients work unchanged:
//   POST /translate   q (a string or an array of strings), source (a code or "auto"), target,
//                     format ("text"), alternatives (0), api_key; as JSON (Content-Type
//                     application/json) or as a form (application/x-www-form-urlencoded), the
//                     query string's fields first, as werkzeug's request.values reads them.
//                     {"translatedText": ...} shaped as q was, and with source "auto"
//                     "detectedLanguage": {"confidence": 100.0, "language": CODE} (one per text).
//   GET /languages    [{"code": "de", "name": "German", "targets": ["en"]}, ...]
//   GET /health       {"status": "ok"} (503 while draining)
// Every error is {"error": "..."} on one line, with LibreTranslate's status and wording where it
// has one: 400 bad input, 403 a missing or unknown key, 429 over the request rate.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "rosetta/translator/service.h"

namespace rosetta::cli::serve {

struct ApiConfig {
  std::string source = "de", target = "en";  // the model's language pair (ISO 639-1 codes)
  int64_t char_limit = -1;                   // characters (code points) per text; -1: none
  int64_t max_sentences = 1000;              // sentences per request, all its texts together
  std::set<std::string> api_keys;            // empty: no key needed
};

// A request as the API sees it; the HTTP layer fills it from the wire.
struct Request {
  std::string method;        // "GET", "POST", ...
  std::string target;        // path and query: "/translate?api_key=k"
  std::string content_type;  // the header's value, parameters included ("" when absent)
  std::string body;
};

struct Response {
  int status = 200;
  std::string body;  // one line of JSON, or /metrics' text
  std::string content_type = "application/json";
  int64_t sentences = 0;  // sentences translated, for the access log and the metrics
};

// What a valid /translate asks for: each text split into sentences (split_sentences), to be
// translated in one submission (all_sentences(), in order) and joined back by answer().
struct TranslateJob {
  std::vector<translator::SplitText> texts;
  bool array = false;        // q was an array: translatedText is one too
  bool auto_source = false;  // source "auto": the answer says which language it detected
  std::vector<std::string> all_sentences() const;
  int64_t sentence_count() const;
};

// The route of a request: /translate is `translate`; an unknown path or a method the path does not
// take gets its 404 or 405 answer here.
enum class Route { translate, languages, health, metrics, options, answered };
struct Routed {
  Route route;
  Response response;  // with Route::answered
};
Routed route(const Request& request);

// The path of a request target, without its query: "/translate?x=1" -> "/translate".
std::string path_of(const std::string& target);

// A /translate request checked: its job, or the error to answer (400, 403).
std::variant<TranslateJob, Response> parse_translate(const ApiConfig& config, const Request& request);

// The answer to `job` given the translations of its sentences (all_sentences(), as many, in order).
Response answer(const ApiConfig& config, const TranslateJob& job, const std::vector<std::string>& translations);

Response error_response(int status, const std::string& message);
Response languages_response(const ApiConfig& config);
Response health_response(bool draining);

// The English name of an ISO 639-1 code LibreTranslate knows ("de" -> "German"); the code itself
// for one not in its table.
std::string language_name(const std::string& code);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points over U+10FFFF).
bool valid_utf8(const std::string& s);
// Code points in well-formed UTF-8 `s` (Python's len(), which LibreTranslate's --char-limit counts).
int64_t code_points(const std::string& s);
// A form's or query's fields (application/x-www-form-urlencoded): '+' is a space, %XY a byte; a
// '%' not followed by two hex digits stays as it is (as werkzeug decodes). The first of a name
// repeated wins, as request.values.get() does.
std::map<std::string, std::string> parse_form(const std::string& text);

// The rest is serve_metrics.cpp's.

// Requests per minute per client (--req-limit), over a moving window of the last 60 s as
// flask-limiter's "moving-window" strategy counts. Memory: at most `per_minute` times per client
// seen in the last minute; clients silent for a minute are forgotten.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(int64_t per_minute) : per_minute_(per_minute) {}
  // Counts a request of `client` at `now` and says whether it is within the limit (always, with
  // no limit: per_minute < 0). A refused request is not counted.
  bool allow(const std::string& client, Clock::time_point now);
  // LibreTranslate's 429 message: "Slowdown: 60 per 1 minute".
  std::string message() const;
  size_t clients() const { return seen_.size(); }

 private:
  int64_t per_minute_;
  std::unordered_map<std::string, std::deque<Clock::time_point>> seen_;
  Clock::time_point last_sweep_{};
};

// A histogram of Prometheus' kind: cumulative counts of observations <= each bound, their sum.
struct Histogram {
  std::vector<double> bounds;
  std::vector<int64_t> counts;  // per bound, not cumulative; the last one is +Inf
  double sum = 0;
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  int64_t count() const;
};

// What the HTTP layer counts for /metrics (beside the service's own ServiceStats).
struct HttpCounters {
  std::map<int, int64_t> requests_by_status;  // every request answered or dropped, by status
  int64_t sentences = 0;                      // sentences in answered /translate requests
  int64_t client_gone = 0;                    // requests whose client went away before the answer
  int64_t connections = 0;                    // open now (a gauge)
  Histogram latency{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};  // seconds
};

// /metrics in Prometheus' text format (version 0.0.4).
std::string prometheus_text(const HttpCounters& http, const translator::ServiceStats& service, bool draining);

}  // namespace rosetta::cli::serve
