#include "vaetransfer/similarity/procrustes.h"

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/engine.h"

namespace vaetransfer::similarity {

ProcrustesForm procrustes_form_from_name(const std::string& name, const char* arg) {
  if (name == "nu" || name == "similarity") return ProcrustesForm::kSimilarity;
  if (name == "2-2nu") return ProcrustesForm::kTwoMinusTwoNu;
  if (name == "1-nu") return ProcrustesForm::kOneMinusNu;
  if (name == "arccos") return ProcrustesForm::kArccos;
  if (name == "sqrt(2-2nu)") return ProcrustesForm::kSqrtTwoMinusTwoNu;
  VT_CHECK_ARG(false, arg, "expected one of 'nu', '2-2nu', '1-nu', 'arccos', 'sqrt(2-2nu)', got '", name, "'");
  return ProcrustesForm::kSimilarity;
}

double apply_procrustes_form(double nu, ProcrustesForm form) {
  switch (form) {
    case ProcrustesForm::kSimilarity: return nu;
    case ProcrustesForm::kTwoMinusTwoNu: return 2.0 - 2.0 * nu;
    case ProcrustesForm::kOneMinusNu: return 1.0 - nu;
    case ProcrustesForm::kArccos: return std::acos(nu);
    case ProcrustesForm::kSqrtTwoMinusTwoNu: return std::sqrt(2.0 - 2.0 * nu);
  }
  return nu;
}

double nuclear_norm_of_product(const at::Tensor& fy, const at::Tensor& fx) {
  auto m = fy.t().mm(fx);
  const int64_t k = std::min(m.size(0), m.size(1));
  if (k <= 512) return at::linalg_svdvals(m).sum().item<double>();
  auto g = symmetric_gram(m.size(0) <= m.size(1) ? m : m.t());
  return at::linalg_eigvalsh(g).clamp_min(0.0).sqrt().sum().item<double>();
}

double procrustes_similarity(const LayerFit& x, const LayerFit& y) {
  if (&x == &y) return 1.0;
  return std::clamp(nuclear_norm_of_product(y.procrustes_factor(), x.procrustes_factor()), 0.0, 1.0);
}

ApproximateNu procrustes_similarity_truncated(const LayerFit& x, const LayerFit& y, const TruncationOptions& options) {
  if (&x == &y) return {1.0, 0.0};
  const TruncatedFactor& fx = x.truncated_factor(options);
  const TruncatedFactor& fy = y.truncated_factor(options);
  const double value = std::clamp(nuclear_norm_of_product(fy.factor, fx.factor), 0.0, 1.0);
  const double tx = fx.discarded, ty = fy.discarded;
  const double bound = std::min(std::sqrt(tx) + std::sqrt(ty * (1.0 - tx)), std::sqrt(ty) + std::sqrt(tx * (1.0 - ty)));
  return {value, std::min(bound, std::max(value, 1.0 - value))};  // ν and ν̃ both lie in [0, 1]
}

ProcrustesFit::ProcrustesFit(const Params& p)
    : truncation{p.integer("rank"), p.integer("power_iterations"), static_cast<uint64_t>(p.integer("seed"))} {
  VT_CHECK_ARG(truncation.rank >= 0, "rank", "expected 0 (exact) or a rank >= 1, got ", truncation.rank);
  VT_CHECK_ARG(truncation.power_iterations >= 0, "power_iterations", "expected >= 0, got ",
               truncation.power_iterations);
  VT_CHECK_ARG(p.integer("seed") >= 0, "seed", "expected >= 0, got ", p.integer("seed"));
}

void ProcrustesFit::fit(const LayerFit& layer) const {
  if (approximate()) layer.truncated_factor(truncation);
  else layer.procrustes_factor();
}

Score ProcrustesFit::score(const LayerFit& x, const LayerFit& y) const {
  const ApproximateNu a = approximate() ? procrustes_similarity_truncated(x, y, truncation)
                                        : ApproximateNu{procrustes_similarity(x, y), 0.0};
  return {a.value, a.bound};
}

std::vector<ParamSpec> procrustes_fit_specs() {
  return {{"rank", ParamType::Int, int64_t{0},
           "0: exact; k >= 1: approximate from each layer's leading k-dimensional spectrum (with error bounds)"},
          {"power_iterations", ParamType::Int, int64_t{2}, "approximate: randomized subspace iterations"},
          {"seed", ParamType::Int, int64_t{0}, "approximate: seed of the Gaussian test matrix"}};
}

namespace {

class Procrustes : public Measure {
 public:
  explicit Procrustes(const Params& p) : Measure(p), fits_(p), form_(procrustes_form_from_name(p.str("form"))) {}
  bool fit(const LayerFit& layer) const override {
    fits_.fit(layer);
    return true;
  }
  Score score(const PairData& pair) const override { return fits_.score(pair.x, pair.y); }
  double report(double nu) const override { return apply_procrustes_form(nu, form_); }

 private:
  ProcrustesFit fits_;
  ProcrustesForm form_;
};

std::vector<ParamSpec> procrustes_specs() {
  auto specs = procrustes_fit_specs();
  specs.insert(specs.begin(), {"form", ParamType::String, std::string("nu"),
                               "reported form: 'nu' (similarity), '2-2nu', '1-nu', 'arccos', 'sqrt(2-2nu)'"});
  return specs;
}

}  // namespace

VT_REGISTER(MeasureRegistry,
            {"procrustes", "factor", "Procrustes similarity ν = ‖ẎᵀẊ‖_* (Eq. 5, 7) or a distance form of it",
             procrustes_specs(),
             [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<Procrustes>(p); }});

double procrustes(const at::Tensor& x, const at::Tensor& y, ProcrustesForm form) {
  static const char* names[] = {"nu", "2-2nu", "1-nu", "arccos", "sqrt(2-2nu)"};
  EngineOptions eo;
  eo.measure = make_measure("procrustes", {{"form", std::string(names[static_cast<int>(form)])}});
  auto fx = std::make_shared<LayerFit>(x, FitOptions{}, "x");
  auto fy = std::make_shared<LayerFit>(y, FitOptions{}, "y");
  return similarity_matrices({{fx}}, {{fy}}, eo).item<double>();
}

}  // namespace vaetransfer::similarity
