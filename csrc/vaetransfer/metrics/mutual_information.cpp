#include "vaetransfer/metrics/mutual_information.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "vaetransfer/common/check.h"

namespace vaetransfer::metrics {
namespace {

// One column relabelled to 0..count-1 (in increasing order of the original values).
struct Compact {
  std::vector<int64_t> id;
  int64_t count = 0;
};

Compact compact(const int64_t* values, int64_t n, int64_t stride) {
  Compact out;
  out.id.resize(n);
  int64_t lo = values[0], hi = values[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, values[i * stride]);
    hi = std::max(hi, values[i * stride]);
  }
  // Unsigned difference: no overflow for any pair of int64 values.
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span <= static_cast<uint64_t>(4 * n + 1024)) {  // dense lookup table over [lo, hi]
    std::vector<int64_t> table(span + 1, -1);
    for (int64_t i = 0; i < n; ++i) table[static_cast<uint64_t>(values[i * stride]) - static_cast<uint64_t>(lo)] = 0;
    for (auto& t : table) {
      if (t == 0) t = out.count++;
    }
    for (int64_t i = 0; i < n; ++i) {
      out.id[i] = table[static_cast<uint64_t>(values[i * stride]) - static_cast<uint64_t>(lo)];
    }
  } else {  // sparse labels: sort the distinct values
    std::vector<int64_t> sorted(n);
    for (int64_t i = 0; i < n; ++i) sorted[i] = values[i * stride];
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    out.count = static_cast<int64_t>(sorted.size());
    for (int64_t i = 0; i < n; ++i) {
      out.id[i] = std::lower_bound(sorted.begin(), sorted.end(), values[i * stride]) - sorted.begin();
    }
  }
  return out;
}

// Tasks per thread: enough rows of work to pay for waking the threads (they cost more than small tables).
int64_t grain_for(int64_t n) { return std::max<int64_t>(1, (int64_t{1} << 17) / std::max<int64_t>(n, 1)); }

std::vector<Compact> compact_columns(const at::Tensor& t) {
  const int64_t n = t.size(0), cols = t.size(1);
  const int64_t* data = t.data_ptr<int64_t>();
  std::vector<Compact> out(cols);
  at::parallel_for(0, cols, grain_for(n), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) out[c] = compact(data + c, n, cols);
  });
  return out;
}

std::vector<int64_t> marginal_counts(const Compact& c) {
  std::vector<int64_t> counts(c.count, 0);
  for (auto id : c.id) ++counts[id];
  return counts;
}

// sum_c c log c over the nonzero counts.
double sum_c_log_c(const std::vector<int64_t>& counts) {
  double s = 0;
  for (auto c : counts) {
    if (c > 0) s += static_cast<double>(c) * std::log(static_cast<double>(c));
  }
  return s;
}

// I(x; y) = log N + (1/N) [sum_ij n_ij log n_ij - sum_i a_i log a_i - sum_j b_j log b_j].
double pair_mi(const Compact& x, double ax_term, const Compact& y, double by_term) {
  if (x.count <= 1 || y.count <= 1) return 0.0;  // a constant column shares no information
  const int64_t n = static_cast<int64_t>(x.id.size());
  double joint = 0;
  const uint64_t cells = static_cast<uint64_t>(x.count) * static_cast<uint64_t>(y.count);
  if (cells <= static_cast<uint64_t>(std::max<int64_t>(8 * n, 1 << 20))) {
    std::vector<int64_t> table(cells, 0);
    for (int64_t i = 0; i < n; ++i) ++table[x.id[i] * y.count + y.id[i]];
    joint = sum_c_log_c(table);
  } else {  // too many cells for a table: count runs of sorted cell keys
    std::vector<int64_t> keys(n);
    for (int64_t i = 0; i < n; ++i) keys[i] = x.id[i] * y.count + y.id[i];
    std::sort(keys.begin(), keys.end());
    for (int64_t i = 0; i < n;) {
      int64_t j = i;
      while (j < n && keys[j] == keys[i]) ++j;
      const double c = static_cast<double>(j - i);
      joint += c * std::log(c);
      i = j;
    }
  }
  const double nd = static_cast<double>(n);
  const double mi = std::log(nd) + (joint - ax_term - by_term) / nd;
  return std::max(0.0, mi);
}

at::Tensor as_labels(const at::Tensor& t, const char* arg) {
  check_dim(t, 2, arg);
  check_integral(t, arg);
  VT_CHECK_ARG(t.size(0) >= 1, arg, "expected at least one example, got shape ", t.sizes());
  return t.to(at::kCPU, at::kLong).contiguous();
}

}  // namespace

at::Tensor discrete_mutual_information(const at::Tensor& a, const at::Tensor& b) {
  at::NoGradGuard no_grad;
  auto x = as_labels(a, "a");
  auto y = as_labels(b, "b");
  VT_CHECK_ARG(y.size(0) == x.size(0), "b", "expected ", x.size(0), " rows like 'a', got ", y.size(0));
  const int64_t d = x.size(1), k = y.size(1);
  auto out = at::zeros({d, k}, at::TensorOptions().dtype(at::kDouble));
  if (d == 0 || k == 0) return out;
  auto xs = compact_columns(x);
  auto ys = compact_columns(y);
  std::vector<double> xt(d), yt(k);  // sum_i a_i log a_i of each column's marginal counts
  for (int64_t i = 0; i < d; ++i) xt[i] = sum_c_log_c(marginal_counts(xs[i]));
  for (int64_t j = 0; j < k; ++j) yt[j] = sum_c_log_c(marginal_counts(ys[j]));
  double* o = out.data_ptr<double>();
  at::parallel_for(0, d * k, grain_for(x.size(0)), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t i = p / k, j = p % k;
      o[p] = pair_mi(xs[i], xt[i], ys[j], yt[j]);
    }
  });
  return out;
}

at::Tensor discrete_entropy(const at::Tensor& a) {
  at::NoGradGuard no_grad;
  auto x = as_labels(a, "a");
  const int64_t n = x.size(0), k = x.size(1);
  auto out = at::zeros({k}, at::TensorOptions().dtype(at::kDouble));
  if (k == 0) return out;
  auto xs = compact_columns(x);
  double* o = out.data_ptr<double>();
  const double nd = static_cast<double>(n);
  for (int64_t j = 0; j < k; ++j) {
    if (xs[j].count <= 1) continue;  // one class: zero entropy, exactly
    o[j] = std::max(0.0, std::log(nd) - sum_c_log_c(marginal_counts(xs[j])) / nd);
  }
  return out;
}

}  // namespace vaetransfer::metrics
