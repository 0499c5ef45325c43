// Mutual k-NN alignment and CKNNA (Huh et al. 2024, "The Platonic Representation Hypothesis", §2
// "Metrics" and App. A), and the example geometry they share with cka_rbf and rsa (knn.h).
//
// mutual_knn: for every example i, N_X(i) = its k nearest other examples in layer X; the score is
//   (1/n) Σ_i |N_X(i) ∩ N_Y(i)| / k, in [0, 1]; about k/(n−1) for unrelated layers.
// cknna (App. A): with the kernel K_ij = ⟨u_i, u_j⟩ and its row-centred form
//   K̃_ij = K_ij − (1/n) Σ_l K_il,
//   Align(K, L) = Σ_i Σ_j α(i, j) K̃_ij L̃_ij,  α(i, j) = 1[i ≠ j, j ∈ N_X(i), j ∈ N_Y(i)],
//   CKNNA = Align(K, L) / √(Align(K, K) Align(L, L)), in [−1, 1] (Cauchy–Schwarz over the pairs).
// Geometry (`metric`): "cosine", the paper's (features L2-normalised per example, neighbours by
// inner product, kernel the cosine); or "euclidean" (neighbours by Euclidean distance, kernel the
// inner product of column-centred features), which makes both invariant to an offset as well as to
// rotation and isotropic scaling. The authors' released code differs in two ways, not followed
// here: it clips outlying feature values before normalising, and its CKNNA applies the unbiased
// HSIC estimator to the masked kernels instead of the row centring above.
#include "vaetransfer/similarity/knn.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vaetransfer/common/check.h"
#include "vaetransfer/similarity/measure.h"

