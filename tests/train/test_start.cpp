// rosetta::start in a program of its own (tests/train/probe/start_probe.cpp, linking
// rosetta::train alone, as examples/charlm): on a CPU that OpenBLAS misdetects, played by the
// test hooks of start.h, the program runs on the CPU's own core after the self-test, as the
// rosetta CLI does (tests/apps/test_blas_fix.cpp); a failed self-test is one warning the program
// prints; OPENBLAS_CORETYPE set before is never overridden; the wait policy is passive unless
// chosen.
#include <catch2/catch.hpp>

#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rosetta/core/cpu.h"
#include "rosetta/core/tensor.h"
#include "support.h"

namespace {

struct Probe {
  int exit_code = -1;
  std::map<std::string, std::string> said;  // its key=value lines
  std::vector<std::string> warnings;        // its stderr lines
  std::string output;                       // everything, for INFO
};

// Runs the probe with the environment variables `vars` ("NAME=value ...") and none of the BLAS
// ones (nor the wait policy) this test's own environment may hold.
Probe probe(const std::string& vars) {
  const std::string err =
      (std::filesystem::temp_directory_path() / ("rosetta_start_" + std::to_string(std::random_device{}()))).string();
  const std::string cmd =
      "env -u OPENBLAS_CORETYPE -u ROSETTA_BLAS_CORE_WAS -u ROSETTA_BLAS_SELF_TEST_FAILED "
      "-u ROSETTA_TEST_BLAS_MISDETECT -u ROSETTA_TEST_BLAS_SELF_TEST -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " +
      vars + " " + ROSETTA_START_PROBE + " 2>" + err + " </dev/null";
  Probe p;
  const rosetta::test::CommandResult run = rosetta::test::run_command(cmd);
  p.exit_code = run.exit_code;
  p.output = run.output;
  std::istringstream out(p.output);
  for (std::string line; std::getline(out, line);)
    if (const size_t eq = line.find('='); eq != std::string::npos) p.said[line.substr(0, eq)] = line.substr(eq + 1);
  std::ifstream in(err);
  for (std::string line; std::getline(in, line);) {
    p.output += line + "\n";
    p.warnings.push_back(line);
  }
  std::filesystem::remove(err);
  return p;
}

bool same_core(const std::string& a, const std::string& b) { return strcasecmp(a.c_str(), b.c_str()) == 0; }

// The hooks play a misdetection as Prescott (SSE3), which means something only above SSE3.
bool can_play_misdetection() {
  if (rosetta::cpu_isa_level() > rosetta::IsaLevel::sse3) return true;
  WARN("skipped: this CPU (" << rosetta::cpu_isa_name() << ") has nothing better than OpenBLAS's Prescott kernels");
  return false;
}

}  // namespace

TEST_CASE("start: a program of its own on a misdetected core runs on the CPU's own after the self-test",
          "[start][blas]") {
  if (!can_play_misdetection()) return;
  const Probe p = probe("ROSETTA_TEST_BLAS_MISDETECT=Prescott");
  INFO(p.output);
  REQUIRE(p.exit_code == 0);
  REQUIRE(same_core(p.said.at("blas_core"), rosetta::blas_core_for()));
  REQUIRE(p.warnings.empty());
  REQUIRE_THAT(p.said.at("kernels"), Catch::Contains("chosen by rosetta after a self-test: OpenBLAS picked Prescott"));
  REQUIRE(p.said.at("size") == "3.0 MiB");  // the training library ran
}

TEST_CASE("start: a self-test that crashes, is wrong or hangs leaves the program on its core, with one warning",
          "[start][blas]") {
  if (!can_play_misdetection()) return;
  const std::string candidate = rosetta::blas_core_for();
  for (const auto& [hook, reason] : std::vector<std::pair<std::string, std::string>>{
           {"crash", "(killed by SIGABRT)"}, {"wrong", "(wrong result: sgemm NN 1x1x1"}, {"hang", "(no answer within 1 s)"}}) {
    const Probe p = probe("ROSETTA_TEST_BLAS_MISDETECT=Prescott ROSETTA_TEST_BLAS_SELF_TEST=" + hook +
                          " ROSETTA_BLAS_SELF_TEST_TIMEOUT=1");
    INFO(hook << "\n" << p.output);
    REQUIRE(p.exit_code == 0);
    REQUIRE(p.said.at("blas_core") == "Prescott");
    // StartReport::warning, as the program printed it.
    REQUIRE(p.warnings.size() == 1);
    REQUIRE_THAT(p.warnings[0], Catch::StartsWith("start_probe: warning: OpenBLAS picked its Prescott kernels (SSE3)"));
    REQUIRE_THAT(p.warnings[0], Catch::Contains("the " + candidate + " kernels failed a self-test " + reason));
    REQUIRE_THAT(p.warnings[0], Catch::EndsWith("so fp32 products run on Prescott"));
  }
}

TEST_CASE("start: OPENBLAS_CORETYPE set before is never overridden", "[start][blas]") {
  if (!can_play_misdetection()) return;
  for (const std::string extra : {"ROSETTA_TEST_BLAS_SELF_TEST=crash", "ROSETTA_TEST_BLAS_MISDETECT=Sandybridge"}) {
    const Probe p = probe("OPENBLAS_CORETYPE=Prescott " + extra);
    INFO(p.output);
    REQUIRE(p.exit_code == 0);
    REQUIRE(p.said.at("blas_core") == "Prescott");
    REQUIRE(p.warnings.empty());
    REQUIRE_THAT(p.said.at("kernels"), Catch::Contains("OPENBLAS_CORETYPE=Prescott from the environment"));
  }
}

TEST_CASE("start: threads wait passively unless the environment chose", "[start]") {
  REQUIRE(probe("").said.at("omp_wait_policy") == "passive");
  REQUIRE(probe("OMP_WAIT_POLICY=active").said.at("omp_wait_policy") == "active");
  REQUIRE(probe("GOMP_SPINCOUNT=1000").said.at("omp_wait_policy").empty());
}
