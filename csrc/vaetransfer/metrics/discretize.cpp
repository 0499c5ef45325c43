#include "vaetransfer/metrics/discretize.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "vaetransfer/common/check.h"

namespace vaetransfer::metrics {
namespace {

// The left edges of np.histogram(column, bins): np.linspace(lo, hi, bins + 1)[:-1], i.e. i * step + lo, or
// (i / bins) * delta + lo when the step underflows to zero. `volatile` keeps each product a separately
// rounded double (never fused into an FMA), as in NumPy. Computed per index, never stored: any number of
// bins takes no memory.
class LeftEdges {
 public:
  LeftEdges(double lo, double hi, int64_t bins) : bins_(bins) {
    if (lo == hi) {  // np.histogram widens an empty range by 0.5 on each side
      lo -= 0.5;
      hi += 0.5;
    }
    lo_ = lo;
    delta_ = hi - lo;
    step_ = delta_ / static_cast<double>(bins);
  }
  double operator()(int64_t i) const {
    volatile double scaled = step_ == 0 ? (static_cast<double>(i) / static_cast<double>(bins_)) * delta_
                                        : static_cast<double>(i) * step_;
    return scaled + lo_;
  }
  // The number of edges <= v (the edges are non-decreasing), by bisection.
  int64_t count_at_most(double v) const {
    int64_t lo = 0, hi = bins_;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if ((*this)(mid) <= v) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

 private:
  int64_t bins_;
  double lo_ = 0.0, delta_ = 0.0, step_ = 0.0;
};

}  // namespace

at::Tensor histogram_discretize(const at::Tensor& codes, int64_t bins) {
  check_dim(codes, 2, "codes");
  check_floating(codes, "codes");
  VT_CHECK_ARG(codes.size(0) >= 1, "codes", "expected at least one example, got shape ", codes.sizes());
  VT_CHECK_ARG(bins >= 2, "bins", "expected at least 2 bins, got ", bins);
  at::NoGradGuard no_grad;
  auto x = codes.to(at::kCPU, at::kDouble).t().contiguous();  // [D, N]: each code's values contiguous
  const int64_t d = x.size(0), n = x.size(1);
  auto out = at::empty({d, n}, at::TensorOptions().dtype(at::kLong));
  const double* in = x.data_ptr<double>();
  int64_t* labels = out.data_ptr<int64_t>();
  std::atomic<bool> finite{true};
  // Codes in parallel only when each task has enough values to pay for waking the threads.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 17) / std::max<int64_t>(n, 1));
  at::parallel_for(0, d, grain, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const double* v = in + c * n;
      int64_t* label = labels + c * n;
      double lo = v[0], hi = v[0];
      bool ok = true;
      for (int64_t r = 0; r < n; ++r) {
        ok &= std::isfinite(v[r]);
        lo = std::min(lo, v[r]);
        hi = std::max(hi, v[r]);
      }
      if (!ok) {
        finite = false;
        continue;
      }
      const LeftEdges edge(lo, hi, bins);
      // np.digitize(v, edges) (right=False) = number of left edges <= v, in 1..bins; minus one. The
      // arithmetic guess is corrected against the exact edges, so the result is the edges' comparison.
      const double first = edge(0);
      const double inv_width = static_cast<double>(bins - 1) / (edge(bins - 1) - first);  // ~ 1 / step
      if (!(inv_width > 0) || !std::isfinite(inv_width)) {  // degenerate spacing: bisection
        for (int64_t r = 0; r < n; ++r) label[r] = edge.count_at_most(v[r]) - 1;
        continue;
      }
      for (int64_t r = 0; r < n; ++r) {
        int64_t g = static_cast<int64_t>((v[r] - first) * inv_width);
        g = std::clamp<int64_t>(g, 0, bins - 1);
        while (g + 1 < bins && edge(g + 1) <= v[r]) ++g;
        while (g > 0 && edge(g) > v[r]) --g;
        label[r] = g;
      }
    }
  });
  VT_CHECK_ARG(finite.load(), "codes", "expected finite values, found NaN or inf");
  return out.t().contiguous().to(codes.device());
}

}  // namespace vaetransfer::metrics
