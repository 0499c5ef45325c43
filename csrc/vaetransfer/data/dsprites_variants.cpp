#include "vaetransfer/data/dsprites_variants.h"

#include <cmath>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/counter_rng.h"
#include "vaetransfer/data/dsprites.h"
#include "vaetransfer/data/grid.h"

namespace vaetransfer::data {

DSpritesVariantRows dsprites_variant(const at::Tensor& indices, DSpritesVariant variant, int64_t seed,
                                     bool with_images) {
  VT_CHECK_ARG(seed >= 0, "seed", "expected a non-negative integer, got ", seed);
  const at::Tensor idx = grid_rows(indices, DSpritesGrid::kCount);
  DSprites base = dsprites(idx, with_images);
  DSpritesVariantRows out{at::Tensor(), base.latents_values, base.latents_classes, at::Tensor()};
  const int64_t n = idx.size(0);
  const int64_t* ip = idx.data_ptr<int64_t>();
  // One stream per (seed, variant); draw k of dSprites row i is counter i·kDraws + k.
  const uint64_t stream = (static_cast<uint64_t>(seed) << 1) | (variant == DSpritesVariant::kNoisy ? 1u : 0u);
  constexpr int S = DSpritesGrid::kImageSize;
  constexpr int64_t kPlane = S * S;

  if (variant == DSpritesVariant::kColor) {
    out.colors = at::empty({n, 3}, at::kDouble);
    double* colors = out.colors.data_ptr<double>();
    for (int64_t r = 0; r < n; ++r) {
      for (int c = 0; c < 3; ++c) {
        colors[r * 3 + c] = 0.5 + 0.5 * counter_uniform(stream, static_cast<uint64_t>(ip[r]) * 3 + c);
      }
    }
  }
  if (!with_images) return out;

  out.imgs = at::empty({n, 3, S, S}, at::kByte);
  const uint8_t* mask = base.imgs.data_ptr<uint8_t>();
  uint8_t* img = out.imgs.data_ptr<uint8_t>();
  const double* colors = out.colors.defined() ? out.colors.data_ptr<double>() : nullptr;
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* m = mask + r * kPlane;
      for (int c = 0; c < 3; ++c) {
        uint8_t* plane = img + (r * 3 + c) * kPlane;
        if (colors) {
          const auto value = static_cast<uint8_t>(std::lround(255.0 * colors[r * 3 + c]));
          for (int64_t p = 0; p < kPlane; ++p) plane[p] = m[p] ? value : 0;
        } else {
          // Background: uniform on 0..255, one draw per pixel and channel.
          const uint64_t first = (static_cast<uint64_t>(ip[r]) * 3 + c) * kPlane;
          for (int64_t p = 0; p < kPlane; ++p) {
            plane[p] = m[p] ? 255 : static_cast<uint8_t>(256.0 * counter_uniform(stream, first + p));
          }
        }
      }
    }
  });
  return out;
}

}  // namespace vaetransfer::data
