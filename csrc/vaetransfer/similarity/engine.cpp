#include "vaetransfer/similarity/engine.h"

#include <map>
#include <set>
#include <stdexcept>

#include "vaetransfer/common/check.h"

namespace vaetransfer::similarity {

std::unique_ptr<Measure> make_measure(const std::string& name, const std::map<std::string, ParamValue>& params,
                                      const char* arg) {
  return MeasureRegistry::get().make(name, params, arg);
}

bool register_measure(MeasureRegistry::Entry entry) { return MeasureRegistry::get().add(std::move(entry)); }

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
  const std::shared_ptr<const Measure> measure =
      options.measure ? options.measure : std::shared_ptr<const Measure>(make_measure("cka"));
  measure->check(n, first.arg());

  // Requested distinct pairs (u, v) between different layers, plus self pairs for the norms. A
  // symmetric measure scores each unordered pair once (u < v); an asymmetric one each ordered pair
  // (u from A, v from B).
  const bool ordered = !measure->symmetric();
  auto key = [ordered](int64_t u, int64_t v) {
    return ordered ? std::make_pair(u, v) : std::make_pair(std::min(u, v), std::max(u, v));
  };
  std::set<std::pair<int64_t, int64_t>> distinct;
  for (int64_t u : ia)
    for (int64_t v : ib)
      if (u != v && !layers[u]->constant() && !layers[v]->constant()) distinct.insert(key(u, v));
  if (!options.constant_as_zero) {
    for (const LayerFit* f : layers)
      VT_CHECK_ARG(!f->constant(), f->arg(),
                   "is constant (zero variance after centring): similarity is undefined; drop the layer or "
                   "pass constant='zero'");
  }
  std::set<int64_t> involved;
  for (auto [u, v] : distinct) involved.insert(u), involved.insert(v);

  at::Tensor inner, diag_dot;
  if (measure->needs_gram() && !distinct.empty()) {
    std::vector<std::pair<int64_t, int64_t>> pairs(distinct.begin(), distinct.end());
    for (int64_t u : involved) pairs.emplace_back(u, u);
    inner = gram_inner_products(layers, pairs, options.stream);
    std::vector<at::Tensor> rows;
    for (const LayerFit* f : layers) rows.push_back(f->row_sq().cpu());
    auto r = at::stack(rows);
    diag_dot = r.mm(r.t());
  }

  // Per-layer fits, then one score per distinct pair; progress counts both for measures with fits.
  const int64_t total = static_cast<int64_t>(involved.size() + distinct.size());
  int64_t done = 0;
  bool report = true;  // a measure without per-layer work reports no progress (fit_all returns false)
  BatchContext context;
  context.memory_bytes = options.stream.memory_bytes;
  context.advance = [&](int64_t k) {
    done += k;
    if (report && options.progress) options.progress(done, total);
  };
  std::vector<const LayerFit*> to_fit;
  for (int64_t u : involved) to_fit.push_back(layers[u]);
  report = measure->fit_all(to_fit, context);
  std::vector<PairData> pair_data;
  pair_data.reserve(distinct.size());
  for (auto [u, v] : distinct) {
    PairData pair{*layers[u], *layers[v], n};
    if (inner.defined()) {
      auto acc = inner.accessor<double, 2>();
      pair.kl = acc[u][v], pair.kk = acc[u][u], pair.ll = acc[v][v];
      pair.diag_dot = diag_dot.accessor<double, 2>()[u][v];
    }
    pair_data.push_back(pair);
  }
  const std::vector<Score> scored = measure->score_all(pair_data, context);
  if (scored.size() != pair_data.size())
    throw std::logic_error("Measure::score_all returned " + std::to_string(scored.size()) + " scores for " +
                           std::to_string(pair_data.size()) + " pairs");
  std::map<std::pair<int64_t, int64_t>, Score> scores;
  size_t next = 0;
  for (auto uv : distinct) scores[uv] = scored[next++];

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
            value = measure->constant();
          } else if (u == v) {
            value = measure->identical();
          } else {
            const Score& s = scores.at(key(u, v));
            value = s.value;
            e[i][j][k][l] = s.bound;
          }
          o[i][j][k][l] = measure->report(value);
        }
  if (bound != nullptr) *bound = errors;
  return out;
}

}  // namespace vaetransfer::similarity
