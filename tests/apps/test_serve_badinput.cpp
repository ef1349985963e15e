// rosetta serve on bad input, each case its own test: the right status, a one-line JSON error,
// and the server goes on answering a good request afterwards (and, where it matters, meanwhile).
#include <optional>
#include <thread>

#include "serve_support.h"

using namespace rosetta::test;
using nlohmann::json;

namespace {

const json kGood = {{"q", "3 1 4"}, {"source", "de"}, {"target", "en"}};

// A copy-task run and a server on it with `args`, for one test.
struct Served {
  TempDir work;
  std::string run;
  std::optional<Server> server;
  explicit Served(const std::string& args, const std::string& tag = "serve_bad") : work(tag) {
    run = train_serve_run(work);
    server.emplace(work, run, "--beam 1 " + args);
  }
  int port() const { return server->port(); }
  // A good request is still answered, and the server stops cleanly when told.
  void require_still_serving() {
    const HttpReply r = post_json(port(), kGood);
    INFO(r.body);
    REQUIRE(r.status == 200);
    REQUIRE(r.json()["translatedText"].is_string());
  }
  ~Served() {
    if (server && server->running()) server->stop();
  }
};

// `r` is the error answer `status`, one line of JSON {"error": ...} holding `fragment`.
void require_error_answer(const HttpReply& r, int status, const std::string& fragment) {
  INFO(r.head << "\n\n" << r.body);
  REQUIRE(r.status == status);
  REQUIRE(r.body.find('\n') == std::string::npos);
  const json j = r.json();
  REQUIRE(j.is_object());
  REQUIRE(j.size() == 1);
  REQUIRE_THAT(r.error(), Catch::Contains(fragment));
}

}  // namespace

TEST_CASE("serve bad input: malformed JSON", "[serve][badinput]") {
  Served s("");
  for (const char* body : {"{\"q\": \"3 1\", ", "{'q': 1}", "nul", "{\"q\": \"3\"}}"})
    require_error_answer(http_request(s.port(), "POST", "/translate", "application/json", body), 400, "Invalid JSON");
  require_error_answer(http_request(s.port(), "POST", "/translate", "application/json", "[1]"), 400,
                       "Invalid JSON format");
  s.require_still_serving();
}

TEST_CASE("serve bad input: a field of the wrong type", "[serve][badinput]") {
  Served s("");
  for (const json& body : {json{{"q", 3}, {"source", "de"}, {"target", "en"}},
                           json{{"q", {"3", {{"x", 1}}}}, {"source", "de"}, {"target", "en"}},
                           json{{"q", "3"}, {"source", {"de"}}, {"target", "en"}},
                           json{{"q", "3"}, {"source", "de"}, {"target", "en"}, {"format", 1}}})
    require_error_answer(post_json(s.port(), body), 400, "Invalid request: ");
  s.require_still_serving();
}

TEST_CASE("serve bad input: an empty body", "[serve][badinput]") {
  Served s("");
  require_error_answer(http_request(s.port(), "POST", "/translate", "application/json", ""), 400, "Invalid JSON");
  require_error_answer(http_request(s.port(), "POST", "/translate", "application/x-www-form-urlencoded", ""), 400,
                       "missing q parameter");
  require_error_answer(http_request(s.port(), "POST", "/translate"), 400, "missing q parameter");
  s.require_still_serving();
}

