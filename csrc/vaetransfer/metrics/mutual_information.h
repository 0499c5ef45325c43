// Plug-in (empirical) mutual information and entropy of discrete labels, in nats: the quantities of the
// MIG, modularity and SAP-style metrics ("Isolating Sources of Disentanglement in VAEs", Chen et al. 2018,
// §4 "MIG"; "Learning Deep Disentangled Embeddings with the F-Statistic Loss", Ridgeway & Mozer 2018, §4).
// I(a; b) = sum_ij p_ij log(p_ij / (p_i p_j)) over the empirical joint distribution of two columns, the
// value scikit-learn's mutual_info_score gives (natural log; exactly 0 when either column is constant;
// clipped at 0 against round-off). Labels are arbitrary integers: only equality matters.
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer::metrics {

// a: integer [N, D], b: integer [N, K], N >= 1 (same N). Returns float64 [D, K] (on CPU): I(a_d; b_k).
at::Tensor discrete_mutual_information(const at::Tensor& a, const at::Tensor& b);

// a: integer [N, K], N >= 1. Returns float64 [K] (on CPU): H(a_k) = I(a_k; a_k).
at::Tensor discrete_entropy(const at::Tensor& a);

}  // namespace vaetransfer::metrics
