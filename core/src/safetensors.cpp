// safetensors reader and writer. The reader treats its input as hostile: it validates the
// header length, the JSON, every field of every entry, and the exact packing of the data section
// (as the reference implementation does) before it allocates a single tensor, so tensor memory is
// bounded by the size of the input and header memory by what the header holds.
#include "rosetta/core/safetensors.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "rosetta/core/io.h"
#include "safetensors_header.h"

namespace rosetta {

namespace {

using json = nlohmann::json;
using detail::HeaderEntry;
using detail::json_error_text;
using detail::kMetadataKey;
using detail::printable;
using detail::read_header;

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O copies raw bytes and assumes a little-endian host");

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr size_t kLengthBytes = 8;                  // the u64 header length prefix

}  // namespace

const Tensor* SafeTensors::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

SafeTensors parse_safetensors(std::string_view bytes, const std::string& file) {
  ROSETTA_CHECK(bytes.size() >= kLengthBytes, file, ": file is ", bytes.size(),
                " bytes, too short for the 8-byte header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), kLengthBytes);  // little-endian host
  const uint64_t rest = bytes.size() - kLengthBytes;
  ROSETTA_CHECK(header_len <= rest, file, ": header length ", header_len, " exceeds file size ",
                bytes.size());
  ROSETTA_CHECK(header_len <= kMaxHeaderBytes, file, ": header length ", header_len,
                " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  ROSETTA_CHECK(header_len > 0, file, ": header is empty");
  const std::string_view header = bytes.substr(kLengthBytes, header_len);
  ROSETTA_CHECK(header[0] == '{', file,
                ": header does not start with '{' (it must be a JSON object)");
  const std::string_view data = bytes.substr(kLengthBytes + header_len);

  SafeTensors out;
  std::vector<HeaderEntry> entries;
  read_header(header, file, data.size(), &entries, &out.metadata);

  // The tensors must tile the data section exactly: sorted by offsets, each begins where the
  // previous one ended, and the last ends at the end of the file. (Stable, so empty tensors at
  // the same offset keep their header order.)
  std::stable_sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  const HeaderEntry* prev = nullptr;
  for (const HeaderEntry& e : entries) {
    ROSETTA_CHECK(e.begin >= expect, file, ": tensor ", printable(e.name), " at bytes [", e.begin,
                  ", ", e.end, ") overlaps tensor ", printable(prev ? prev->name : ""), " at [",
                  prev ? prev->begin : 0, ", ", expect, ")");
    ROSETTA_CHECK(e.begin == expect, file, ": gap of ", e.begin - expect, " bytes before tensor ",
                  printable(e.name), " at bytes [", e.begin, ", ", e.end, ")");
    expect = e.end;
    prev = &e;
  }
  ROSETTA_CHECK(expect == data.size(), file, ": data section has ", data.size(),
                " bytes, but the tensors cover only ", expect);

  // Only now, with every size checked against the input, allocate.
  out.tensors.reserve(entries.size());
  for (const HeaderEntry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.storage()->data(), data.data() + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

namespace {

// `s` as a JSON string literal, quotes included; throws naming `what` unless s is valid UTF-8.
std::string json_string(const std::string& s, const std::string& what) {
  try {
    return json(s).dump();
  } catch (const json::exception& e) {
    ROSETTA_FAIL(what, " is not valid UTF-8 (", json_error_text(e), ")");
  }
}

std::string serialize(const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata,
                      const std::string& file) {
  // The header is written by hand, in the order of `tensors` (which is the order of the data):
  // {"__metadata__":{"k":"v"},"name":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},...}
  std::string text = "{";
  if (!metadata.empty()) {
    text += "\"__metadata__\":{";
    for (const auto& [k, v] : metadata) {
      if (text.back() != '{') text += ',';
      text += json_string(k, file + ": metadata key " + printable(k));
      text += ':';
      text += json_string(v, file + ": metadata value of " + printable(k));
    }
    text += '}';
  }
  std::set<std::string_view> names;
  std::vector<Tensor> packed;
  packed.reserve(tensors.size());
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::string where = file + ": tensor " + printable(name);
    ROSETTA_CHECK(t.defined(), where, " is undefined");
    ROSETTA_CHECK(name != kMetadataKey, where, ": the name is reserved for metadata");
    ROSETTA_CHECK(names.insert(name).second, where, ": the name is used twice");
    const uint64_t nbytes = uint64_t(t.numel()) * dtype_size(t.dtype());
    if (text.size() > 1) text += ',';
    text += json_string(name, where + ": the name");
    text += ":{\"dtype\":\"";
    text += dtype_name(t.dtype());
    text += "\",\"shape\":[";
    for (int i = 0; i < t.dim(); ++i)
      text.append(i ? "," : "").append(std::to_string(t.shape()[i]));
    text.append("],\"data_offsets\":[").append(std::to_string(offset)).append(",");
    text.append(std::to_string(offset + nbytes)).append("]}");
    offset += nbytes;
    packed.push_back(t.contiguous());
  }
  text += '}';
  // Pad with spaces so that the data section starts 8-byte aligned.
  text.append((kLengthBytes - text.size() % kLengthBytes) % kLengthBytes, ' ');

  std::string out;
  out.reserve(kLengthBytes + text.size() + offset);
  const uint64_t header_len = text.size();
  out.append(reinterpret_cast<const char*>(&header_len), kLengthBytes);  // little-endian host
  out += text;
  for (const Tensor& t : packed) {
    const size_t esize = dtype_size(t.dtype());
    const char* p = static_cast<const char*>(t.storage()->data()) + t.offset() * esize;
    out.append(p, size_t(t.numel()) * esize);
  }
  return out;
}

}  // namespace

std::string serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  return serialize(tensors, metadata, "serialize_safetensors");
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize(tensors, metadata, path));
}

SafeTensors load_safetensors(const std::string& path) {
  return parse_safetensors(read_regular_file(path), path);
}

namespace {
// from_chars reads no leading space or '+', and no locale: the value must be the number alone.
template <class T>
T metadata_number(const std::map<std::string, std::string>& metadata, const std::string& key,
                  const std::string& file, const char* what) {
  const auto it = metadata.find(key);
  ROSETTA_CHECK(it != metadata.end(), file, " has no ", key, " in its metadata");
  const std::string& s = it->second;
  T v{};
  const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
  ROSETTA_CHECK(err == std::errc() && end == s.data() + s.size(), file, ": ", key, " = '", s, "' is not ",
                what);
  return v;
}
}  // namespace

int64_t metadata_int(const std::map<std::string, std::string>& metadata, const std::string& key,
                     const std::string& file) {
  return metadata_number<int64_t>(metadata, key, file, "an integer");
}

double metadata_double(const std::map<std::string, std::string>& metadata, const std::string& key,
                       const std::string& file) {
  return metadata_number<double>(metadata, key, file, "a number");
}

}  // namespace rosetta
