// Schedules: a loss weight (KL weight β, Annealed-VAE capacity, a regulariser's λ) as a function
// of the 0-based optimisation step. Built by kind through the schedule registry:
//   constant  value
//   linear    start for step < delay, then linearly to end over `steps` steps, then end
//             (KL warm-up / annealing, e.g. "Finetuning Pretrained Transformers into VAEs" Eq. 6)
//   cyclical  Fu et al. (2019): after `delay`, cycles of `period` steps; within a cycle the weight
//             rises linearly from start to end over the first ratio·period steps and stays at end
//             for the rest; after `cycles` cycles (0: never) it stays at end.
// A schedule is a pure function of the step, so a resumed run sees the same weights.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "vaetransfer/common/params.h"

namespace vaetransfer::schedules {

class Schedule : public Registered {
 public:
  virtual double value(int64_t step) const = 0;
  virtual bool is_constant() const { return false; }
  // "linear(start=0, end=1, steps=1000, delay=0)": stored in snapshots and checked on resume.
  std::string describe() const;
  const std::string& kind() const { return name(); }

 protected:
  using Registered::Registered;
};

using SchedulePtr = std::shared_ptr<Schedule>;
using ScheduleRegistry = Registry<Schedule>;

SchedulePtr make_schedule(const std::string& kind, const std::map<std::string, ParamValue>& params);
SchedulePtr constant_schedule(double value);

}  // namespace vaetransfer::schedules
