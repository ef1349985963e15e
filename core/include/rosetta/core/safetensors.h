// The Hugging Face safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes]  N, the header length, a little-endian u64
//   [N bytes]  JSON header, padded with spaces so that 8 + N is a multiple of 8:
//              {"__metadata__": {"key": "value", ...},
//               "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   [rest]     the data section: each tensor's elements, row-major, little-endian, at
//              [begin, end) relative to the start of this section; packed, no gaps, no overlap.
//
// Supported dtypes: F32, F64, I32. Parsing validates everything before allocating tensors and
// throws rosetta::Error naming the file and the tensor on any malformed input.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rosetta/core/lifetime.h"
#include "rosetta/core/tensor.h"

namespace rosetta {

struct SafeTensors {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in the order of their data in the file
  std::map<std::string, std::string> metadata;          // the "__metadata__" entry

  // The tensor called `name`, or nullptr.
  const Tensor* find(const std::string& name) const ROSETTA_LIFETIMEBOUND;
};

// The bytes of a safetensors file holding `tensors` (written in the given order; non-contiguous
// views are packed) and `metadata`. Names must be unique and not "__metadata__".
std::string serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
// serialize_safetensors, written with write_file_atomic.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Parses the bytes of a safetensors file; `name_for_errors` (usually the path) starts every
// error message.
SafeTensors parse_safetensors(std::string_view bytes, const std::string& name_for_errors);
SafeTensors load_safetensors(const std::string& path);

// Numbers in metadata, whose values are strings: the value of `key`, which must be an integer
// (metadata_int) or a decimal number, "nan" and "inf" included (metadata_double), in full.
// Errors name `file` (usually the path), the key and the value.
int64_t metadata_int(const std::map<std::string, std::string>& metadata, const std::string& key,
                     const std::string& file);
double metadata_double(const std::map<std::string, std::string>& metadata, const std::string& key,
                       const std::string& file);

}  // namespace rosetta
