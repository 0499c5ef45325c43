#include "vaetransfer/similarity/resample.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/cka.h"

namespace vaetransfer::similarity {

namespace {

using Models = std::vector<std::vector<LayerFitPtr>>;

// Float32 products are summed in float64 every kSum terms, so rounding does not grow with n².
constexpr int64_t kSum = int64_t{1} << 16;

// The unique layers of both sides and, for every entry of the output, its layer indices.
struct Layout {
  std::vector<const LayerFit*> layers;
  std::vector<int64_t> ia, ib;
  int64_t ma = 0, mb = 0, la = 0, lb = 0, n = 0;
  at::ScalarType ct = at::kFloat;
};

void check_models(const Models& models, const char* arg) {
  VT_CHECK_ARG(!models.empty(), arg, "expected at least one model, got none");
  const size_t layers = models.front().size();
  VT_CHECK_ARG(layers > 0, arg, "expected at least one layer per model, got none");
  for (size_t i = 0; i < models.size(); ++i) {
    VT_CHECK_ARG(models[i].size() == layers, arg, "expected ", layers, " layers in every model, model ", i, " has ",
                 models[i].size());
    for (const auto& f : models[i]) VT_CHECK_TYPE(f != nullptr, arg, "expected fitted layers, got None");
  }
}

Layout layout(const Models& a, const Models& b, bool constant_as_zero) {
  check_models(a, "models_a");
  check_models(b, "models_b");
  Layout out;
  out.ma = static_cast<int64_t>(a.size()), out.mb = static_cast<int64_t>(b.size());
  out.la = static_cast<int64_t>(a.front().size()), out.lb = static_cast<int64_t>(b.front().size());
  std::map<const LayerFit*, int64_t> index;
  auto id = [&](const LayerFitPtr& f) {
    auto [it, fresh] = index.emplace(f.get(), static_cast<int64_t>(out.layers.size()));
    if (fresh) out.layers.push_back(f.get());
    return it->second;
  };
  for (const auto& m : a)
    for (const auto& f : m) out.ia.push_back(id(f));
  for (const auto& m : b)
    for (const auto& f : m) out.ib.push_back(id(f));
  const LayerFit& first = *out.layers.front();
  out.n = first.n();
  for (const LayerFit* f : out.layers) {
    VT_CHECK_ARG(f->n() == first.n(), f->arg(), "expected the same number of examples n = ", first.n(), " as ",
                 first.arg(), ", got n = ", f->n());
    check_same_device(first.x(), first.arg().c_str(), f->x(), f->arg().c_str());
    VT_CHECK_ARG(constant_as_zero || !f->constant(), f->arg(),
                 "is constant (zero variance after centring): similarity is undefined; drop the layer or pass "
                 "constant='zero'");
    if (f->compute_dtype() == at::kDouble) out.ct = at::kDouble;
  }
  return out;
}

// a (A × m), b (B × m) → a bᵀ (A × B) float64.
at::Tensor product_f64(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() == at::kDouble) return a.mm(b.t());
  auto acc = at::zeros({a.size(0), b.size(0)}, a.options().dtype(at::kDouble));
  const int64_t m = a.size(1);
  for (int64_t c0 = 0; c0 < m; c0 += kSum) {
    const int64_t len = std::min(kSum, m - c0);
    acc.add_(a.narrow(1, c0, len).mm(b.narrow(1, c0, len).t()).to(at::kDouble));
  }
  return acc;
}

// zᵀ z (P × P) float64 for z (m × P), summed over row chunks.
at::Tensor cross_f64(const at::Tensor& z) {
  if (z.scalar_type() == at::kDouble) return z.t().mm(z);
  auto acc = at::zeros({z.size(1), z.size(1)}, z.options().dtype(at::kDouble));
  for (int64_t r0 = 0; r0 < z.size(0); r0 += kSum) {
    auto part = z.narrow(0, r0, std::min(kSum, z.size(0) - r0));
    acc.add_(part.t().mm(part).to(at::kDouble));
  }
  return acc;
}

at::Tensor centred_features(const LayerFit& f, at::ScalarType ct) { return f.centred(0, f.n(), 0, f.p(), ct); }

// The centred Gram Xc Xcᵀ (n × n) in `ct`, built over feature chunks at half cost.
at::Tensor centred_gram(const LayerFit& f, at::ScalarType ct) {
  const int64_t n = f.n();
  auto out = at::zeros({n, n}, f.x().options().dtype(ct));
  const int64_t chunk = std::max<int64_t>(1, f.chunk_features() / 2);
  for (int64_t c0 = 0; c0 < f.p(); c0 += chunk)
    add_upper_gram(out, f.centred(0, n, c0, std::min(f.p(), c0 + chunk), ct), n);
  return mirror_upper(out);
}

// A pair's score from its (replicate) Gram quantities; 0 where the replicate leaves a layer
// constant or (debiased) gives a non-positive unbiased self-HSIC.
double replicate_score(bool debiased, double kl, double kk, double ll, double dd, double dkk, double dll, double tk,
                       double tl, int64_t n) {
  if (!debiased) return kk > 0.0 && ll > 0.0 ? cka_from_inner(kl, kk, ll) : 0.0;
  const double hxx = unbiased_hsic(kk, dkk, tk, tk, n), hyy = unbiased_hsic(ll, dll, tl, tl, n);
  if (!(hxx > 0.0) || !(hyy > 0.0)) return 0.0;
  return std::clamp(unbiased_hsic(kl, dd, tk, tl, n) / std::sqrt(hxx * hyy), -1.0, 1.0);
}

// Below this share of its full-data energy (scaled to the replicate's size), a layer counts as
// constant in a replicate: rounding of the re-centring, not variance.
double constant_share(at::ScalarType ct) { return ct == at::kDouble ? 1e-10 : 1e-5; }

// Per-replicate quantities of the active layers (index into Layout::layers): cross[a][b] for
// A-side × B-side active layers, and per layer ‖K‖², trace, diagonal (rows of the replicate).
struct Replicate {
  at::Tensor cross;            // (|A|, |B|) float64
  std::vector<double> kk, tr;  // per active layer
  at::Tensor diag;             // (L_active, m) float64: K^w_ii per kept row (weighted mode)
  at::Tensor dd;               // (L_active, L_active) float64: Σ_i w_i K_ii L_ii (L permuted: L_π(i)π(i))
  std::vector<double> dself;   // per active layer: Σ_i w_i K_ii² (never permuted)
  std::vector<bool> flat;      // constant within the replicate
  int64_t n = 0;               // N = Σ w
};

// Active (not constant on the full data) layers, and the A-side / B-side ones among them.
struct Active {
  std::vector<int64_t> layer;         // active index → layer index
  std::vector<int64_t> slot;          // layer index → active index or −1
  std::vector<int64_t> side_a, side_b;  // active indices used on each side
  std::vector<int64_t> pos_a, pos_b;    // active index → position in side_a / side_b or −1
};

Active active_layers(const Layout& lay) {
  Active act;
  const int64_t L = static_cast<int64_t>(lay.layers.size());
  act.slot.assign(L, -1);
  for (int64_t u = 0; u < L; ++u)
    if (!lay.layers[u]->constant()) {
      act.slot[u] = static_cast<int64_t>(act.layer.size());
      act.layer.push_back(u);
    }
  const int64_t A = static_cast<int64_t>(act.layer.size());
  act.pos_a.assign(A, -1), act.pos_b.assign(A, -1);
  for (int64_t u : lay.ia)
    if (act.slot[u] >= 0 && act.pos_a[act.slot[u]] < 0) {
      act.pos_a[act.slot[u]] = static_cast<int64_t>(act.side_a.size());
      act.side_a.push_back(act.slot[u]);
    }
  for (int64_t v : lay.ib)
    if (act.slot[v] >= 0 && act.pos_b[act.slot[v]] < 0) {
      act.pos_b[act.slot[v]] = static_cast<int64_t>(act.side_b.size());
      act.side_b.push_back(act.slot[v]);
    }
  return act;
}

at::Tensor long_index(const std::vector<int64_t>& v, const at::Device& device) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(device);
}

