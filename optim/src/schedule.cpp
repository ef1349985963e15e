#include "rosetta/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "rosetta/core/check.h"

namespace rosetta::optim {

namespace {
void check_step(int64_t step) { ROSETTA_CHECK(step >= 1, "schedule: step ", step, " < 1"); }
void check_lr(double lr) {
  ROSETTA_CHECK(std::isfinite(lr) && lr >= 0, "schedule: learning rate ", lr, " is invalid");
}
}  // namespace

ConstantSchedule::ConstantSchedule(double lr) : lr_(lr) { check_lr(lr); }
std::string ConstantSchedule::describe() const {
  std::ostringstream os;
  os << "constant lr " << lr_;
  return os.str();
}

NoamSchedule::NoamSchedule(double factor, int64_t d_model, int64_t warmup)
    : factor_(factor), d_model_(d_model), warmup_(warmup) {
  check_lr(factor);
  ROSETTA_CHECK(d_model > 0 && warmup > 0, "noam schedule: d_model and warmup must be positive");
}
double NoamSchedule::lr(int64_t step) const {
  check_step(step);
  const double s = double(step);
  return factor_ * std::pow(double(d_model_), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(double(warmup_), -1.5));
}
std::string NoamSchedule::describe() const {
  std::ostringstream os;
  os << "noam factor " << factor_ << ", d_model " << d_model_ << ", warmup " << warmup_;
  return os.str();
}

InverseSqrtSchedule::InverseSqrtSchedule(double peak, int64_t warmup) : peak_(peak), warmup_(warmup) {
  check_lr(peak);
  ROSETTA_CHECK(warmup >= 0, "inverse-sqrt schedule: negative warmup");
}
double InverseSqrtSchedule::lr(int64_t step) const {
  check_step(step);
  if (step <= warmup_) return peak_ * double(step) / double(warmup_);
  return peak_ * std::sqrt(double(std::max<int64_t>(warmup_, 1)) / double(step));
}
std::string InverseSqrtSchedule::describe() const {
  std::ostringstream os;
  os << "linear warmup " << warmup_ << " to " << peak_ << ", then inverse square root";
  return os.str();
}

CosineSchedule::CosineSchedule(double peak, int64_t warmup, int64_t total, double min_lr)
    : peak_(peak), min_(min_lr), warmup_(warmup), total_(total) {
  check_lr(peak);
  check_lr(min_lr);
  ROSETTA_CHECK(warmup >= 0 && total > warmup, "cosine schedule: needs 0 <= warmup (", warmup,
                ") < total steps (", total, ")");
}
double CosineSchedule::lr(int64_t step) const {
  check_step(step);
  if (step <= warmup_) return peak_ * double(step) / double(warmup_);
  if (step >= total_) return min_;
  const double progress = double(step - warmup_) / double(total_ - warmup_);
  return min_ + 0.5 * (peak_ - min_) * (1.0 + std::cos(M_PI * progress));
}
std::string CosineSchedule::describe() const {
  std::ostringstream os;
  os << "linear warmup " << warmup_ << " to " << peak_ << ", cosine to " << min_ << " at step "
     << total_;
  return os.str();
}

namespace {
// The progress, at `step`, of a phase that stood at `v` at update `s` and ends at update `e`.
// Anchored at (0, 0) it is step / e exactly (v + 1.0 * x == x), the plain formula's value.
double phase_progress(int64_t step, int64_t s, double v, int64_t e) {
  if (e <= s) return 1.0;
  return std::clamp(v + (1.0 - v) * double(step - s) / double(e - s), 0.0, 1.0);
}
}  // namespace

BudgetSchedule::BudgetSchedule(Shape shape, double peak, double floor, State state)
    : shape_(shape), peak_(peak), floor_(floor) {
  check_lr(peak);
  check_lr(floor);
  ROSETTA_CHECK(floor <= peak, "budget schedule: floor ", floor, " above the peak ", peak);
  set_state(state);
}

void BudgetSchedule::set_state(const State& s) {
  ROSETTA_CHECK(s.warmup >= -1 && s.total >= 0 && s.anchor_step >= 0 && s.anchor_progress >= 0 &&
                    s.anchor_progress <= 1,
                "budget schedule: invalid state (warmup ", s.warmup, ", total ", s.total, ", anchor ",
                s.anchor_step, " at ", s.anchor_progress, ")");
  s_ = s;
}

double BudgetSchedule::warmup_progress(int64_t step) const {
  if (s_.warmup < 0) return 0;
  if (s_.anchor_step < s_.warmup) return phase_progress(step, s_.anchor_step, s_.anchor_progress, s_.warmup);
  return phase_progress(step, 0, 0, s_.warmup);
}

double BudgetSchedule::decay_progress(int64_t step) const {
  if (s_.total == 0) return 0;
  if (s_.anchor_step >= s_.warmup) return phase_progress(step, s_.anchor_step, s_.anchor_progress, s_.total);
  return phase_progress(step, s_.warmup, 0, s_.total);
}

double BudgetSchedule::lr(int64_t step) const {
  check_step(step);
  if (s_.warmup < 0) return 0;  // the warm-up's length is not known yet
  if (step <= s_.warmup) return peak_ * warmup_progress(step);
  const double p = decay_progress(step);
  const double g = shape_ == Shape::linear ? 1.0 - p : 0.5 * (1.0 + std::cos(M_PI * p));
  return floor_ + (peak_ - floor_) * g;
}

void BudgetSchedule::rebudget(int64_t step, int64_t total, int64_t warmup) {
  ROSETTA_CHECK(step >= 0 && total >= 0, "budget schedule: rebudget(", step, ", ", total, ")");
  const bool warming = s_.warmup < 0 || step < s_.warmup;
  if (warming && warmup >= 0 && warmup != s_.warmup) {
    if (warmup <= step) {  // the warm-up ends now: the decay starts from the next update
      s_.warmup = step;
      s_.anchor_step = step;
      s_.anchor_progress = 0;
    } else {
      const double q = warmup_progress(step);
      s_.warmup = warmup;
      s_.anchor_step = step;
      s_.anchor_progress = q;
    }
  }
  if (total == s_.total) return;
  // During the warm-up the decay's anchor stays (warmup, 0); once it runs, it carries on from
  // where it stands (0 when the total was unknown: the decay starts here).
  if (s_.warmup >= 0 && step >= s_.warmup) {
    const double p = decay_progress(step);
    s_.anchor_step = step;
    s_.anchor_progress = p;
  }
  s_.total = total;
}

std::string BudgetSchedule::describe() const {
  std::ostringstream os;
  os << "linear warmup ";
  if (s_.warmup < 0) os << "(its length estimated with the budget)";
  else os << s_.warmup;
  os << " to " << peak_ << ", " << (shape_ == Shape::linear ? "linear" : "cosine") << " decay to " << floor_;
  if (s_.total == 0) os << " at the end of the budget";
  else os << " at step " << s_.total;
  return os.str();
}

BudgetSchedule::Shape budget_shape(ScheduleKind kind) {
  if (kind == ScheduleKind::linear) return BudgetSchedule::Shape::linear;
  if (kind == ScheduleKind::cosine) return BudgetSchedule::Shape::cosine;
  ROSETTA_FAIL("'", schedule_kind_name(kind), "' is not a budget schedule (linear, cosine)");
}

std::unique_ptr<Schedule> make_schedule(ScheduleKind kind, double lr, int64_t warmup, int64_t total_steps,
                                        int64_t d_model) {
  switch (kind) {
    case ScheduleKind::constant: return std::make_unique<ConstantSchedule>(lr);
    case ScheduleKind::noam: return std::make_unique<NoamSchedule>(lr, d_model, std::max<int64_t>(warmup, 1));
    case ScheduleKind::inverse_sqrt: return std::make_unique<InverseSqrtSchedule>(lr, warmup);
    case ScheduleKind::cosine: return std::make_unique<CosineSchedule>(lr, warmup, total_steps);
    case ScheduleKind::linear:
      ROSETTA_CHECK(warmup >= 0 && total_steps > warmup, "linear schedule: needs 0 <= warmup (", warmup,
                    ") < total steps (", total_steps, ")");
      return std::make_unique<BudgetSchedule>(BudgetSchedule::Shape::linear, lr, 0.0,
                                              BudgetSchedule::State{warmup, total_steps, 0, 0.0});
  }
  ROSETTA_FAIL("no schedule has the value ", int(kind));
}

}  // namespace rosetta::optim
