// Learning-rate schedules: lr as a function of the step number (1 for the first update).
#pragma once

#include <memory>
#include <string>

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

// By name: "constant", "noam" (peak is then the factor), "inverse-sqrt", "cosine".
std::unique_ptr<Schedule> make_schedule(const std::string& name, double lr, int64_t warmup,
                                        int64_t total_steps, int64_t d_model);

}  // namespace rosetta::optim