// Held layers: centred features for narrow ones (all in the feature form), a stored centred
// Gram for the others (the Gram form). Recomputing a narrow layer's Gram rows per replicate
// costs n²·p, below the n²·L of its pair products when p ≤ L.
struct Bank {
  bool feature_form = false;
  std::vector<at::Tensor> feat, gram;  // by active index; one of the two is defined
  at::Tensor z;                        // feature form: all active layers' features side by side (n × P)
  std::vector<int64_t> offset;         // feature form: first column of each active layer in z
  at::Tensor member;                   // feature form: (P, A) float64, member[c, s] = 1 if column c is layer s's
};

Bank make_bank(const Layout& lay, const Active& act, bool feature_form) {
  Bank bank;
  bank.feature_form = feature_form;
  const int64_t A = static_cast<int64_t>(act.layer.size());
  bank.feat.resize(A), bank.gram.resize(A);
  const int64_t keep_features = std::max<int64_t>(16, A);
  std::vector<at::Tensor> parts;
  int64_t offset = 0;
  for (int64_t s = 0; s < A; ++s) {
    const LayerFit& f = *lay.layers[act.layer[s]];
    if (feature_form) {
      parts.push_back(centred_features(f, lay.ct));
      bank.offset.push_back(offset);
      offset += f.p();
    } else if (f.p() <= keep_features) {
      bank.feat[s] = centred_features(f, lay.ct);
    } else {
      bank.gram[s] = centred_gram(f, lay.ct);
    }
  }
  if (feature_form && !parts.empty()) {
    bank.z = at::cat(parts, 1).contiguous();
    bank.member = at::zeros({offset, A}, bank.z.options().dtype(at::kDouble));
    for (int64_t s = 0; s < A; ++s) bank.member.narrow(0, bank.offset[s], lay.layers[act.layer[s]]->p()).select(1, s).fill_(1.0);
  }
  return bank;
}

