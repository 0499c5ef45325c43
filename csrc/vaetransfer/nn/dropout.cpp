#include "vaetransfer/nn/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <mutex>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/counter_rng.h"

namespace vaetransfer::nn {
namespace {

template <typename T>
void fill_mask(T* out, int64_t n, uint64_t seed, double p) {
  const uint64_t threshold = static_cast<uint64_t>(p * static_cast<double>(1ull << 24));  // keep iff u24 >= threshold
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const uint64_t base = splitmix64(seed);
  at::parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = (splitmix64(base ^ static_cast<uint64_t>(i)) >> 40) >= threshold ? scale : T(0);
  });
}

}  // namespace

at::Tensor dropout(const at::Tensor& x, double p, at::Generator& gen) {
  VT_CHECK_ARG(p >= 0 && p < 1, "dropout_rate", "expected in [0, 1), got ", p);
  if (p == 0) return x;
  if (!x.device().is_cpu() || !gen.device().is_cpu() || !at::isFloatingType(x.scalar_type()))
    return x * at::empty_like(x).bernoulli_(1.0 - p, gen).div_(1.0 - p);
  uint64_t seed;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    seed = at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
  }
  auto mask = at::empty(x.sizes(), x.options().requires_grad(false));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "vt_dropout_mask",
                                  [&] { fill_mask<scalar_t>(mask.data_ptr<scalar_t>(), mask.numel(), seed, p); });
  return x * mask;
}

}  // namespace vaetransfer::nn
