// Majority-vote tables of the FactorVAE metric ("Disentangling by Factorising", Kim & Mnih 2018, §4): the
// number of training points whose (arg-min-variance dimension, fixed factor) pair is (r, c).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace vaetransfer::metrics {

// rows, cols: integer [M] (same M, M >= 0), rows in [0, num_rows), cols in [0, num_cols).
// Returns int64 [num_rows, num_cols]: how many times each (rows[m], cols[m]) pair occurs. Same device.
at::Tensor vote_counts(const at::Tensor& rows, const at::Tensor& cols, int64_t num_rows, int64_t num_cols);

}  // namespace vaetransfer::metrics
