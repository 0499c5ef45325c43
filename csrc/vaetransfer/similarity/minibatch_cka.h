// Minibatch CKA (Nguyen, Raghu & Kornblith 2021, "Do wide and deep networks learn the same
// things?", §3.1): the unbiased HSIC estimator HSIC₁ (Song et al. 2012, "Feature selection via
// dependence maximization", Eq. 5) computed on each minibatch b and averaged over the batches,
//   CKA_mb(k, l) = mean_b HSIC₁(K_b, L_b) / √(mean_b HSIC₁(K_b, K_b) · mean_b HSIC₁(L_b, L_b)),
// for every A layer k and B layer l, with linear kernels. Memory holds at most two batches, never
// an n × n Gram of the whole data set. The average runs over batches, never over layers.
//
// HSIC₁ needs at least 4 examples. Small batches are carried over: examples are collected until
// at least 4 are held; such a group is kept back until the next group is complete, so that a last
// remainder of fewer than 4 examples joins the last group. Batches of 4 or more are thus their own
// minibatches, exactly as given, and batches of any size (even 1) are accepted.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vaetransfer::similarity {

class MinibatchCKA {
 public:
  // The layers' names (error messages and the order of result()'s rows and columns).
  MinibatchCKA(std::vector<std::string> names_a, std::vector<std::string> names_b);

  // acts_a[k]: (b, ...) activations of A layer k on this batch's b examples (the same b rows in
  // acts_b); each layer keeps its width across batches.
  void update(const std::vector<at::Tensor>& acts_a, const std::vector<at::Tensor>& acts_b);

  // (L_a, L_b) float64 CKA_mb over every batch so far (the kept-back group included; the state
  // is unchanged, so updates may continue). constant_as_zero: a layer whose mean self-HSIC₁ is
  // not positive (constant on every batch) scores 0 instead of raising ArgumentError.
  at::Tensor result(bool constant_as_zero = false) const;

  int64_t layers_a() const { return la_; }
  int64_t layers_b() const { return lb_; }
  int64_t examples() const { return examples_; }
  // Minibatches in the average so far (the kept-back group counts once it is complete).
  int64_t batches() const;

 private:
  struct Sums {
    at::Tensor ab, aa, bb;  // Σ_b HSIC₁: (L_a, L_b), (L_a,), (L_b,) float64
    int64_t batches = 0;
  };
  void add(Sums& sums, const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) const;

  int64_t la_, lb_;
  std::vector<std::string> names_a_, names_b_;
  std::vector<int64_t> width_a_, width_b_;
  // Per layer: the largest |value| seen, and the rounding unit of its compute dtype (constancy).
  std::vector<double> absmax_a_, absmax_b_, eps_a_, eps_b_;
  // Per layer: the power of two its activations are scaled by before their Gram (fixed by the first
  // batch with a nonzero value; 0 until then), so float32 Grams hold any activation scale and every
  // batch's HSIC₁ is in the same units.
  std::vector<double> scale_a_, scale_b_;
  Sums sums_;
  std::vector<at::Tensor> held_a_, held_b_, pending_a_, pending_b_;
  int64_t held_n_ = 0, pending_n_ = 0, examples_ = 0;
};

}  // namespace vaetransfer::similarity