namespace vaetransfer::similarity {

RowGeometry row_geometry_from_name(const std::string& name, const std::string& allowed, const char* arg) {
  const std::string padded = "|" + allowed + "|";
  const bool ok = padded.find("|" + name + "|") != std::string::npos;
  std::string list;
  for (char c : allowed) list += c == '|' ? std::string("', '") : std::string(1, c);
  VT_CHECK_ARG(ok, arg, "expected one of '", list, "', got '", name, "'");
  if (name == "cosine") return RowGeometry::kCosine;
  if (name == "correlation") return RowGeometry::kCorrelation;
  return RowGeometry::kEuclidean;
}

namespace {
constexpr int64_t kBlockBytes = int64_t{64} << 20;  // float64 scratch per row or feature block
}  // namespace

ExampleGeometry::ExampleGeometry(const LayerFit& layer, RowGeometry geometry, bool float64_distances)
    : layer_(layer), geometry_(geometry), n_(layer.n()), p_(layer.p()),
      dtype_(float64_distances ? at::kDouble : layer.compute_dtype()) {
  const auto stored = layer.x().scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  rows_ = layer.x().to(at::kCPU, stored).contiguous();
  eps_ = dtype_ == at::kDouble ? std::numeric_limits<double>::epsilon()
                                              : static_cast<double>(std::numeric_limits<float>::epsilon());
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  if (geometry_ == RowGeometry::kEuclidean) {
    // Euclidean works in the layer's scaled frame s·x (s a power of two, see LayerFit), so squared
    // distances stay within float32 at any activation scale; the other geometries normalise rows.
    unit_ = layer.scale();
    shift_ = layer.mean().to(at::kCPU);
    sq_norm_ = layer.row_sq().to(at::kCPU);
  } else {
    shift_ = at::zeros({n_}, f64);
    scale_ = at::zeros({n_}, f64);
    sq_norm_ = at::zeros({n_}, f64);
    if (geometry_ == RowGeometry::kCosine) mean_row_ = at::zeros({p_}, f64);
    const int64_t step = std::max<int64_t>(1, kBlockBytes / (8 * p_));
    for (int64_t r0 = 0; r0 < n_; r0 += step) {
      const int64_t len = std::min(step, n_ - r0);
      auto block = rows_.narrow(0, r0, len).to(at::kDouble);
      if (geometry_ == RowGeometry::kCosine) {
        auto sq = block.square().sum(1);
        auto nonzero = sq.gt(0.0);
        auto inv = at::where(nonzero, sq.clamp_min(std::numeric_limits<double>::min()).rsqrt(), at::zeros_like(sq));
        scale_.narrow(0, r0, len).copy_(inv);
        sq_norm_.narrow(0, r0, len).copy_(nonzero.to(at::kDouble));
        mean_row_.add_(block.mul(inv.unsqueeze(1)).sum(0));
      } else {
        auto m = block.mean(1);
        auto c = block - m.unsqueeze(1);
        auto ss = c.square().sum(1);
        // A row of equal values leaves only the rounding of its mean (≤ p ε |x|max per entry).
        auto tol = block.abs().amax(1).mul(2.0 * static_cast<double>(p_) * std::numeric_limits<double>::epsilon())
                       .square()
                       .mul(static_cast<double>(p_));
        auto flat = ss.le(tol).nonzero();
        VT_CHECK_ARG(flat.numel() == 0, layer.arg(), "example ", (flat.numel() ? r0 + flat[0][0].item<int64_t>() : 0),
                     " has the same value in every feature: its Pearson correlation with other examples (the "
                     "'correlation' RDM) is undefined; use rdm='euclidean' or drop the example");
        shift_.narrow(0, r0, len).copy_(m);
        scale_.narrow(0, r0, len).copy_(ss.rsqrt());
        sq_norm_.narrow(0, r0, len).fill_(1.0);
      }
    }
    if (geometry_ == RowGeometry::kCosine) mean_row_.div_(static_cast<double>(n_));
  }
  max_sq_norm_ = sq_norm_.max().item<double>();
}

at::Tensor ExampleGeometry::unit_columns(int64_t c0, int64_t c1, int64_t row0) const {
  const int64_t rows = n_ - row0;
  if (geometry_ == RowGeometry::kEuclidean) return layer_.centred(row0, n_, c0, c1, at::kDouble);  // s·x − s·x̄
  auto v = rows_.narrow(0, row0, rows).narrow(1, c0, c1 - c0).to(at::kDouble, /*non_blocking=*/false, /*copy=*/true);  // never rows_ itself
  if (geometry_ == RowGeometry::kCorrelation) v.sub_(shift_.narrow(0, row0, rows).unsqueeze(1));
  return v.mul_(scale_.narrow(0, row0, rows).unsqueeze(1));
}

int64_t ExampleGeometry::rows_per_block(int64_t bytes) const {
  const int64_t row = n_ * static_cast<int64_t>(c10::elementSize(dtype_));
  return std::clamp<int64_t>(bytes / std::max<int64_t>(1, 2 * row), 1, n_);  // the block and a caller's copy
}

int64_t ExampleGeometry::chunk_features(int64_t bytes) const {
  // A float64 chunk and its copy in a quarter of `bytes`, at most 64 MiB: wider chunks make no faster
  // product (4,000 features at n = 2,000) and only raise the peak.
  return std::max<int64_t>(1, std::min(bytes / 4, kBlockBytes) / (8 * n_));
}

at::Tensor ExampleGeometry::sq_distance_rows(int64_t r0, int64_t r1, int64_t bytes, int64_t from) const {
  const at::ScalarType ct = dtype_;
  const int64_t rows = r1 - r0, cols = n_ - from;
  // ⟨u_i, u_j⟩ over feature chunks of u (never all of u at once), then ‖u_i‖² + ‖u_j‖² − 2⟨u_i, u_j⟩.
  auto d = at::zeros({rows, cols}, at::TensorOptions().dtype(ct));
  const int64_t chunk = chunk_features(bytes);
  const int64_t row0 = std::min(r0, from);  // the first row the block reads
  for (int64_t c0 = 0; c0 < p_; c0 += chunk) {
    const auto u = unit_columns(c0, std::min(p_, c0 + chunk), row0).to(ct);
    d.addmm_(u.narrow(0, r0 - row0, rows), u.narrow(0, from - row0, cols).t(), /*beta=*/1.0, /*alpha=*/-2.0);
  }
  const auto sq = sq_norm_.to(ct);
  d.add_(sq.narrow(0, r0, rows).unsqueeze(1)).add_(sq.narrow(0, from, cols).unsqueeze(0)).clamp_min_(0.0);
  // Zero at j = i: the entries (i, i) of the block that lie in its columns.
  const int64_t d0 = std::max(r0, from), len = r1 - d0;
  if (len > 0) d.narrow(0, d0 - r0, len).narrow(1, d0 - from, len).diagonal().zero_();
  return d;
}

at::Tensor ExampleGeometry::packed_sq_distances(int64_t block_bytes) const {
  const at::ScalarType ct = dtype_;
  auto out = at::zeros({n_ * (n_ - 1) / 2}, at::TensorOptions().dtype(ct));
  // Feature chunks outside, row blocks inside: each chunk of u is made once, and each block multiplies
  // its rows by the rows from its first one on (the triangle, about half the full product). Blocks of at
  // most n/16 rows (≥ 256) keep the part below the diagonal small.
  const int64_t chunk = chunk_features(block_bytes);
  const int64_t step = std::min(rows_per_block(block_bytes), std::max<int64_t>(256, (n_ + 15) / 16));
  AT_DISPATCH_FLOATING_TYPES(ct, "packed_sq_distances", [&] {
    scalar_t* o = out.data_ptr<scalar_t>();
    for (int64_t c0 = 0; c0 < p_; c0 += chunk) {
      const auto u = unit_columns(c0, std::min(p_, c0 + chunk)).to(ct);
      for (int64_t r0 = 0; r0 < n_; r0 += step) {
        const int64_t r1 = std::min(n_, r0 + step), cols = n_ - r0;
        const auto t = at::mm(u.narrow(0, r0, r1 - r0), u.narrow(0, r0, cols).t()).contiguous();
        const scalar_t* b = t.const_data_ptr<scalar_t>();
        at::parallel_for(r0, r1, 16, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            const scalar_t* src = b + (i - r0) * cols + (i - r0) + 1;  // entries (i, j > i)
            scalar_t* dst = o + packed_row_offset(i, n_);
            for (int64_t j = 0; j < n_ - i - 1; ++j) dst[j] += scalar_t(-2) * src[j];
          }
        });
      }
    }
    // ‖u_i‖² + ‖u_j‖² − 2⟨u_i, u_j⟩ (added in this order, as sq_distance_rows), clamped at 0.
    const auto sq_t = sq_norm_.to(ct).contiguous();
    const scalar_t* sq = sq_t.const_data_ptr<scalar_t>();
    at::parallel_for(0, n_, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        scalar_t* row = o + packed_row_offset(i, n_);
        for (int64_t j = i + 1; j < n_; ++j) row[j - i - 1] = std::max(scalar_t(0), (row[j - i - 1] + sq[i]) + sq[j]);
      }
    });
  });
  return out;
}

