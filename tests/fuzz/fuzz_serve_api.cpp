// libFuzzer target for rosetta serve's request handling without sockets (apps/serve_api.h): the
// route of a request, and /translate's body parsed and checked (JSON, forms, query strings), then
// answered with each sentence "translated" as itself. Every input must give an answer, never
// throw: a status the API uses, one line of JSON, an error object of one string where the status
// is not 200, and for a job, sentences that join back into its texts (a JSON q comes back as it
// was sent).
//
// Input layout: byte 0 picks the content type and the API's configuration (a key required, a
// character limit), byte 1 the method; the rest up to the first '\n' is the request target, the
// rest after it the body.
//
// Built by scripts/ci-extra.sh (CMake, -DROSETTA_FUZZ=ON with clang); seeds in
// corpus/serve_api/, dictionary serve_api.dict.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <variant>

#include "serve_api.h"

namespace {

using namespace rosetta::cli::serve;

void require(bool ok) {
  if (!ok) std::abort();
}

// One line of JSON; an error answer is {"error": "<one string>"}.
void check(const Response& r) {
  static const std::set<int> statuses{200, 400, 403, 404, 405, 503};
  require(statuses.contains(r.status));
  require(r.body.find('\n') == std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  require(!j.is_discarded());
  if (r.status != 200) require(j.is_object() && j.size() == 1 && j.contains("error") && j["error"].is_string());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const char* types[] = {"application/json", "application/x-www-form-urlencoded", "",
                                "text/plain", "application/vnd.api+json; charset=utf-8",
                                "multipart/form-data; boundary=b", "APPLICATION/JSON", "application/json;"};
  static const char* methods[] = {"POST", "GET", "OPTIONS", "PUT"};
  ApiConfig config;
  if (data[0] & 0x08) config.api_keys = {"key"};
  if (data[0] & 0x10) config.char_limit = 8;
  if (data[0] & 0x20) config.max_sentences = 3;
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t nl = rest.find('\n');
  Request request{methods[data[1] % 4], nl == std::string::npos ? "/translate" : rest.substr(0, nl),
                  types[data[0] % 8], nl == std::string::npos ? rest : rest.substr(nl + 1)};

  const Routed routed = route(request);
  if (routed.route == Route::answered) check(routed.response);
  request.target = "/translate" + (request.target.find('?') == std::string::npos
                                       ? std::string()
                                       : request.target.substr(request.target.find('?')));
  auto parsed = parse_translate(config, request);
  if (const auto* error = std::get_if<Response>(&parsed)) {
    require(error->status == 400 || error->status == 403);
    check(*error);
    return 0;
  }
  const TranslateJob& job = std::get<TranslateJob>(parsed);
  require(job.sentence_count() <= config.max_sentences);
  const std::vector<std::string> sentences = job.all_sentences();
  require(int64_t(sentences.size()) == job.sentence_count());
  for (const std::string& s : sentences) require(!s.empty() && s.find('\n') == std::string::npos);
  const Response r = answer(config, job, sentences);  // each sentence as its own translation
  check(r);
  const nlohmann::json j = nlohmann::json::parse(r.body);
  require(j["translatedText"].is_array() == job.array);
  require(j.contains("detectedLanguage") == job.auto_source);
  if (data[0] % 8 == 0 || data[0] % 8 >= 6) {  // a JSON body: q, split and joined, is q again
    const nlohmann::json in = nlohmann::json::parse(request.body);
    require(j["translatedText"] == in["q"]);
  }
  return 0;
}
