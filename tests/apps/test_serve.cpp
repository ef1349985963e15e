// rosetta serve end to end: a copy-task run served on a free port answers as `rosetta translate`
// translates the same sentences (same beam and precision), through a raw HTTP client, curl and
// PyPI's libretranslatepy (a client nobody here wrote, unchanged), with batching across requests
// and without; /languages, /health and /metrics; keep-alive; the command's own errors.
#include <thread>

#include "serve_support.h"

using namespace rosetta::test;
using nlohmann::json;

namespace {

const char* kDecode = "--beam 4 --precision fp32";

std::string joined(const std::vector<std::string>& lines, const std::string& sep = "\n") {
  std::string s;
  for (size_t i = 0; i < lines.size(); ++i) s += (i ? sep : "") + lines[i];
  return s;
}

// Each line sent as its own request by `clients` threads at once: the answers, in line order.
std::vector<std::string> translate_concurrently(int port, const std::vector<std::string>& lines, int clients) {
  std::vector<std::string> out(lines.size());
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      for (size_t i = size_t(c); i < lines.size(); i += size_t(clients)) {
        const HttpReply r = post_json(port, {{"q", lines[i]}, {"source", "de"}, {"target", "en"}});
        const json j = r.json();
        out[i] = r.status == 200 && j.contains("translatedText") ? j["translatedText"].get<std::string>()
                                                                 : "HTTP " + std::to_string(r.status) + " " + r.body;
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("serve: answers equal rosetta translate's, one request per sentence, arrays, texts and forms", "[serve]") {
  TempDir work("serve");
  const std::string run = train_serve_run(work);
  const std::vector<std::string> lines = symbol_lines(48);
  const std::vector<std::string> offline = translate_offline(run, lines, std::string(kDecode) + " --threads 1");
  REQUIRE(offline.size() == lines.size());
  int copied = 0;
  for (size_t i = 0; i < lines.size(); ++i) copied += offline[i] == lines[i];
  REQUIRE(copied >= 40);  // the model copies: its answers are not all alike

  Server server(work, run, std::string(kDecode) + " --threads 2 --max-wait-ms 20");
  const int port = server.port();
  CHECK(translate_concurrently(port, lines, 8) == offline);

  // An array answers an array in order; a text of lines is split, translated and joined back.
  const HttpReply array = post_json(port, {{"q", lines}, {"source", "de"}, {"target", "en"}});
  REQUIRE(array.status == 200);
  CHECK(array.json()["translatedText"] == json(offline));
  const std::vector<std::string> first(lines.begin(), lines.begin() + 5);
  const std::vector<std::string> first_en(offline.begin(), offline.begin() + 5);
  const HttpReply text = post_json(port, {{"q", joined(first) + "\n\n"}, {"source", "auto"}, {"target", "en"}});
  REQUIRE(text.status == 200);
  CHECK(text.json()["translatedText"] == joined(first_en) + "\n\n");
  CHECK(text.json()["detectedLanguage"] == json{{"confidence", 100.0}, {"language", "de"}});
  // A form, as libretranslatepy and LibreTranslate's own page send it; \r\n as Python splits lines.
  std::string q;
  for (const auto& l : first) q += (q.empty() ? "" : "%0D%0A") + std::regex_replace(l, std::regex(" "), "+");
  const HttpReply form =
      http_request(port, "POST", "/translate", "application/x-www-form-urlencoded", "source=de&target=en&q=" + q);
  REQUIRE(form.status == 200);
  CHECK(form.json()["translatedText"] == joined(first_en));
  CHECK_THAT(form.head, Catch::Contains("Content-Type: application/json"));
  CHECK_THAT(form.head, Catch::Contains("Access-Control-Allow-Origin: *"));

  const HttpReply langs = get(port, "/languages");
  CHECK(langs.json() == json::parse(R"([{"code":"de","name":"German","targets":["en"]},
                                        {"code":"en","name":"English","targets":[]}])"));
  CHECK(get(port, "/health").json() == json{{"status", "ok"}});
  const HttpReply metrics = get(port, "/metrics");
  REQUIRE(metrics.status == 200);
  CHECK(metric(metrics.body, "rosetta_serve_requests_total{status=\"200\"}") == double(lines.size() + 3 + 2));
  CHECK(metric(metrics.body, "rosetta_serve_sentences_total") == double(2 * lines.size() + 10));
  CHECK(metric(metrics.body, "rosetta_serve_decoded_sentences_total") == double(2 * lines.size() + 10));
  CHECK(metric(metrics.body, "rosetta_serve_batch_rows_count") >= 1);
  CHECK(metric(metrics.body, "rosetta_serve_queue_sentences") == 0);

  REQUIRE(server.stop() == 0);
  const std::string log = server.log();
  INFO(log);
  CHECK(count_log_lines(log, "POST /translate 200") == int(lines.size()) + 3);
  CHECK_THAT(log, Catch::Contains("POST /translate 200 5 sentences"));
  CHECK_THAT(log, Catch::Contains("drained"));
}

TEST_CASE("serve: --no-batching answers the same, keep-alive serves requests one after another", "[serve]") {
  TempDir work("serve_nobatch");
  const std::string run = train_serve_run(work);
  const std::vector<std::string> lines = symbol_lines(16, 9);
  const std::vector<std::string> offline = translate_offline(run, lines, "--beam 1 --precision fp32 --threads 1");
  Server server(work, run, "--beam 1 --precision fp32 --threads 2 --no-batching");
  CHECK(translate_concurrently(server.port(), lines, 4) == offline);

  // Three requests on one connection, each answered before the next is sent.
  const int fd = connect_to(server.port());
  REQUIRE(fd >= 0);
  for (int i = 0; i < 3; ++i) {
    const std::string body = json{{"q", lines[size_t(i)]}, {"source", "de"}, {"target", "en"}}.dump();
    REQUIRE(send_all(fd, "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n" + body));
    std::string raw;
    for (int k = 0; k < 100 && parse_reply(raw).body.size() < 10; ++k) raw += read_until_closed(fd, 0.1);
    const HttpReply r = parse_reply(raw);
    REQUIRE(r.status == 200);
    CHECK_THAT(r.head, !Catch::Contains("Connection: close"));
    CHECK(r.json()["translatedText"] == offline[size_t(i)]);
  }
  ::close(fd);
  CHECK(server.stop() == 0);
}

TEST_CASE("serve: curl's JSON and form requests", "[serve]") {
  if (run_shell("command -v curl").exit_code != 0) {
    WARN("curl is not installed: the curl requests are not tried");
    return;
  }
  TempDir work("serve_curl");
  const std::string run = train_serve_run(work);
  const std::vector<std::string> lines{"3 1 4 1 5", "0 7 2 6"};
  const std::vector<std::string> offline = translate_offline(run, lines, std::string(kDecode));
  Server server(work, run, kDecode);
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/translate";
  const RunResult j = run_shell("curl -s -X POST " + url +
                                " -H 'Content-Type: application/json' -d '{\"q\": [\"3 1 4 1 5\", \"0 7 2 6\"], "
                                "\"source\": \"de\", \"target\": \"en\"}'");
  INFO(j.output);
  CHECK(json::parse(j.output, nullptr, false) == json{{"translatedText", offline}});
  const RunResult f = run_shell("curl -s " + url + " --data-urlencode 'q=3 1 4 1 5' -d source=de -d target=en");
  INFO(f.output);
  CHECK(json::parse(f.output, nullptr, false) == json{{"translatedText", offline[0]}});
  CHECK(server.stop() == 0);
}

TEST_CASE("serve: PyPI's libretranslatepy translates through it unchanged", "[serve]") {
  if (run_shell("python3 -c 'import libretranslatepy'").exit_code != 0) {
    WARN("python3 cannot import libretranslatepy (pip install libretranslatepy): this test does not run");
    return;
  }
  TempDir work("serve_ltpy");
  const std::string run = train_serve_run(work);
  const std::vector<std::string> lines = symbol_lines(12, 3);
  const std::vector<std::string> offline = translate_offline(run, lines, std::string(kDecode));
  write_file(work / "lines.txt", joined(lines) + "\n");
  write_file(work / "keys.txt", "# one a line\nsecret-key\n");
  write_file(work / "client.py", R"(import json, sys, urllib.error
from libretranslatepy import LibreTranslateAPI
port, lines_file, key = sys.argv[1], sys.argv[2], sys.argv[3] or None
lt = LibreTranslateAPI("http://127.0.0.1:" + port, api_key=key)
lines = open(lines_file, encoding="utf-8").read().split("\n")[:-1]
out = {"languages": lt.languages(), "translations": [lt.translate(l, "de", "en") for l in lines],
       "text": lt.translate("\n".join(lines[:3]), "auto", "en")}
try:
    LibreTranslateAPI("http://127.0.0.1:" + port, api_key="wrong").translate(lines[0], "de", "en")
    out["wrong_key"] = 200
except urllib.error.HTTPError as e:
    out["wrong_key"] = e.code
    out["wrong_key_error"] = json.loads(e.read())["error"]
print(json.dumps(out))
)");
  for (const bool keys : {false, true}) {
    Server server(work, run, std::string(kDecode) + (keys ? " --api-keys " + (work / "keys.txt") : ""),
                  keys ? "serve-keys.log" : "serve.log");
    const RunResult r = run_shell("python3 " + (work / "client.py") + " " + std::to_string(server.port()) + " " +
                                  (work / "lines.txt") + " '" + (keys ? "secret-key" : "") + "'");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const json out = json::parse(r.output);
    CHECK(out["translations"] == json(offline));
    CHECK(out["text"] == offline[0] + "\n" + offline[1] + "\n" + offline[2]);
    CHECK(out["languages"][0]["code"] == "de");
    CHECK(out["wrong_key"] == (keys ? 403 : 200));
    if (keys) CHECK(out["wrong_key_error"] == "Invalid API key");
    CHECK(server.stop() == 0);
  }
}

TEST_CASE("serve: its own errors are one line: a port in use, a bad key file, one language twice", "[serve]") {
  TempDir work("serve_cli");
  const std::string run = train_serve_run(work);
  Server server(work, run, "");
  const std::string port = std::to_string(server.port());
  require_error(run_rosetta("serve --model " + run + " --port " + port),
                {"cannot listen on 127.0.0.1:" + port, "in use"});
  require_error(run_rosetta("serve --model " + run + " --port 0 --api-keys " + (work / "none.txt")),
                {"--api-keys", "none.txt", "cannot be read"});
  write_file(work / "empty.txt", "\n# nothing\n");
  require_error(run_rosetta("serve --model " + run + " --port 0 --api-keys " + (work / "empty.txt")),
                {"--api-keys", "holds no key"});
  require_error(run_rosetta("serve --model " + run + " --port 0 --source en --target en"), {"--source", "en"});
  require_error(run_rosetta("serve --model " + (work / "nope") + " --port 0"), {"nope"});
  require_error(run_rosetta("serve --model " + run + " --port 70000"), {"--port", "70000"});
  CHECK(server.stop() == 0);
}