TEST_CASE("serve bad input: a 10 MB body gets 413 before it is read", "[serve][badinput]") {
  Served s("--max-body 100000");
  const std::string big = "{\"q\": \"" + std::string(10 << 20, '1') + "\", \"source\": \"de\", \"target\": \"en\"}";
  const auto t0 = std::chrono::steady_clock::now();
  require_error_answer(http_request(s.port(), "POST", "/translate", "application/json", big), 413, "--max-body");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  // Announced with Expect: 100-continue (as curl does for large bodies): refused before any of it is sent.
  const int fd = connect_to(s.port());
  REQUIRE(send_all(fd, "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(big.size()) + "\r\nExpect: 100-continue\r\n\r\n"));
  require_error_answer(parse_reply(read_until_closed(fd, 10)), 413, "over 100000 bytes");
  ::close(fd);
  s.require_still_serving();
}

TEST_CASE("serve bad input: invalid UTF-8", "[serve][badinput]") {
  Served s("");
  require_error_answer(http_request(s.port(), "POST", "/translate", "application/json",
                                    "{\"q\": \"3 \xC3\x28\", \"source\": \"de\", \"target\": \"en\"}"),
                       400, "Invalid JSON");
  require_error_answer(http_request(s.port(), "POST", "/translate", "application/x-www-form-urlencoded",
                                    "q=3%FF&source=de&target=en"),
                       400, "not valid UTF-8");
  s.require_still_serving();
}

TEST_CASE("serve bad input: a language pair the model lacks, a text the model cannot read", "[serve][badinput]") {
  Served s("--source de --target en");
  require_error_answer(post_json(s.port(), {{"q", "3"}, {"source", "fr"}, {"target", "en"}}), 400,
                       "fr is not supported");
  require_error_answer(post_json(s.port(), {{"q", "3"}, {"source", "en"}, {"target", "de"}}), 400,
                       "German (de) is not available as a target language from English (en)");
  require_error_answer(post_json(s.port(), {{"q", "3"}, {"source", "de"}, {"target", "en"}, {"format", "html"}}), 400,
                       "html format is not supported");
  // The copy task's codec knows the symbols 0-7 alone: the service refuses the sentence.
  require_error_answer(post_json(s.port(), {{"q", "3 1\nx y"}, {"source", "de"}, {"target", "en"}}), 400,
                       "Cannot translate text: sentence 2");
  s.require_still_serving();
}

TEST_CASE("serve bad input: a slow client is dropped at the deadline, others are served meanwhile",
          "[serve][badinput]") {
  Served s("--timeout 2");
  const int fd = connect_to(s.port());
  REQUIRE(fd >= 0);
  const std::string body = kGood.dump();
  const std::string req = "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  // One byte every 250 ms: the request would take ~20 s whole; the server drops it after 2 s.
  const auto t0 = std::chrono::steady_clock::now();
  std::string answer;
  size_t sent = 0;
  for (; sent < req.size(); ++sent) {
    if (!send_all(fd, req.substr(sent, 1))) break;
    bool timed_out = false;
    answer += read_until_closed(fd, 0.25, &timed_out);
    if (!timed_out) break;  // closed
    if (sent == 3) s.require_still_serving();  // the slow one holds nobody up
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  CHECK(sent < req.size());
  CHECK(seconds > 1.5);
  CHECK(seconds < 6);
  CHECK(answer.empty());  // closed at the deadline, without an answer
  s.require_still_serving();
  CHECK_THAT(s.server->log(), Catch::Contains(" - - 408 0 sentences"));  // its request line never came whole
}

TEST_CASE("serve bad input: a client that disconnects mid-request is dropped from the queue", "[serve][badinput]") {
  // One decoder and batches of one sentence: three long requests keep it busy for a while (a
  // thousand batches each), while the short one that leaves waits behind them (shorter sentences
  // are taken last).
  Served s("--threads 1 --batch-tokens 8 --max-wait-ms 0");
  const std::vector<std::string> longer(1000, "7 6 5 4 3 2 1 0");
  std::vector<HttpReply> long_replies(3);  // (Catch2's checks are for the main thread)
  std::vector<std::thread> blockers;
  for (auto& reply : long_replies)
    blockers.emplace_back([&] { reply = post_json(s.port(), {{"q", longer}, {"source", "de"}, {"target", "en"}}); });
  sleep_ms(100);
  const int fd = connect_to(s.port());
  const std::string body = json{{"q", std::vector<std::string>(40, "1")}, {"source", "de"}, {"target", "en"}}.dump();
  REQUIRE(send_all(fd, "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body));
  sleep_ms(50);
  ::close(fd);  // gone before its answer
  for (auto& t : blockers) t.join();
  for (const HttpReply& r : long_replies) {
    CHECK(r.status == 200);
    CHECK(r.json()["translatedText"].size() == longer.size());
  }
  // The answer of the one that left is dropped and counted.
  std::string text;
  for (int i = 0; i < 200 && metric(text, "rosetta_serve_requests_total{status=\"499\"}") != 1; ++i) {
    sleep_ms(50);
    text = get(s.port(), "/metrics").body;
  }
  INFO(text);
  CHECK(metric(text, "rosetta_serve_requests_total{status=\"499\"}") == 1);
  CHECK(metric(text, "rosetta_serve_cancelled_requests_total") == 1);
  CHECK(metric(text, "rosetta_serve_cancelled_sentences_total") > 0);
  CHECK(metric(text, "rosetta_serve_decoded_sentences_total") < 3000 + 40);
  s.require_still_serving();
}

TEST_CASE("serve bad input: more connections than the limit get 503", "[serve][badinput]") {
  Served s("--max-connections 2 --timeout 20");
  const int a = connect_to(s.port()), b = connect_to(s.port());
  REQUIRE(send_all(a, "POST /translate HTTP/1.1\r\n"));  // mid-request, holding its connection
  REQUIRE(b >= 0);
  sleep_ms(200);
  require_error_answer(post_json(s.port(), kGood), 503, "--max-connections");
  require_error_answer(get(s.port(), "/health"), 503, "--max-connections");
  ::close(a);
  ::close(b);
  sleep_ms(200);
  s.require_still_serving();
}

TEST_CASE("serve bad input: a missing or unknown api key gets 403", "[serve][badinput]") {
  TempDir keys("serve_keys");
  write_file(keys / "keys.txt", "k-one\n  k-two  \n");
  Served s("--api-keys " + (keys / "keys.txt"));
  require_error_answer(post_json(s.port(), kGood), 403, "Invalid API key");
  json wrong = kGood;
  wrong["api_key"] = "k-three";
  require_error_answer(post_json(s.port(), wrong), 403, "Invalid API key");
  json right = kGood;
  right["api_key"] = "k-two";
  CHECK(post_json(s.port(), right).status == 200);
  CHECK(http_request(s.port(), "POST", "/translate?api_key=k-one", "application/x-www-form-urlencoded",
                     "q=3&source=de&target=en").status == 200);
  CHECK(get(s.port(), "/languages").status == 200);  // as LibreTranslate: no key needed there
}

TEST_CASE("serve bad input: over the request rate gets 429, other routes are not limited", "[serve][badinput]") {
  Served s("--req-limit 3");
  for (int i = 0; i < 3; ++i) REQUIRE(post_json(s.port(), kGood).status == 200);
  require_error_answer(post_json(s.port(), kGood), 429, "Slowdown: 3 per 1 minute");
  CHECK(get(s.port(), "/health").status == 200);
  require_error_answer(http_request(s.port(), "GET", "/nowhere"), 404, "Not Found");
  require_error_answer(http_request(s.port(), "GET", "/translate"), 405, "takes POST");
  require_error_answer(http_request(s.port(), "POST", "/translate", "", "", "X-Junk: \x01\r\nBad Header\r\n"), 400,
                       "Bad Request");
}
