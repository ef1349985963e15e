// rosetta serve's HTTP/1.1 server on Boost.Beast (why Beast: serve_http.h). One network thread;
// each connection is a Session going through these states:
//
//   idle --first bytes--> reading --whole request--> translating --answer--> writing --> idle
//                            |  (deadline: --timeout from the first byte)        (or closed)
//                            +--> an error answer (400, 413, 431), then closed; past the
//                                 deadline (408), closed without one
//
// While translating, the socket is watched: its client's end closing (EOF or reset) sets the
// submission's cancelled flag, so the service drops its sentences not yet decoding; the answer,
// when it comes, is counted as 499 (nginx's "client closed request") and dropped.
#include "serve_http.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <unordered_set>

#include "rosetta/core/check.h"

namespace rosetta::cli::serve {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using beast::error_code;

namespace {

std::string str(beast::string_view s) { return std::string(s.data(), s.size()); }

// A path fit for one log line: control bytes as '?', at most 200 bytes.
std::string loggable(const std::string& s) {
  std::string out = s.substr(0, 200);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s.size() > 200 ? out + "..." : out;
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

constexpr int kClientGone = 499;
constexpr size_t kLingerBytes = size_t(64) << 20;  // discarded at most after an early answer

}  // namespace

class Session;

struct HttpServer::Impl {
  ServerOptions options;
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::signal_set signals{ioc, SIGINT, SIGTERM};
  net::steady_timer accept_retry{ioc};
  translator::TranslationService* service = nullptr;
  RateLimiter limiter;
  HttpCounters counters;
  std::unordered_set<Session*> sessions;  // open connections (the rejected ones apart)
  int64_t rejecting = 0;                  // connections being told 503
  int64_t in_flight = 0;                  // submissions whose answer has not come back
  bool draining = false;

  explicit Impl(ServerOptions o) : options(std::move(o)), limiter(options.req_limit) {}
  void accept();
  void serve_socket(tcp::socket socket);
  void on_signal(const error_code& ec, int sig);
  void maybe_done();
  void log(const std::string& client, const std::string& method, const std::string& path, int status,
           int64_t sentences, Clock::time_point start);
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server) : stream_(std::move(socket)), server_(server) {
    error_code ec;
    const tcp::endpoint peer = stream_.socket().remote_endpoint(ec);
    address_ = ec ? "?" : peer.address().to_string();
    client_ = ec ? "?" : address_ + ":" + std::to_string(peer.port());
  }

  void start() {
    server_.sessions.insert(this);
    ++server_.counters.connections;
    counted_ = true;
    idle();
  }

  // Over --max-connections: 503 at once, without reading the request.
  void reject() {
    ++server_.rejecting;
    rejected_ = true;
    start_ = Clock::now();
    keep_alive_ = false;
    respond(error_response(503, "Service Unavailable: " + std::to_string(server_.options.max_connections) +
                                    " connections are open (--max-connections); retry later"),
            /*linger=*/true);
  }

  // Draining: a connection kept alive between requests is closed; one in a request goes on to its
  // answer, and a new one (accepted before the drain) to its first request's answer.
  void close_if_idle() {
    if (state_ == State::idle && requests_ > 0) finish();
  }

 private:
  enum class State { idle, reading, translating, writing, closed };

