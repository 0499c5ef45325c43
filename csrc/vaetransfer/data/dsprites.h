// dSprites (Matthey et al. 2017) generated procedurally: the full factor grid of the
// public file, laid out as in dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz.
#pragma once
#include <ATen/ATen.h>

#include <array>

namespace vaetransfer::data {

struct DSpritesGrid {
  static constexpr int kImageSize = 64;
  static constexpr int kFactors = 6;
  // color, shape, scale, orientation, posX, posY — posY varies fastest.
  static constexpr std::array<int64_t, kFactors> kSizes = {1, 3, 6, 40, 32, 32};
  static constexpr int64_t kCount = 1 * 3 * 6 * 40 * 32 * 32;  // 737,280
};

struct DSprites {
  at::Tensor imgs;             // uint8 [N, 64, 64], values 0/1 (undefined when not requested)
  at::Tensor latents_values;   // float64 [N, 6]
  at::Tensor latents_classes;  // int64 [N, 6]
};

// Rows `indices` (int64 [N], each in [0, 737280)) of the full data set, or the whole
// set when `indices` is undefined. Images are rendered in parallel.
DSprites dsprites(const at::Tensor& indices, bool with_images);

// Renders the images of given latent class rows (int64 [N, 6]).
at::Tensor render_dsprites(const at::Tensor& latents_classes);

}  // namespace vaetransfer::data