// Feature-form columns of active layer s.
at::Tensor columns(const Bank& bank, const Layout& lay, const Active& act, const at::Tensor& m, int64_t s) {
  return m.narrow(-1, bank.offset[s], lay.layers[act.layer[s]]->p());
}

void fill_output(at::Tensor& out, int64_t r, const Layout& lay, const Active& act, const Replicate& rep,
                 bool debiased, bool self_is_one) {
  auto o = out.accessor<double, 5>();
  auto cross = rep.cross.accessor<double, 2>();
  auto dd = rep.dd.accessor<double, 2>();
  for (int64_t i = 0; i < lay.ma; ++i)
    for (int64_t j = 0; j < lay.mb; ++j)
      for (int64_t k = 0; k < lay.la; ++k)
        for (int64_t l = 0; l < lay.lb; ++l) {
          const int64_t u = lay.ia[i * lay.la + k], v = lay.ib[j * lay.lb + l];
          const int64_t su = act.slot[u], sv = act.slot[v];
          double value;
          if (su < 0 || sv < 0 || rep.flat[su] || rep.flat[sv]) {
            value = 0.0;  // the constant value, also against itself (as the engine does)
          } else if (u == v && self_is_one) {
            value = 1.0;
          } else {
            value = replicate_score(debiased, cross[act.pos_a[su]][act.pos_b[sv]], rep.kk[su], rep.kk[sv],
                                    dd[su][sv], rep.dself[su], rep.dself[sv], rep.tr[su], rep.tr[sv], rep.n);
          }
          o[r][i][j][k][l] = value;
        }
}

int64_t block_rows(int64_t layers, int64_t width, at::ScalarType ct, int64_t memory_bytes) {
  const int64_t elem = static_cast<int64_t>(c10::elementSize(ct));
  return std::clamp<int64_t>(memory_bytes / std::max<int64_t>(1, layers * width * elem), 1, std::max<int64_t>(1, width));
}

// The checks both replicate kinds share: the stream options, and an integer (rows, n) table of
// per-replicate row weights or permutations, named `arg`.
void check_replicates(const ReplicateOptions& options, const at::Tensor& table, const char* arg, int64_t n) {
  VT_CHECK_ARG(options.memory_bytes > 0, "memory_bytes", "expected > 0, got ", options.memory_bytes);
  VT_CHECK_ARG(options.form >= 0 && options.form <= 2, "form", "expected 0 (auto), 1 (feature) or 2 (Gram), got ",
               options.form);
  check_integral(table, arg);
  VT_CHECK_ARG(table.dim() == 2 && table.size(1) == n, arg, "expected shape (", arg, ", n = ", n, "), got ",
               table.sizes());
}

}  // namespace

