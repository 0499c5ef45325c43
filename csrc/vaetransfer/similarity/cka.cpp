#include "vaetransfer/similarity/cka.h"

#include <map>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/engine.h"

namespace vaetransfer::similarity {

namespace {

// ⟨K_s, K_t⟩ for every pair of streamed layers, K = Xc Xcᵀ, without holding any full n × n Gram.
// Rows are taken in groups sized by `memory_bytes`; each layer's rows [g0, n) are centred once per
// group (chunked over features) and only their upper tile triangle is multiplied (add_upper_gram).
// A group buffer B_s thus holds every entry of K_s above the kGramDiag-diagonal blocks once and
// those small diagonal blocks D in full, so Σ_groups (2⟨B_s, B_t⟩ − Σ_D ⟨D_s, D_t⟩) = ⟨K_s, K_t⟩
// for all layer pairs, in one matrix product per group: about half the work of full Grams.
at::Tensor stream_inner_products(const std::vector<const LayerFit*>& s, int64_t memory_bytes) {
  const int64_t L = static_cast<int64_t>(s.size());
  const int64_t n = s.front()->n();
  at::ScalarType ct = at::kFloat;
  for (auto* f : s)
    if (f->compute_dtype() == at::kDouble) ct = at::kDouble;
  const int64_t elem = static_cast<int64_t>(c10::elementSize(ct));
  auto opts = s.front()->x().options().dtype(ct);
  auto g = at::zeros({L, L}, opts.dtype(at::kDouble));
  for (int64_t g0 = 0; g0 < n;) {
    const int64_t width = n - g0;
    int64_t rows = std::clamp<int64_t>(memory_bytes / std::max<int64_t>(1, L * width * elem), 1, width);
    if (rows < width && rows > kGramPanel) rows -= rows % kGramPanel;  // whole panels
    auto buf = at::zeros({L, rows, width}, opts);
    for (int64_t i = 0; i < L; ++i) {
      const LayerFit& f = *s[i];
      const int64_t chunk = std::max<int64_t>(1, f.chunk_features() * 8 / elem / 2);
      auto bi = buf[i];
      for (int64_t c0 = 0; c0 < f.p(); c0 += chunk)  // rows g0..n, centred once per group
        add_upper_gram(bi, f.centred(g0, n, c0, std::min(f.p(), c0 + chunk), ct), rows);
    }
    // Float32 products summed in float64 every kSum entries, so rounding does not grow with n².
    constexpr int64_t kSum = int64_t{1} << 16;
    auto acc = at::zeros({L, L}, g.options());
    const int64_t step = std::max<int64_t>(1, kSum / width);
    for (int64_t r0 = 0; r0 < rows; r0 += step) {
      auto part = buf.narrow(1, r0, std::min(step, rows - r0)).flatten(1);
      acc.add_(part.mm(part.t()).to(at::kDouble));
    }
    acc.mul_(2.0);
    for (int64_t s0 = 0; s0 < rows; s0 += kGramDiag) {
      const int64_t bs = std::min(kGramDiag, rows - s0);
      auto d = buf.narrow(1, s0, bs).narrow(2, s0, bs).reshape({L, bs * bs});
      acc.sub_(d.mm(d.t()).to(at::kDouble));
    }
    g.add_(acc);
    g0 += rows;
  }
  return g.cpu();
}

}  // namespace

at::Tensor gram_inner_products(const std::vector<const LayerFit*>& layers,
                               const std::vector<std::pair<int64_t, int64_t>>& pairs,
                               const StreamOptions& options) {
  const int64_t L = static_cast<int64_t>(layers.size());
  VT_CHECK_ARG(options.memory_bytes > 0, "memory_bytes", "expected > 0, got ", options.memory_bytes);
  VT_CHECK_ARG(options.form >= 0 && options.form <= 2, "form", "expected 0 (auto), 1 (feature) or 2 (Gram), got ",
               options.form);
  auto out = at::zeros({L, L}, at::kDouble);
  if (L == 0) return out;
  const int64_t n = layers.front()->n();
  std::vector<double> partner_features(L, 0.0);
  for (auto [u, v] : pairs) {
    partner_features[u] += static_cast<double>(layers[v]->p());
    if (u != v) partner_features[v] += static_cast<double>(layers[u]->p());
  }
  std::vector<bool> streamed(L, false);
  for (int64_t u = 0; u < L; ++u)
    streamed[u] = options.form == 2 || (options.form == 0 && partner_features[u] > 0.25 * static_cast<double>(n));

  // Gram form: the streamed layers, all their pairs in one pass.
  std::vector<const LayerFit*> s;
  std::vector<int64_t> slot(L, -1);
  for (int64_t u = 0; u < L; ++u)
    if (streamed[u] && partner_features[u] > 0) {
      slot[u] = static_cast<int64_t>(s.size());
      s.push_back(layers[u]);
    }
  at::Tensor g;
  if (!s.empty()) g = stream_inner_products(s, options.memory_bytes);

  // Feature form: ‖YcᵀXc‖_F², with each layer centred once.
  std::map<int64_t, at::Tensor> centred;
  auto features = [&](int64_t u) -> const at::Tensor& {
    auto it = centred.find(u);
    if (it == centred.end()) {
      const LayerFit& f = *layers[u];
      it = centred.emplace(u, f.centred(0, f.n(), 0, f.p(), f.compute_dtype())).first;
    }
    return it->second;
  };
  auto acc = out.accessor<double, 2>();
  for (auto [u, v] : pairs) {
    double value;
    if (slot[u] >= 0 && slot[v] >= 0) {
      value = g[slot[u]][slot[v]].item<double>();
    } else {
      const auto& xu = features(u);
      const auto& xv = features(v);
      auto ct = xu.scalar_type() == at::kDouble || xv.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
      auto prod = xv.to(ct).t().mm(xu.to(ct));
      value = prod.to(at::kDouble).square().sum().item<double>();
    }
    acc[u][v] = value;
    acc[v][u] = value;
  }
  return out;
}

double cka_from_inner(double kl, double kk, double ll) {
  const double v = kl / std::sqrt(kk * ll);
  return std::clamp(v, 0.0, 1.0);
}

double unbiased_hsic(double kl, double diag_dot, double trace_k, double trace_l, int64_t n) {
  const double nd = static_cast<double>(n);
  return kl - nd / (nd - 2.0) * diag_dot + trace_k * trace_l / ((nd - 1.0) * (nd - 2.0));
}

double linear_cka(const PairData& pair) { return cka_from_inner(pair.kl, pair.kk, pair.ll); }

double debiased_cka(const PairData& pair) {
  const LayerFit &x = pair.x, &y = pair.y;
  const double hxy = unbiased_hsic(pair.kl, pair.diag_dot, x.trace(), y.trace(), pair.n);
  const double hxx = unbiased_hsic(pair.kk, x.row_sq().square().sum().item<double>(), x.trace(), x.trace(), pair.n);
  const double hyy = unbiased_hsic(pair.ll, y.row_sq().square().sum().item<double>(), y.trace(), y.trace(), pair.n);
  VT_CHECK_ARG(hxx > 0.0, x.arg(), "debiased CKA is undefined: its unbiased self-HSIC is ", hxx, " (<= 0)");
  VT_CHECK_ARG(hyy > 0.0, y.arg(), "debiased CKA is undefined: its unbiased self-HSIC is ", hyy, " (<= 0)");
  return std::clamp(hxy / std::sqrt(hxx * hyy), -1.0, 1.0);
}

namespace {

class CKA : public Measure {
 public:
  explicit CKA(const Params& p) : Measure(p) {}
  bool needs_gram() const override { return true; }
  Score score(const PairData& pair) const override { return {linear_cka(pair)}; }
};

class DebiasedCKA : public Measure {
 public:
  explicit DebiasedCKA(const Params& p) : Measure(p) {}
  bool needs_gram() const override { return true; }
  void check(int64_t n, const std::string& arg) const override {
    VT_CHECK_ARG(n >= 4, arg, "debiased CKA needs at least 4 examples, got n = ", n);
  }
  Score score(const PairData& pair) const override { return {debiased_cka(pair)}; }
};

}  // namespace

VT_REGISTER(MeasureRegistry, {"cka", "gram", "linear CKA (Eq. 2): ⟨K, L⟩ / (‖K‖ ‖L‖) of the centred Grams", {},
                              [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<CKA>(p); },
                              {"linear_cka"}});
VT_REGISTER(MeasureRegistry,
            {"cka_debiased", "gram", "linear CKA from the unbiased HSIC (Song et al. 2012); in [−1, 1], needs n ≥ 4", {},
             [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<DebiasedCKA>(p); }});

double cka(const at::Tensor& x, const at::Tensor& y, bool debiased, const StreamOptions& options) {
  EngineOptions eo;
  eo.measure = make_measure(debiased ? "cka_debiased" : "cka");
  eo.stream = options;
  auto fx = std::make_shared<LayerFit>(x, FitOptions{}, "x");
  auto fy = std::make_shared<LayerFit>(y, FitOptions{}, "y");
  return similarity_matrices({{fx}}, {{fy}}, eo).item<double>();
}

}  // namespace vaetransfer::similarity
