// CKA with a Gaussian (RBF) kernel (Kornblith et al. 2019, "Similarity of Neural Network
// Representations Revisited", §3 "Kernel selection", Eq. 3 with the HSIC of Eq. 2 on RBF Grams).
//
//   K_ij = exp(−‖x_i − x_j‖² / (2σ²)),  K̃ = H K H (H = I − 11ᵀ/n),
//   CKA = ⟨K̃, L̃⟩_F / (‖K̃‖_F ‖L̃‖_F)   (the 1/(n−1)² of HSIC cancels), in [0, 1].
// Bandwidth: σ = bandwidth · √(median of the n² squared distances ‖x_i − x_j‖², the zero diagonal
// included), per layer: the paper's heuristic ("σ as a fraction of the median distance between
// examples"), with the median taken as the authors' released code takes it; bandwidth = 1 is that
// code's default (the paper also reports 0.2, 0.4 and 0.8). The distances are those of ExampleGeometry
// (Euclidean, row blocks of one matrix product each, in the layer's compute dtype); each pair i < j
// takes its upper-triangle value, so the kernel is exactly symmetric.
//
// Two forms, picked by memory_bytes as linear CKA picks its own (the values agree to the rounding of
// the products; tests compare them):
// * Held, when every involved layer's packed centred kernel (n(n−1)/2 values in the compute dtype, 4 ·
//   n(n−1)/2 bytes: 8 MB at n = 2,000, 50 MB at n = 5,000) fits in three quarters of memory_bytes (the
//   rest for the row blocks that build them): one distance pass per layer into its packed upper
//   triangle, the median by radix selection over those values, exp and centring in place; a pair is
//   one inner product of two triangles (dot_f64) plus the float64 diagonals. The fast form: the
//   distance product (n² p) is done once per layer.
// * Streamed, beyond: no n × n matrix is ever held.
//   - Per layer (fit_all, kept for every pair): σ from the exact median, found by radix selection over
//     the distances' bit patterns (16 bits a pass: two passes over the row blocks in float32, four in
//     float64), then the kernel's row means r (float64) in one more pass: K̃_ij = K_ij − r_i − r_j + r̄.
//     Memory: O(n) numbers and one row block.
//   - All pairs at once (score_all): one pass over row blocks computing every involved layer's centred
//     kernel rows (upper triangle) into one buffer of L × rows × n values sized by memory_bytes, and
//     their inner products by one matrix product per block (float32 products summed in float64 every
//     2^16 entries, as the linear CKA stream); the diagonal K̃_ii = 1 − 2 r_i + r̄ added in float64.
//   Each pass recomputes the layer's distances, so the streamed form costs about four distance
//   products per layer where the held one costs one.
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <type_traits>
#include <vector>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/knn.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {
namespace {

struct KernelFit {
  std::shared_ptr<ExampleGeometry> geometry;
  double two_sigma2 = 0.0;
  at::Tensor r;     // (n,) row means of K, float64
  double grand = 0.0;
  at::Tensor diag;  // (n,) K̃_ii = 1 − 2 r_i + r̄, float64
  at::Tensor held;  // held form: (n(n−1)/2,) K̃'s strictly upper triangle, compute dtype; else undefined
  double norm2 = 0.0;  // held form: ‖K̃‖²_F
};

// Non-negative floats order as their bit patterns (−0 counted as +0).
template <typename T>
struct Key {
  using type = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static type of(T v) {
    if (v == T(0)) return 0;
    type k;
    std::memcpy(&k, &v, sizeof k);
    return k;
  }
  static T value(type k) {
    T v;
    std::memcpy(&v, &k, sizeof v);
    return v;
  }
};

// Calls visit(value) for every upper-triangle distance (i < j), block by block.
template <typename T, typename Visit>
void for_each_upper(const ExampleGeometry& g, int64_t bytes, Visit&& visit) {
  const int64_t n = g.n(), block_rows = g.rows_per_block(bytes);
  for (int64_t r0 = 0; r0 < n; r0 += block_rows) {
    const int64_t r1 = std::min(n, r0 + block_rows);
    const auto block = g.sq_distance_rows(r0, r1, bytes, r0).contiguous();  // columns r0…n − 1
    const T* b = block.template const_data_ptr<T>();
    const int64_t cols = n - r0;
    for (int64_t i = r0; i < r1; ++i) {
      const T* row = b + (i - r0) * cols;  // row[j − r0] = entry (i, j)
      for (int64_t j = i + 1; j < n; ++j) visit(row[j - r0]);
    }
  }
}

// The values of 0-based ranks `ranks` (ascending order) among the non-negative values that
// for_each(visit) calls visit with, by radix selection on their bit patterns, 16 bits a pass.
template <typename T, typename ForEach>
std::vector<double> order_statistics(ForEach&& for_each, const std::vector<int64_t>& ranks) {
  using K = typename Key<T>::type;
  constexpr int kBits = static_cast<int>(8 * sizeof(K));
  const size_t q = ranks.size();
  std::vector<K> prefix(q, 0);
  std::vector<int64_t> remaining(ranks.begin(), ranks.end());
  for (int shift = kBits - 16; shift >= 0; shift -= 16) {
    const int known = kBits - 16 - shift;  // bits fixed by the earlier passes
    std::vector<std::array<int64_t, 65536>> hist(q);
    for (auto& h : hist) h.fill(0);
    for_each([&](T v) {
      const K key = Key<T>::of(v);
      for (size_t s = 0; s < q; ++s)
        if (known == 0 || (key >> (shift + 16)) == prefix[s]) ++hist[s][(key >> shift) & 0xFFFF];
    });
    for (size_t s = 0; s < q; ++s) {
      int64_t below = 0;
      int bucket = 0;
      while (below + hist[s][bucket] <= remaining[s]) below += hist[s][bucket++];
      remaining[s] -= below;
      prefix[s] = (prefix[s] << 16) | static_cast<K>(bucket);
    }
  }
  std::vector<double> out(q);
  for (size_t s = 0; s < q; ++s) out[s] = static_cast<double>(Key<T>::value(prefix[s]));
  return out;
}

// The median of the n² entries of the squared-distance matrix: each upper entry twice and the n zeros
// of the diagonal (the authors' np.median over the full matrix). `packed`: the upper triangle when
// held (then read from it), else undefined (then streamed from row blocks of g).
double full_matrix_median(const ExampleGeometry& g, int64_t bytes, const at::Tensor& packed) {
  const int64_t n = g.n(), total = n * n;
  // Order statistic q (0-based) of the full matrix: 0 for q < n, else the upper triangle's ⌊(q − n)/2⌋-th.
  const std::vector<int64_t> wanted = total % 2 == 1 ? std::vector<int64_t>{total / 2}
                                                     : std::vector<int64_t>{total / 2 - 1, total / 2};
  std::vector<int64_t> ranks;
  for (int64_t q : wanted)
    if (q >= n) ranks.push_back((q - n) / 2);
  std::vector<double> values;
  AT_DISPATCH_FLOATING_TYPES(g.dtype(), "rbf_median", [&] {
    if (packed.defined()) {
      const scalar_t* v = packed.const_data_ptr<scalar_t>();
      const int64_t m = packed.numel();
      values = order_statistics<scalar_t>([&](auto&& visit) { for (int64_t i = 0; i < m; ++i) visit(v[i]); }, ranks);
    } else {
      values = order_statistics<scalar_t>([&](auto&& visit) { for_each_upper<scalar_t>(g, bytes, visit); }, ranks);
    }
  });
  std::vector<double> order;
  size_t next = 0;
  for (int64_t q : wanted) order.push_back(q < n ? 0.0 : values[next++]);
  return order.size() == 1 ? order[0] : 0.5 * (order[0] + order[1]);
}

// exp(−D/2σ²) of rows [r0, r1) at the columns r0…n − 1, (r1 − r0, n − r0), its entries j ≤ i (lower
// triangle and diagonal) set to 0.
at::Tensor upper_kernel_rows(const KernelFit& fit, int64_t r0, int64_t r1, int64_t bytes) {
  auto k = fit.geometry->sq_distance_rows(r0, r1, bytes, r0).div_(-fit.two_sigma2).exp_();
  return k.triu_(1);
}

// Held form: the packed distances become K̃'s upper triangle in place (exp, then K_ij − (r_i − r̄) − r_j
// in the compute dtype, the row means summed in float64), and its norm.
template <typename T>
void centre_held(KernelFit& fit, int64_t n) {
  T* v = fit.held.data_ptr<T>();
  auto sums = at::ones({n}, at::kDouble);  // K_ii = 1
  double* s = sums.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) {
    const T* row = v + packed_row_offset(i, n);
    double acc = 0.0;
    for (int64_t j = i + 1; j < n; ++j) {  // each entry counts for its row and its column
      acc += static_cast<double>(row[j - i - 1]);
      s[j] += static_cast<double>(row[j - i - 1]);
    }
    s[i] += acc;
  }
  fit.r = sums.div_(static_cast<double>(n));
  fit.grand = fit.r.mean().item<double>();
  const double* r = fit.r.const_data_ptr<double>();
  std::vector<T> rc(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) rc[j] = static_cast<T>(r[j]);
  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T* row = v + packed_row_offset(i, n);
      const T ri = static_cast<T>(r[i] - fit.grand);
      for (int64_t j = i + 1; j < n; ++j) row[j - i - 1] = (row[j - i - 1] - ri) - rc[j];
    }
  });
}

