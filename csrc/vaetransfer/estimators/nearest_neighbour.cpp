#include "vaetransfer/estimators/nearest_neighbour.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "vaetransfer/common/check.h"

namespace vaetransfer::estimators {
namespace {

at::Tensor flat(const at::Tensor& t, const char* arg) {
  check_defined(t, arg);
  VT_CHECK_ARG(t.dim() >= 1, arg, "expected [N, ...] examples, got a 0-d tensor");
  VT_CHECK_TYPE(t.scalar_type() != at::kBool && !t.is_complex(), arg, "expected real values, got ", t.scalar_type());
  int64_t features = 1;
  for (int64_t i = 1; i < t.dim(); ++i) features *= t.size(i);
  return t.reshape({t.size(0), features});
}

constexpr int64_t kChunk = 8192;  // rows converted to the compute type at a time

// Squared row norms in the compute type, converting (and checking finite) chunk by chunk.
at::Tensor row_norms2(const at::Tensor& x, at::ScalarType type, const char* arg) {
  auto out = at::empty({x.size(0)}, x.options().dtype(type));
  for (int64_t s = 0; s < x.size(0); s += kChunk) {
    const auto part = x.narrow(0, s, std::min(kChunk, x.size(0) - s)).to(type);
    check_finite(part, arg);
    out.narrow(0, s, part.size(0)).copy_(part.mul(part).sum(1));
  }
  return out;
}

// ỹ = [Vᵀx, ‖x − VVᵀx‖] for every row in the compute type (chunked), or x itself without a basis.
at::Tensor bound_features(const at::Tensor& x, const at::Tensor& basis, const at::Tensor& norm2) {
  if (!basis.defined()) return x.to(norm2.scalar_type()).contiguous();
  auto out = at::empty({x.size(0), basis.size(1) + 1}, norm2.options());
  for (int64_t s = 0; s < x.size(0); s += kChunk) {
    const int64_t len = std::min(kChunk, x.size(0) - s);
    const auto y = at::mm(x.narrow(0, s, len).to(basis.scalar_type()), basis);
    const auto perp2 = (norm2.narrow(0, s, len) - y.mul(y).sum(1)).clamp_min(0);
    out.narrow(0, s, len).narrow(1, 0, basis.size(1)).copy_(y);
    out.narrow(0, s, len).select(1, basis.size(1)).copy_(perp2.sqrt());
  }
  return out;
}

// Σ (a − b)² of two raw rows (any real element type), in float64.
template <typename S>
double exact_distance2(const S* a, const S* b, int64_t f) {
  double acc = 0;
  for (int64_t d = 0; d < f; ++d) {
    const double diff = static_cast<double>(a[d]) - static_cast<double>(b[d]);
    acc += diff * diff;
  }
  return acc;
}

// T: the compute type of the bounds; S: the element type of the rows (kept as given, so uint8
// images cost one byte per value and only the (k + 1)-wide features are held in T).
template <typename T, typename S>
NearestNeighbours search(const at::Tensor& q, const at::Tensor& r, const NearestNeighbourOptions& o,
                         const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t m = q.size(0), n = r.size(0), f = q.size(1);
  constexpr auto type = std::is_same_v<T, double> ? at::kDouble : at::kFloat;
  const at::Tensor q_norm2 = row_norms2(q, type, "queries"), r_norm2 = row_norms2(r, type, "reference");
  at::Tensor basis;  // V [F, k], orthonormal columns
  const int64_t k = std::min({o.projection_dim, f, n});
  if (k > 0 && k < f) {
    // Leading right singular subspace of a row sample by randomized subspace iteration (Halko,
    // Martinsson & Tropp 2011, Alg. 4.4), in float64; only its orthonormality matters for exactness.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(o.seed));
    const auto rows = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, std::min(n, o.basis_rows));
    const auto sample = r.index_select(0, rows).to(at::kDouble);
    auto v = std::get<0>(at::linalg_qr(at::randn({f, k}, gen, at::kDouble)));
    for (int it = 0; it < 3; ++it) {
      const auto u = std::get<0>(at::linalg_qr(at::mm(sample, v)));
      v = std::get<0>(at::linalg_qr(at::mm(sample.t(), u)));
    }
    basis = v.to(type).contiguous();
  }
  const at::Tensor yq = bound_features(q, basis, q_norm2), yr = bound_features(r, basis, r_norm2);
  const S* qp = q.data_ptr<S>();
  const S* rp = r.data_ptr<S>();
  const T* qn2 = q_norm2.data_ptr<T>();
  // Rounding of the expanded square: a relative margin rel·(‖q‖² + ‖r‖²) (the bound may only be
  // loosened, never tightened, so the nearest row is never filtered out).
  const double rel = std::is_same_v<T, double> ? 1e-10 : 1e-4;

