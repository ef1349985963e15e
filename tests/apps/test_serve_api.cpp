// rosetta serve's API without sockets (apps/serve_api.h): LibreTranslate's requests as JSON and as
// forms, each error with its status and message, the answers' shapes, the rate limiter and the
// Prometheus text.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "serve_api.h"

using namespace rosetta::cli::serve;
using nlohmann::json;

namespace {

Request post(const std::string& content_type, const std::string& body, const std::string& target = "/translate") {
  return Request{"POST", target, content_type, body};
}

Request post_json(const json& body) { return post("application/json", body.dump()); }

// The error of a request that must fail: its status and message.
std::pair<int, std::string> failure(const ApiConfig& config, const Request& r) {
  auto parsed = parse_translate(config, r);
  REQUIRE(std::holds_alternative<Response>(parsed));
  const Response& resp = std::get<Response>(parsed);
  INFO(resp.body);
  REQUIRE(resp.body.find('\n') == std::string::npos);
  const json j = json::parse(resp.body);
  REQUIRE(j.size() == 1);
  return {resp.status, j.at("error").get<std::string>()};
}

TranslateJob job_of(const ApiConfig& config, const Request& r) {
  auto parsed = parse_translate(config, r);
  if (auto* resp = std::get_if<Response>(&parsed)) FAIL(resp->body);
  return std::get<TranslateJob>(parsed);
}

// Each sentence "translated" as itself in capitals, to see where each lands.
std::vector<std::string> shout(const std::vector<std::string>& sentences) {
  std::vector<std::string> out;
  for (std::string s : sentences) {
    for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("serve api: a JSON string is split into sentences and answered as one string", "[serve]") {
  const ApiConfig config;
  const TranslateJob job = job_of(config, post_json({{"q", "Der Hund. Die Katze!\nDas Haus"}, {"source", "de"},
                                                     {"target", "en"}, {"format", "text"}}));
  REQUIRE(job.all_sentences() == std::vector<std::string>{"Der Hund.", "Die Katze!", "Das Haus"});
  const Response r = answer(config, job, shout(job.all_sentences()));
  CHECK(r.status == 200);
  CHECK(r.sentences == 3);
  CHECK(json::parse(r.body) == json{{"translatedText", "DER HUND. DIE KATZE!\nDAS HAUS"}});
}

TEST_CASE("serve api: an array answers an array, in order, source auto adds detectedLanguage", "[serve]") {
  const ApiConfig config;
  const TranslateJob job =
      job_of(config, post_json({{"q", {"Eins. Zwei.", "", "Drei"}}, {"source", "auto"}, {"target", "en"}}));
  REQUIRE(job.sentence_count() == 3);
  const json j = json::parse(answer(config, job, shout(job.all_sentences())).body);
  CHECK(j["translatedText"] == json{"EINS. ZWEI.", "", "DREI"});
  const json detected = {{"confidence", 100.0}, {"language", "de"}};
  CHECK(j["detectedLanguage"] == json{detected, detected, detected});
  // A string with source auto: one object, as LibreTranslate gives it.
  const TranslateJob one = job_of(config, post_json({{"q", "Eins"}, {"source", "auto"}, {"target", "en"}}));
  CHECK(json::parse(answer(config, one, {"ONE"}).body) ==
        json{{"translatedText", "ONE"}, {"detectedLanguage", detected}});
}

TEST_CASE("serve api: a form as libretranslatepy sends it, the query string read first", "[serve]") {
  const ApiConfig config;
  // urllib.parse.urlencode({"q": "Ä ö\r\nb+c", "source": "de", "target": "en"})
  const TranslateJob job =
      job_of(config, post("application/x-www-form-urlencoded", "q=%C3%84+%C3%B6%0D%0Ab%2Bc%0A&source=de&target=en"));
  // "\n".join(q.splitlines()): \r\n becomes \n, the last line break goes
  REQUIRE(job.all_sentences() == std::vector<std::string>{"Ä ö", "b+c"});
  CHECK(!job.array);
  const TranslateJob q = job_of(config, post("application/x-www-form-urlencoded", "q=zwei&source=fr&target=en",
                                             "/translate?source=de"));
  CHECK(q.all_sentences() == std::vector<std::string>{"zwei"});
  // No body type at all: the query string alone.
  CHECK(job_of(config, post("", "", "/translate?q=eins&source=de&target=en")).sentence_count() == 1);
}

TEST_CASE("serve api: parse_form decodes as werkzeug does", "[serve]") {
  const auto f = parse_form("a=1&b=%41%zz%4&c&a=2&=x&d=x%3Dy+z&&");
  CHECK(f.at("a") == "1");  // the first wins
  CHECK(f.at("b") == "A%zz%4");
  CHECK(f.at("c").empty());
  CHECK(f.at("") == "x");
  CHECK(f.at("d") == "x=y z");
}

TEST_CASE("serve api: bad requests get 400 and LibreTranslate's message", "[serve]") {
  const ApiConfig config;
  using P = std::pair<int, std::string>;
  CHECK(failure(config, post("application/json", "{\"q\": ")).first == 400);
  CHECK_THAT(failure(config, post("application/json", "{\"q\": ")).second, Catch::StartsWith("Invalid JSON: "));
  CHECK(failure(config, post("application/json", "")).first == 400);
  CHECK(failure(config, post("application/json", "[1, 2]")) == P{400, "Invalid JSON format"});
  CHECK(failure(config, post("", "")) == P{400, "Invalid request: missing q parameter"});
  CHECK(failure(config, post_json({{"q", ""}, {"source", "de"}, {"target", "en"}})) ==
        P{400, "Invalid request: missing q parameter"});
  CHECK(failure(config, post_json({{"q", "x"}, {"target", "en"}})) ==
        P{400, "Invalid request: missing source parameter"});
  CHECK(failure(config, post_json({{"q", "x"}, {"source", "de"}})) ==
        P{400, "Invalid request: missing target parameter"});
  CHECK(failure(config, post_json({{"q", 5}, {"source", "de"}, {"target", "en"}})) ==
        P{400, "Invalid request: q must be a string or an array of strings"});
  CHECK(failure(config, post_json({{"q", {"a", 1}}, {"source", "de"}, {"target", "en"}})) ==
        P{400, "Invalid request: q must be a string or an array of strings"});
  CHECK(failure(config, post_json({{"q", {{"a", 1}}}, {"source", "de"}, {"target", "en"}})) ==
        P{400, "Invalid request: q must be a string or an array of strings"});
  CHECK(failure(config, post_json({{"q", "x"}, {"source", {"de"}}, {"target", "en"}})) ==
        P{400, "Invalid request: source must be a string"});
  CHECK(failure(config, post_json({{"q", "x"}, {"source", "fr"}, {"target", "en"}})) == P{400, "fr is not supported"});
  CHECK(failure(config, post_json({{"q", "x"}, {"source", "de"}, {"target", "es"}})) == P{400, "es is not supported"});
  CHECK(failure(config, post_json({{"q", "x"}, {"source", "en"}, {"target", "de"}})) ==
        P{400, "German (de) is not available as a target language from English (en)"});
  CHECK(failure(config, post_json({{"q", "x"}, {"source", "de"}, {"target", "en"}, {"format", "html"}})) ==
        P{400, "html format is not supported (rosetta serve translates text)"});
  CHECK(failure(config, post_json({{"q", "x"}, {"source", "de"}, {"target", "en"}, {"alternatives", 3}})) ==
        P{400, "Invalid request: alternatives parameter must be <= 0"});
  CHECK(failure(config, post_json({{"q", "x"}, {"source", "de"}, {"target", "en"}, {"alternatives", "many"}})) ==
        P{400, "Invalid request: alternatives parameter is not a number"});
  CHECK(failure(config, post("multipart/form-data; boundary=x", "--x--")).first == 400);
  // alternatives 0, as clients send it by default, is fine
  CHECK(job_of(config, post_json({{"q", "x"}, {"source", "de"}, {"target", "en"}, {"alternatives", "0"}}))
            .sentence_count() == 1);
}

TEST_CASE("serve api: invalid UTF-8 is refused in JSON and in forms", "[serve]") {
  const ApiConfig config;
  const auto json_bad =
      failure(config, post("application/json", "{\"q\": \"a\xff\", \"source\": \"de\", \"target\": \"en\"}"));
  CHECK(json_bad.first == 400);
  CHECK_THAT(json_bad.second, Catch::StartsWith("Invalid JSON: "));
  CHECK(failure(config, post("application/x-www-form-urlencoded", "q=%C3%28&source=de&target=en")) ==
        std::pair<int, std::string>{400, "Invalid request: the value of q is not valid UTF-8"});
  CHECK(valid_utf8("Grüße, 日本, 😀"));
  for (const char* bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xE2\x82"})
    CHECK_FALSE(valid_utf8(bad));
}

TEST_CASE("serve api: limits: characters per text, sentences per request", "[serve]") {
  ApiConfig config;
  config.char_limit = 5;
  config.max_sentences = 3;
  // Code points, not bytes: "Äöü12" is 5.
  CHECK(job_of(config, post_json({{"q", "Äöü12"}, {"source", "de"}, {"target", "en"}})).sentence_count() == 1);
  CHECK(failure(config, post_json({{"q", {"ok", "Äöü123"}}, {"source", "de"}, {"target", "en"}})) ==
        std::pair<int, std::string>{400, "Invalid request: request (6) exceeds text limit (5)"});
  config.char_limit = -1;
  CHECK(failure(config, post_json({{"q", "A. B. C. D."}, {"source", "de"}, {"target", "en"}})) ==
        std::pair<int, std::string>{400, "Invalid request: request (4 sentences) exceeds the sentence limit (3)"});
}

TEST_CASE("serve api: with api keys, a request without a known one gets 403", "[serve]") {
  ApiConfig config;
  config.api_keys = {"k1", "k2"};
  const json ok = {{"q", "x"}, {"source", "de"}, {"target", "en"}};
  CHECK(failure(config, post_json(ok)).first == 403);
  json wrong = ok;
  wrong["api_key"] = "k3";
  CHECK(failure(config, post_json(wrong)) == std::pair<int, std::string>{403, "Invalid API key"});
  json right = ok;
  right["api_key"] = "k2";
  CHECK(job_of(config, post_json(right)).sentence_count() == 1);
  CHECK(job_of(config, post("application/x-www-form-urlencoded", "q=x&source=de&target=en&api_key=k1"))
            .sentence_count() == 1);
  // the key is checked before the rest, as LibreTranslate's access_check
  CHECK(failure(config, post("application/x-www-form-urlencoded", "api_key=no")).first == 403);
}

TEST_CASE("serve api: routes, languages and health", "[serve]") {
  CHECK(route({"POST", "/translate?x=1", "", ""}).route == Route::translate);
  CHECK(route({"GET", "/languages", "", ""}).route == Route::languages);
  CHECK(route({"OPTIONS", "/translate", "", ""}).route == Route::options);
  const Routed wrong = route({"GET", "/translate", "", ""});
  CHECK(wrong.route == Route::answered);
  CHECK(wrong.response.status == 405);
  CHECK(route({"GET", "/nope\n", "", ""}).response.status == 404);
  CHECK(json::parse(route({"GET", "/nope\n", "", ""}).response.body)["error"].get<std::string>().find('\n') !=
        std::string::npos);  // escaped in the JSON, so the body stays one line
  CHECK(route({"GET", "/nope\n", "", ""}).response.body.find('\n') == std::string::npos);
  ApiConfig config;
  config.source = "de";
  config.target = "en";
  CHECK(json::parse(languages_response(config).body) ==
        json::parse(R"([{"code":"de","name":"German","targets":["en"]},{"code":"en","name":"English","targets":[]}])"));
  CHECK(json::parse(health_response(false).body) == json{{"status", "ok"}});
  CHECK(health_response(true).status == 503);
  CHECK(language_name("xx") == "xx");
}

TEST_CASE("serve api: the rate limiter counts a moving minute per client", "[serve]") {
  RateLimiter limiter(2);
  const auto t0 = RateLimiter::Clock::now();
  using std::chrono::seconds;
  CHECK(limiter.allow("a", t0));
  CHECK(limiter.allow("a", t0 + seconds(10)));
  CHECK_FALSE(limiter.allow("a", t0 + seconds(20)));
  CHECK(limiter.allow("b", t0 + seconds(20)));  // another client has its own
  CHECK(limiter.allow("a", t0 + seconds(60)));  // the first has left the window
  CHECK_FALSE(limiter.allow("a", t0 + seconds(61)));
  CHECK(limiter.message() == "Slowdown: 2 per 1 minute");
  limiter.allow("c", t0 + seconds(200));  // a minute later the silent ones are forgotten
  CHECK(limiter.clients() == 1);
  RateLimiter none(-1);
  for (int i = 0; i < 1000; ++i) REQUIRE(none.allow("a", t0));
}

TEST_CASE("serve api: the Prometheus text has every family, histograms cumulative", "[serve]") {
  HttpCounters http;
  http.requests_by_status[200] = 3;
  http.requests_by_status[499] = 1;
  http.latency.observe(0.003);
  http.latency.observe(0.2);
  http.latency.observe(100);
  rosetta::translator::ServiceStats stats;
  stats.batches = 2;
  stats.sentences = 5;
  stats.cancelled = 4;
  stats.pending = 7;
  stats.batch_rows_buckets = {0, 0, 1, 2};
  const std::string text = prometheus_text(http, stats, false);
  for (const char* line :
       {"rosetta_serve_requests_total{status=\"200\"} 3\n", "rosetta_serve_requests_total{status=\"499\"} 1\n",
        "rosetta_serve_cancelled_sentences_total 4\n", "rosetta_serve_queue_sentences 7\n",
        "rosetta_serve_batch_rows_bucket{le=\"4\"} 1\n", "rosetta_serve_batch_rows_bucket{le=\"8\"} 2\n",
        "rosetta_serve_batch_rows_bucket{le=\"+Inf\"} 2\n", "rosetta_serve_batch_rows_count 2\n",
        "rosetta_serve_request_duration_seconds_bucket{le=\"0.005\"} 1\n",
        "rosetta_serve_request_duration_seconds_bucket{le=\"0.25\"} 2\n",
        "rosetta_serve_request_duration_seconds_bucket{le=\"30\"} 2\n",
        "rosetta_serve_request_duration_seconds_bucket{le=\"+Inf\"} 3\n",
        "rosetta_serve_request_duration_seconds_count 3\n", "# TYPE rosetta_serve_batch_rows histogram\n",
        "rosetta_serve_draining 0\n"})
    CHECK_THAT(text, Catch::Contains(line));
}
