// rosetta serve: a trained run as a translation service with LibreTranslate's HTTP API, batching
// the sentences of concurrent requests together (translator/service.h; the HTTP side in
// serve_http.h, the API in serve_api.h).
#include <fstream>
#include <set>
#include <string>

#include "commands.h"
#include "decode_args.h"
#include "log.h"
#include "rosetta/train/resources.h"
#include "rosetta/translator/service.h"
#include "serve_http.h"
#include "layers.h"

namespace rosetta::cli {

namespace {

struct ServeArgs {
  std::string model, checkpoint = "best", api_keys;
  DecodeArgs decode;
  int64_t batch_tokens = 2048, max_pending = 8192;
  int threads = 0, max_wait_ms = 5;
  bool no_batching = false;
  serve::ServerOptions server;
};

// The keys of --api-keys FILE: one a line; blank lines and lines starting with '#' skipped,
// whitespace around a key ignored.
std::set<std::string> read_api_keys(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("--api-keys " + path + ": cannot be read");
  std::set<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    const size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    keys.insert(line.substr(b, e - b + 1));
  }
  if (in.bad()) throw Error("--api-keys " + path + ": read failed");
  if (keys.empty()) throw Error("--api-keys " + path + ": holds no key (one a line)");
  return keys;
}

void run(ServeArgs a) {
  if (!a.api_keys.empty()) a.server.api.api_keys = read_api_keys(a.api_keys);
  if (a.server.api.source == a.server.api.target)
    throw Error("--source and --target are both " + a.server.api.source + ": name the model's language pair");
  serve::HttpServer server(a.server);  // the port is taken (or refused) before the model loads
  set_num_threads(a.threads);
  apply_precision(a.decode.precision);
  const MemoryBudget budget(a.decode.memory_limit);
  budget.check(loading_plan(weights_to_load(a.model, a.checkpoint)));
  const Translator t = Translator::load(a.model, a.checkpoint);
  const auto& d = a.decode;
  translator::TranslationService service(
      t, translator::ServiceOptions()
             .search(d.options()).batch_tokens(a.batch_tokens).threads(a.threads)
             .max_wait_ms(a.max_wait_ms).max_pending(a.max_pending).across_requests(!a.no_batching));
  spdlog::info("{} ({} -> {}): beam {}, {} decoder thread(s), batches of {} source tokens{}", a.model,
               a.server.api.source, a.server.api.target, d.beam, a.threads > 0 ? a.threads : get_num_threads(),
               a.batch_tokens, a.no_batching ? ", each request decoded on its own (--no-batching)" : "");
  server.run(service);
  service.close();
}

}  // namespace

void register_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  serve::ServerOptions& s = a->server;
  CLI::App* cmd = app.add_subcommand(
      "serve", "serve a run over HTTP with LibreTranslate's API, batching the sentences of concurrent requests");
  cmd->add_option("--model", a->model, "run directory made by rosetta train")->required();
  cmd->add_option("--checkpoint", a->checkpoint, kCheckpointHelp)->check(CLI::IsMember(kCheckpointChoices));
  cmd->add_option("--host", s.host, "address to listen on (0.0.0.0: every interface)")->capture_default_str();
  cmd->add_option("--port", s.port, "port to listen on (0: a free one, logged)")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--source", s.api.source, "the model's source language (ISO 639-1 code)")->capture_default_str();
  cmd->add_option("--target", s.api.target, "the model's target language")->capture_default_str();
  add_decode_options(*cmd, a->decode);
  cmd->add_option("--batch-tokens", a->batch_tokens, "source tokens per decoding batch")
      ->check(CLI::Range(1, 1 << 24))->capture_default_str();
  cmd->add_option("--threads", a->threads, "decoder threads, each decoding one batch at a time (0: default)")
      ->check(CLI::Range(0, 1024))->capture_default_str();
  cmd->add_option("--max-wait-ms", a->max_wait_ms, "how long a sentence may wait for a batch to fill")
      ->check(CLI::Range(0, 10000))->capture_default_str();
  cmd->add_flag("--no-batching", a->no_batching,
                "decode each request on its own, never batched with another's sentences (for comparisons)");
  cmd->add_option("--max-body", s.max_body, "bytes of a request body at most (beyond: 413)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30))->capture_default_str();
  cmd->add_option("--char-limit", s.api.char_limit, "characters per text at most (beyond: 400; -1: none)")
      ->check(CLI::Range(int64_t(-1), int64_t(1) << 30))->capture_default_str();
  cmd->add_option("--max-sentences", s.api.max_sentences, "sentences per request at most (beyond: 400)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))->capture_default_str();
  cmd->add_option("--max-connections", s.max_connections, "connections open at once at most (beyond: 503)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))->capture_default_str();
  cmd->add_option("--max-pending", a->max_pending, "sentences queued for decoding at most (beyond: 503)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24))->capture_default_str();
  cmd->add_option("--timeout", s.timeout_s,
                  "seconds for a whole request to arrive from its first byte, for an answer to be taken, and "
                  "for an idle connection to stay open")
      ->check(finite_range(0.1, 3600))->capture_default_str();
  cmd->add_option("--req-limit", s.req_limit,
                  "translate requests per minute per client address (beyond: 429; -1: none)")
      ->check(CLI::Range(int64_t(-1), int64_t(1) << 30))->capture_default_str();
  cmd->add_option("--api-keys", a->api_keys,
                  "file of API keys, one a line: then a request without one of them gets 403");
  cmd->callback([a] { run(*a); });
}

}  // namespace rosetta::cli