double ExampleGeometry::margin(int64_t i) const {
  const double sq = sq_norm_.data_ptr<double>()[i];
  return 2.0 * static_cast<double>(p_ + 10) * eps_ * (sq + max_sq_norm_);
}

namespace {

// Σ_d term(d) in float64 over four interleaved partial sums (a fixed order, whatever the thread count:
// equal inputs give equal sums), which keeps four additions in flight instead of one long chain.
template <typename Term>
double sum_terms(int64_t p, Term&& term) {
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t d = 0;
  for (; d + 4 <= p; d += 4) {
    acc[0] += term(d);
    acc[1] += term(d + 1);
    acc[2] += term(d + 2);
    acc[3] += term(d + 3);
  }
  for (; d < p; ++d) acc[d % 4] += term(d);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

template <typename T>
double exact_sq_distance(const T* a, const T* b, int64_t p, RowGeometry g, double sa, double sb, double ma,
                         double mb) {
  switch (g) {
    case RowGeometry::kEuclidean:  // sa = sb = the layer's scale, a power of two
      if constexpr (std::is_same_v<T, float>) {
        // A float32 difference squared stays well inside float64's range, so the scale can multiply
        // the sum once: s² Σ (a − b)² = Σ ((a − b) s)² exactly.
        return sum_terms(p, [&](int64_t d) {
                 const double diff = static_cast<double>(a[d]) - static_cast<double>(b[d]);
                 return diff * diff;
               }) * (sa * sa);
      } else {
        return sum_terms(p, [&](int64_t d) {
          const double diff = (static_cast<double>(a[d]) - static_cast<double>(b[d])) * sa;
          return diff * diff;
        });
      }
    case RowGeometry::kCosine:
      // An all-zero row (scale 0) is at distance exactly 1 from every unit row: 2 − 2 cos with cos = 0.
      if (sa == 0.0 || sb == 0.0) return sa == 0.0 && sb == 0.0 ? 0.0 : 1.0;
      return sum_terms(p, [&](int64_t d) {
        const double diff = static_cast<double>(a[d]) * sa - static_cast<double>(b[d]) * sb;
        return diff * diff;
      });
    case RowGeometry::kCorrelation:
      return sum_terms(p, [&](int64_t d) {
        const double diff = (static_cast<double>(a[d]) - ma) * sa - (static_cast<double>(b[d]) - mb) * sb;
        return diff * diff;
      });
  }
  return 0.0;
}

template <typename T>
double exact_kernel(const T* a, const T* b, int64_t p, RowGeometry g, const double* col_mean, double sa, double sb,
                    double ma, double mb) {
  double acc = 0.0;
  switch (g) {
    case RowGeometry::kEuclidean:  // sa = sb = the layer's scale, col_mean scaled
      for (int64_t d = 0; d < p; ++d)
        acc += (static_cast<double>(a[d]) * sa - col_mean[d]) * (static_cast<double>(b[d]) * sb - col_mean[d]);
      break;
    case RowGeometry::kCosine:
      for (int64_t d = 0; d < p; ++d) acc += (static_cast<double>(a[d]) * sa) * (static_cast<double>(b[d]) * sb);
      break;
    case RowGeometry::kCorrelation:
      for (int64_t d = 0; d < p; ++d)
        acc += ((static_cast<double>(a[d]) - ma) * sa) * ((static_cast<double>(b[d]) - mb) * sb);
      break;
  }
  return acc;
}

}  // namespace

double ExampleGeometry::exact(int64_t i, int64_t j) const {
  const bool row_stats = geometry_ != RowGeometry::kEuclidean;
  const double sa = row_stats ? scale_.data_ptr<double>()[i] : unit_, sb = row_stats ? scale_.data_ptr<double>()[j] : unit_;
  const double ma = row_stats ? shift_.data_ptr<double>()[i] : 0.0, mb = row_stats ? shift_.data_ptr<double>()[j] : 0.0;
  if (rows_.scalar_type() == at::kDouble) {
    const double* x = rows_.const_data_ptr<double>();
    return exact_sq_distance(x + i * p_, x + j * p_, p_, geometry_, sa, sb, ma, mb);
  }
  const float* x = rows_.const_data_ptr<float>();
  return exact_sq_distance(x + i * p_, x + j * p_, p_, geometry_, sa, sb, ma, mb);
}

double ExampleGeometry::kernel(int64_t i, int64_t j) const {
  const bool row_stats = geometry_ != RowGeometry::kEuclidean;
  const double sa = row_stats ? scale_.data_ptr<double>()[i] : unit_, sb = row_stats ? scale_.data_ptr<double>()[j] : unit_;
  const double ma = geometry_ == RowGeometry::kCorrelation ? shift_.data_ptr<double>()[i] : 0.0;
  const double mb = geometry_ == RowGeometry::kCorrelation ? shift_.data_ptr<double>()[j] : 0.0;
  const double* col_mean = geometry_ == RowGeometry::kEuclidean ? shift_.data_ptr<double>() : nullptr;
  if (rows_.scalar_type() == at::kDouble) {
    const double* x = rows_.const_data_ptr<double>();
    return exact_kernel(x + i * p_, x + j * p_, p_, geometry_, col_mean, sa, sb, ma, mb);
  }
  const float* x = rows_.const_data_ptr<float>();
  return exact_kernel(x + i * p_, x + j * p_, p_, geometry_, col_mean, sa, sb, ma, mb);
}

double ExampleGeometry::kernel_row_mean(int64_t i) const {
  if (geometry_ == RowGeometry::kEuclidean) return 0.0;  // column-centred features average to 0
  VT_CHECK_ARG(geometry_ == RowGeometry::kCosine, "metric", "the row mean of the kernel needs 'cosine' or 'euclidean'");
  const double s = scale_.data_ptr<double>()[i];
  const double* m = mean_row_.data_ptr<double>();
  double acc = 0.0;
  if (rows_.scalar_type() == at::kDouble) {
    const double* x = rows_.const_data_ptr<double>() + i * p_;
    for (int64_t d = 0; d < p_; ++d) acc += (x[d] * s) * m[d];
  } else {
    const float* x = rows_.const_data_ptr<float>() + i * p_;
    for (int64_t d = 0; d < p_; ++d) acc += (static_cast<double>(x[d]) * s) * m[d];
  }
  return acc;
}

at::Tensor ExampleGeometry::first_copies() const {
  auto out = at::arange(n_, at::kLong);
  int64_t* first = out.data_ptr<int64_t>();
  const auto* bytes = static_cast<const unsigned char*>(rows_.const_data_ptr());
  const size_t row_bytes = static_cast<size_t>(p_) * rows_.element_size();
  std::unordered_map<uint64_t, std::vector<int64_t>> seen;
  for (int64_t i = 0; i < n_; ++i) {
    const unsigned char* row = bytes + static_cast<size_t>(i) * row_bytes;
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the row's bytes
    for (size_t b = 0; b < row_bytes; ++b) h = (h ^ row[b]) * 1099511628211ull;
    auto& bucket = seen[h];
    for (int64_t j : bucket)
      if (std::memcmp(bytes + static_cast<size_t>(j) * row_bytes, row, row_bytes) == 0) {
        first[i] = j;
        break;
      }
    if (first[i] == i) bucket.push_back(i);
  }
  return out;
}

at::Tensor nearest_neighbours(const ExampleGeometry& geometry, int64_t k, int64_t block_bytes) {
  const int64_t n = geometry.n();
  VT_CHECK_ARG(k >= 1 && k <= n - 1, "k", "expected 1 <= k <= n − 1 = ", n - 1, ", got ", k);
  auto out = at::empty({n, k}, at::kLong);
  int64_t* idx = out.data_ptr<int64_t>();
  const int64_t step = geometry.rows_per_block(block_bytes);
  for (int64_t r0 = 0; r0 < n; r0 += step) {
    const int64_t r1 = std::min(n, r0 + step);
    const at::Tensor dist = geometry.sq_distance_rows(r0, r1, block_bytes).contiguous();
    AT_DISPATCH_FLOATING_TYPES(dist.scalar_type(), "nearest_neighbours", [&] {
      const scalar_t* d = dist.const_data_ptr<scalar_t>();
      at::parallel_for(r0, r1, 16, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> buf(n);
        std::vector<std::pair<double, int64_t>> cand;
        for (int64_t i = begin; i < end; ++i) {
          const scalar_t* row = d + (i - r0) * n;
          std::copy(row, row + n, buf.begin());
          buf[i] = std::numeric_limits<scalar_t>::infinity();
          std::nth_element(buf.begin(), buf.begin() + (k - 1), buf.end());
          // Every example among the true k nearest lies within 2·margin of the k-th approximate distance.
          const double threshold = static_cast<double>(buf[k - 1]) + 2.0 * geometry.margin(i);
          cand.clear();
          for (int64_t j = 0; j < n; ++j)
            if (j != i && static_cast<double>(row[j]) <= threshold) cand.emplace_back(geometry.exact(i, j), j);
          std::partial_sort(cand.begin(), cand.begin() + k, cand.end());
          for (int64_t t = 0; t < k; ++t) idx[i * k + t] = cand[t].second;
        }
      });
    });
  }
  return out;
}

