// Shared test helpers: random tensors, non-contiguous variants, a tensor closeness matcher, and
// a scratch directory.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "rosetta/core/ops.h"
#include "rosetta/core/random.h"

namespace rosetta::test {

// A fresh directory under the system temp dir, removed with its content on scope exit.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("rosetta_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  // The names in it, sorted.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
};

// Largest |a - b| / (atol/rtol-weighted scale) over all elements; <= 1 means close.
inline double closeness(const Tensor& a, const Tensor& b, double rtol, double atol) {
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    if (va[i] == vb[i]) continue;  // exact, including equal infinities
    const double err = std::abs(va[i] - vb[i]) / (atol + rtol * std::abs(vb[i]));
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  return worst;
}

class AllCloseMatcher : public Catch::MatcherBase<Tensor> {
 public:
  AllCloseMatcher(Tensor expected, double rtol, double atol)
      : expected_(std::move(expected)), rtol_(rtol), atol_(atol) {}
  bool match(const Tensor& actual) const override {
    return actual.shape() == expected_.shape() && closeness(actual, expected_, rtol_, atol_) <= 1;
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "is close to " << expected_.str() << " (rtol " << rtol_ << ", atol " << atol_ << ")";
    return os.str();
  }

 private:
  Tensor expected_;
  double rtol_, atol_;
};

inline AllCloseMatcher AllClose(const Tensor& expected, double rtol = 1e-5, double atol = 1e-6) {
  return AllCloseMatcher(expected, rtol, atol);
}

// The same values as `t`, laid out non-contiguously: a strided slice of a larger buffer.
inline Tensor non_contiguous(const Tensor& t) {
  Shape big = t.shape();
  if (big.size() == 0) return t.clone();
  big[big.size() - 1] *= 2;
  Tensor buf = Tensor::full(big, 1234.0, t.dtype());
  Tensor view = buf.slice(-1, 0, big.back(), 2);
  view.copy_(t);
  REQUIRE_FALSE((view.is_contiguous() && view.numel() > 1 && t.shape().back() > 1));
  return view;
}

// A transposed view holding the values of `t` (same shape as t, swapped strides).
inline Tensor transposed_layout(const Tensor& t) {
  REQUIRE(t.dim() >= 2);
  return t.transpose(-1, -2).contiguous().transpose(-1, -2);
}

// Runs `command` with /bin/sh and returns its exit status (128 + the signal where one ended it)
// and what it wrote on stdout.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace rosetta::test

namespace rosetta {
inline std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }
}  // namespace rosetta
