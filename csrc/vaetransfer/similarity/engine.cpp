#include "vaetransfer/similarity/engine.h"

#include <map>
#include <set>

#include "vaetransfer/common/check.h"

namespace vaetransfer::similarity {

Measure measure_from_name(const std::string& name, const char* arg) {
  if (name == "cka") return Measure::kCKA;
  if (name == "cka_debiased") return Measure::kCKADebiased;
  if (name == "procrustes") return Measure::kProcrustes;
  if (name == "min") return Measure::kMin;
  VT_CHECK_ARG(false, arg, "expected one of 'cka', 'cka_debiased', 'procrustes', 'min', got '", name, "'");
  return Measure::kCKA;
}

namespace {

void check_models(const std::vector<std::vector<LayerFitPtr>>& models, const char* arg) {
  VT_CHECK_ARG(!models.empty(), arg, "expected at least one model, got none");
  const size_t layers = models.front().size();
  VT_CHECK_ARG(layers > 0, arg, "expected at least one layer per model, got none");
  for (size_t i = 0; i < models.size(); ++i) {
    VT_CHECK_ARG(models[i].size() == layers, arg, "expected ", layers, " layers in every model, model ", i,
                 " has ", models[i].size());
    for (const auto& f : models[i]) VT_CHECK_TYPE(f != nullptr, arg, "expected fitted layers, got None");
  }
}

}  // namespace

at::Tensor similarity_matrices(const std::vector<std::vector<LayerFitPtr>>& models_a,
                               const std::vector<std::vector<LayerFitPtr>>& models_b,
                               const EngineOptions& options, at::Tensor* bound) {
  check_models(models_a, "models_a");
  check_models(models_b, "models_b");
  const int64_t ma = static_cast<int64_t>(models_a.size()), mb = static_cast<int64_t>(models_b.size());
  const int64_t la = static_cast<int64_t>(models_a.front().size()), lb = static_cast<int64_t>(models_b.front().size());

  // Unique layers (a layer object shared by A and B is fitted and streamed once).
  std::vector<const LayerFit*> layers;
  std::map<const LayerFit*, int64_t> index;
  auto id = [&](const LayerFitPtr& f) {
    auto [it, fresh] = index.emplace(f.get(), static_cast<int64_t>(layers.size()));
    if (fresh) layers.push_back(f.get());
    return it->second;
  };
  std::vector<int64_t> ia(ma * la), ib(mb * lb);
  for (int64_t i = 0; i < ma; ++i)
    for (int64_t k = 0; k < la; ++k) ia[i * la + k] = id(models_a[i][k]);
  for (int64_t j = 0; j < mb; ++j)
    for (int64_t l = 0; l < lb; ++l) ib[j * lb + l] = id(models_b[j][l]);

  const LayerFit& first = *layers.front();
  for (const LayerFit* f : layers) {
    VT_CHECK_ARG(f->n() == first.n(), f->arg(), "expected the same number of examples n = ", first.n(), " as ",
                 first.arg(), ", got n = ", f->n());
    check_same_device(first.x(), first.arg().c_str(), f->x(), f->arg().c_str());
  }
  const int64_t n = first.n();
  const bool need_cka = options.measure != Measure::kProcrustes;
  const bool need_procrustes = options.measure == Measure::kProcrustes || options.measure == Measure::kMin;
  const bool debiased = options.measure == Measure::kCKADebiased;
  VT_CHECK_ARG(!debiased || n >= 4, first.arg(), "debiased CKA needs at least 4 examples, got n = ", n);
  VT_CHECK_ARG(options.measure != Measure::kMin || options.form == ProcrustesForm::kSimilarity, "form",
               "measure 'min' compares similarities; expected form 'nu'");

  // Requested distinct pairs (u, v) between different layers, plus self pairs for the norms.
  std::set<std::pair<int64_t, int64_t>> distinct;
  for (int64_t u : ia)
    for (int64_t v : ib)
      if (u != v && !layers[u]->constant() && !layers[v]->constant()) distinct.emplace(std::min(u, v), std::max(u, v));
  if (!options.constant_as_zero) {
    for (const LayerFit* f : layers)
      VT_CHECK_ARG(!f->constant(), f->arg(),
                   "is constant (zero variance after centring): similarity is undefined; drop the layer or "
                   "pass constant='zero'");
  }

  at::Tensor inner;
  at::Tensor diag_dot;
  if (need_cka) {
    std::vector<std::pair<int64_t, int64_t>> pairs(distinct.begin(), distinct.end());
    std::set<int64_t> involved;
    for (auto [u, v] : distinct) involved.insert(u), involved.insert(v);
    for (int64_t u : involved) pairs.emplace_back(u, u);
    inner = gram_inner_products(layers, pairs, options.stream);
    if (debiased) {
      std::vector<at::Tensor> rows;
      for (const LayerFit* f : layers) rows.push_back(f->row_sq().cpu());
      auto r = at::stack(rows);
      diag_dot = r.mm(r.t());
    }
  }
  std::map<std::pair<int64_t, int64_t>, ApproximateNu> nu;
  if (need_procrustes) {
    std::set<int64_t> involved;
    for (auto [u, v] : distinct) involved.insert(u), involved.insert(v);
    const int64_t total = static_cast<int64_t>(involved.size() + distinct.size());
    int64_t done = 0;
    auto tick = [&] {
      if (options.progress) options.progress(++done, total);
    };
    const bool approx = options.approximate;
    for (int64_t u : involved) {
      if (approx) layers[u]->truncated_factor(options.truncation);
      else layers[u]->procrustes_factor();
      tick();
    }
    for (auto [u, v] : distinct) {
      nu[{u, v}] = approx ? procrustes_similarity_truncated(*layers[u], *layers[v], options.truncation)
                          : ApproximateNu{procrustes_similarity(*layers[u], *layers[v]), 0.0};
      tick();
    }
  }

  auto cka_value = [&](int64_t u, int64_t v) {
    auto acc = inner.accessor<double, 2>();
    if (!debiased) return cka_from_inner(acc[u][v], acc[u][u], acc[v][v]);
    auto dd = diag_dot.accessor<double, 2>();
    const LayerFit &x = *layers[u], &y = *layers[v];
    const double hxy = unbiased_hsic(acc[u][v], dd[u][v], x.trace(), y.trace(), n);
    const double hxx = unbiased_hsic(acc[u][u], dd[u][u], x.trace(), x.trace(), n);
    const double hyy = unbiased_hsic(acc[v][v], dd[v][v], y.trace(), y.trace(), n);
    VT_CHECK_ARG(hxx > 0.0, x.arg(), "debiased CKA is undefined: its unbiased self-HSIC is ", hxx, " (<= 0)");
    VT_CHECK_ARG(hyy > 0.0, y.arg(), "debiased CKA is undefined: its unbiased self-HSIC is ", hyy, " (<= 0)");
    return std::clamp(hxy / std::sqrt(hxx * hyy), -1.0, 1.0);
  };

  auto out = at::empty({ma, mb, la, lb}, at::kDouble);
  auto o = out.accessor<double, 4>();
  auto errors = at::zeros({ma, mb, la, lb}, at::kDouble);
  auto e = errors.accessor<double, 4>();
  for (int64_t i = 0; i < ma; ++i)
    for (int64_t j = 0; j < mb; ++j)
      for (int64_t k = 0; k < la; ++k)
        for (int64_t l = 0; l < lb; ++l) {
          const int64_t u = ia[i * la + k], v = ib[j * lb + l];
          double value;
          if (layers[u]->constant() || layers[v]->constant()) {
            value = 0.0;
          } else if (u == v) {
            value = 1.0;
          } else {
            const ApproximateNu a = need_procrustes ? nu.at({std::min(u, v), std::max(u, v)}) : ApproximateNu{};
            const double p = a.value;
            e[i][j][k][l] = a.bound;  // min(c, ·) is 1-Lipschitz: the bound on ν also bounds min(CKA, ν)
            switch (options.measure) {
              case Measure::kCKA:
              case Measure::kCKADebiased: value = cka_value(u, v); break;
              case Measure::kProcrustes: value = p; break;
              case Measure::kMin: value = std::min(cka_value(u, v), p); break;
            }
          }
          if (options.measure == Measure::kProcrustes) value = apply_procrustes_form(value, options.form);
          o[i][j][k][l] = value;
        }
  if (bound != nullptr) *bound = errors;
  return out;
}

}  // namespace vaetransfer::similarity
