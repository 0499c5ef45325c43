#include "vaetransfer/metrics/votes.h"

#include <ATen/core/grad_mode.h>

#include "vaetransfer/common/check.h"

namespace vaetransfer::metrics {

at::Tensor vote_counts(const at::Tensor& rows, const at::Tensor& cols, int64_t num_rows, int64_t num_cols) {
  check_dim(rows, 1, "rows");
  check_dim(cols, 1, "cols");
  check_same_device(rows, "rows", cols, "cols");
  VT_CHECK_ARG(num_rows >= 1, "num_rows", "expected at least one row, got ", num_rows);
  VT_CHECK_ARG(num_cols >= 1, "num_cols", "expected at least one column, got ", num_cols);
  VT_CHECK_ARG(cols.size(0) == rows.size(0), "cols", "expected ", rows.size(0), " entries like 'rows', got ",
               cols.size(0));
  check_range(rows, 0, num_rows, "rows");
  check_range(cols, 0, num_cols, "cols");
  at::NoGradGuard no_grad;
  auto out = at::zeros({num_rows * num_cols}, rows.options().dtype(at::kLong));
  if (rows.size(0) == 0) return out.view({num_rows, num_cols});
  auto cell = rows.to(at::kLong) * num_cols + cols.to(at::kLong);
  out.index_add_(0, cell, at::ones_like(cell));
  return out.view({num_rows, num_cols});
}

}  // namespace vaetransfer::metrics
