// A schedule of faults against one training run (tests/apps/fault_schedule.h): kill -9 at random
// moments, SIGTERM, checkpoint and metrics writes that fail, a report that cannot be written, a
// corrupted newest checkpoint; each followed by `rosetta train --resume` alone. The run ends as
// the same run never interrupted does, bit for bit.
//
// CI runs 50 faults (seed 1). A longer schedule is one command:
//   ROSETTA_FAULTS=500 ROSETTA_FAULT_SEED=7 build/tests/test_apps "a schedule of faults*"
// (The same with one rank of an MPI job killed: tests/mpi/test_mpi_faults.cpp.)
#include "fault_schedule.h"

using rosetta::test::FaultSchedule;
using rosetta::test::TempDir;
using rosetta::test::env_int;

TEST_CASE("a schedule of faults: the run resumes after each and ends as if never interrupted", "[faults][schedule]") {
  const int64_t faults = env_int("ROSETTA_FAULTS", 50);
  const uint64_t seed = uint64_t(env_int("ROSETTA_FAULT_SEED", 1));
  // Enough updates that the run is still training when the last fault hits. A kill lands 1-12
  // updates after the last logged one, a blocked report after 30, each plus what the run makes
  // while the test polls metrics.jsonl: on a fast CPU 600 updates can run out before the 50th
  // fault. Twice that leaves room.
  const int64_t steps = std::max<int64_t>(1200, 24 * faults);
  TempDir work("fault_schedule");
  FaultSchedule(work, seed, steps, FaultSchedule::one_process_kinds())
      .require_ends_as_uninterrupted(faults, "fault schedule (seed " + std::to_string(seed) + ")");
}
