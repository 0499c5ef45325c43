// Regularisers: named terms added to any task's loss, loss += λ·term, with λ a weight that may
// follow a schedule. Built by name through the regulariser registry — a new regulariser is
// one file with one registration (the RR reverse pass and SRIP come this way). The term's
// value (unweighted) is reported as a history column named by the regulariser's label.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>

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
  // The unweighted, differentiable 0-D term for this step.
  virtual at::Tensor term(nn::Model& model, const objectives::Batch& batch, const objectives::TaskOutput& out,
                          const objectives::StepContext& ctx) const = 0;

 protected:
  using Registered::Registered;
};

using RegularizerPtr = std::shared_ptr<Regularizer>;
using RegularizerRegistry = Registry<Regularizer>;

RegularizerPtr make_regularizer(const std::string& name, const std::map<std::string, ParamValue>& params);

}  // namespace vaetransfer::regularizers
