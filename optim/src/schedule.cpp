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

std::unique_ptr<Schedule> make_schedule(const std::string& name, double lr, int64_t warmup,
                                        int64_t total_steps, int64_t d_model) {
  if (name == "constant") return std::make_unique<ConstantSchedule>(lr);
  if (name == "noam") return std::make_unique<NoamSchedule>(lr, d_model, std::max<int64_t>(warmup, 1));
  if (name == "inverse-sqrt") return std::make_unique<InverseSqrtSchedule>(lr, warmup);
  if (name == "cosine") return std::make_unique<CosineSchedule>(lr, warmup, total_steps);
  ROSETTA_FAIL("unknown schedule '", name, "' (constant, noam, inverse-sqrt, cosine)");
}

}  // namespace rosetta::optim
