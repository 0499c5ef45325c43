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

double procrustes(const at::Tensor& x, const at::Tensor& y, ProcrustesForm form) {
  EngineOptions eo;
  eo.measure = Measure::kProcrustes;
  eo.form = form;
  auto fx = std::make_shared<LayerFit>(x, FitOptions{}, "x");
  auto fy = std::make_shared<LayerFit>(y, FitOptions{}, "y");
  return similarity_matrices({{fx}}, {{fy}}, eo).item<double>();
}

}  // namespace vaetransfer::similarity
