// The dSprites variants of the disentanglement literature ("Challenging Common
// Assumptions in the Unsupervised Learning of Disentangled Representations",
// Locatello et al. 2019, §5 and its data sets): RGB images on the dSprites factor grid.
//
// * colour: the sprite takes a random colour, each channel uniform in [0.5, 1), on a
//   black background;
// * noisy: the sprite is white on a background of uniform noise, independent per
//   pixel and channel.
//
// The random parts come from a counter-based stream of (seed, dSprites index), so a row
// does not depend on which other rows are generated; the sprite mask is the dSprites
// render of the same index.
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer::data {

enum class DSpritesVariant { kColor, kNoisy };

struct DSpritesVariantRows {
  at::Tensor imgs;             // uint8 [N, 3, 64, 64], 0..255 (undefined when not requested)
  at::Tensor latents_values;   // float64 [N, 6], as dSprites
  at::Tensor latents_classes;  // int64 [N, 6], as dSprites
  at::Tensor colors;           // float64 [N, 3] sprite colour in [0.5, 1) (colour variant; undefined for noisy)
};

// Rows `indices` of the dSprites grid (the whole grid when undefined) in `variant`,
// drawn from the stream `seed` (>= 0).
DSpritesVariantRows dsprites_variant(const at::Tensor& indices, DSpritesVariant variant, int64_t seed,
                                     bool with_images);

}  // namespace vaetransfer::data
