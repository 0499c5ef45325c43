// SRIP (the Ort baseline of "Reviving Autoencoder Pretraining", Eq. 27):
// term = Σ_W σ(WᵀW − I) over the weight matrices and conv kernels (parameters with ≥ 2
// dimensions) of `groups`, σ estimated by power iteration with one vector per weight kept
// between steps (and in snapshots, so a resumed run continues exactly). σ, not σ²: Eq. 27.
#include <map>
#include <set>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/counter_rng.h"
#include "vaetransfer/nn/model.h"
#include "vaetransfer/regularizers/regularizer.h"
#include "vaetransfer/rr/orthogonality.h"

namespace vaetransfer::regularizers {
namespace {

class SRIP : public Regularizer {
 public:
  explicit SRIP(const Params& p) : Regularizer(p) {
    VT_CHECK_ARG(p.integer("iterations") >= 1, "iterations", "expected >= 1, got ", p.integer("iterations"));
  }
  void check(const nn::Model& model) const override {
    VT_CHECK_ARG(!penalised(model).empty(), "groups", "no weight matrix or kernel in the groups ",
                 c10::Join(", ", params().strings("groups")));
  }

  Term term(nn::Model& model, const objectives::Batch&, const objectives::TaskOutput& out,
            const objectives::StepContext&) const override {
    at::Tensor sum = at::zeros({}, out.loss.options());
    const auto names = penalised(model);
    for (const auto& [n, w] : model.parameters_named()) {
      if (!names.count(n)) continue;
      const auto a = rr::gram_residual(w);
      auto& v = vectors_[n];
      if (!v.defined() || v.size(0) != a.size(0)) {
        // A fixed start per parameter: N(0, I) from (seed, name), normalised.
        uint64_t h = 1469598103934665603ull;  // FNV-1a of the name: the same start on every platform
        for (unsigned char c : n) h = (h ^ c) * 1099511628211ull;
        auto gen = nn::make_generator(a.device(), splitmix64(static_cast<uint64_t>(params().integer("seed")) ^ h));
        v = at::randn({a.size(0)}, gen, a.options().requires_grad(false));
        v = v / v.norm();
      }
      sum = sum + rr::spectral_norm(a, v, params().integer("iterations"));
    }
    return {sum, {}};
  }

  nn::Named state() const override {
    nn::Named s;
    for (const auto& [n, v] : vectors_) s.emplace_back(n, v);
    return s;
  }
  void load_state(const nn::Named& state) override {
    vectors_.clear();
    for (const auto& [n, v] : state) vectors_[n] = v.clone();
  }

 private:
  std::set<std::string> penalised(const nn::Model& model) const {
    std::set<std::string> names;
    const auto params_by_name = model.parameters_named();
    std::map<std::string, int64_t> dims;
    for (const auto& [n, p] : params_by_name) dims[n] = p.dim();
    for (const auto& g : params().strings("groups"))
      for (auto& n : model.group(g, "groups"))
        if (dims[n] >= 2) names.insert(n);
    return names;
  }

  mutable std::map<std::string, at::Tensor> vectors_;
};

}  // namespace

VT_REGISTER(RegularizerRegistry,
            {"srip", "",
             "Σ_W σ(WᵀW − I) over the weight matrices and kernels of `groups` (SRIP; Ort baseline of the RR paper), "
             "σ by power iteration with the vector kept between steps",
             {{"groups", ParamType::Strings, std::vector<std::string>{"all"}, "parameter groups penalised"},
              {"iterations", ParamType::Int, int64_t{1}, "power-iteration steps per training step"},
              {"seed", ParamType::Int, int64_t{0}, "seed of the power-iteration start vectors"}},
             [](const Params& p) -> std::unique_ptr<Regularizer> { return std::make_unique<SRIP>(p); },
             {"ort"}});

}  // namespace vaetransfer::regularizers
