// The fixtures of the file tests (test_io.cpp: safetensors; test_files.cpp: plain files).
#pragma once

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "support.h"

namespace {

namespace fs = std::filesystem;
using namespace rosetta;
using Catch::Contains;
using Catch::Equals;
using Catch::StartsWith;
using rosetta::test::ScratchDir;

// Writes `bytes` to `path` with a plain stream (not the functions under test).

inline void write_plain(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace
