#include "rosetta/translator/run.h"

#include "rosetta/train/process_group.h"
#include "run_steps.h"

namespace rosetta::translator {

namespace {

// One process's part of the run, step by step (run_steps.h).
TrainOutcome train_in(const train::ProcessGroup& group, TrainConfig c, const std::string& config_toml,
                      const RunHooks& hooks, const std::atomic<bool>* stop) {
  detail::TrainingRun run(group, std::move(c), hooks, stop);  // the configuration checked, the directory locked
  run.plan();                     // threads and replicas; the run directory and the memory plan checked
  run.read_data();                // a run that fails on its data leaves nothing behind
  run.open_run_dir(config_toml);  // created; a new run's config.toml, tokenizers and empty logs
  run.build();                    // model, optimizer, schedule, trainer on its replicas, data order
  run.restore();                  // --resume: the checkpoint's weights, optimizer, progress, data position
  run.describe();                 // memory, schedule and padding, in the log
  return run.finish(run.loop());  // updates, validations, checkpoints until a rule stops; the last ones
}

}  // namespace

// Data-parallel training (several ranks) is the single-process loop with three additions: every
// rank serves all batches from the shared data order but computes only its share, the gradient
// buffer is summed over the ranks before the update, and every decision to stop is agreed on.
// With one rank every collective is the identity and the run is the single-process run.
TrainOutcome train_translator(TrainConfig c, const std::string& config_toml, const RunHooks& hooks,
                              const std::atomic<bool>* stop) {
  // A build without MPI runs alone under a launcher of one process (e.g. srun), and refuses to
  // be one of several: each would train alone, all into the same directory.
  if (!train::mpi_built() && !c.distributed)
    ROSETTA_CHECK(train::launched_size() == 1, "started as one of ", train::launched_size(),
                  " MPI processes, but this rosetta was built without MPI; rebuild with libopenmpi-dev installed ",
                  "(cmake -DROSETTA_MPI=ON)");
  const bool join = c.distributed || (train::mpi_built() && train::launched_by_mpi());
  const train::ProcessGroup group = join ? train::ProcessGroup::world() : train::ProcessGroup();
  try {
    return train_in(group, std::move(c), config_toml, hooks, stop);
  } catch (...) {
    group.fail();  // the other ranks may be waiting for this one: end the job
    throw;
  }
}

}  // namespace rosetta::translator