  void idle() {
    state_ = State::idle;
    if (server_.draining && requests_ > 0) return finish();
    if (buffer_.size() > 0) return read();  // the next request is here already (pipelined)
    stream_.expires_after(seconds(server_.options.timeout_s));  // a silent connection is closed
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      self->buffer_.commit(n);
      if (ec || self->state_ == State::closed) return self->finish();
      self->read();
    });
  }

  // A request, its header then its body, within one deadline from its first byte.
  void read() {
    state_ = State::reading;
    start_ = Clock::now();
    method_ = path_ = "-";
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(uint64_t(server_.options.max_body));
    stream_.expires_after(seconds(server_.options.timeout_s));
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      self->on_header(ec);
    });
  }

  void on_header(error_code ec) {
    if (ec) return on_read(ec);
    const auto& req = parser_->get();
    method_ = str(req.method_string());
    path_ = loggable(path_of(str(req.target())));
    // curl sends a large body only after "100 Continue" (or a second's wait without it).
    if (beast::iequals(req[http::field::expect], "100-continue") && !parser_->is_done()) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](error_code ec, size_t) {
        if (ec) return self->on_read(ec);
        self->read_body();
      });
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      self->on_read(ec);
    });
  }

  void on_read(error_code ec) {
    if (state_ == State::closed) return;
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
        ec == http::error::partial_message || ec == net::error::operation_aborted)
      return finish();  // the client went away mid-request: nobody to answer
    keep_alive_ = false;
    if (ec == beast::error::timeout) {  // tcp_stream closed the socket at the deadline: nothing can be said
      server_.log(client_, method_, path_, 408, 0, start_);
      return finish();
    }
    if (ec == http::error::body_limit)
      return respond(error_response(413, "Request Entity Too Large: the body is over " +
                                             std::to_string(server_.options.max_body) + " bytes (--max-body)"),
                     true);
    if (ec == http::error::header_limit)
      return respond(error_response(431, "Request Header Fields Too Large: over 16384 bytes"), true);
    if (ec) return respond(error_response(400, "Bad Request: " + ec.message()), true);
    handle();
  }

  void handle() {
    ++requests_;
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive() && !server_.draining;
    start_ = Clock::now();
    Request request{method_, str(req.target()), str(req[http::field::content_type]), req.body()};
    try {
      const Routed r = route(request);
      switch (r.route) {
        case Route::answered: return respond(r.response);
        case Route::options: return respond(Response{200, "", ""});
        case Route::languages: return respond(languages_response(server_.options.api));
        case Route::health: return respond(health_response(server_.draining));
        case Route::metrics: {
          Response m{200, prometheus_text(server_.counters, server_.service->stats(), server_.draining)};
          m.content_type = "text/plain; version=0.0.4; charset=utf-8";
          return respond(m);
        }
        case Route::translate: return translate(request);
      }
    } catch (const std::exception& e) {  // no memory for this request: the others go on
      respond(error_response(500, "Internal Server Error: " + std::string(e.what())));
    }
  }

  void translate(const Request& request) {
    if (!server_.limiter.allow(address_, Clock::now())) return respond(error_response(429, server_.limiter.message()));
    auto parsed = parse_translate(server_.options.api, request);
    if (auto* response = std::get_if<Response>(&parsed)) return respond(*response);
    job_ = std::move(std::get<TranslateJob>(parsed));
    std::vector<std::string> sentences = job_->all_sentences();
    if (sentences.empty()) return respond(answer(server_.options.api, *job_, {}));
    cancelled_ = std::make_shared<std::atomic<bool>>(false);
    auto done = [self = shared_from_this()](std::vector<std::string> out, std::exception_ptr error) {
      net::post(self->server_.ioc, [self, out = std::move(out), error]() mutable {
        self->on_translated(std::move(out), error);
      });
    };
    try {
      server_.service->submit(std::move(sentences), std::move(done), cancelled_);
    } catch (const translator::ServiceBusy&) {
      return respond(error_response(503, "Service Unavailable: " +
                                             std::to_string(server_.service->options().max_pending()) +
                                             " sentences are queued (--max-pending); retry later"));
    } catch (const translator::ServiceClosed&) {
      return respond(error_response(503, "Service Unavailable: draining (shutting down)"));
    }
    ++server_.in_flight;
    state_ = State::translating;
    stream_.expires_never();
    watch();
  }

  // While translating: the client's end closing (EOF, reset) cancels the submission.
  void watch() {
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      if (ec || self->state_ != State::translating) return;  // answered meanwhile
      char c;
      const ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return;  // the next request, pipelined: the client is there
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return self->watch();
      self->cancelled_->store(true);
      self->client_gone_ = true;
      ++self->server_.counters.client_gone;
      self->finish();
    });
  }

  void on_translated(std::vector<std::string> translations, std::exception_ptr error) {
    --server_.in_flight;
    if (client_gone_ || state_ == State::closed) {
      server_.log(client_, method_, path_, kClientGone, job_ ? job_->sentence_count() : 0, start_);
      return server_.maybe_done();
    }
    error_code ignored;
    stream_.socket().cancel(ignored);  // the watch
    if (!error) return respond(answer(server_.options.api, *job_, translations));
    try {
      std::rethrow_exception(error);
    } catch (const translator::ServiceClosed&) {
      respond(error_response(503, "Service Unavailable: draining (shutting down)"));
    } catch (const rosetta::Error& e) {  // the codec refused a sentence
      respond(error_response(400, std::string("Cannot translate text: ") + e.what()));
    } catch (const std::exception& e) {
      respond(error_response(500, std::string("Cannot translate text: ") + e.what()));
    }
  }

  // Writes `r` (then the next request, or closes); `linger`: the request was not read whole, so
  // after the answer the rest of what the client sends is read and dropped for a moment before
  // closing, or the kernel would answer it with a reset that can destroy the answer unread.
  void respond(const Response& r, bool linger = false) {
    state_ = State::writing;
    response_ = {};
    response_.version(parser_ && parser_->is_header_done() ? parser_->get().version() : 11);
    response_.result(unsigned(r.status));
    response_.set(http::field::server, "rosetta/" ROSETTA_VERSION);
    if (!r.content_type.empty()) response_.set(http::field::content_type, r.content_type);
    // As LibreTranslate's after_request: browsers may call it from any page.
    response_.set(http::field::access_control_allow_origin, "*");
    response_.set(http::field::access_control_allow_headers, "Authorization, Content-Type");
    response_.set(http::field::access_control_expose_headers, "Authorization");
    response_.set(http::field::access_control_allow_methods, "GET, POST");
    response_.set(http::field::access_control_allow_credentials, "true");
    response_.set(http::field::access_control_max_age, "1728000");
    response_.keep_alive(keep_alive_ && !server_.draining);
    response_.body() = r.body;
    response_.prepare_payload();
    if (r.status == 200 && r.sentences > 0) server_.counters.sentences += r.sentences;
    server_.log(client_, method_, path_, r.status, r.status == 200 ? r.sentences : 0, start_);
    stream_.expires_after(seconds(server_.options.timeout_s));  // an answer nobody reads is dropped
    http::async_write(stream_, response_, [self = shared_from_this(), linger](error_code ec, size_t) {
      if (ec) return self->finish();
      if (linger) return self->linger();
      if (!self->response_.keep_alive()) return self->finish();
      self->idle();
    });
  }

  void linger() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    buffer_.consume(buffer_.size());
    drain_more();
  }

  void drain_more() {
    stream_.async_read_some(buffer_.prepare(16384), [self = shared_from_this()](error_code ec, size_t n) {
      self->lingered_ += n;
      self->buffer_.consume(self->buffer_.size());
      if (ec || self->lingered_ > kLingerBytes) return self->finish();
      self->drain_more();
    });
  }

  void finish() {
    if (state_ == State::closed) return;
    state_ = State::closed;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    if (counted_) {
      server_.sessions.erase(this);
      --server_.counters.connections;
    }
    if (rejected_) --server_.rejecting;
    server_.maybe_done();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  HttpServer::Impl& server_;
  State state_ = State::idle;
  std::string address_, client_, method_ = "-", path_ = "-";
  bool keep_alive_ = false, client_gone_ = false, counted_ = false, rejected_ = false;
  size_t lingered_ = 0;
  int64_t requests_ = 0;  // read whole on this connection
  Clock::time_point start_ = Clock::now();
  std::optional<TranslateJob> job_;
  std::shared_ptr<std::atomic<bool>> cancelled_;
};

