// rosetta serve's drain: SIGTERM under load answers every request the server accepted before it,
// refuses new connections, closes idle ones, and exits 0.
#include <atomic>
#include <mutex>
#include <thread>

#include "serve_support.h"

using namespace rosetta::test;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Attempt {
  Clock::time_point connected, answered;
  int status = 0;  // 0: refused, or reset before any answer
  bool connected_ok = false, answer_ok = false;
};

}  // namespace

TEST_CASE("serve: SIGTERM under load: every request accepted before it is answered, then exit 0", "[serve]") {
  TempDir work("serve_drain");
  const std::string run = train_serve_run(work);
  const std::vector<std::string> lines = symbol_lines(20, 11);
  const std::vector<std::string> offline = translate_offline(run, lines, "--beam 4 --precision fp32");
  Server server(work, run, "--beam 4 --precision fp32 --threads 2");
  const std::string body = json{{"q", lines}, {"source", "de"}, {"target", "en"}}.dump();
  const std::string request = "POST /translate HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
                              "application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;

  std::mutex mutex;
  std::vector<Attempt> attempts;
  std::atomic<bool> signalled{false};
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c)
    clients.emplace_back([&] {
      for (;;) {
        Attempt a;
        const int fd = connect_to(server.port());
        a.connected = Clock::now();
        a.connected_ok = fd >= 0;
        if (fd >= 0) {
          send_all(fd, request);
          const HttpReply r = parse_reply(read_until_closed(fd, 60));
          ::close(fd);
          a.answered = Clock::now();
          a.status = r.status;
          const json j = r.json();
          a.answer_ok = r.status == 200 && j.is_object() && j["translatedText"] == json(offline);
          answered += a.status == 200;
        }
        const std::lock_guard<std::mutex> lock(mutex);
        attempts.push_back(a);
        if (signalled && a.status != 200) return;  // refused or not accepted: the server is going
      }
    });
  for (int i = 0; i < 3000 && answered < 24; ++i) sleep_ms(10);
  REQUIRE(answered >= 24);
  const Clock::time_point kill_time = Clock::now();
  signalled = true;
  const int code = server.stop(60);
  for (auto& t : clients) t.join();
  INFO(server.log());
  REQUIRE(code == 0);

  int ok = 0, in_flight_at_signal = 0;
  for (const Attempt& a : attempts) {
    if (a.connected < kill_time) {
      INFO("a request connected before the signal: status " << a.status);
      CHECK(a.connected_ok);
      CHECK(a.status == 200);
      CHECK(a.answer_ok);
      in_flight_at_signal += a.answered > kill_time;
    } else {
      CHECK((a.status == 200 || a.status == 0));  // accepted and answered, or never accepted
      if (a.status == 200) CHECK(a.answer_ok);
    }
    ok += a.status == 200;
  }
  CHECK(in_flight_at_signal > 0);  // the drain had work to do
  // The server's log agrees: one access line per answer, each a 200.
  CHECK(count_log_lines(server.log(), "POST /translate 200") == ok);
  CHECK(count_log_lines(server.log(), "POST /translate 499") == 0);
  CHECK_THAT(server.log(), Catch::Contains("SIGTERM: draining"));
}

TEST_CASE("serve: a request being read at SIGINT is answered (health says draining), idle ones are closed",
          "[serve]") {
  TempDir work("serve_drain_read");
  const std::string run = train_serve_run(work);
  Server server(work, run, "--beam 1 --timeout 30");
  const int reading = connect_to(server.port()), idle = connect_to(server.port());
  REQUIRE(reading >= 0);
  REQUIRE(idle >= 0);
  // `idle` is kept alive after an answer; `reading` is in the middle of its request.
  REQUIRE(send_all(idle, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(parse_reply(read_until_closed(idle, 1)).status == 200);
  REQUIRE(send_all(reading, "GET /health HTTP/1.1\r\nHost: x\r\n"));
  sleep_ms(300);
  kill(server.pid(), SIGINT);
  sleep_ms(300);
  // The idle connection is closed without an answer; new ones are refused.
  bool timed_out = false;
  CHECK(read_until_closed(idle, 10, &timed_out).empty());
  CHECK_FALSE(timed_out);
  CHECK(connect_to(server.port()) < 0);
  CHECK(server.running());  // still answering the one it reads
  REQUIRE(send_all(reading, "\r\n"));
  const HttpReply r = parse_reply(read_until_closed(reading, 10));
  INFO(r.head << "\n" << r.body);
  CHECK(r.status == 503);
  CHECK_THAT(r.error(), Catch::Contains("draining"));
  CHECK_THAT(r.head, Catch::Contains("Connection: close"));
  ::close(reading);
  ::close(idle);
  CHECK(server.wait(30) == 0);
  CHECK_THAT(server.log(), Catch::Contains("SIGINT: draining"));
}
