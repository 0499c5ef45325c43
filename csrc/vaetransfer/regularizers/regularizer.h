// Regularisers: named terms added to any task's loss, loss += λ·term, with λ a weight that may
// follow a schedule. Built by name through the regulariser registry — a new regulariser is
// one file with one registration (l2, the RR reverse pass, SRIP). The term's value (without λ)
// is reported as a history column named by the regulariser's label, and its parts (e.g. the
// RR loss of each layer) as columns "<label>_<part>".
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vaetransfer/common/params.h"
#include "vaetransfer/nn/model.h"
#include "vaetransfer/objectives/task.h"

namespace vaetransfer::regularizers {

class Regularizer : public Registered {
 public:
  // Checks the regulariser against the model before training starts (e.g. that its parameter
  // groups exist), so a bad config fails before a run directory is written.
  virtual void check(const nn::Model& model) const {}
  // True when term() reads the forward pass's layer outputs (TaskOutput::layers).
  virtual bool needs_layers() const { return false; }
  // True when term() reads the reversible units' traces (TaskOutput::traces).
  virtual bool needs_traces() const { return false; }
  // Names of the parts term() reports besides its value (history columns "<label>_<part>").
  virtual std::vector<std::string> parts(const nn::Model& model) const { return {}; }

  struct Term {
    at::Tensor value;                // 0-D, differentiable: the loss adds λ·value
    std::vector<at::Tensor> parts;   // 0-D, aligned with parts() (reported, detached)
  };
  virtual Term term(nn::Model& model, const objectives::Batch& batch, const objectives::TaskOutput& out,
                    const objectives::StepContext& ctx) const = 0;

  // State kept between steps (e.g. SRIP's power-iteration vectors), saved in snapshots so a
  // resumed run continues exactly; load_state receives what state() returned.
  virtual nn::Named state() const { return {}; }
  virtual void load_state(const nn::Named& state) {}

 protected:
  using Registered::Registered;
};

using RegularizerPtr = std::shared_ptr<Regularizer>;
using RegularizerRegistry = Registry<Regularizer>;

RegularizerPtr make_regularizer(const std::string& name, const std::map<std::string, ParamValue>& params);

}  // namespace vaetransfer::regularizers