double dot_f64(const at::Tensor& a, const at::Tensor& b) {
  VT_CHECK_ARG(a.numel() == b.numel() && a.scalar_type() == b.scalar_type(), "b", "expected the shape and dtype of a");
  const int64_t n = a.numel();
  constexpr int64_t kBlock = 1024, kLanes = 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  auto ac = a.contiguous(), bc = b.contiguous();
  AT_DISPATCH_FLOATING_TYPES(ac.scalar_type(), "dot_f64", [&] {
    const scalar_t* x = ac.const_data_ptr<scalar_t>();
    const scalar_t* y = bc.const_data_ptr<scalar_t>();
    at::parallel_for(0, blocks, 64, [&](int64_t begin, int64_t end) {
      for (int64_t blk = begin; blk < end; ++blk) {
        const int64_t s = blk * kBlock, e = std::min(n, s + kBlock);
        scalar_t lanes[kLanes] = {};
        int64_t i = s;
        for (; i + kLanes <= e; i += kLanes)
          for (int64_t l = 0; l < kLanes; ++l) lanes[l] += x[i + l] * y[i + l];
        double total = 0.0;
        for (int64_t l = 0; l < kLanes; ++l) total += static_cast<double>(lanes[l]);
        for (; i < e; ++i) total += static_cast<double>(x[i]) * static_cast<double>(y[i]);
        partial[static_cast<size_t>(blk)] = total;
      }
    });
  });
  double total = 0.0;
  for (double v : partial) total += v;
  return total;
}

