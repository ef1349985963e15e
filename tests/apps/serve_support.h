// Helpers for the tests of `rosetta serve`: a copy-task run to serve, the server as a child process
// on a free port (--port 0, read back from its log), and a plain HTTP/1.1 client on a raw socket
// whose every wait has a deadline, so that a server that hangs fails a test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include <regex>

#include "cli_support.h"

namespace rosetta::test {

// The copy-task run the serve tests translate with: after 400 updates its translations do not
// hang on near ties, so batches of any make-up give the same ones.
inline std::string train_serve_run(const TempDir& work) { return train_copy_run(work, 400); }

// n lines of 3-8 copy symbols (the lengths train_serve_run learns), deterministic.
inline std::vector<std::string> symbol_lines(int n, unsigned seed = 5) {
  std::vector<std::string> out;
  std::mt19937 rng(seed);
  for (int i = 0; i < n; ++i) {
    std::string line;
    for (int k = 0, len = 3 + int(rng() % 6); k < len; ++k) line.append(k ? " " : "").append(std::to_string(rng() % 8));
    out.push_back(line);
  }
  return out;
}

// `rosetta translate` of `lines` with `flags`: its lines.
inline std::vector<std::string> translate_offline(const std::string& run, const std::vector<std::string>& lines,
                                                  const std::string& flags) {
  std::string input;
  for (const auto& l : lines) input += l + "\n";
  const RunResult r = run_shell(std::string(ROSETTA_BIN) + " translate --model " + run + " " + flags + " 2>/dev/null",
                                input);
  REQUIRE(r.exit_code == 0);
  return lines_of(r.output);
}

struct HttpReply {
  int status = 0;  // 0: no status line came (refused, reset or closed before an answer)
  std::string head, body;
  bool connected = false;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
  std::string error() const {
    const auto j = json();
    return j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : "";
  }
};

// A connected TCP socket to 127.0.0.1:port, or -1.
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends all of `data` (false where the peer is gone).
inline bool send_all(int fd, const std::string& data) {
  for (size_t at = 0; at < data.size();) {
    const ssize_t n = ::send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += size_t(n);
  }
  return true;
}

// Reads until the peer closes or `seconds` pass; "" with *timed_out where nothing more came.
inline std::string read_until_closed(int fd, double seconds, bool* timed_out = nullptr) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) {
      if (timed_out) *timed_out = true;
      return out;
    }
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, size_t(n));
  }
}

// A whole answer parsed from `raw` (status 0 where none is).
inline HttpReply parse_reply(const std::string& raw) {
  HttpReply r;
  const size_t end = raw.find("\r\n\r\n");
  std::smatch m;
  const std::string first = raw.substr(0, raw.find("\r\n"));
  if (end == std::string::npos || !std::regex_match(first, m, std::regex(R"(HTTP/1\.[01] (\d{3}) .*)"))) return r;
  r.status = std::stoi(m[1]);
  r.head = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  return r;
}

// One request on a new connection (Connection: close), its answer read until the server closes.
inline HttpReply http_request(int port, const std::string& method, const std::string& target,
                              const std::string& content_type = "", const std::string& body = "",
                              const std::string& headers = "", double seconds = 60) {
  const int fd = connect_to(port);
  if (fd < 0) return {};
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers;
  if (!content_type.empty()) req += "Content-Type: " + content_type + "\r\n";
  if (method == "POST" || !body.empty()) req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  send_all(fd, req + "\r\n" + body);
  HttpReply r = parse_reply(read_until_closed(fd, seconds));
  r.connected = true;
  ::close(fd);
  return r;
}

inline HttpReply post_json(int port, const nlohmann::json& body, const std::string& target = "/translate") {
  return http_request(port, "POST", target, "application/json", body.dump());
}

inline HttpReply get(int port, const std::string& path) { return http_request(port, "GET", path); }

// The value of a metric line "NAME VALUE" in /metrics' text (-1 where absent).
inline double metric(const std::string& text, const std::string& name) {
  for (const std::string& line : lines_of(text))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

// `rosetta serve --model RUN --port 0 ARGS` in the background; port() once it listens.
class Server {
 public:
  Server(const TempDir& work, const std::string& run, const std::string& args,
         const std::string& log_name = "serve.log")
      : proc_("serve --model " + run + " --port 0 " + args, work / log_name) {
    const std::regex listening(R"(listening on http://[^:]+:(\d+) )");
    for (int i = 0; i < 6000 && port_ == 0; ++i) {
      std::smatch m;
      const std::string log = proc_.output();
      if (std::regex_search(log, m, listening)) port_ = std::stoi(m[1]);
      else if (!proc_.running()) break;
      else sleep_ms(10);
    }
    INFO(proc_.output());
    REQUIRE(port_ > 0);
  }
  int port() const { return port_; }
  std::string log() const { return proc_.output(); }
  bool running() { return proc_.running(); }
  // SIGTERM, then the exit status (or -1 where it has not ended within `seconds`).
  int stop(double seconds = 60) {
    kill(proc_.pid, SIGTERM);
    return wait(seconds);
  }
  int wait(double seconds) {
    for (int i = 0; i < int(seconds * 100); ++i) {
      if (!proc_.running()) return proc_.wait();
      sleep_ms(10);
    }
    return -1;
  }
  pid_t pid() const { return proc_.pid; }

 private:
  Proc proc_;
  int port_ = 0;
};

// Access-log lines of the server's log with this status ("... POST /translate 200 ...").
inline int count_log_lines(const std::string& log, const std::string& method_path_status) {
  int n = 0;
  for (const std::string& line : lines_of(log)) n += line.find(" " + method_path_status + " ") != std::string::npos;
  return n;
}

}  // namespace rosetta::test