KernelFit fit_kernel(const LayerFit& layer, double bandwidth, int64_t memory_bytes, bool hold) {
  const int64_t n = layer.n();
  KernelFit fit;
  fit.geometry = std::make_shared<ExampleGeometry>(layer, RowGeometry::kEuclidean);
  if (hold) fit.held = fit.geometry->packed_sq_distances(memory_bytes);
  const double median = full_matrix_median(*fit.geometry, memory_bytes, fit.held);
  VT_CHECK_ARG(median > 0.0, layer.arg(),
               "RBF CKA is undefined: the median squared distance between examples is 0 (more than half of all "
               "pairs coincide), so the bandwidth σ = bandwidth · median distance is 0");
  fit.two_sigma2 = 2.0 * bandwidth * bandwidth * median;
  if (hold) {
    fit.held.div_(-fit.two_sigma2).exp_();
    AT_DISPATCH_FLOATING_TYPES(fit.held.scalar_type(), "rbf_centre", [&] { centre_held<scalar_t>(fit, n); });
    fit.diag = (1.0 + fit.grand) - 2.0 * fit.r;
    fit.norm2 = 2.0 * dot_f64(fit.held, fit.held) + fit.diag.square().sum().item<double>();
    return fit;
  }
  const int64_t rows = fit.geometry->rows_per_block(memory_bytes);
  // Row sums of K from the upper triangle (each entry counts for its row and its column) and K_ii = 1.
  auto sums = at::ones({n}, at::kDouble);
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t r1 = std::min(n, r0 + rows);
    const auto k = upper_kernel_rows(fit, r0, r1, memory_bytes);
    // Summed in the block's dtype (torch's cascade sums: no float64 copy of the block), added in float64.
    sums.narrow(0, r0, r1 - r0).add_(k.sum(1).to(at::kDouble));
    sums.narrow(0, r0, n - r0).add_(k.sum(0).to(at::kDouble));
  }
  fit.r = sums.div_(static_cast<double>(n));
  fit.grand = fit.r.mean().item<double>();
  fit.diag = (1.0 + fit.grand) - 2.0 * fit.r;
  return fit;
}