namespace {

// One layer's neighbourhoods: (n, k) indices, each row in increasing index order (for merging), and
// for CKNNA the row-centred kernel at those entries and Align(K, K).
struct NeighbourFit {
  at::Tensor index;
  at::Tensor value;
  double self = 0.0;
};

NeighbourFit fit_neighbours(const LayerFit& layer, RowGeometry metric, int64_t k, bool kernel, int64_t block_bytes) {
  // float64 distances: the candidates' margin shrinks from p·ε32 to p·ε64, so almost no exact
  // recomputation (about p operations per candidate) is needed; the neighbours are the same either way.
  ExampleGeometry g(layer, metric, /*float64_distances=*/true);
  NeighbourFit fit;
  fit.index = std::get<0>(nearest_neighbours(g, k, block_bytes).sort(1));
  if (!kernel) return fit;
  const int64_t n = layer.n();
  fit.value = at::empty({n, k}, at::kDouble);
  const int64_t* idx = fit.index.const_data_ptr<int64_t>();
  double* val = fit.value.data_ptr<double>();
  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const double row_mean = g.kernel_row_mean(i);
      for (int64_t t = 0; t < k; ++t) val[i * k + t] = g.kernel(i, idx[i * k + t]) - row_mean;
    }
  });
  fit.self = fit.value.square().sum().item<double>();
  VT_CHECK_ARG(fit.self > 0.0, layer.arg(),
               "CKNNA is undefined: the centred kernel is 0 on every neighbour pair (Align(K, K) = 0)");
  return fit;
}

