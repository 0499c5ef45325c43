// The labelled 32×32 RGB domains (object_shapes, street_digits): their common row type and the
// by-index generation loop they share.
#pragma once
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "vaetransfer/common/check.h"
#include "vaetransfer/data/grid.h"
#include "vaetransfer/data/scene.h"

namespace vaetransfer::data {

inline constexpr int64_t kLabelledDomainSize = 32;  // image side
inline constexpr int kDomainClasses = 10;

struct LabelledRows {
  at::Tensor images;   // uint8 [N, 3, 32, 32] (undefined when not requested)
  at::Tensor factors;  // int64 [N, F]: column 0 the class label, then the domain's discrete nuisances
};

// Rows `indices` (every row of [0, count) when undefined) of a labelled domain: row i has class
// i mod 10 and draws everything else from its own stream RowRng(seed, i, domain), so a row never
// depends on which other rows are generated. `draw(label, rng, nuisances, image)` writes the
// row's F − 1 nuisance factors and, when `image` is not null, its uint8 [3, 32, 32] image.
template <class Draw>
LabelledRows generate_labelled(const at::Tensor& indices, int64_t count, int64_t seed, bool with_images,
                               uint64_t domain, int factors, Draw draw) {
  VT_CHECK_ARG(seed >= 0, "seed", "expected a non-negative integer, got ", seed);
  const at::Tensor idx = grid_rows(indices, count);
  const int64_t n = idx.size(0);
  constexpr int64_t kImage = 3 * kLabelledDomainSize * kLabelledDomainSize;
  LabelledRows out;
  out.factors = at::empty({n, factors}, at::kLong);
  if (with_images) out.images = at::empty({n, 3, kLabelledDomainSize, kLabelledDomainSize}, at::kByte);
  const int64_t* ip = idx.data_ptr<int64_t>();
  int64_t* fp = out.factors.data_ptr<int64_t>();
  uint8_t* imgp = with_images ? out.images.data_ptr<uint8_t>() : nullptr;
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      RowRng rng(seed, ip[r], domain);
      const int label = static_cast<int>(ip[r] % kDomainClasses);
      fp[r * factors] = label;
      draw(label, rng, fp + r * factors + 1, imgp ? imgp + r * kImage : nullptr);
    }
  });
  return out;
}

}  // namespace vaetransfer::data
