// The start-up check of the kernels (core/src/kernels/kernel_check.h) and the AMX tiles'
// configuration (amx.h): on this CPU every kernel it runs passes; a kernel whose check crashes,
// computes wrong or hangs (faults injected by ROSETTA_TEST_KERNEL_FAULT in a program of its own,
// probe/kernel_check_probe.cpp) is left out, the next kernel runs, one line says so, and the
// products are right.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/amx.h"
#include "kernels/bf16_kernel.h"
#include "kernels/dispatch.h"
#include "kernels/f32_kernel.h"
#include "kernels/int8_kernel.h"
#include "kernels/kernel_check.h"
#include "rosetta/core/cpu.h"
#include "support.h"

using namespace rosetta::detail;

namespace {

struct Probe {
  int exit_code = -1;
  std::map<std::string, std::string> said;  // its key=value lines
  std::vector<std::string> warnings;        // its warning= lines
  std::string output;
};

// Runs the probe with `vars` ("NAME=value ...") and none of the kernel switches this test's
// environment may hold.
Probe probe(const std::string& vars) {
  const std::string cmd = "env -u ROSETTA_AMX -u ROSETTA_INT8 -u ROSETTA_PACKED_F32 -u ROSETTA_TEST_KERNEL_FAULT " +
                          vars + " " + ROSETTA_KERNEL_CHECK_PROBE + " 2>&1 </dev/null";
  Probe p;
  const rosetta::test::CommandResult run = rosetta::test::run_command(cmd);
  p.exit_code = run.exit_code;
  p.output = run.output;
  std::istringstream out(p.output);
  for (std::string line; std::getline(out, line);)
    if (const size_t eq = line.find('='); eq != std::string::npos) {
      if (line.substr(0, eq) == "warning") p.warnings.push_back(line.substr(eq + 1));
      else p.said[line.substr(0, eq)] = line.substr(eq + 1);
    }
  return p;
}

// The kernel a precision's list chooses first here, and the one after it (the models aside,
// which the dispatch runs only when the environment asks): their names, "" where none.
template <class K, class IsModel>
std::pair<std::string, std::string> first_two(const std::vector<const K*>& here, IsModel is_model) {
  std::vector<std::string> names;
  for (const K* k : here)
    if (!is_model(k)) names.push_back(k->name);
  return {names.size() > 0 ? names[0] : "", names.size() > 1 ? names[1] : ""};
}

}  // namespace

TEST_CASE("the AMX kernels' tile configuration: palette 1, tiles 0-7 of 16 rows of 64 bytes", "[kernel_check]") {
  const amx::TileConfig cfg = amx::tile_config();
  unsigned char bytes[64];
  std::memcpy(bytes, &cfg, sizeof bytes);
  CHECK(int(bytes[0]) == 1);  // palette
  CHECK(int(bytes[1]) == 0);  // start row
  for (int i = 2; i < 16; ++i) CHECK(int(bytes[i]) == 0);
  for (int t = 0; t < 16; ++t) {
    INFO("tile " << t);
    const int colsb = bytes[16 + 2 * t] | bytes[17 + 2 * t] << 8, rows = bytes[48 + t];
    CHECK(colsb == (t < 8 ? 64 : 0));
    CHECK(rows == (t < 8 ? 16 : 0));
  }
  CHECK(amx::same_config(cfg, amx::tile_config()));
  amx::TileConfig other = cfg;
  other.rows[3] = 15;
  CHECK_FALSE(amx::same_config(cfg, other));
}

TEST_CASE("where the CPU has AMX, the tiles hold the configuration loaded", "[kernel_check]") {
  const rosetta::CpuFeatures& f = rosetta::cpu_features();
  if (!(f.amx_tile && amx::tile_state_granted())) {
    WARN("this CPU (" << rosetta::cpu_isa_name()
                      << ") has no AMX tiles the OS grants: the configuration is not read back here");
    return;
  }
  amx::configure_tiles();
  const amx::TileConfig got = amx::stored_config();
  amx::release_tiles();
  CHECK(amx::same_config(got, amx::tile_config()));
  CHECK(amx::same_config(amx::stored_config(), amx::TileConfig{}));  // released: all zero
}

