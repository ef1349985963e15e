// The CLI's choice of OpenBLAS kernels (rosetta::start, core/start.h), with its test hooks playing a CPU that
// OpenBLAS misdetects: the better core is taken after a self-test in a child process; a
// self-test that crashes, computes a wrong result or hangs costs one warning line, not the run;
// the user's OPENBLAS_CORETYPE is never overridden.
#include <strings.h>

#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "rosetta/core/cpu.h"
#include "rosetta/core/tensor.h"

using rosetta::test::RunResult;
using rosetta::test::TempDir;

namespace {

struct Outcome {
  int exit_code = -1;
  std::string core;                   // "blas_core" of the bench's JSON lines
  std::string kernels;                // and its "kernels" (kernels_summary())
  std::vector<std::string> warnings;  // stderr lines about the self-test
  std::string output;                 // everything, for INFO
};

// A quick `rosetta bench --decode` (~0.2 s) with the environment variables `vars`
// ("NAME=value ...") and none of the BLAS ones this test's own environment may hold.
Outcome bench_with(const std::string& vars) {
  TempDir dir("blas_fix");
  const RunResult r = rosetta::test::run_shell(
      "env -u OPENBLAS_CORETYPE -u ROSETTA_BLAS_CORE_WAS -u ROSETTA_BLAS_SELF_TEST_FAILED "
      "-u ROSETTA_TEST_BLAS_MISDETECT -u ROSETTA_TEST_BLAS_SELF_TEST " +
      vars + " " + ROSETTA_BIN + " bench --decode --preset tiny --steps 1 --threads 1 2>" + (dir / "stderr"));
  Outcome o;
  o.exit_code = r.exit_code;
  const std::string err = rosetta::test::slurp(dir / "stderr");
  o.output = r.output + err;
  for (const std::string& line : rosetta::test::lines_of(r.output)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("blas_core")) o.core = j["blas_core"].get<std::string>();
    if (!j.is_discarded() && j.contains("kernels")) o.kernels = j["kernels"].get<std::string>();
  }
  for (const std::string& line : rosetta::test::lines_of(err))
    if (line.find("self-test") != std::string::npos) o.warnings.push_back(line);
  return o;
}

bool same_core(const std::string& a, const std::string& b) { return strcasecmp(a.c_str(), b.c_str()) == 0; }

// The hooks play a misdetection as Prescott (SSE3), which means something only above SSE3.
bool can_play_misdetection() {
  if (rosetta::cpu_isa_level() > rosetta::IsaLevel::sse3) return true;
  WARN("skipped: this CPU (" << rosetta::cpu_isa_name() << ") has nothing better than OpenBLAS's Prescott kernels");
  return false;
}

}  // namespace

TEST_CASE("blas fix: a misdetected core is replaced by the CPU's own after the self-test", "[cli][blas]") {
  if (!can_play_misdetection()) return;
  const Outcome o = bench_with("ROSETTA_TEST_BLAS_MISDETECT=Prescott");
  INFO(o.output);
  REQUIRE(o.exit_code == 0);
  REQUIRE(same_core(o.core, rosetta::blas_core_for()));
  REQUIRE(o.warnings.empty());
  // What the logs and the report say: which kernels, and that rosetta chose them.
  REQUIRE_THAT(o.kernels, Catch::Contains("chosen by rosetta after a self-test: OpenBLAS picked Prescott"));
}

TEST_CASE("blas fix: a self-test that crashes, is wrong or hangs leaves the run on its core, with one warning",
          "[cli][blas]") {
  if (!can_play_misdetection()) return;
  const std::string candidate = rosetta::blas_core_for();
  struct Case {
    std::string hook, reason;
  };
  for (const Case& c : {Case{"crash", "(killed by SIGABRT)"}, Case{"wrong", "(wrong result: sgemm NN 1x1x1"},
                        Case{"hang", "(no answer within 1 s)"}}) {
    const Outcome o = bench_with("ROSETTA_TEST_BLAS_MISDETECT=Prescott ROSETTA_TEST_BLAS_SELF_TEST=" + c.hook +
                                 " ROSETTA_BLAS_SELF_TEST_TIMEOUT=1");
    INFO(c.hook << "\n" << o.output);
    REQUIRE(o.exit_code == 0);
    REQUIRE(o.core == "Prescott");
    REQUIRE(o.warnings.size() == 1);
    const std::string& w = o.warnings[0];
    REQUIRE(w.rfind("rosetta: warning: OpenBLAS picked its Prescott kernels (SSE3)", 0) == 0);
    REQUIRE_THAT(w, Catch::Contains("the " + candidate + " kernels failed a self-test " + c.reason));
    REQUIRE_THAT(w, Catch::EndsWith("so fp32 products run on Prescott"));
  }

  // A rosetta started by one whose self-test failed (a sweep's runs) does not test again.
  const Outcome child = bench_with("ROSETTA_TEST_BLAS_MISDETECT=Prescott ROSETTA_TEST_BLAS_SELF_TEST=crash "
                                   "ROSETTA_BLAS_SELF_TEST_FAILED=" + candidate);
  INFO(child.output);
  REQUIRE(child.exit_code == 0);
  REQUIRE(child.core == "Prescott");
  REQUIRE(child.warnings.empty());
}

TEST_CASE("blas fix: the user's OPENBLAS_CORETYPE is never overridden", "[cli][blas]") {
  if (!can_play_misdetection()) return;
  // A self-test would crash and warn: none runs.
  const Outcome o = bench_with("OPENBLAS_CORETYPE=Prescott ROSETTA_TEST_BLAS_SELF_TEST=crash");
  INFO(o.output);
  REQUIRE(o.exit_code == 0);
  REQUIRE(o.core == "Prescott");
  REQUIRE(o.warnings.empty());

  // Nor by the misdetection hook.
  const Outcome hooked = bench_with("OPENBLAS_CORETYPE=Prescott ROSETTA_TEST_BLAS_MISDETECT=Sandybridge");
  INFO(hooked.output);
  REQUIRE(hooked.core == "Prescott");
  REQUIRE(hooked.warnings.empty());
}

TEST_CASE("blas fix: a core OpenBLAS picked well is kept", "[cli][blas]") {
  const Outcome o = bench_with("");
  INFO(o.output);
  REQUIRE(o.exit_code == 0);
  REQUIRE_FALSE(o.core.empty());
  // What OpenBLAS picks on this CPU by itself is what this test process runs, unless its
  // environment chose.
  if (std::getenv("OPENBLAS_CORETYPE")) {
    WARN("OPENBLAS_CORETYPE is set in the test's environment: OpenBLAS's own pick is unknown here");
    return;
  }
  const rosetta::BlasKernels own = rosetta::blas_kernels();
  if (!own.below_cpu()) {
    REQUIRE(o.core == own.core);
    REQUIRE(o.warnings.empty());
  } else {  // a real misdetection: mended, or a warning says why not
    REQUIRE((same_core(o.core, rosetta::blas_core_for()) || o.warnings.size() == 1));
  }
}
