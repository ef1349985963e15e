// The schedule of a run, and the budget a linear or cosine schedule decays over (optim's
// BudgetSchedule). With --max-steps the budget is known: the schedule is a fixed function of the
// step, and a resumed run sets the same rates bit for bit. With --max-time it is the updates the
// time left allows at the speed measured so far: re-estimated after every --log-every updates
// (and, before the first such estimate, after this process's 1st, 2nd, 4th, ... update), so that
// the rate reaches its floor when the time runs out, however fast the machine turns out to be.
// Each estimate re-anchors the schedule where it stands (optim/schedule.h), and the schedule's
// state goes into every checkpoint (Progress::schedule).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "rosetta/core/check.h"
#include "run_steps.h"

namespace rosetta::translator::detail {

using rosetta::detail::num;

namespace {

// A warm-up of `w` in updates, for a budget of `total` updates: a share ends before the budget.
int64_t warmup_updates(const TrainConfig::Warmup& w, int64_t total) {
  if (!w.is_share) return w.updates;
  return std::max<int64_t>(0, std::min<int64_t>(std::llround(w.share * double(total)), total - 1));
}

// The advice of both refusals of a warm-up that a time budget cannot hold.
constexpr const char* kShorterWarmup = "give a shorter --warmup (or a share, e.g. 5%) or a longer --max-time";

}  // namespace

std::shared_ptr<optim::Schedule> TrainingRun::make_run_schedule() {
  const TrainConfig::Warmup w = c_.warmup_spec();
  if (!c_.budget_schedule()) {
    // A share of the budget is a share of --max-steps (TrainConfig::validate asks for it).
    const int64_t warmup = warmup_updates(w, c_.max_steps);
    return optim::make_schedule(c_.schedule, c_.lr, warmup, std::max<int64_t>(c_.max_steps, warmup + 1),
                                c_.model.d_model());
  }
  optim::BudgetSchedule::State s;
  if (c_.max_time_seconds() > 0) {  // the total is estimated as the run goes, and a share's warm-up with it
    s.warmup = w.is_share ? -1 : w.updates;
  } else {
    s.total = c_.max_steps;
    s.warmup = warmup_updates(w, c_.max_steps);
  }
  budget_ = std::make_shared<optim::BudgetSchedule>(optim::budget_shape(c_.schedule), c_.lr, c_.decay_to * c_.lr, s);
  return budget_;
}

void TrainingRun::restore_budget() {
  if (!budget_ || !p_.schedule) return;  // a fresh schedule: the run did not have one, or an earlier version
  budget_->set_state(*p_.schedule);
  // --max-steps, as this invocation gives it (the same: nothing changes); a time budget is
  // re-estimated at the next log line.
  if (c_.max_time_seconds() == 0)
    budget_->rebudget(p_.step, c_.max_steps, warmup_updates(c_.warmup_spec(), c_.max_steps));
}

bool TrainingRun::rebudget_due() const {
  if (!budget_ || max_time_ <= 0) return false;
  if (p_.step % c_.log_every == 0) return true;
  const int64_t n = process_steps_;
  return early_estimates_ && n < c_.log_every && (n & (n - 1)) == 0;
}

void TrainingRun::rebudget() {
  // The updates the time left allows at this process's speed so far (its validations and
  // checkpoints included: they take from the same time), by the root's clock: the ranks' clocks
  // differ, and every rank must set the same rates. The speed leaves out the process's first
  // update once there are others: it carries one-off costs (allocations, threads and MPI
  // starting), several updates' worth on a small model.
  double measured[2] = {0, 0};  // updates left, updates per second
  if (root_) {
    using clock = std::chrono::steady_clock;
    const bool skip_first = process_steps_ > 1;
    const double seconds = std::chrono::duration<double>(clock::now() - (skip_first ? t1_ : t0_)).count();
    measured[1] = double(process_steps_ - (skip_first ? 1 : 0)) / std::max(seconds, 1e-9);
    measured[0] = std::floor(measured[1] * std::max(max_time_ - elapsed(), 0.0));
  }
  group_.sum(measured, 2);
  int64_t total = p_.step + int64_t(measured[0]);
  if (c_.max_steps > 0) total = std::min(total, c_.max_steps);
  const TrainConfig::Warmup w = c_.warmup_spec();
  // A warm-up in updates that the budget cannot hold is refused at the first log line, where
  // the speed is measured over enough updates to trust.
  ROSETTA_CHECK(w.is_share || p_.step >= w.updates || p_.step % c_.log_every != 0 || total > w.updates,
                "--max-time ", c_.max_time, " allows about ", total, " updates at the ", num("%.1f", measured[1]),
                " updates/s measured, no more than the warm-up (--warmup ", w.updates, "): the ", optim::schedule_kind_name(c_.schedule),
                " schedule would never decay; ", kShorterWarmup);
  budget_->rebudget(p_.step, total, w.is_share ? warmup_updates(w, total) : -1);
}

void TrainingRun::refuse_unmeasured_warmup() const {
  const TrainConfig::Warmup w = c_.warmup_spec();
  if (!budget_ || w.is_share || p_.step >= w.updates || p_.step >= c_.log_every) return;
  ROSETTA_FAIL("--max-time ", c_.max_time, " ended at update ", p_.step, ", before the first log line (--log-every ",
               c_.log_every, ") could measure it and inside the warm-up (--warmup ", w.updates, "): the ", optim::schedule_kind_name(c_.schedule),
               " schedule never decayed; ", kShorterWarmup);
}

}  // namespace rosetta::translator::detail
