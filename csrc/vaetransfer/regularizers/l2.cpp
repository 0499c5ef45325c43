// L2 penalty on parameter groups: term = Σ_{θ ∈ groups} ‖θ‖² (summed over every entry), so the
// gradient it adds to each parameter is 2λθ. Unlike an optimiser's weight decay it can target a
// group (e.g. "decoder", "block4.conv") and its λ can follow a schedule.
#include <set>

#include "vaetransfer/regularizers/regularizer.h"

namespace vaetransfer::regularizers {
namespace {

class L2 : public Regularizer {
 public:
  explicit L2(const Params& p) : Regularizer(p) {}
  void check(const nn::Model& model) const override { penalised(model); }
  Term term(nn::Model& model, const objectives::Batch&, const objectives::TaskOutput& out,
            const objectives::StepContext&) const override {
    const auto names = penalised(model);
    at::Tensor sum = at::zeros({}, out.loss.options());
    for (const auto& [n, p] : model.parameters_named())
      if (names.count(n)) sum = sum + p.square().sum();
    return {sum, {}};
  }

 private:
  // Names of the penalised parameters (ArgumentError naming "groups" for an unknown group).
  std::set<std::string> penalised(const nn::Model& model) const {
    std::set<std::string> names;
    for (const auto& g : params().strings("groups"))
      for (auto& n : model.group(g, "groups")) names.insert(n);
    return names;
  }
};

}  // namespace

VT_REGISTER(RegularizerRegistry,
            {"l2", "", "Σ‖θ‖² over the parameters of `groups` (gradient 2λθ)",
             {{"groups", ParamType::Strings, std::vector<std::string>{"all"}, "parameter groups penalised"}},
             [](const Params& p) -> std::unique_ptr<Regularizer> { return std::make_unique<L2>(p); }});

}  // namespace vaetransfer::regularizers