// Whether every layer's packed centred kernel fits in three quarters of `memory_bytes` (the held form).
bool kernels_fit(const std::vector<const LayerFit*>& layers, int64_t memory_bytes) {
  if (layers.empty()) return false;
  const int64_t n = layers.front()->n();
  const int64_t packed = n * (n - 1) / 2;
  int64_t need = 0;
  for (const LayerFit* l : layers) {
    const int64_t bytes = packed * static_cast<int64_t>(c10::elementSize(l->compute_dtype()));
    if (bytes > memory_bytes - need) return false;  // (no overflow: need ≤ memory_bytes so far)
    need += bytes;
  }
  return need <= memory_bytes / 4 * 3;
}

class RBFCKA : public Measure {
 public:
  explicit RBFCKA(const Params& p) : Measure(p), bandwidth_(p.number("bandwidth")) {
    VT_CHECK_ARG(std::isfinite(bandwidth_) && bandwidth_ > 0.0, "bandwidth",
                 "expected a fraction of the median distance > 0, got ", bandwidth_);
  }
  bool fit_all(const std::vector<const LayerFit*>& layers, const BatchContext& context) const override {
    const bool hold = kernels_fit(layers, context.memory_bytes);
    // The held form's blocks get what the kernels leave of the budget.
    int64_t left = context.memory_bytes;
    if (hold)
      for (const LayerFit* l : layers)
        left -= l->n() * (l->n() - 1) / 2 * static_cast<int64_t>(c10::elementSize(l->compute_dtype()));
    for (const LayerFit* layer : layers) {
      get(*layer, hold ? left : context.memory_bytes, hold);
      context.advance(1);
    }
    return !layers.empty();
  }
  std::vector<Score> score_all(const std::vector<PairData>& pairs, const BatchContext& context) const override {
    if (pairs.empty()) return {};  // every pair identical or with a constant layer: nothing to stream
    // Every involved layer once, then ⟨K̃_s, K̃_t⟩ for all of them in one streamed pass.
    std::vector<const LayerFit*> layers;
    std::map<const LayerFit*, int64_t> slot;
    for (const PairData& p : pairs)
      for (const LayerFit* l : {&p.x, &p.y})
        if (slot.emplace(l, static_cast<int64_t>(layers.size())).second) layers.push_back(l);
    bool held = true;
    for (const LayerFit* l : layers) held = held && get(*l, context.memory_bytes).held.defined();
    const at::Tensor g = held ? held_inner_products(layers) : inner_products(layers, context.memory_bytes);
    auto acc = g.accessor<double, 2>();
    std::vector<Score> out;
    for (const PairData& p : pairs) {
      const int64_t s = slot[&p.x], t = slot[&p.y];
      for (const LayerFit* l : {&p.x, &p.y})
        VT_CHECK_ARG(acc[slot[l]][slot[l]] > 0.0, "bandwidth", "RBF CKA is undefined for ", l->arg(), " at bandwidth ",
                     bandwidth_, ": every kernel value rounds to the same number (K̃ = 0); use a smaller bandwidth");
      out.push_back({std::clamp(acc[s][t] / std::sqrt(acc[s][s] * acc[t][t]), 0.0, 1.0)});
      context.advance(1);
    }
    return out;
  }
  Score score(const PairData& pair) const override { return score_all({pair}, BatchContext{})[0]; }

