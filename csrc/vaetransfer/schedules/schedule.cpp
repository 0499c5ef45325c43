#include "vaetransfer/schedules/schedule.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "vaetransfer/common/check.h"

namespace vaetransfer::schedules {

std::string Schedule::describe() const {
  std::ostringstream out;
  out << kind() << "(";
  bool first = true;
  for (const auto& [k, v] : params().values()) {
    out << (first ? "" : ", ") << k << "=" << to_string(v);
    first = false;
  }
  out << ")";
  return out.str();
}

SchedulePtr make_schedule(const std::string& kind, const std::map<std::string, ParamValue>& params) {
  return SchedulePtr(ScheduleRegistry::get().make(kind, params, "schedule"));
}

SchedulePtr constant_schedule(double value) { return make_schedule("constant", {{"value", value}}); }

namespace {

void check_finite(double v, const char* arg) { VT_CHECK_ARG(std::isfinite(v), arg, "expected a finite value, got ", v); }

class Constant : public Schedule {
 public:
  explicit Constant(const Params& p) : Schedule(p), value_(p.number("value")) { check_finite(value_, "value"); }
  double value(int64_t) const override { return value_; }
  bool is_constant() const override { return true; }

 private:
  double value_;
};

class Linear : public Schedule {
 public:
  explicit Linear(const Params& p)
      : Schedule(p), start_(p.number("start")), end_(p.number("end")), steps_(p.integer("steps")),
        delay_(p.integer("delay")) {
    check_finite(start_, "start");
    check_finite(end_, "end");
    VT_CHECK_ARG(steps_ >= 1, "steps", "expected the length of the ramp (>= 1 step), got ", steps_);
    VT_CHECK_ARG(delay_ >= 0, "delay", "expected >= 0, got ", delay_);
  }
  double value(int64_t step) const override {
    if (step < delay_) return start_;
    const double t = std::min(1.0, static_cast<double>(step - delay_) / static_cast<double>(steps_));
    return start_ + (end_ - start_) * t;
  }

 private:
  double start_, end_;
  int64_t steps_, delay_;
};

class Cyclical : public Schedule {
 public:
  explicit Cyclical(const Params& p)
      : Schedule(p), start_(p.number("start")), end_(p.number("end")), period_(p.integer("period")),
        ratio_(p.number("ratio")), cycles_(p.integer("cycles")), delay_(p.integer("delay")) {
    check_finite(start_, "start");
    check_finite(end_, "end");
    VT_CHECK_ARG(period_ >= 1, "period", "expected >= 1 step, got ", period_);
    VT_CHECK_ARG(ratio_ > 0 && ratio_ <= 1, "ratio", "expected the rising fraction of a cycle in (0, 1], got ", ratio_);
    VT_CHECK_ARG(cycles_ >= 0, "cycles", "expected >= 0 (0: no limit), got ", cycles_);
    VT_CHECK_ARG(delay_ >= 0, "delay", "expected >= 0, got ", delay_);
  }
  double value(int64_t step) const override {
    if (step < delay_) return start_;
    const int64_t s = step - delay_;
    if (cycles_ > 0 && s >= cycles_ * period_) return end_;
    const double tau = static_cast<double>(s % period_) / static_cast<double>(period_);
    return start_ + (end_ - start_) * std::min(1.0, tau / ratio_);
  }

 private:
  double start_, end_;
  int64_t period_;
  double ratio_;
  int64_t cycles_, delay_;
};

}  // namespace

VT_REGISTER(ScheduleRegistry, {"constant", "", "a constant weight", {{"value", ParamType::Float, 1.0, "the weight"}},
                               [](const Params& p) -> std::unique_ptr<Schedule> { return std::make_unique<Constant>(p); }});
VT_REGISTER(ScheduleRegistry,
            {"linear", "", "start until `delay`, then linearly to end over `steps` steps (warm-up / annealing)",
             {{"start", ParamType::Float, 0.0, "weight before and at the start of the ramp"},
              {"end", ParamType::Float, 1.0, "weight after the ramp"},
              {"steps", ParamType::Int, int64_t{1000}, "length of the ramp in steps"},
              {"delay", ParamType::Int, int64_t{0}, "steps before the ramp starts"}},
             [](const Params& p) -> std::unique_ptr<Schedule> { return std::make_unique<Linear>(p); }});
VT_REGISTER(ScheduleRegistry,
            {"cyclical", "",
             "Fu et al. (2019): cycles of `period` steps rising linearly start → end over ratio·period, then end",
             {{"start", ParamType::Float, 0.0, "weight at the start of each cycle"},
              {"end", ParamType::Float, 1.0, "weight reached after ratio·period steps of a cycle"},
              {"period", ParamType::Int, int64_t{1000}, "steps per cycle"},
              {"ratio", ParamType::Float, 0.5, "rising fraction of a cycle, in (0, 1]"},
              {"cycles", ParamType::Int, int64_t{0}, "number of cycles, then end (0: no limit)"},
              {"delay", ParamType::Int, int64_t{0}, "steps at `start` before the first cycle"}},
             [](const Params& p) -> std::unique_ptr<Schedule> { return std::make_unique<Cyclical>(p); }});

}  // namespace vaetransfer::schedules