at::Tensor weighted_cka_replicates(const Models& models_a, const Models& models_b, const at::Tensor& weights,
                                   const ReplicateOptions& options) {
  const Layout lay = layout(models_a, models_b, options.constant_as_zero);
  check_replicates(options, weights, "weights", lay.n);
  const int64_t R = weights.size(0);
  auto w_all = weights.to(at::kLong).cpu().contiguous();
  if (R > 0) {
    VT_CHECK_ARG(w_all.min().item<int64_t>() >= 0, "weights", "expected non-negative example counts");
    const int64_t least = w_all.sum(1).min().item<int64_t>();
    const int64_t need = options.debiased ? 4 : 2;
    VT_CHECK_ARG(least >= need, "weights", "expected every replicate to hold at least ", need,
                 " examples, one holds ", least);
  }
  const Active act = active_layers(lay);
  const int64_t A = static_cast<int64_t>(act.layer.size());
  auto out = at::zeros({R, lay.ma, lay.mb, lay.la, lay.lb}, at::kDouble);
  if (R == 0) return out;

  const auto device = lay.layers.front()->x().device();
  const auto fopts = at::TensorOptions().dtype(lay.ct).device(device);
  const double n_eff = 0.632 * static_cast<double>(lay.n);
  double P = 0.0;
  for (int64_t u : act.layer) P += static_cast<double>(lay.layers[u]->p());
  const double pairs = static_cast<double>(act.side_a.size() * act.side_b.size()) + static_cast<double>(A);
  const bool feature_form = options.form == 1 || (options.form == 0 && P * P <= pairs * n_eff);
  const Bank bank = A > 0 ? make_bank(lay, act, feature_form) : Bank{};
  const at::Tensor ia = long_index(act.side_a, device), ib = long_index(act.side_b, device);
  const double share = constant_share(lay.ct);

  for (int64_t r = 0; r < R; ++r) {
    Replicate rep;
    auto w_row = w_all[r];
    rep.n = w_row.sum().item<int64_t>();
    const double N = static_cast<double>(rep.n);
    auto S_cpu = at::nonzero(w_row).squeeze(1);
    const int64_t m = S_cpu.size(0);
    auto S = S_cpu.to(device);
    auto ws = w_row.index_select(0, S_cpu).to(at::kDouble).to(device);  // (m,) float64
    auto ws_ct = ws.to(lay.ct);
    auto sw = ws_ct.sqrt();
    rep.kk.assign(A, 0.0), rep.tr.assign(A, 0.0), rep.flat.assign(A, false);
    std::vector<at::Tensor> diag(A);
    if (A == 0) {
      rep.cross = at::zeros({0, 0}, at::kDouble);
      rep.dd = at::zeros({0, 0}, at::kDouble);
    } else if (bank.feature_form) {
      auto zs = bank.z.index_select(0, S);
      auto mean = zs.t().mv(ws_ct).div_(N);  // weighted column means
      auto zd = zs - mean.unsqueeze(0);
      auto c = cross_f64(zd * sw.unsqueeze(1));  // Σ_i w_i (z_i − m)(z_i − m)ᵀ
      // Squared Frobenius norms of every layer × layer block at once: Eᵀ (C ∘ C) E.
      auto blocks = bank.member.t().mm(c.square_()).mm(bank.member);
      rep.cross = blocks.index_select(0, ia).index_select(1, ib).cpu();
      auto self = blocks.diagonal().cpu().contiguous();
      std::copy_n(self.data_ptr<double>(), A, rep.kk.begin());
      auto d = zd.square().to(at::kDouble).mm(bank.member);  // (m, A): ‖z_i − m‖² per layer
      for (int64_t s = 0; s < A; ++s) diag[s] = d.select(1, s);
    } else {
      // Gram form, without re-centring any Gram: with P = D − w wᵀ / N (D = diag w), the weighted
      // re-centring is K^w-products = tr(K P L P), so
      //   ⟨K^w, L^w⟩_W = Σ_ij w_i w_j K_ij L_ij − (2/N) Σ_i w_i a_i b_i + (wᵀa)(wᵀb) / N²,
      // a = K w, b = L w (K, L centred at the unweighted mean). Only the first term needs the
      // Grams: rows and columns of the kept examples, one side weighted by w_i w_j, streamed.
      auto w_dense = at::zeros({lay.n}, fopts).index_copy_(0, S, ws_ct);
      std::vector<at::Tensor> xs(A);
      std::vector<double> tot(A, 0.0);
      auto av = at::empty({A, m}, at::TensorOptions().dtype(at::kDouble).device(device));  // (K w)_i, kept rows
      for (int64_t s = 0; s < A; ++s) {
        at::Tensor kw, kdiag;
        if (bank.gram[s].defined()) {
          kw = bank.gram[s].mv(w_dense).index_select(0, S).to(at::kDouble);
          kdiag = bank.gram[s].diagonal().index_select(0, S).to(at::kDouble);
        } else {
          xs[s] = bank.feat[s].index_select(0, S);
          kw = xs[s].mv(xs[s].t().mv(ws_ct)).to(at::kDouble);
          kdiag = at::sum(xs[s].square(), {1}, false, at::kDouble);
        }
        av[s].copy_(kw);
        tot[s] = at::dot(ws, kw).item<double>();
        diag[s] = kdiag - (2.0 / N) * kw + tot[s] / (N * N);  // K^w_ii = ‖x_i − m_w‖²
      }
      const int64_t rows = block_rows(2 * A, m, lay.ct, options.memory_bytes);
      auto cross = at::zeros({static_cast<int64_t>(act.side_a.size()), static_cast<int64_t>(act.side_b.size())},
                             at::TensorOptions().dtype(at::kDouble).device(device));
      auto self = at::zeros({A}, at::TensorOptions().dtype(at::kDouble).device(device));
      auto buf = at::empty({A, std::min(rows, m), m}, fopts);
      auto wbuf = at::empty({A, std::min(rows, m), m}, fopts);
      for (int64_t r0 = 0; r0 < m; r0 += rows) {
        const int64_t h = std::min(rows, m - r0);
        auto b = buf.narrow(1, 0, h), wb = wbuf.narrow(1, 0, h);
        auto sr = S.narrow(0, r0, h);
        for (int64_t s = 0; s < A; ++s) {
          auto bs = b[s];
          if (bank.gram[s].defined())
            at::index_select_out(bs, bank.gram[s].index_select(0, sr), 1, S);
          else
            at::mm_out(bs, xs[s].narrow(0, r0, h), xs[s].t());
        }
        at::mul_out(wb, b, ws_ct.narrow(0, r0, h).unsqueeze(1) * ws_ct.unsqueeze(0));  // w_i w_j K_ij
        // All active layers against all: one skinny GEMM that streams each buffer once (cheaper
        // than copying out the A-side and B-side rows); the cross terms and the norms are read off it.
        auto all = product_f64(wb.reshape({A, h * m}), b.reshape({A, h * m}));
        cross.add_(all.index_select(0, ia).index_select(1, ib));
        self.add_(all.diagonal());
      }
      // The rank-one corrections of tr(K P L P).
      auto wa = av * ws.unsqueeze(0);
      auto t = at::tensor(tot, at::TensorOptions().dtype(at::kDouble)).to(device);
      auto corr = wa.mm(av.t()).mul_(-2.0 / N).add_(t.unsqueeze(1) * t.unsqueeze(0) / (N * N));  // (A, A)
      cross.add_(corr.index_select(0, ia).index_select(1, ib));
      self.add_(corr.diagonal());
      rep.cross = cross.cpu();
      auto self_cpu = self.cpu().contiguous();
      std::copy_n(self_cpu.data_ptr<double>(), A, rep.kk.begin());
    }
    if (A > 0) {
      auto d = at::stack(diag);  // (A, m) float64
      rep.dd = (d * ws.unsqueeze(0)).mm(d.t()).cpu();
      auto tr = d.mv(ws).cpu().contiguous();
      auto dd = rep.dd.accessor<double, 2>();
      auto tra = tr.accessor<double, 1>();
      rep.dself.assign(A, 0.0);
      for (int64_t s = 0; s < A; ++s) rep.dself[s] = dd[s][s];
      for (int64_t s = 0; s < A; ++s) {
        rep.tr[s] = tra[s];
        const LayerFit& f = *lay.layers[act.layer[s]];
        rep.flat[s] = !(rep.tr[s] > share * f.trace() * N / static_cast<double>(lay.n));
      }
    }
    fill_output(out, r, lay, act, rep, options.debiased, /*self_is_one=*/true);
    if (options.progress) options.progress(r + 1, R);
  }
  return out;
}

