// Learning-rate schedules: lr as a function of the step number (1 for the first update).
#pragma once

#include <memory>
#include <string>

#include "rosetta/core/enum_names.h"

namespace rosetta::optim {

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual double lr(int64_t step) const = 0;  // step >= 1
  virtual std::string describe() const = 0;
};

// lr
class ConstantSchedule : public Schedule {
 public:
  explicit ConstantSchedule(double lr);
  double lr(int64_t) const override { return lr_; }
  std::string describe() const override;

 private:
  double lr_;
};

// The paper's: lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
class NoamSchedule : public Schedule {
 public:
  NoamSchedule(double factor, int64_t d_model, int64_t warmup);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double factor_;
  int64_t d_model_, warmup_;
};

// Linear warmup to peak over `warmup` steps, then peak * sqrt(warmup / step).
class InverseSqrtSchedule : public Schedule {
 public:
  InverseSqrtSchedule(double peak, int64_t warmup);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double peak_;
  int64_t warmup_;
};

// Linear warmup to peak, then a half cosine from peak down to min_lr at total_steps (held
// at min_lr after).
class CosineSchedule : public Schedule {
 public:
  CosineSchedule(double peak, int64_t warmup, int64_t total_steps, double min_lr = 0.0);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double peak_, min_;
  int64_t warmup_, total_;
};

// Linear warm-up to peak, then a decay (linear or half cosine) to `floor` at the end of a budget
// of updates that need not be known in advance: a run with a time budget re-estimates it as it
// goes (rebudget), from the speed it measures. Each re-estimate keeps the learning rate
// continuous: the progress through the current phase (warm-up, then decay) carries on from
// where it stands at the re-estimate and reaches 1 at the phase's new end. With a budget known
// in advance (no rebudget), the progress is the plain (step - warmup) / (total - warmup).
//
//   warm-up, step <= warmup:  lr = peak * q(step),  q from 0 at step 0 to 1 at `warmup`
//   decay, step > warmup:     lr = floor + (peak - floor) * g(p(step)),  p from 0 at `warmup`
//                             to 1 at `total` (held at 1 after);  g(p) = 1 - p (linear) or
//                             (1 + cos(pi p)) / 2 (cosine)
//   a phase re-anchored at step s with progress v and end e: v + (1 - v) (step - s) / (e - s)
class BudgetSchedule : public Schedule {
 public:
  enum class Shape { linear, cosine };

  // Where the schedule stands: what a checkpoint keeps to continue with the same rates.
  struct State {
    int64_t warmup = 0;  // updates of the warm-up; -1 while unknown (a share of a budget not yet estimated)
    int64_t total = 0;   // the update at which the decay reaches the floor; 0 while unknown
    // The current phase's anchor: its progress was anchor_progress at update anchor_step. An
    // anchor before `warmup` is the warm-up's; the decay's is then (warmup, 0).
    int64_t anchor_step = 0;
    double anchor_progress = 0;
  };

  // While the warm-up is unknown the rate is 0; while the total is unknown the decay has not begun.
  BudgetSchedule(Shape shape, double peak, double floor, State state);
  double lr(int64_t step) const override;
  std::string describe() const override;

  // After update `step` (the next is step + 1): the budget is now `total` updates and, when
  // `warmup` >= 0 and the warm-up has not ended, the warm-up `warmup` updates (a warm-up at or
  // before `step` ends now). The phase under way is re-anchored at `step`; an unchanged budget
  // changes nothing, so that the rates stay those of the plain formula bit for bit.
  void rebudget(int64_t step, int64_t total, int64_t warmup = -1);

  const State& state() const { return s_; }
  void set_state(const State& s);  // a checkpoint's; checked
  Shape shape() const { return shape_; }

 private:
  double warmup_progress(int64_t step) const;  // q
  double decay_progress(int64_t step) const;   // p

  Shape shape_;
  double peak_, floor_;
  State s_;
};

// The schedules make_schedule builds, as options name them.
enum class ScheduleKind { constant, noam, inverse_sqrt, linear, cosine };
constexpr EnumNames<ScheduleKind, 5> enum_names(ScheduleKind) {
  return {"schedule",
          {{{ScheduleKind::constant, "constant"}, {ScheduleKind::noam, "noam"},
            {ScheduleKind::inverse_sqrt, "inverse-sqrt"}, {ScheduleKind::linear, "linear"},
            {ScheduleKind::cosine, "cosine"}}}};
}
inline ScheduleKind parse_schedule_kind(const std::string& s) { return parse_enum<ScheduleKind>(s); }
inline const char* schedule_kind_name(ScheduleKind k) { return enum_name(k); }

// linear or cosine; throws naming the others.
BudgetSchedule::Shape budget_shape(ScheduleKind kind);

// constant, noam (peak is then the factor), inverse-sqrt, cosine, linear (a BudgetSchedule to 0
// at total_steps); by name, the name parsed first.
std::unique_ptr<Schedule> make_schedule(ScheduleKind kind, double lr, int64_t warmup, int64_t total_steps,
                                        int64_t d_model);
inline std::unique_ptr<Schedule> make_schedule(const std::string& name, double lr, int64_t warmup,
                                               int64_t total_steps, int64_t d_model) {
  return make_schedule(parse_schedule_kind(name), lr, warmup, total_steps, d_model);
}

}  // namespace rosetta::optim