// Σ_i Σ_{j ∈ N_X(i) ∩ N_Y(i)} w(i, j): the count of shared neighbours, or the kernel products.
double shared_neighbours(const NeighbourFit& a, const NeighbourFit& b, bool kernel) {
  const int64_t n = a.index.size(0), k = a.index.size(1);
  const int64_t* ia = a.index.const_data_ptr<int64_t>();
  const int64_t* ib = b.index.const_data_ptr<int64_t>();
  const double* va = kernel ? a.value.const_data_ptr<double>() : nullptr;
  const double* vb = kernel ? b.value.const_data_ptr<double>() : nullptr;
  double total = 0.0;  // summed in row order: the same value whatever the thread count
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = 0, t = 0;
    while (s < k && t < k) {
      const int64_t x = ia[i * k + s], y = ib[i * k + t];
      if (x < y) {
        ++s;
      } else if (y < x) {
        ++t;
      } else {
        total += kernel ? va[i * k + s] * vb[i * k + t] : 1.0;
        ++s, ++t;
      }
    }
  }
  return total;
}

class Neighbourhood : public Measure {
 public:
  Neighbourhood(const Params& p, bool kernel)
      : Measure(p), kernel_(kernel), k_(p.integer("k")),
        metric_(row_geometry_from_name(p.str("metric"), "cosine|euclidean", "metric")) {
    VT_CHECK_ARG(k_ >= 1, "k", "expected a number of neighbours >= 1, got ", k_);
  }
  void check(int64_t n, const std::string& arg) const override {
    VT_CHECK_ARG(k_ <= n - 2, "k", "expected k <= n − 2 = ", n - 2, " for n = ", n, " examples (with k >= n − 1 every ",
                 "example is a neighbour of every other and the score is 1 for any layers), got k = ", k_);
  }
  bool fit(const LayerFit& layer) const override {
    get(layer);
    return true;
  }
  bool fit_all(const std::vector<const LayerFit*>& layers, const BatchContext& context) const override {
    for (const LayerFit* layer : layers) {  // distance blocks within memory_bytes
      get(*layer, context.memory_bytes);
      context.advance(1);
    }
    return !layers.empty();
  }
  Score score(const PairData& pair) const override {
    const NeighbourFit &a = get(pair.x), &b = get(pair.y);
    const double shared = shared_neighbours(a, b, kernel_);
    if (!kernel_) return {shared / (static_cast<double>(pair.n) * static_cast<double>(k_))};
    return {std::clamp(shared / std::sqrt(a.self * b.self), -1.0, 1.0)};
  }