at::Tensor permuted_cka_replicates(const Models& models_a, const Models& models_b, const at::Tensor& permutations,
                                   const ReplicateOptions& options) {
  const Layout lay = layout(models_a, models_b, options.constant_as_zero);
  check_replicates(options, permutations, "permutations", lay.n);
  auto perms = permutations.to(at::kLong).cpu().contiguous();
  const int64_t K = perms.size(0);
  if (K > 0) {
    auto sorted = std::get<0>(perms.sort(1));
    VT_CHECK_ARG(sorted.equal(at::arange(lay.n, at::kLong).unsqueeze(0).expand({K, lay.n})), "permutations",
                 "expected every row to be a permutation of 0..", lay.n - 1);
  }
  if (options.debiased)
    VT_CHECK_ARG(lay.n >= 4, lay.layers.front()->arg(), "debiased CKA needs at least 4 examples, got n = ", lay.n);
  const Active act = active_layers(lay);
  const int64_t A = static_cast<int64_t>(act.layer.size());
  const int64_t na = static_cast<int64_t>(act.side_a.size()), nb = static_cast<int64_t>(act.side_b.size());
  auto out = at::zeros({K, lay.ma, lay.mb, lay.la, lay.lb}, at::kDouble);
  if (K == 0) return out;

  const auto device = lay.layers.front()->x().device();
  const auto fopts = at::TensorOptions().dtype(lay.ct).device(device);
  double pa = 0.0, pb = 0.0;
  for (int64_t s : act.side_a) pa += static_cast<double>(lay.layers[act.layer[s]]->p());
  for (int64_t s : act.side_b) pb += static_cast<double>(lay.layers[act.layer[s]]->p());
  const bool feature_form =
      options.form == 1 || (options.form == 0 && pa * pb <= static_cast<double>(na * nb) * static_cast<double>(lay.n));
  const Bank bank = A > 0 ? make_bank(lay, act, feature_form) : Bank{};

  // Full-data quantities, the same under every permutation.
  Replicate rep;
  rep.n = lay.n;
  rep.kk.assign(A, 0.0), rep.tr.assign(A, 0.0), rep.flat.assign(A, false);
  std::vector<at::Tensor> rsq(A);
  for (int64_t s = 0; s < A; ++s) {
    const LayerFit& f = *lay.layers[act.layer[s]];
    rep.tr[s] = f.trace();
    rsq[s] = f.row_sq().to(device);
    if (feature_form) {
      auto x = columns(bank, lay, act, bank.z, s);
      rep.kk[s] = cross_f64(x).square().sum().item<double>();
    } else if (bank.gram[s].defined()) {
      rep.kk[s] = at::sum(bank.gram[s].square(), at::kDouble).item<double>();
    } else {
      rep.kk[s] = cross_f64(bank.feat[s]).square().sum().item<double>();
    }
  }
  const at::Tensor rows_sq = A > 0 ? at::stack(rsq) : at::Tensor();  // (A, n) float64
  rep.dself.assign(A, 0.0);
  for (int64_t s = 0; s < A; ++s) rep.dself[s] = rsq[s].square().sum().item<double>();

  at::Tensor za, zb_cols, member_a, member_b;
  std::vector<int64_t> off_a, off_b;
  if (feature_form && na > 0 && nb > 0) {
    std::vector<at::Tensor> pa_parts, pb_parts;
    int64_t o = 0;
    for (int64_t s : act.side_a) pa_parts.push_back(columns(bank, lay, act, bank.z, s)), off_a.push_back(o), o += lay.layers[act.layer[s]]->p();
    o = 0;
    for (int64_t s : act.side_b) pb_parts.push_back(columns(bank, lay, act, bank.z, s)), off_b.push_back(o), o += lay.layers[act.layer[s]]->p();
    za = at::cat(pa_parts, 1).contiguous();
    zb_cols = at::cat(pb_parts, 1).contiguous();
    auto membership = [&](const std::vector<int64_t>& side, const std::vector<int64_t>& off, int64_t cols) {
      auto e = at::zeros({cols, static_cast<int64_t>(side.size())}, za.options().dtype(at::kDouble));
      for (size_t i = 0; i < side.size(); ++i)
        e.narrow(0, off[i], lay.layers[act.layer[side[i]]]->p()).select(1, static_cast<int64_t>(i)).fill_(1.0);
      return e;
    };
    member_a = membership(act.side_a, off_a, za.size(1));
    member_b = membership(act.side_b, off_b, zb_cols.size(1));
  }
  const int64_t rows = block_rows(na + nb, lay.n, lay.ct, options.memory_bytes);

  for (int64_t k = 0; k < K; ++k) {
    auto pi = perms[k].to(device);
    if (A > 0) {
      // Σ_i K_ii L_π(i)π(i) for every A-side / B-side layer pair (all active layers, for simplicity).
      rep.dd = rows_sq.mm(rows_sq.index_select(1, pi).t()).cpu();
    } else {
      rep.dd = at::zeros({0, 0}, at::kDouble);
    }
    if (na == 0 || nb == 0) {
      rep.cross = at::zeros({na, nb}, at::kDouble);
    } else if (feature_form) {
      // ‖Yπᵀ X‖_F² blocks of one (P_a × P_b) product: Eₐᵀ (C ∘ C) E_b.
      auto c = product_f64(za.t().contiguous(), zb_cols.index_select(0, pi).t().contiguous());
      rep.cross = member_a.t().mm(c.square_()).mm(member_b).cpu();
    } else {
      // ⟨K, P L Pᵀ⟩ streamed over row blocks: A's Gram rows against B's permuted Gram rows.
      std::vector<at::Tensor> yp(A);
      for (int64_t s : act.side_b)
        if (!bank.gram[s].defined()) yp[s] = bank.feat[s].index_select(0, pi);
      auto cross = at::zeros({na, nb}, at::TensorOptions().dtype(at::kDouble).device(device));
      auto buf_a = at::empty({na, std::min(rows, lay.n), lay.n}, fopts);
      auto buf_b = at::empty({nb, std::min(rows, lay.n), lay.n}, fopts);
      for (int64_t r0 = 0; r0 < lay.n; r0 += rows) {
        const int64_t h = std::min(rows, lay.n - r0);
        auto ba = buf_a.narrow(1, 0, h), bb = buf_b.narrow(1, 0, h);
        auto pr = pi.narrow(0, r0, h);
        for (int64_t a = 0; a < na; ++a) {
          const int64_t s = act.side_a[a];
          auto bs = ba[a];
          if (bank.gram[s].defined())
            bs.copy_(bank.gram[s].narrow(0, r0, h));
          else
            at::mm_out(bs, bank.feat[s].narrow(0, r0, h), bank.feat[s].t());
        }
        for (int64_t b = 0; b < nb; ++b) {
          const int64_t s = act.side_b[b];
          auto bs = bb[b];
          if (bank.gram[s].defined())
            at::index_select_out(bs, bank.gram[s].index_select(0, pr), 1, pi);
          else
            at::mm_out(bs, yp[s].narrow(0, r0, h), yp[s].t());
        }
        cross.add_(product_f64(ba.reshape({na, h * lay.n}), bb.reshape({nb, h * lay.n})));
      }
      rep.cross = cross.cpu();
    }
    fill_output(out, k, lay, act, rep, options.debiased, /*self_is_one=*/false);
    if (options.progress) options.progress(k + 1, K);
  }
  return out;
}

}  // namespace vaetransfer::similarity
