// The safetensors header as the reader checks it (internal to core/src/safetensors*.cpp): a
// SAX reader that validates every field of every entry as it arrives, before anything is
// allocated (safetensors_header.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "rosetta/core/shape.h"
#include "rosetta/core/tensor.h"

namespace rosetta::detail {

// The header's key for the string metadata, which no tensor may take.
inline constexpr const char* kMetadataKey = "__metadata__";

// `s` made safe for a one-line message: quoted, control bytes as \xNN, long strings cut.
std::string printable(std::string_view s);

// The message of a nlohmann exception without its "[json.exception.parse_error.101] " prefix.
// It may quote input bytes (possibly a whole long token), so keep it printable and short.
std::string json_error_text(const nlohmann::json::exception& e);

// One tensor entry of the header, validated.
struct HeaderEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
};

// Parses and validates the header of `file` (whose data section has `data_bytes` bytes); entries
// come back in header order, each checked on its own. Throws naming the file and the field.
void read_header(std::string_view header, const std::string& file, uint64_t data_bytes,
                 std::vector<HeaderEntry>* entries, std::map<std::string, std::string>* metadata);

}  // namespace rosetta::detail