  NearestNeighbours out;
  out.distance = at::empty({m}, at::kDouble);
  out.index = at::empty({m}, at::kLong);
  double* dist = out.distance.data_ptr<double>();
  int64_t* idx = out.index.data_ptr<int64_t>();
  std::atomic<int64_t> compared{0};
  const int64_t qc = o.query_chunk, tiles = (m + qc - 1) / qc;
  const int64_t per_report = std::max<int64_t>(1, at::get_num_threads() * 2);
  for (int64_t start = 0; start < tiles; start += per_report) {
    const int64_t stop = std::min(tiles, start + per_report);
    at::parallel_for(start, stop, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t a = t * qc, rows = std::min(m, a + qc) - a;
        // bound²[i, j] = ‖q_i‖² + ‖r_j‖² − 2 ỹ_i·ỹ_j (single-threaded product inside this task),
        // stored less the margin's ‖r_j‖² part so the scan compares with one number per query.
        const at::Tensor lb = at::addmm(r_norm2.mul(1.0 - rel).unsqueeze(0), yq.narrow(0, a, rows), yr.t(), 1.0, -2.0)
                            .add_(q_norm2.narrow(0, a, rows).unsqueeze(1))
                            .contiguous();
        const T* lp = lb.data_ptr<T>();
        int64_t pairs = 0;
        for (int64_t i = 0; i < rows; ++i) {
          const T* row = lp + i * n;
          const S* qi = qp + (a + i) * f;
          const int64_t first = std::min_element(row, row + n) - row;
          double best = exact_distance2(qi, rp + first * f, f);
          int64_t arg = first;
          ++pairs;
          // Rows with bound² − rel·‖r‖² <= best + rel·‖q‖² may be nearer; compare them exactly.
          const double slack = rel * static_cast<double>(qn2[a + i]);
          T threshold = static_cast<T>(best + slack);
          for (int64_t j = 0; j < n; ++j) {
            if (row[j] > threshold || j == first) continue;
            const double d2 = exact_distance2(qi, rp + j * f, f);
            ++pairs;
            if (d2 < best || (d2 == best && j < arg)) {
              best = d2;
              arg = j;
              threshold = static_cast<T>(best + slack);
            }
          }
          dist[a + i] = std::sqrt(best);
          idx[a + i] = arg;
        }
        compared += pairs;
      }
    });
    if (progress) progress(std::min(m, stop * qc), m);
  }
  out.pairs_compared = compared.load();
  return out;
}

}  // namespace

NearestNeighbours nearest_neighbours(const at::Tensor& queries, const at::Tensor& reference,
                                     const NearestNeighbourOptions& options,
                                     const std::function<void(int64_t, int64_t)>& progress) {
  const auto q_in = flat(queries, "queries"), r_in = flat(reference, "reference");
  VT_CHECK_ARG(q_in.size(1) == r_in.size(1), "reference", "expected ", q_in.size(1),
               " features per example (as the queries), got ", r_in.size(1));
  VT_CHECK_ARG(r_in.size(0) >= 1, "reference", "expected at least one reference example");
  VT_CHECK_ARG(options.projection_dim >= 0, "projection_dim", "expected >= 0, got ", options.projection_dim);
  VT_CHECK_ARG(options.basis_rows >= 1, "basis_rows", "expected >= 1, got ", options.basis_rows);
  VT_CHECK_ARG(options.query_chunk >= 1, "query_chunk", "expected >= 1, got ", options.query_chunk);
  VT_CHECK_ARG(options.seed >= 0, "seed", "expected >= 0, got ", options.seed);
  at::NoGradGuard no_grad;
  // Rows in one element type (the promoted one when they differ), on the CPU; bounds in float32,
  // or float64 when either input is float64.
  const auto element = at::promote_types(q_in.scalar_type(), r_in.scalar_type());
  const auto q = q_in.to(at::kCPU, element).contiguous(), r = r_in.to(at::kCPU, element).contiguous();
  NearestNeighbours out;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, element, "nearest_neighbours", [&] {
    out = element == at::kDouble ? search<double, scalar_t>(q, r, options, progress)
                                 : search<float, scalar_t>(q, r, options, progress);
  });
  out.distance = out.distance.to(queries.device());
  out.index = out.index.to(queries.device());
  return out;
}

}  // namespace vaetransfer::estimators