void HttpServer::Impl::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (!ec) serve_socket(std::move(socket));  // accepted before a drain began: served all the same
    if (draining || !acceptor.is_open()) return;
    if (ec && ec != net::error::operation_aborted) {
      // Out of file descriptors (EMFILE) and the like: the connection waits in the kernel's queue
      // while the open ones finish; try again shortly rather than spin.
      spdlog::warn("accept: {}", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(100));
      return accept_retry.async_wait([this](error_code e) {
        if (!e && !draining) accept();
      });
    }
    accept();
  });
}

void HttpServer::Impl::serve_socket(tcp::socket socket) {
  auto session = std::make_shared<Session>(std::move(socket), *this);
  if (int64_t(sessions.size()) < options.max_connections) return session->start();
  // Telling the client costs a moment; past as many again, it is just closed.
  if (rejecting < options.max_connections) return session->reject();
  ++counters.requests_by_status[503];
}

void HttpServer::Impl::on_signal(const error_code& ec, int sig) {
  if (ec) return;
  const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
  if (draining) {
    spdlog::warn("{} again: exiting without waiting for {} request(s) in flight", name, in_flight);
    std::_Exit(1);
  }
  draining = true;
  spdlog::info("{}: draining: no new connections; answering the requests accepted ({} in translation)", name,
               in_flight);
  // The connections the kernel had completed before the signal are accepted, then the rest refused.
  error_code ignored;
  acceptor.cancel(ignored);
  acceptor.non_blocking(true, ignored);
  for (;;) {
    error_code e;
    tcp::socket s(ioc);
    acceptor.accept(s, e);
    if (e) break;
    serve_socket(std::move(s));
  }
  acceptor.close(ignored);
  accept_retry.cancel();
  const std::vector<Session*> open(sessions.begin(), sessions.end());
  for (Session* s : open) s->close_if_idle();
  signals.async_wait([this](const error_code& e, int s) { on_signal(e, s); });
  maybe_done();
}

