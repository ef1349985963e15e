// `rosetta serve`'s HTTP/1.1 server: serve_api's LibreTranslate API on a socket, the sentences of
// every request submitted to one TranslationService (which batches them across requests).
//
// Why Boost.Beast (Debian's libboost-dev, headers only) and not Debian 12's cpp-httplib 0.11.4:
// the service must drop a client that sends one byte a second, drop from the queue a request
// whose client went away, and bound its queue. httplib's read timeout restarts at every recv(),
// a handler cannot see its socket (so a client gone mid-request goes unnoticed until the answer
// is written), its task queue is unbounded, and the socket loop that would need changing is
// private. Beast gives each of these directly: one deadline for a whole request
// (tcp_stream::expires_after, set once before it is read), the socket to watch for its client's
// end while the translation is queued, and the acceptor to close for a drain.
//
// Mechanism: one thread runs the network (an asio io_context): accepting, reading, parsing,
// answering. The decoding runs on the service's threads; a finished submission posts its answer
// back to the network thread. So nothing of the network blocks on a translation, and a bad
// request costs only its own parsing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rosetta/translator/service.h"
#include "serve_api.h"

namespace rosetta::cli::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";  // an address or a name; 0.0.0.0 for every interface
  int port = 5000;                 // 0: a free port, logged
  int64_t max_body = 1 << 20;      // bytes of a request body; beyond: 413
  int64_t max_connections = 256;   // open at once; beyond: 503 and closed
  double timeout_s = 30;           // a whole request must arrive, an answer be taken, within this
  int64_t req_limit = -1;          // /translate requests per minute per client address; -1: none
  ApiConfig api;
};

class HttpServer {
 public:
  // Listens on host:port (throws rosetta::Error naming them where it cannot), and from now on a
  // SIGTERM or SIGINT is the server's (before run(), it drains at once when run() starts).
  explicit HttpServer(ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  int port() const;  // the one bound (--port 0 picks one)

  // Serves, submitting translations to `service`, until SIGTERM or SIGINT; then drains: closes the
  // listening socket (connections the kernel had queued are accepted first), closes idle
  // connections, answers every request read, and returns once none is left. A second signal
  // while draining exits at once (status 1). Logs one line per request on stderr:
  //   CLIENT METHOD PATH STATUS N sentences T ms
  void run(translator::TranslationService& service);

 private:
  friend class Session;  // a connection (serve_http.cpp)
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rosetta::cli::serve