 private:
  const NeighbourFit& get(const LayerFit& layer, int64_t block_bytes = int64_t{64} << 20) const {
    return fits_.get(layer, [&](const LayerFit& l) { return fit_neighbours(l, metric_, k_, kernel_, block_bytes); });
  }
  bool kernel_;
  int64_t k_;
  RowGeometry metric_;
  FitCache<NeighbourFit> fits_;
};

std::vector<ParamSpec> neighbour_specs() {
  return {{"k", ParamType::Int, int64_t{10}, "neighbours per example (Huh et al. 2024 use k = 10); 1 <= k <= n − 2"},
          {"metric", ParamType::String, std::string("cosine"),
           "'cosine' (the paper's: L2-normalised features) or 'euclidean' (also offset-invariant)"}};
}

}  // namespace

VT_REGISTER(MeasureRegistry,
            {"mutual_knn", "factor",
             "mutual k-NN alignment (Huh et al. 2024): mean over examples of |N_X(i) ∩ N_Y(i)| / k; chance ≈ k/(n−1)",
             neighbour_specs(),
             [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<Neighbourhood>(p, false); }});
VT_REGISTER(MeasureRegistry,
            {"cknna", "factor",
             "CKNNA (Huh et al. 2024, App. A): CKA of row-centred kernels over pairs that are neighbours in both "
             "layers; in [−1, 1]",
             neighbour_specs(),
             [](const Params& p) -> std::unique_ptr<Measure> { return std::make_unique<Neighbourhood>(p, true); }});

}  // namespace vaetransfer::similarity