 private:
  // (L, L) float64 ⟨K̃_s, K̃_t⟩ of held kernels: each upper entry stands for (i, j) and (j, i).
  at::Tensor held_inner_products(const std::vector<const LayerFit*>& layers) const {
    const int64_t L = static_cast<int64_t>(layers.size());
    auto g = at::zeros({L, L}, at::kDouble);
    auto acc = g.accessor<double, 2>();
    for (int64_t s = 0; s < L; ++s)
      for (int64_t t = s; t < L; ++t) {
        const KernelFit &a = get(*layers[s], 0), &b = get(*layers[t], 0);
        const at::Tensor ha = a.held.scalar_type() == b.held.scalar_type() ? a.held : a.held.to(at::kDouble);
        const at::Tensor hb = a.held.scalar_type() == b.held.scalar_type() ? b.held : b.held.to(at::kDouble);
        acc[s][t] = acc[t][s] = s == t ? a.norm2 : 2.0 * dot_f64(ha, hb) + a.diag.dot(b.diag).item<double>();
      }
    return g;
  }
  // (L, L) float64 ⟨K̃_s, K̃_t⟩ of the layers, streamed over row blocks within memory_bytes.
  at::Tensor inner_products(const std::vector<const LayerFit*>& layers, int64_t memory_bytes) const {
    const int64_t L = static_cast<int64_t>(layers.size());
    std::vector<const KernelFit*> fits;
    at::ScalarType ct = at::kFloat;
    for (const LayerFit* l : layers) {
      fits.push_back(&get(*l, memory_bytes));
      if (l->compute_dtype() == at::kDouble) ct = at::kDouble;
    }
    const int64_t n = layers.front()->n();
    const int64_t elem = static_cast<int64_t>(c10::elementSize(ct));
    // The buffer, and a distance block of one layer at a time beside it.
    const int64_t rows = std::clamp<int64_t>(memory_bytes / std::max<int64_t>(1, (L + 3) * n * elem), 1, n);
    auto g = at::zeros({L, L}, at::kDouble);
    std::vector<at::Tensor> diags;
    for (const KernelFit* f : fits) diags.push_back(f->diag);
    const auto d = at::stack(diags);
    g.add_(d.mm(d.t()));  // the diagonal entries, counted once
    constexpr int64_t kSum = int64_t{1} << 16;
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
      const int64_t r1 = std::min(n, r0 + rows), m = r1 - r0;
      auto buf = at::empty({L, m, n - r0}, at::TensorOptions().dtype(ct));  // columns r0…n − 1
      for (int64_t s = 0; s < L; ++s) {
        const KernelFit& f = *fits[s];
        auto k = upper_kernel_rows(f, r0, r1, memory_bytes).to(ct);
        // K̃_ij = K_ij − r_i − r_j + r̄ on the upper triangle (j > i), 0 elsewhere.
        auto ri = f.r.narrow(0, r0, m).sub(f.grand).to(ct).unsqueeze(1);
        auto centred = k.sub_(ri).sub_(f.r.narrow(0, r0, n - r0).to(ct).unsqueeze(0)).triu_(1);
        buf[s].copy_(centred);
      }
      auto acc = at::zeros({L, L}, at::kDouble);
      const int64_t step = std::max<int64_t>(1, kSum / (n - r0));
      for (int64_t a = 0; a < m; a += step) {
        auto part = buf.narrow(1, a, std::min(step, m - a)).flatten(1);
        acc.add_(part.mm(part.t()).to(at::kDouble));
      }
      g.add_(acc, 2.0);  // each upper entry stands for (i, j) and (j, i)
    }
    return g;
  }
  // The layer's fit, made on first use (held when `hold`; fit_all decides it for all layers at once).
  const KernelFit& get(const LayerFit& layer, int64_t memory_bytes, bool hold = false) const {
    return fits_.get(layer, [&](const LayerFit& l) { return fit_kernel(l, bandwidth_, memory_bytes, hold); });
  }
  double bandwidth_;
  FitCache<KernelFit> fits_;
};

}  // namespace

VT_REGISTER(MeasureRegistry,
            {"cka_rbf", "factor",
             "CKA with a Gaussian kernel (Kornblith et al. 2019, §3), σ = bandwidth × the median distance; in [0, 1]",
             {{"bandwidth", ParamType::Float, 1.0,
               "σ as a fraction of the layer's median distance between examples (1.0: the authors' code default)"}},
             [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<RBFCKA>(p); }});

}  // namespace vaetransfer::similarity