void HttpServer::Impl::maybe_done() {
  if (draining && sessions.empty() && rejecting == 0 && in_flight == 0) ioc.stop();
}

void HttpServer::Impl::log(const std::string& client, const std::string& method, const std::string& path,
                           int status, int64_t sentences, Clock::time_point start) {
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ++counters.requests_by_status[status];
  counters.latency.observe(seconds);
  spdlog::info("{} {} {} {} {} sentences {:.1f} ms", client, method, path, status, sentences, seconds * 1e3);
}

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  const std::string where = s.options.host + ":" + std::to_string(s.options.port);
  error_code ec;
  tcp::resolver resolver(s.ioc);
  const auto found = resolver.resolve(s.options.host, std::to_string(s.options.port),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) throw Error("--host " + s.options.host + ": " + (ec ? ec.message() : "no address"));
  const tcp::endpoint endpoint = found.begin()->endpoint();
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw Error("cannot listen on " + where + ": " + ec.message() + " (--host, --port)");
}

HttpServer::~HttpServer() = default;

int HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::run(translator::TranslationService& service) {
  Impl& s = *impl_;
  s.service = &service;
  s.accept();
  s.signals.async_wait([&s](const error_code& e, int sig) { s.on_signal(e, sig); });
  const std::string host = s.options.host.find(':') != std::string::npos ? "[" + s.options.host + "]" : s.options.host;
  spdlog::info("listening on http://{}:{} (LibreTranslate's API: POST /translate, GET /languages, /health, /metrics)",
               host, port());
  s.ioc.run();
  spdlog::info("drained: every request accepted was answered ({} in all)", s.counters.latency.count());
}

}  // namespace rosetta::cli::serve