TEST_CASE("every kernel this CPU runs passed its start-up check, and the dispatch chose among them", "[kernel_check]") {
  const KernelChecks& checked = kernel_checks();
  CHECK(checked.not_run.empty());
  CHECK(checked.checks.size() == f32_kernels_here().size() + bf16_kernels_here().size() + int8_kernels_here().size());
  for (const KernelCheck& c : checked.checks) {
    INFO(c.precision << " " << c.kernel << ": " << c.failure);
    CHECK(c.failure.empty());
    CHECK(passed_check(c.id));
  }
  CHECK(rosetta::kernel_check_warnings().empty());
  CHECK(check_key("int8", "AMX-INT8 (modelled)") == "int8-amx-int8-modelled");
  CHECK(check_key("fp32", "AVX-512") == "fp32-avx-512");
  CHECK(check_key("bf16", "AVX512_BF16") == "bf16-avx512-bf16");
}

TEST_CASE("a kernel whose check crashes, computes wrong or hangs is left out: the next one runs, one line says so",
          "[kernel_check]") {
  struct List {
    const char* precision;
    std::pair<std::string, std::string> kernels;  // first and next
    const char* instead;                           // the line's end where no kernel is left
  };
  const std::vector<List> lists{
      {"fp32", first_two(f32_kernels_here(), [](auto) { return false; }), "run on OpenBLAS instead"},
      {"bf16", first_two(bf16_kernels_here(), [](const Bf16Kernel* k) { return k->modelled; }),
       "no bf16 kernel is left"},
      {"int8", first_two(int8_kernels_here(), [](const Int8Kernel* k) { return std::strstr(k->name, "modelled"); }),
       "no int8 kernel is left"}};
  std::string first_keys;
  for (const List& l : lists)
    if (!l.kernels.first.empty()) first_keys += check_key(l.precision, l.kernels.first.c_str()) + ",";
  if (first_keys.empty()) {
    WARN("this CPU (" << rosetta::cpu_isa_name() << ") runs none of rosetta's own kernels: nothing to fault");
    return;
  }
  const std::vector<std::pair<std::string, std::string>> faults{
      {"crash", "killed by SIGILL"}, {"wrong", "wrong result: C[0,7] = "}, {"hang", "no answer within 0.5 s"}};
  for (const auto& [fault, why] : faults) {
    std::string spec;
    for (const List& l : lists)
      if (!l.kernels.first.empty()) {
        if (!spec.empty()) spec += ',';
        spec += check_key(l.precision, l.kernels.first.c_str()) + ":" + fault;
      }
    const Probe p = probe("ROSETTA_KERNEL_CHECK_TIMEOUT=0.5 ROSETTA_TEST_KERNEL_FAULT=" + spec);
    INFO("fault " << fault << " (" << spec << "); the probe said:\n" << p.output);
    CHECK(p.exit_code == 0);
    size_t faulted = 0;
    for (const List& l : lists) {
      if (l.kernels.first.empty()) continue;
      ++faulted;
      const std::string& next = l.kernels.second;
      CHECK(p.said.at(l.precision) == (next.empty() ? "none" : next));
      if (!next.empty()) CHECK(p.said.at(std::string(l.precision) + "_right") == "1");
      const std::string line = std::string("the ") + l.precision + " kernel " + l.kernels.first +
                               " failed its start-up check on this CPU (" + why;
      bool said = false;
      for (const std::string& w : p.warnings)
        if (w.rfind(line, 0) == 0)
          said = w.find(next.empty() ? l.instead : ("run on " + next + " instead").c_str()) != std::string::npos;
      CHECK(said);
    }
    CHECK(p.warnings.size() == faulted);  // one line per kernel that failed, nothing else
  }
}

TEST_CASE("without faults the probe runs the first kernel of each list, its products right", "[kernel_check]") {
  const Probe p = probe("");
  INFO(p.output);
  CHECK(p.exit_code == 0);
  CHECK(p.warnings.empty());
  CHECK(p.said.at("fp32") == (f32_kernels_here().empty() ? "none" : f32_kernels_here()[0]->name));
  if (!f32_kernels_here().empty()) CHECK(p.said.at("fp32_right") == "1");
  if (!bf16_kernels_here().empty()) {
    CHECK(p.said.at("bf16") == bf16_kernels_here()[0]->name);
    CHECK(p.said.at("bf16_right") == "1");
  }
  if (!int8_kernels_here().empty()) {
    CHECK(p.said.at("int8") == int8_kernels_here()[0]->name);
    CHECK(p.said.at("int8_right") == "1");
  }
}
