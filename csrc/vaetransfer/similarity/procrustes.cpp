#include "vaetransfer/similarity/procrustes.h"

#include <algorithm>

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
  return nuclear_norms_of_products({{&fy, &fx}}, 1, 0).front();
}

namespace {

// M = F_yᵀ F_x with its shorter side first (k × K, k ≤ K): the singular values are the same.
at::Tensor short_side_first(const at::Tensor& fy, const at::Tensor& fx) {
  auto m = fy.t().mm(fx);
  return m.size(0) <= m.size(1) ? m : m.t();
}

at::Tensor zero_padded(const at::Tensor& m, int64_t rows, int64_t cols) {
  if (m.size(0) == rows && m.size(1) == cols) return m;
  return at::constant_pad_nd(m, {0, cols - m.size(1), 0, rows - m.size(0)}, 0.0);
}

}  // namespace

std::vector<double> nuclear_norms_of_products(const std::vector<std::pair<const at::Tensor*, const at::Tensor*>>& pairs,
                                              int64_t batch, int64_t memory_bytes,
                                              const std::function<void(int64_t)>& advance) {
  std::vector<double> out(pairs.size(), 0.0);
  if (pairs.empty()) return out;
  // Short side k of each product; pairs sorted by method (SVD for k ≤ 512) and k, largest first,
  // so a batch pads its products by little. Zero rows and columns add only zero singular values.
  std::vector<int64_t> k(pairs.size()), order(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    k[i] = std::min(pairs[i].first->size(1), pairs[i].second->size(1));
    order[i] = static_cast<int64_t>(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return k[a] > k[b]; });
  const bool cuda = pairs.front().second->is_cuda();
  size_t start = 0;
  while (start < order.size()) {
    const int64_t kmax = k[order[start]];
    const bool svd = kmax <= kSvdNuclearMaxSide;
    // A batch: consecutive pairs of the same method whose k is within 20 % of the first (padding
    // wastes < 2× of the cubic work), at most `batch` of them (0: the memory budget on CUDA, one
    // at a time on the CPU, where LAPACK takes one matrix per call anyway).
    const int64_t per_item = 4 * 8 * kmax * std::max<int64_t>(kmax, pairs[order[start]].first->size(0));
    const int64_t limit = batch > 0 ? batch : cuda ? std::max<int64_t>(1, memory_bytes / per_item) : 1;
    size_t end = start + 1;
    while (end < order.size() && static_cast<int64_t>(end - start) < limit &&
           (k[order[end]] <= kSvdNuclearMaxSide) == svd && 5 * k[order[end]] >= 4 * kmax)
      ++end;
    std::vector<at::Tensor> items;
    for (size_t i = start; i < end; ++i) items.push_back(short_side_first(*pairs[order[i]].first, *pairs[order[i]].second));
    at::Tensor norms;
    if (svd) {
      int64_t cols = 0;
      for (const auto& m : items) cols = std::max(cols, m.size(1));
      for (auto& m : items) m = zero_padded(m, kmax, cols);
      norms = at::linalg_svdvals(at::stack(items)).sum(-1);
    } else {  // Σ √λ of the k × k Gram M Mᵀ (formed at half cost)
      for (auto& m : items) m = zero_padded(symmetric_gram(m), kmax, kmax);
      norms = at::linalg_eigvalsh(at::stack(items)).clamp_min(0.0).sqrt().sum(-1);
    }
    norms = norms.cpu();  // one host sync per batch
    for (size_t i = start; i < end; ++i) out[order[i]] = norms[static_cast<int64_t>(i - start)].item<double>();
    if (advance) advance(static_cast<int64_t>(end - start));
    start = end;
  }
  return out;
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
    : truncation{p.integer("rank"), p.integer("power_iterations"), static_cast<uint64_t>(p.integer("seed"))},
      batch(p.integer("batch")) {
  VT_CHECK_ARG(batch >= 0, "batch", "expected 0 (automatic) or a batch size >= 1, got ", batch);
  VT_CHECK_ARG(truncation.rank >= 0, "rank", "expected 0 (exact) or a rank >= 1, got ", truncation.rank);
  VT_CHECK_ARG(truncation.power_iterations >= 0, "power_iterations", "expected >= 0, got ",
               truncation.power_iterations);
  VT_CHECK_ARG(p.integer("seed") >= 0, "seed", "expected >= 0, got ", p.integer("seed"));
}

void ProcrustesFit::fit(const LayerFit& layer) const {
  if (approximate()) layer.truncated_factor(truncation);
  else layer.procrustes_factor();
}

void ProcrustesFit::fit_all(const std::vector<const LayerFit*>& layers, const BatchContext& context) const {
  std::vector<const LayerFit*> spectral;  // exact factors of p > n layers: batched eigendecompositions
  for (const LayerFit* layer : layers) {
    if (!approximate() && !layer->has_procrustes_factor() && layer->p() > layer->n() && !layer->constant()) {
      spectral.push_back(layer);
      continue;
    }
    fit(*layer);
    context.advance(1);
  }
  if (spectral.empty()) return;
  // The engine has checked that every layer has the same n and device.
  const int64_t n = spectral.front()->n();
  const int64_t per_item = 3 * 8 * n * n;  // the Gram, its eigenvectors and the solver's workspace
  const int64_t limit = batch > 0 ? batch
                        : spectral.front()->x().is_cuda() ? std::max<int64_t>(1, context.memory_bytes / per_item)
                                                          : 1;
  for (size_t start = 0; start < spectral.size(); start += static_cast<size_t>(limit)) {
    const size_t end = std::min(spectral.size(), start + static_cast<size_t>(limit));
    std::vector<at::Tensor> grams;
    for (size_t i = start; i < end; ++i) grams.push_back(spectral[i]->procrustes_gram());
    auto [evals, evecs] = at::linalg_eigh(at::stack(grams));
    grams.clear();
    for (size_t i = start; i < end; ++i) {
      const auto j = static_cast<int64_t>(i - start);
      spectral[i]->set_procrustes_spectrum(evals[j], evecs[j]);
    }
    context.advance(static_cast<int64_t>(end - start));
  }
}

std::vector<Score> ProcrustesFit::score_all(const std::vector<PairData>& pairs, const BatchContext& context) const {
  std::vector<Score> out(pairs.size());
  std::vector<std::pair<const at::Tensor*, const at::Tensor*>> products;
  std::vector<size_t> where;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const LayerFit &x = pairs[i].x, &y = pairs[i].y;
    if (approximate() || &x == &y) {  // approximate: products of rank ≤ `rank`, cheap one at a time
      out[i] = score(x, y);
      context.advance(1);
      continue;
    }
    products.emplace_back(&y.procrustes_factor(), &x.procrustes_factor());
    where.push_back(i);
  }
  const std::vector<double> nu = nuclear_norms_of_products(products, batch, context.memory_bytes, context.advance);
  for (size_t j = 0; j < where.size(); ++j) out[where[j]] = {std::clamp(nu[j], 0.0, 1.0), 0.0};
  return out;
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
          {"seed", ParamType::Int, int64_t{0}, "approximate: seed of the Gaussian test matrix"},
          {"batch", ParamType::Int, int64_t{0},
           "exact: layers per batched eigendecomposition and pairs per batched nuclear norm; 0: as many as "
           "memory_bytes holds on CUDA, one at a time on the CPU"}};
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
  bool fit_all(const std::vector<const LayerFit*>& layers, const BatchContext& context) const override {
    fits_.fit_all(layers, context);
    return true;
  }
  std::vector<Score> score_all(const std::vector<PairData>& pairs, const BatchContext& context) const override {
    return fits_.score_all(pairs, context);
  }
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
