// Inverted dropout with masks from a counter-based stream: element i is kept iff the 24-bit
// uniform u(seed, i) ≥ p, and kept values are scaled by 1/(1 − p). The seed is one 64-bit draw
// from `gen`, so masks follow the generator's state (which snapshots save) and never touch the
// global RNG; and one hash per element is several times cheaper on the CPU than ATen's
// bernoulli_, which made dropout a quarter of a small T5's training step. Differentiable (the
// gradient is the same mask). Non-CPU tensors use ATen's bernoulli_ with `gen`.
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer::nn {

at::Tensor dropout(const at::Tensor& x, double p, at::Generator& gen);

}  // namespace vaetransfer::nn
