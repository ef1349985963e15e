// A schedule of faults against a job of two ranks (tests/apps/fault_schedule.h): one rank killed
// with kill -9 at a random moment of its training (mpiexec then ends the job), SIGTERM to one
// rank (every rank stops at the same update, with a checkpoint), a corrupted newest checkpoint;
// each followed by `mpiexec -n 2 rosetta train --resume` alone. The job ends as the same job
// never interrupted does, bit for bit. (No kill while mpiexec starts the job: Open MPI 4.1's
// mpiexec can then wait forever, see FaultSchedule::signal_at_random.)
//
// CI runs 16 faults (seed 1); more with ROSETTA_MPI_FAULTS and ROSETTA_FAULT_SEED:
//   ROSETTA_MPI_FAULTS=100 build/tests/test_mpi "a schedule of faults*"
#include "apps/fault_schedule.h"
#include "mpi_env.h"

using rosetta::test::FaultSchedule;
using rosetta::test::TempDir;
using rosetta::test::env_int;

TEST_CASE("a schedule of faults on 2 ranks: the job resumes after each and ends as if never interrupted",
          "[mpi][faults][schedule]") {
  rosetta::test::container_friendly_mpi_env();
  const int64_t faults = env_int("ROSETTA_MPI_FAULTS", 16);
  const uint64_t seed = uint64_t(env_int("ROSETTA_FAULT_SEED", 1));
  // Enough updates that the job is still training when the last fault hits: as the one-process
  // schedule's (tests/apps/test_fault_schedule.cpp), whose 12 per fault ran out on a fast CPU.
  const int64_t steps = std::max<int64_t>(600, 24 * faults);
  TempDir work("mpi_fault_schedule");
  FaultSchedule(work, seed, steps, FaultSchedule::job_kinds(), std::string(ROSETTA_MPIEXEC) + " -n 2")
      .require_ends_as_uninterrupted(faults, "fault schedule on 2 ranks (seed " + std::to_string(seed) + ")");
}
