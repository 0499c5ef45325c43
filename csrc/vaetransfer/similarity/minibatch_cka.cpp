#include "vaetransfer/similarity/minibatch_cka.h"

#include <algorithm>
#include <cmath>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/cka.h"
#include "vaetransfer/similarity/layer_fit.h"

namespace vaetransfer::similarity {

namespace {

constexpr int64_t kMinExamples = 4;  // HSIC₁ divides by n(n − 3)

std::vector<at::Tensor> concat(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.empty()) return b;
  std::vector<at::Tensor> out(a.size());
  for (size_t k = 0; k < a.size(); ++k) out[k] = at::cat({a[k], b[k]}, 0);
  return out;
}

// Per layer of one side: its centred Gram (flattened, float64), diagonal and trace.
struct Side {
  at::Tensor gram, diag;  // (L, b²), (L, b)
  std::vector<double> trace;
};

Side side(const std::vector<at::Tensor>& acts) {
  Side s;
  std::vector<at::Tensor> grams, diags;
  for (const auto& x : acts) {
    auto xc = x - x.mean(0, /*keepdim=*/true);
    auto k = symmetric_gram(xc).to(at::kDouble);
    diags.push_back(k.diagonal().clone());
    s.trace.push_back(diags.back().sum().item<double>());
    grams.push_back(k.reshape({-1}));
  }
  s.gram = at::stack(grams);
  s.diag = at::stack(diags);
  return s;
}

}  // namespace

MinibatchCKA::MinibatchCKA(std::vector<std::string> names_a, std::vector<std::string> names_b)
    : la_(static_cast<int64_t>(names_a.size())),
      lb_(static_cast<int64_t>(names_b.size())),
      names_a_(std::move(names_a)),
      names_b_(std::move(names_b)) {
  VT_CHECK_ARG(la_ > 0, "layers_a", "expected at least one layer, got none");
  VT_CHECK_ARG(lb_ > 0, "layers_b", "expected at least one layer, got none");
  sums_.ab = at::zeros({la_, lb_}, at::kDouble);
  sums_.aa = at::zeros({la_}, at::kDouble);
  sums_.bb = at::zeros({lb_}, at::kDouble);
}

void MinibatchCKA::add(Sums& sums, const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) const {
  const int64_t n = a.front().size(0);
  const Side sa = side(a), sb = side(b);
  auto kl = sa.gram.mm(sb.gram.t()).cpu();
  auto dd = sa.diag.mm(sb.diag.t()).cpu();
  auto kk = sa.gram.square().sum(1).cpu(), ll = sb.gram.square().sum(1).cpu();
  auto dk = sa.diag.square().sum(1).cpu(), dl = sb.diag.square().sum(1).cpu();
  // HSIC₁ = unbiased_hsic(...) / (n(n − 3)): the factor matters here, batches may differ in size.
  const double scale = 1.0 / (static_cast<double>(n) * static_cast<double>(n - 3));
  auto ab = sums.ab.accessor<double, 2>();
  auto aa = sums.aa.accessor<double, 1>();
  auto bb = sums.bb.accessor<double, 1>();
  auto klx = kl.accessor<double, 2>(), ddx = dd.accessor<double, 2>();
  for (int64_t k = 0; k < la_; ++k) {
    aa[k] += scale * unbiased_hsic(kk[k].item<double>(), dk[k].item<double>(), sa.trace[k], sa.trace[k], n);
    for (int64_t l = 0; l < lb_; ++l) ab[k][l] += scale * unbiased_hsic(klx[k][l], ddx[k][l], sa.trace[k], sb.trace[l], n);
  }
  for (int64_t l = 0; l < lb_; ++l)
    bb[l] += scale * unbiased_hsic(ll[l].item<double>(), dl[l].item<double>(), sb.trace[l], sb.trace[l], n);
  ++sums.batches;
}

