#include "serve_api.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

namespace rosetta::cli::serve {

using nlohmann::json;

namespace {

// One line of JSON, whatever bytes its strings hold (an invalid UTF-8 sequence becomes U+FFFD).
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// At most `n` bytes of `s`, marked where cut (the dump mends a sequence cut in two).
std::string clip(const std::string& s, size_t n = 200) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The media type of a Content-Type value: "application/json; charset=utf-8" -> "application/json".
std::string media_type(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  const size_t b = t.find_first_not_of(" \t"), e = t.find_last_not_of(" \t");
  return b == std::string::npos ? "" : t.substr(b, e - b + 1);
}

// Flask's request.is_json: application/json, or application/...+json.
bool is_json(const std::string& type) {
  return type == "application/json" || (type.starts_with("application/") && type.ends_with("+json"));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string url_decode(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += char(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The bytes of a line break of Python's str.splitlines() at q[i] (\n, \r\n, \r, \v, \f, \x1c-\x1e,
// U+0085, U+2028, U+2029), 0 where none is.
size_t line_break_at(const std::string& q, size_t i) {
  const auto at = [&](size_t k) { return k < q.size() ? static_cast<unsigned char>(q[k]) : 0; };
  const unsigned char c = at(i);
  if (c == '\r') return at(i + 1) == '\n' ? 2 : 1;
  if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) return 1;
  if (c == 0xC2 && at(i + 1) == 0x85) return 2;
  if (c == 0xE2 && at(i + 1) == 0x80 && (at(i + 2) == 0xA8 || at(i + 2) == 0xA9)) return 3;
  return 0;
}

// A form's q as LibreTranslate reads it: "\n".join(q.splitlines()): each line break becomes '\n',
// and one at the very end goes.
std::string python_lines(const std::string& q) {
  std::string out;
  bool pending_break = false;
  for (size_t i = 0; i < q.size();) {
    const size_t n = line_break_at(q, i);
    if (pending_break) out += '\n';
    pending_break = n > 0;
    if (n == 0) out += q[i];
    i += std::max<size_t>(n, 1);
  }
  return out;
}

// The fields a /translate request gives, from the query string then the body, as request.values
// (form) or request.get_json() reads them; nullopt and *error set where the body cannot be read.
std::optional<json> request_fields(const Request& request, std::string* error) {
  json fields = json::object();
  const size_t q = request.target.find('?');
  std::map<std::string, std::string> values;
  if (q != std::string::npos) values = parse_form(request.target.substr(q + 1));
  const std::string type = media_type(request.content_type);
  if (is_json(type)) {
    try {
      json body = json::parse(request.body);
      if (!body.is_object()) {
        *error = "Invalid JSON format";
        return std::nullopt;
      }
      return body;  // LibreTranslate reads a JSON request's fields from its body alone
    } catch (const json::exception& e) {
      std::string what = e.what();
      if (const size_t b = what.find("] "); what.starts_with("[json.exception") && b != std::string::npos)
        what = what.substr(b + 2);
      *error = "Invalid JSON: " + clip(what, 300);
      return std::nullopt;
    }
  }
  if (type == "application/x-www-form-urlencoded") {
    for (auto& [k, v] : parse_form(request.body)) values.emplace(k, v);  // the query's first
  } else if (type == "multipart/form-data") {
    *error = "Invalid request: multipart/form-data is not supported; send JSON or application/x-www-form-urlencoded";
    return std::nullopt;
  }
  for (const auto& [k, v] : values) {
    if (!valid_utf8(k) || !valid_utf8(v)) {
      *error = "Invalid request: the " + (valid_utf8(k) ? "value of " + clip(k, 40) : std::string("field name")) +
               " is not valid UTF-8";
      return std::nullopt;
    }
    fields[k] = k == "q" ? python_lines(v) : v;
  }
  return fields;
}

// Python's truthiness of a JSON value ("if not q"): null, false, 0, "", [] and {} are false.
bool truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();  // (json::empty() is false for strings)
  if (v.is_array() || v.is_object()) return !v.empty();
  return true;
}

const json& field(const json& fields, const char* name) {
  static const json null;
  const auto it = fields.find(name);
  return it == fields.end() ? null : *it;
}

// LibreTranslate's int(alternatives): a whole number, or a string of one.
std::optional<int64_t> python_int(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && std::isfinite(v.get<double>()) && std::abs(v.get<double>()) < 1e18)
    return int64_t(v.get<double>());
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    s.erase(0, s.find_first_not_of(" \t\n"));
    s.erase(s.find_last_not_of(" \t\n") + 1);
    if (s.empty() || s.size() > 18) return std::nullopt;
    size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    if (i == s.size() || s.find_first_not_of("0123456789_", i) != std::string::npos) return std::nullopt;
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    return std::stoll(s);
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> TranslateJob::all_sentences() const {
  std::vector<std::string> out;
  for (const auto& t : texts) out.insert(out.end(), t.sentences.begin(), t.sentences.end());
  return out;
}

int64_t TranslateJob::sentence_count() const {
  int64_t n = 0;
  for (const auto& t : texts) n += int64_t(t.sentences.size());
  return n;
}

std::string path_of(const std::string& target) { return target.substr(0, target.find('?')); }

Response error_response(int status, const std::string& message) {
  return Response{status, dump(json{{"error", message}})};
}

Routed route(const Request& request) {
  struct Path {
    const char* path;
    const char* method;
    Route route;
  };
  static const Path paths[] = {{"/translate", "POST", Route::translate},
                               {"/languages", "GET", Route::languages},
                               {"/health", "GET", Route::health},
                               {"/metrics", "GET", Route::metrics}};
  const std::string path = path_of(request.target);
  for (const Path& p : paths) {
    if (path != p.path) continue;
    if (request.method == p.method) return {p.route, {}};
    if (request.method == "OPTIONS") return {Route::options, {}};  // a browser's CORS preflight
    return {Route::answered, error_response(405, "Method Not Allowed: " + path + " takes " + p.method)};
  }
  return {Route::answered, error_response(404, "Not Found: " + clip(path, 100) +
                                                   " (the API: POST /translate, GET /languages, /health, /metrics)")};
}

std::variant<TranslateJob, Response> parse_translate(const ApiConfig& config, const Request& request) {
  std::string problem;
  const std::optional<json> fields = request_fields(request, &problem);
  if (!fields) return error_response(400, problem);
  const auto bad = [](const std::string& message) { return error_response(400, message); };

  // access_check: the key first (a missing one too: this server has no keyless use)
  if (!config.api_keys.empty()) {
    const json& key = field(*fields, "api_key");
    if (!truthy(key)) return error_response(403, "Invalid API key: this server needs one (api_key)");
    if (!key.is_string() || !config.api_keys.contains(key.get<std::string>()))
      return error_response(403, "Invalid API key");
  }
  const json &q = field(*fields, "q"), &source = field(*fields, "source"), &target = field(*fields, "target");
  using Field = std::pair<const char*, const json*>;
  for (const auto& [name, value] : {Field{"q", &q}, Field{"source", &source}, Field{"target", &target}})
    if (!truthy(*value)) return bad(std::string("Invalid request: missing ") + name + " parameter");
  if (fields->contains("alternatives")) {
    const std::optional<int64_t> n = python_int(field(*fields, "alternatives"));
    if (!n) return bad("Invalid request: alternatives parameter is not a number");
    if (*n > 0) return bad("Invalid request: alternatives parameter must be <= 0");
  }
  // Types: LibreTranslate lets a wrong one reach its translator (a 500); here it is a 400.
  const bool array = q.is_array();
  if (!q.is_string() && !array) return bad("Invalid request: q must be a string or an array of strings");
  if (array)
    for (const json& t : q)
      if (!t.is_string()) return bad("Invalid request: q must be a string or an array of strings");
  for (const auto& [name, value] : {Field{"source", &source}, Field{"target", &target}})
    if (!value->is_string()) return bad(std::string("Invalid request: ") + name + " must be a string");
  const json& format = field(*fields, "format");
  if (!format.is_null() && !format.is_string()) return bad("Invalid request: format must be a string");

  std::vector<std::string> texts;
  if (array) {
    for (const json& t : q) texts.push_back(t.get<std::string>());
  } else {
    texts.push_back(q.get<std::string>());
  }
  if (config.char_limit >= 0)
    for (const std::string& t : texts)
      if (const int64_t n = code_points(t); n > config.char_limit)
        return bad("Invalid request: request (" + std::to_string(n) + ") exceeds text limit (" +
                   std::to_string(config.char_limit) + ")");

  const std::string src_code = source.get<std::string>(), tgt_code = target.get<std::string>();
  const bool auto_source = src_code == "auto";
  const std::string src = auto_source ? config.source : src_code;
  const auto known = [&](const std::string& code) { return code == config.source || code == config.target; };
  if (!known(src)) return bad(clip(src, 40) + " is not supported");
  if (!known(tgt_code)) return bad(clip(tgt_code, 40) + " is not supported");
  if (src != config.source || tgt_code != config.target)
    return bad(language_name(tgt_code) + " (" + tgt_code + ") is not available as a target language from " +
               language_name(src) + " (" + src + ")");
  if (truthy(format) && format.get<std::string>() != "text") {
    const std::string f = format.get<std::string>();
    return bad(clip(f, 40) + " format is not supported" + (f == "html" ? " (rosetta serve translates text)" : ""));
  }

  TranslateJob job;
  job.array = array;
  job.auto_source = auto_source;
  for (const std::string& t : texts) job.texts.push_back(translator::split_sentences(t));
  if (const int64_t n = job.sentence_count(); n > config.max_sentences)
    return bad("Invalid request: request (" + std::to_string(n) + " sentences) exceeds the sentence limit (" +
               std::to_string(config.max_sentences) + ")");
  return job;
}

Response answer(const ApiConfig& config, const TranslateJob& job, const std::vector<std::string>& translations) {
  json texts = json::array(), detected = json::array();
  const json language = {{"confidence", 100.0}, {"language", config.source}};
  size_t at = 0;
  for (const auto& split : job.texts) {
    // translations holds all_sentences()' translations; a shorter list leaves the rest empty.
    std::vector<std::string> mine(split.sentences.size());
    for (size_t i = 0; i < mine.size() && at < translations.size(); ++i) mine[i] = translations[at++];
    texts.push_back(translator::join_sentences(split, mine));
    detected.push_back(language);
  }
  json out = {{"translatedText", job.array ? texts : texts.empty() ? json("") : texts[0]}};
  if (job.auto_source) out["detectedLanguage"] = job.array ? detected : language;
  Response r{200, dump(out)};
  r.sentences = job.sentence_count();
  return r;
}

Response languages_response(const ApiConfig& config) {
  const json langs = json::array({{{"code", config.source}, {"name", language_name(config.source)},
                                   {"targets", json::array({config.target})}},
                                  {{"code", config.target}, {"name", language_name(config.target)},
                                   {"targets", json::array()}}});
  return Response{200, dump(langs)};
}

Response health_response(bool draining) {
  if (draining) return error_response(503, "Service Unavailable: draining (shutting down)");
  return Response{200, dump(json{{"status", "ok"}})};
}

std::string language_name(const std::string& code) {
  static const std::map<std::string, std::string> names{
      {"ar", "Arabic"},     {"az", "Azerbaijani"}, {"bg", "Bulgarian"}, {"ca", "Catalan"},   {"cs", "Czech"},
      {"da", "Danish"},     {"de", "German"},      {"el", "Greek"},     {"en", "English"},   {"eo", "Esperanto"},
      {"es", "Spanish"},    {"et", "Estonian"},    {"fa", "Persian"},   {"fi", "Finnish"},   {"fr", "French"},
      {"ga", "Irish"},      {"he", "Hebrew"},      {"hi", "Hindi"},     {"hu", "Hungarian"}, {"id", "Indonesian"},
      {"it", "Italian"},    {"ja", "Japanese"},    {"ko", "Korean"},    {"lt", "Lithuanian"}, {"lv", "Latvian"},
      {"ms", "Malay"},      {"nb", "Norwegian"},   {"nl", "Dutch"},     {"pl", "Polish"},    {"pt", "Portuguese"},
      {"ro", "Romanian"},   {"ru", "Russian"},     {"sk", "Slovak"},    {"sl", "Slovenian"}, {"sq", "Albanian"},
      {"sv", "Swedish"},    {"th", "Thai"},        {"tl", "Tagalog"},   {"tr", "Turkish"},   {"uk", "Ukrainian"},
      {"ur", "Urdu"},       {"zh", "Chinese"}};
  const auto it = names.find(code);
  return it == names.end() ? code : it->second;
}

bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return false;  // a continuation byte first, an overlong lead (C0, C1) or over F4
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += len;
  }
  return true;
}

int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::map<std::string, std::string> parse_form(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find('&', at);
    if (end == std::string::npos) end = text.size();
    const std::string pair = text.substr(at, end - at);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      out.emplace(url_decode(pair.substr(0, eq)), eq == std::string::npos ? "" : url_decode(pair.substr(eq + 1)));
    }
    at = end + 1;
  }
  return out;
}

}  // namespace rosetta::cli::serve
