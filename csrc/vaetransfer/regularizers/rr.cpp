// The RR loss of "Reviving Autoencoder Pretraining" (Eq. 7):
//     term = Σ_m λ_m ‖d_m − d'_m‖²,
// d_m the forward activations (the input and each unit's output before pooling), d'_m the
// reverse pass's reconstructions (rr/reverse_pass.h), each squared error summed over units and
// averaged over the batch (`reduction` "sum", Eq. 7), or averaged over units too ("mean": one λ
// suits layers of any size; the sum's λ must shrink as layers grow). The public code adds λ·Σ ½‖d' − d‖² summed over the batch too, on
// 0–255 pixels: its λ corresponds to ours times batch/2 for hidden layers, and for the input
// term additionally times 255² when our inputs lie in [0, 1].
// λ_m are `layer_weights` (one per term: input, then every layer before the head; all 1 when
// empty); `input_only` is RR¹ (only the input term); the regulariser's schedulable weight
// multiplies the whole sum, so λ = 0 switches it off. Each term (without λ_m) is a history
// column "<label>_<term>". The pass reads the forward pass's traces: no second forward pass.
#include <ATen/core/grad_mode.h>

#include "vaetransfer/common/check.h"
#include "vaetransfer/regularizers/regularizer.h"
#include "vaetransfer/rr/reverse_pass.h"

namespace vaetransfer::regularizers {
namespace {

class ReversePassLoss : public Regularizer {
 public:
  explicit ReversePassLoss(const Params& p) : Regularizer(p) {
    options_.variant = rr::parse_variant(p.str("variant"));
    options_.output_activation = nn::parse_activation(p.str("output_activation"), "output_activation");
    const auto& reduction = p.str("reduction");
    VT_CHECK_ARG(reduction == "sum" || reduction == "mean", "reduction",
                 "expected 'sum' (over units, Eq. 7) or 'mean' (over units), got '", reduction, "'");
    mean_ = reduction == "mean";
    for (double w : p.numbers("layer_weights"))
      VT_CHECK_ARG(std::isfinite(w) && w >= 0, "layer_weights", "expected finite weights >= 0, got ", w);
    VT_CHECK_ARG(!(p.flag("input_only") && !p.numbers("layer_weights").empty()), "input_only",
                 "give either input_only (RR¹) or layer_weights, not both");
  }
  bool needs_traces() const override { return true; }
  void check(const nn::Model& model) const override { lambdas(model); }
  std::vector<std::string> parts(const nn::Model& model) const override {
    return rr::term_names(rr::reversible_units(model, options_.variant));
  }

  Term term(nn::Model& model, const objectives::Batch&, const objectives::TaskOutput& out,
            const objectives::StepContext&) const override {
    TORCH_CHECK(out.traces != nullptr, "the reverse pass needs the forward pass's traces");
    const auto lambda = lambdas(model);
    std::vector<bool> needed(lambda.size());
    for (size_t m = 0; m < lambda.size(); ++m) needed[m] = lambda[m] > 0;
    auto pass = rr::reverse_pass(model, *out.traces, options_, needed);
    Term t;
    t.value = at::zeros({}, out.loss.options());
    for (size_t m = 0; m < lambda.size(); ++m) {
      if (!pass.reconstructions[m].defined()) {  // a local term with λ_m = 0: reported only
        at::NoGradGuard no_grad;
        pass.reconstructions[m] = rr::reverse_unit(rr::reversible_units(model, options_.variant), *out.traces, m,
                                                   (*out.traces)[m].pre_pool, model.is_training(),
                                                   options_.output_activation);
      }
      auto e = rr::squared_error(pass.targets[m], pass.reconstructions[m]);
      if (mean_) e = e / static_cast<double>(pass.targets[m][0].numel());
      if (lambda[m] > 0) t.value = t.value + lambda[m] * e;
      t.parts.push_back(e);
    }
    return t;
  }

 private:
  std::vector<double> lambdas(const nn::Model& model) const {
    const auto& units = rr::reversible_units(model, options_.variant);
    const size_t n = units.size();
    if (params().flag("input_only")) {
      std::vector<double> w(n, 0.0);
      w[0] = 1.0;
      return w;
    }
    const auto& given = params().numbers("layer_weights");
    if (given.empty()) return std::vector<double>(n, 1.0);
    VT_CHECK_ARG(given.size() == n, "layer_weights", "expected one weight per term (", n, ": ",
                 c10::Join(", ", rr::term_names(units)), "), got ", given.size());
    return given;
  }

  rr::ReverseOptions options_;
  bool mean_ = false;
};

}  // namespace

VT_REGISTER(RegularizerRegistry,
            {"rr", "",
             "Σ_m λ_m‖d_m − d'_m‖² of the reverse pass sharing the forward weights (Reviving Autoencoder "
             "Pretraining, Eq. 7); sum over units, mean over the batch",
             {{"variant", ParamType::String, std::string("full"), "'full' (d'_{m+1} → d'_m) or 'local' (d_{m+1} → d'_m)"},
              {"layer_weights", ParamType::Floats, std::vector<double>{},
               "λ_m per term (input, then each layer before the head); empty: all 1"},
              {"input_only", ParamType::Bool, false, "RR¹: only the input term"},
              {"reduction", ParamType::String, std::string("sum"),
               "each term summed ('sum', Eq. 7) or averaged ('mean') over units; both average over the batch"},
              {"output_activation", ParamType::String, std::string("none"),
               "activation of the reconstructed input: 'none', 'relu' or 'tanh'"}},
             [](const Params& p) -> std::unique_ptr<Regularizer> { return std::make_unique<ReversePassLoss>(p); },
             {"reverse-pass"}});

}  // namespace vaetransfer::regularizers