void MinibatchCKA::update(const std::vector<at::Tensor>& acts_a, const std::vector<at::Tensor>& acts_b) {
  VT_CHECK_ARG(static_cast<int64_t>(acts_a.size()) == la_, "acts_a", "expected ", la_, " layers, got ",
               acts_a.size());
  VT_CHECK_ARG(static_cast<int64_t>(acts_b.size()) == lb_, "acts_b", "expected ", lb_, " layers, got ",
               acts_b.size());
  const bool first = width_a_.empty();
  int64_t n = -1;
  at::Device device = acts_a.front().defined() ? acts_a.front().device() : at::Device(at::kCPU);
  auto prepare = [&](const std::vector<at::Tensor>& acts, const std::vector<std::string>& names,
                     std::vector<int64_t>& widths, std::vector<double>& absmax, std::vector<double>& eps,
                     std::vector<double>& scales) {
    std::vector<at::Tensor> out;
    for (size_t k = 0; k < acts.size(); ++k) {
      const std::string& arg = names[k];
      const auto& x = acts[k];
      check_floating(x, arg.c_str());
      VT_CHECK_ARG(x.dim() >= 2, arg, "expected activations of shape (b, p) or (b, ...), got shape ", x.sizes());
      VT_CHECK_ARG(x.device() == device, arg, "expected every layer on ", device, ", got ", x.device());
      if (n < 0) n = x.size(0);
      VT_CHECK_ARG(x.size(0) == n, arg, "expected the batch's ", n, " examples, got ", x.size(0));
      auto flat = x.reshape({x.size(0), -1});
      VT_CHECK_ARG(flat.size(1) >= 1, arg, "expected at least 1 feature, got shape ", x.sizes());
      if (first) {
        widths.push_back(flat.size(1));
      } else {
        VT_CHECK_ARG(flat.size(1) == widths[k], arg, "expected ", widths[k], " features as in earlier batches, got ",
                     flat.size(1));
      }
      // A copy in the compute dtype: the caller may reuse its buffers before the batch is reduced.
      auto ct = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
      auto held = flat.to(ct, /*non_blocking=*/false, /*copy=*/true).contiguous();
      check_finite(held, arg.c_str());
      if (first) absmax.push_back(0.0), eps.push_back(ct == at::kDouble ? 2.22e-16 : 1.19e-7), scales.push_back(0.0);
      const double batch_max = held.numel() > 0 ? held.abs().max().item<double>() : 0.0;
      absmax[k] = std::max(absmax[k], batch_max);
      if (scales[k] == 0.0 && batch_max > 0.0) {
        int e = 0;
        std::frexp(batch_max, &e);  // batch_max · 2^−e in [0.5, 1)
        scales[k] = std::ldexp(1.0, -e);
      }
      if (scales[k] != 0.0 && scales[k] != 1.0) {  // exact: a power of two (in float64 where float32 cannot hold it)
        if (ct == at::kFloat && !(scales[k] >= 0x1p-126 && scales[k] <= 0x1p127))
          held = held.to(at::kDouble).mul_(scales[k]).to(at::kFloat);
        else
          held.mul_(scales[k]);
        VT_CHECK_ARG(held.numel() == 0 || at::isfinite(held).all().item<bool>(), arg,
                     "this batch's values (up to ", batch_max, ") are beyond float32 at the scale the first batch set; "
                     "pass float64 activations");
      }
      out.push_back(held);
    }
    return out;
  };
  std::vector<int64_t> wa = width_a_, wb = width_b_;
  std::vector<double> ma = absmax_a_, mb = absmax_b_, ea = eps_a_, eb = eps_b_, sa = scale_a_, sb = scale_b_;
  auto a = prepare(acts_a, names_a_, wa, ma, ea, sa);
  auto b = prepare(acts_b, names_b_, wb, mb, eb, sb);
  if (n == 0) return;  // an empty batch adds nothing
  width_a_ = wa, width_b_ = wb, absmax_a_ = ma, absmax_b_ = mb, eps_a_ = ea, eps_b_ = eb;
  scale_a_ = sa, scale_b_ = sb;
  pending_a_ = concat(pending_a_, a), pending_b_ = concat(pending_b_, b);
  pending_n_ += n;
  examples_ += n;
  if (pending_n_ >= kMinExamples) {
    if (held_n_ > 0) add(sums_, held_a_, held_b_);
    held_a_ = std::move(pending_a_), held_b_ = std::move(pending_b_), held_n_ = pending_n_;
    pending_a_.clear(), pending_b_.clear(), pending_n_ = 0;
  }
}

int64_t MinibatchCKA::batches() const { return sums_.batches + (held_n_ > 0 ? 1 : 0); }

at::Tensor MinibatchCKA::result(bool constant_as_zero) const {
  VT_CHECK_ARG(held_n_ > 0, "batches",
               "minibatch CKA needs at least 4 examples in total (HSIC₁ divides by n(n − 3)), got ", examples_);
  Sums sums{sums_.ab.clone(), sums_.aa.clone(), sums_.bb.clone(), sums_.batches};
  if (pending_n_ > 0)
    add(sums, concat(held_a_, pending_a_), concat(held_b_, pending_b_));  // the last remainder joins the last group
  else
    add(sums, held_a_, held_b_);
  const double m = static_cast<double>(sums.batches);
  auto out = at::zeros({la_, lb_}, at::kDouble);
  auto o = out.accessor<double, 2>();
  auto ab = sums.ab.accessor<double, 2>();
  auto aa = sums.aa.accessor<double, 1>();
  auto bb = sums.bb.accessor<double, 1>();
  // A mean self-HSIC₁ is an average of squared norms of U-centred Grams: 0 for a layer constant
  // on every batch, up to the rounding of its centring (entries of about p·(ε·max|x|)²), in the
  // layer's scaled units (scale 0: every value seen was 0).
  auto varies = [&](double mean_hsic, int64_t p, double absmax, double eps, double scale) {
    const double level = 4.0 * eps * absmax * scale;
    const double r = static_cast<double>(p) * level * level;
    return mean_hsic > r * r;
  };
  std::vector<bool> va(la_), vb(lb_);
  for (int64_t k = 0; k < la_; ++k) {
    va[k] = varies(aa[k] / m, width_a_[k], absmax_a_[k], eps_a_[k], scale_a_[k]);
    VT_CHECK_ARG(constant_as_zero || va[k], names_a_[k], "is constant on every batch (its mean unbiased self-HSIC is ",
                 aa[k] / m, "): CKA is undefined; drop the layer or pass constant='zero'");
  }
  for (int64_t l = 0; l < lb_; ++l) {
    vb[l] = varies(bb[l] / m, width_b_[l], absmax_b_[l], eps_b_[l], scale_b_[l]);
    VT_CHECK_ARG(constant_as_zero || vb[l], names_b_[l], "is constant on every batch (its mean unbiased self-HSIC is ",
                 bb[l] / m, "): CKA is undefined; drop the layer or pass constant='zero'");
  }
  for (int64_t k = 0; k < la_; ++k)
    for (int64_t l = 0; l < lb_; ++l)
      o[k][l] = va[k] && vb[l] ? std::clamp(ab[k][l] / std::sqrt(aa[k] * bb[l]), -1.0, 1.0) : 0.0;
  return out;
}

}  // namespace vaetransfer::similarity
