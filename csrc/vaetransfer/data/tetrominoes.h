// Tetrominoes (Bozkurt et al., rate-regularization §4): RGB 32×32 images of a J
// tetromino with five continuous, stratified factors.
#pragma once
#include <ATen/ATen.h>

#include <array>

namespace vaetransfer::data {

struct TetrominoesGrid {
  static constexpr int kImageSize = 32;
  static constexpr int kFactors = 5;   // rotation (degrees), hue, scale (block px), x, y
  static constexpr int kBins = 8;      // strata per factor
  static constexpr int kPerCell = 5;   // samples per 5-D cell
  static constexpr int64_t kCount = 8LL * 8 * 8 * 8 * 8 * 5;  // 163,840
  static constexpr std::array<double, kFactors> kLow = {0.0, 0.0, 2.0, 0.0, 0.0};
  static constexpr std::array<double, kFactors> kHigh = {360.0, 0.875, 5.0, 1.0, 1.0};
};

struct Tetrominoes {
  at::Tensor images;   // uint8 [N, 3, 32, 32] (undefined when not requested)
  at::Tensor factors;  // float64 [N, 5]: rotation°, hue, scale, x, y (x, y: fraction of the admissible range)
  at::Tensor bins;     // int64 [N, 5]: stratum of each factor, 0..7
  at::Tensor centres;  // float64 [N, 2]: the shape's centroid in pixels (x, y)
};

// Rows `indices` of the set for `seed` (the whole set when undefined).
Tetrominoes tetrominoes(const at::Tensor& indices, int64_t seed, bool with_images);

// Renders J tetrominoes for arbitrary factor rows (float64 [N, 5], same meaning as
// Tetrominoes::factors; rotation may be any finite angle). Returns the images and
// the centres; used by the generator and for factor traversals.
std::pair<at::Tensor, at::Tensor> render_tetrominoes(const at::Tensor& factors, bool with_images);

}  // namespace vaetransfer::data
