#include "safetensors_header.h"

#include <algorithm>
#include <limits>

#include "rosetta/core/check.h"

namespace rosetta::detail {

using json = nlohmann::json;

std::string printable(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string out = "'";
  size_t n = s.size();
  if (n > kMax) {
    n = kMax;
    while (n > 0 && (uint8_t(s[n]) & 0xC0) == 0x80) --n;  // do not split a UTF-8 sequence
  }
  for (size_t i = 0; i < n; ++i) {
    const uint8_t c = uint8_t(s[i]);
    if (c < 0x20 || c == 0x7F || c == '\\' || c == '\'') {
      const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  if (n < s.size()) out += "...";
  return out + "'";
}

std::string json_error_text(const nlohmann::json::exception& e) {
  constexpr size_t kMax = 200;
  std::string what = e.what();
  const size_t close = what.find("] ");
  if (what.rfind("[json.exception.", 0) == 0 && close != std::string::npos)
    what.erase(0, close + 2);
  if (what.size() > kMax) what = what.substr(0, kMax) + "...";
  for (char& c : what)
    if (uint8_t(c) < 0x20 || uint8_t(c) >= 0x7F) c = '?';
  return what;
}

namespace {

bool parse_dtype(const std::string& s, DType* out) {
  for (DType t : {DType::f32, DType::f64, DType::i32}) {
    if (s == dtype_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

// A scalar JSON value as the SAX parser reports it: enough to check its type and describe it.
struct Scalar {
  enum Kind { null, boolean, negative_int, unsigned_int, number, string };
  explicit Scalar(Kind k) : kind(k) {}

  Kind kind;
  uint64_t u = 0;         // unsigned_int
  int64_t i = 0;          // negative_int
  std::string_view text;  // number (as written) and string

  std::string describe() const {
    switch (kind) {
      case null: return "null";
      case boolean: return "a boolean";
      case negative_int: return std::to_string(i);
      case unsigned_int: return std::to_string(u);
      case number: return "the number " + std::string(text.substr(0, 40));
      case string: return "the string " + printable(text);
    }
    return "?";
  }
};

constexpr uint64_t kMaxI64 = uint64_t(std::numeric_limits<int64_t>::max());

// Reads the JSON header as a stream of SAX events (nlohmann::json::sax_parse), checking each
// value against the schema as it arrives and keeping only the validated entries. No JSON tree
// is built, so memory is proportional to what is kept and the first error stops the parse.
// (nlohmann's DOM callback parser was quadratic in the number of entries.) Unknown fields of an
// entry are skipped, as by the reference implementation.
//
// Schema: { "__metadata__": null | {key: string, ...},
//           name: {"dtype": string, "shape": [uint, ...], "data_offsets": [uint, uint]}, ... }
class HeaderReader {
 public:
  HeaderReader(const std::string& file, uint64_t data_bytes)
      : file_(file), data_bytes_(data_bytes) {}

  std::vector<HeaderEntry> entries;  // in header order
  std::map<std::string, std::string> metadata;

  // --- the nlohmann SAX interface; each returns true or throws rosetta::Error ---
  bool null() { return scalar(Scalar(Scalar::null)); }
  bool boolean(bool) { return scalar(Scalar(Scalar::boolean)); }
  bool number_integer(int64_t v) {  // the lexer reports numbers written with '-' here, even -0
    Scalar s(v < 0 ? Scalar::negative_int : Scalar::unsigned_int);
    s.i = v;
    s.u = v < 0 ? 0 : uint64_t(v);
    return scalar(s);
  }
  bool number_unsigned(uint64_t v) {
    Scalar s(Scalar::unsigned_int);
    s.u = v;
    return scalar(s);
  }
  bool number_float(double, const std::string& text) {  // also integers beyond 64 bits
    Scalar s(Scalar::number);
    s.text = text;
    return scalar(s);
  }
  bool string(std::string& v) {
    Scalar s(Scalar::string);
    s.text = v;
    return scalar(s);
  }
  // Binary values come only from binary formats (CBOR, ...), never from JSON text.
  bool binary(json::binary_t&) { return scalar(Scalar(Scalar::null)); }
  bool start_object(size_t) { return open(true); }
  bool start_array(size_t) { return open(false); }
  bool key(std::string& k);
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(size_t, const std::string&, const json::exception& e) {
    ROSETTA_FAIL(file_, ": header is not valid JSON: ", json_error_text(e));
  }

 private:
  // Where the next value goes: what container we are in.
  enum class In { start, root, entry, metadata, shape, offsets, end };
  enum Field { kNone = 0, kDtype = 1, kShape = 2, kOffsets = 4 };

  static const char* field_name(int f) {
    return f == kDtype ? "dtype" : f == kShape ? "shape" : "data_offsets";
  }
  // "file: tensor 'name'", the start of every message about the current entry.
  std::string where() const { return file_ + ": tensor " + printable(member_); }

  // Consumes events that belong to the value of an unknown field. `depth` is +1 for a
  // container start, -1 for its end, 0 for a scalar or a key.
  bool skipped(int depth) {
    if (skip_depth_ > 0) {
      skip_depth_ += depth;
      return true;
    }
    if (skip_next_ && depth >= 0) {  // the unknown field's value starts here
      skip_next_ = false;
      skip_depth_ = depth;
      return true;
    }
    return false;
  }

  bool scalar(const Scalar& v);
  bool open(bool object);
  bool close();
  void finish_entry();

  const std::string& file_;
  const uint64_t data_bytes_;
  In in_ = In::start;
  int skip_depth_ = 0;      // > 0 inside the value of an unknown field
  bool skip_next_ = false;  // the next value is that of an unknown field
  std::string member_;      // the current top-level key (a tensor name or "__metadata__")
  bool metadata_seen_ = false;
  std::string meta_key_;  // the current key within "__metadata__"
  HeaderEntry entry_;           // the entry being read
  int field_ = kNone;     // its field whose value comes next
  int seen_fields_ = 0;   // its fields read so far (a mask of Field)
  int n_offsets_ = 0;
  uint64_t offsets_[2] = {0, 0};
};

bool HeaderReader::scalar(const Scalar& v) {
  if (skipped(0)) return true;
  switch (in_) {
    case In::start:
    case In::end:
      ROSETTA_FAIL(file_, ": header is ", v.describe(), ", expected a JSON object");
    case In::root:
      if (member_ == kMetadataKey) {
        ROSETTA_CHECK(v.kind == Scalar::null, file_, ": ", kMetadataKey, " is ", v.describe(),
                      ", expected an object of strings");
        return true;  // null metadata is allowed by the reference implementation
      }
      ROSETTA_FAIL(where(), ": entry is ", v.describe(),
                   ", expected an object with dtype, shape and data_offsets");
    case In::entry:
      if (field_ == kDtype) {
        ROSETTA_CHECK(v.kind == Scalar::string, where(), ": dtype is ", v.describe(),
                      ", expected a string");
        ROSETTA_CHECK(parse_dtype(std::string(v.text), &entry_.dtype), where(), ": dtype ",
                      printable(v.text), " is not supported (rosetta reads F32, F64 and I32)");
        return true;
      }
      ROSETTA_FAIL(where(), ": ", field_name(field_), " is ", v.describe(), ", expected ",
                   field_ == kShape ? "an array" : "[begin, end]");
    case In::metadata:
      ROSETTA_CHECK(v.kind == Scalar::string, file_, ": ", kMetadataKey, " value of ",
                    printable(meta_key_), " is ", v.describe(), ", expected a string");
      metadata.emplace(meta_key_, std::string(v.text));
      return true;
    case In::shape: {
      const int i = entry_.shape.size();
      ROSETTA_CHECK(i < Shape::kMaxDims, where(), ": shape has more than ", Shape::kMaxDims,
                    " dimensions, the most rosetta supports");
      ROSETTA_CHECK(v.kind == Scalar::unsigned_int && v.u <= kMaxI64, where(),
                    ": shape dimension ", i, " is ", v.describe(),
                    ", expected an integer in [0, 2^63)");
      entry_.shape.push_back(int64_t(v.u));
      return true;
    }
    case In::offsets:
      ROSETTA_CHECK(n_offsets_ < 2, where(),
                    ": data_offsets has more than 2 values, expected [begin, end]");
      ROSETTA_CHECK(v.kind == Scalar::unsigned_int, where(), ": data_offsets ",
                    n_offsets_ == 0 ? "begin" : "end", " is ", v.describe(),
                    ", expected a non-negative integer");
      offsets_[n_offsets_++] = v.u;
      return true;
  }
  return true;
}

bool HeaderReader::open(bool object) {
  if (skipped(1)) return true;
  const char* what = object ? "an object" : "an array";
  switch (in_) {
    case In::start:
      ROSETTA_CHECK(object, file_, ": header is an array, expected a JSON object");
      in_ = In::root;
      return true;
    case In::end:
      ROSETTA_FAIL(file_, ": header has content after its JSON object");
    case In::root:
      if (member_ == kMetadataKey) {
        ROSETTA_CHECK(object, file_, ": ", kMetadataKey,
                      " is an array, expected an object of strings");
        in_ = In::metadata;
        return true;
      }
      ROSETTA_CHECK(object, where(),
                    ": entry is an array, expected an object with dtype, shape and data_offsets");
      entry_ = HeaderEntry{};
      entry_.name = member_;
      seen_fields_ = 0;
      n_offsets_ = 0;
      in_ = In::entry;
      return true;
    case In::entry:
      if (!object && field_ == kShape) {
        in_ = In::shape;
        return true;
      }
      if (!object && field_ == kOffsets) {
        in_ = In::offsets;
        return true;
      }
      ROSETTA_FAIL(where(), ": ", field_name(field_), " is ", what, ", expected ",
                   field_ == kDtype ? "a string" : field_ == kShape ? "an array" : "[begin, end]");
    case In::metadata:
      ROSETTA_FAIL(file_, ": ", kMetadataKey, " value of ", printable(meta_key_), " is ", what,
                   ", expected a string");
    case In::shape:
      ROSETTA_CHECK(entry_.shape.size() < Shape::kMaxDims, where(), ": shape has more than ",
                    Shape::kMaxDims, " dimensions, the most rosetta supports");
      ROSETTA_FAIL(where(), ": shape dimension ", entry_.shape.size(), " is ", what,
                   ", expected an integer in [0, 2^63)");
    case In::offsets:
      ROSETTA_CHECK(n_offsets_ < 2, where(),
                    ": data_offsets has more than 2 values, expected [begin, end]");
      ROSETTA_FAIL(where(), ": data_offsets ", n_offsets_ == 0 ? "begin" : "end", " is ", what,
                   ", expected a non-negative integer");
  }
  return true;
}

bool HeaderReader::key(std::string& k) {
  if (skipped(0)) return true;  // never the start of a skipped value: keys are not values
  switch (in_) {
    case In::root:
      member_ = k;
      if (member_ == kMetadataKey) {
        ROSETTA_CHECK(!metadata_seen_, file_, ": ", kMetadataKey, " appears twice in the header");
        metadata_seen_ = true;
      }
      return true;
    case In::entry:
      field_ = k == "dtype"          ? kDtype
               : k == "shape"        ? kShape
               : k == "data_offsets" ? kOffsets
                                     : kNone;
      if (field_ == kNone) {
        skip_next_ = true;
        return true;
      }
      ROSETTA_CHECK(!(seen_fields_ & field_), where(), ": field ", printable(k),
                    " appears twice");
      seen_fields_ |= field_;
      return true;
    case In::metadata:
      ROSETTA_CHECK(!metadata.count(k), file_, ": ", kMetadataKey, " has the key ", printable(k),
                    " twice");
      meta_key_ = k;
      return true;
    default:
      return true;  // keys occur only in objects, and every other object is skipped
  }
}

bool HeaderReader::close() {
  if (skipped(-1)) return true;
  switch (in_) {
    case In::root: in_ = In::end; break;
    case In::metadata: in_ = In::root; break;
    case In::entry:
      finish_entry();
      in_ = In::root;
      break;
    case In::shape: in_ = In::entry; break;
    case In::offsets:
      ROSETTA_CHECK(n_offsets_ == 2, where(), ": data_offsets has ", n_offsets_,
                    n_offsets_ == 1 ? " value" : " values", ", expected [begin, end]");
      in_ = In::entry;
      break;
    default: break;
  }
  return true;
}

// Checks a complete entry on its own: its fields are all present, its shape fits in int64, and
// its byte range lies in the data section and matches the shape.
void HeaderReader::finish_entry() {
  for (int f : {kDtype, kShape, kOffsets})
    ROSETTA_CHECK(seen_fields_ & f, where(), ": missing field '", field_name(f), "'");
  HeaderEntry& e = entry_;
  // The product of max(dim, 1) bounds numel and the strides; it must fit in int64.
  uint64_t span = 1;
  for (int i = 0; i < e.shape.size(); ++i) {
    ROSETTA_CHECK(!__builtin_mul_overflow(span, std::max<uint64_t>(e.shape[i], 1), &span) &&
                      span <= kMaxI64,
                  where(), ": shape is too large: the product of its first ", i + 1,
                  " dimensions exceeds 2^63 - 1");
  }
  e.begin = offsets_[0];
  e.end = offsets_[1];
  ROSETTA_CHECK(e.begin <= e.end, where(), ": data_offsets [", e.begin, ", ", e.end,
                "] end before they begin");
  ROSETTA_CHECK(e.end <= data_bytes_, where(), ": data_offsets [", e.begin, ", ", e.end,
                "] run past the end of the data section (", data_bytes_, " bytes)");
  uint64_t nbytes = 0;
  const bool too_big =
      __builtin_mul_overflow(uint64_t(e.shape.numel()), dtype_size(e.dtype), &nbytes);
  ROSETTA_CHECK(!too_big && e.end - e.begin == nbytes, where(), ": data_offsets [", e.begin, ", ",
                e.end, "] hold ", e.end - e.begin, " bytes, but shape ", e.shape, " of ",
                dtype_name(e.dtype), " needs ",
                too_big ? "more than 2^64" : std::to_string(nbytes));
  entries.push_back(std::move(e));
}

}  // namespace

void read_header(std::string_view header, const std::string& file, uint64_t data_bytes,
                 std::vector<HeaderEntry>* entries, std::map<std::string, std::string>* metadata) {
  HeaderReader reader(file, data_bytes);
  const bool ok = json::sax_parse(header.data(), header.data() + header.size(), &reader);
  ROSETTA_CHECK(ok, file, ": header is not valid JSON");  // the reader throws first

  // Duplicate tensor names (nlohmann would not tell): sort by name, compare neighbours.
  std::vector<const HeaderEntry*> by_name;
  by_name.reserve(reader.entries.size());
  for (const HeaderEntry& e : reader.entries) by_name.push_back(&e);
  std::sort(by_name.begin(), by_name.end(),
            [](const HeaderEntry* a, const HeaderEntry* b) { return a->name < b->name; });
  for (size_t i = 1; i < by_name.size(); ++i) {
    ROSETTA_CHECK(by_name[i - 1]->name != by_name[i]->name, file, ": tensor ",
                  printable(by_name[i]->name), " appears twice in the header");
  }
  *entries = std::move(reader.entries);
  *metadata = std::move(reader.metadata);
}

}  // namespace rosetta::detail
