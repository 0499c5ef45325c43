#include "vaetransfer/similarity/cka.h"

#include <map>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/engine.h"

namespace vaetransfer::similarity {

namespace {

// Upper block triangle of every streamed layer's centred Gram, one block row at a time:
// for rows R = [r0, r1), D_s = K_s[R, R] and O_s = K_s[R, r1:n]. Then
// ⟨K_s, K_t⟩ = Σ_R ⟨D_s, D_t⟩ + 2 ⟨O_s, O_t⟩ — one matrix product over all layer pairs per block.
at::Tensor stream_inner_products(const std::vector<const LayerFit*>& s, int64_t memory_bytes) {
  const int64_t L = static_cast<int64_t>(s.size());
  const int64_t n = s.front()->n();
  at::ScalarType ct = at::kFloat;
  for (auto* f : s)
    if (f->compute_dtype() == at::kDouble) ct = at::kDouble;
  const int64_t elem = static_cast<int64_t>(c10::elementSize(ct));
  const int64_t b = std::clamp<int64_t>(memory_bytes / std::max<int64_t>(1, L * n * elem), 1, n);
  auto opts = s.front()->x().options().dtype(ct);
  auto g = at::zeros({L, L}, opts.dtype(at::kDouble));
  for (int64_t r0 = 0; r0 < n; r0 += b) {
    const int64_t r1 = std::min(n, r0 + b), bb = r1 - r0, m = n - r1;
    auto d = at::zeros({L, bb, bb}, opts);
    auto o = at::zeros({L, bb, m}, opts);
    for (int64_t i = 0; i < L; ++i) {
      const LayerFit& f = *s[i];
      const int64_t chunk = std::max<int64_t>(1, f.chunk_features() * 8 / elem / 2);
      auto di = d[i], oi = o[i];
      for (int64_t c0 = 0; c0 < f.p(); c0 += chunk) {
        auto xc = f.centred(r0, n, c0, std::min(f.p(), c0 + chunk), ct);  // rows r0..n, centred
        auto xr = xc.narrow(0, 0, bb);
        di.addmm_(xr, xr.t());
        if (m > 0) oi.addmm_(xr, xc.narrow(0, bb, m).t());
      }
    }
    auto dv = d.view({L, bb * bb});
    auto acc = dv.mm(dv.t()).to(at::kDouble);
    if (m > 0) {
      auto ov = o.view({L, bb * m});
      acc.add_(ov.mm(ov.t()).to(at::kDouble), 2.0);
    }
    g.add_(acc);
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

double cka(const at::Tensor& x, const at::Tensor& y, bool debiased, const StreamOptions& options) {
  EngineOptions eo;
  eo.measure = debiased ? Measure::kCKADebiased : Measure::kCKA;
  eo.stream = options;
  auto fx = std::make_shared<LayerFit>(x, FitOptions{}, "x");
  auto fy = std::make_shared<LayerFit>(y, FitOptions{}, "y");
  return similarity_matrices({{fx}}, {{fy}}, eo).item<double>();
}

}  // namespace vaetransfer::similarity
