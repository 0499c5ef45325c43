// Tetrominoes (Bozkurt et al., "Rate-Regularization and Generalization in VAEs" §4.1–4.2), as
// the authors' public generator defines it: RGB 32×32 images of a J tetromino with five
// continuous factors, one uniform sample in each cell of a 16 × 8 × 5 × 16 × 16 grid, and the
// four train/test splits of §4.2.
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <string>

namespace vaetransfer::data {

struct TetrominoesGrid {
  static constexpr int kImageSize = 32;
  static constexpr int kFactors = 5;  // angle (degrees), hue, scale (block side, px), x, y (px)
  static constexpr std::array<int64_t, kFactors> kSizes = {16, 8, 5, 16, 16};  // strata per factor
  static constexpr int64_t kCount = 16LL * 8 * 5 * 16 * 16;                    // 163,840 cells, one sample each
  // The generator's ranges: angle 360·(1 − 1/16), hue 1 − 1/8, scale [2, 5], and positions
  // [2·5 − 2, 32 − 2·5 + 1] so that the largest shape stays (nearly) inside the image.
  static constexpr std::array<double, kFactors> kLow = {0.0, 0.0, 2.0, 8.0, 8.0};
  static constexpr std::array<double, kFactors> kHigh = {337.5, 0.875, 5.0, 23.0, 23.0};
};

struct Tetrominoes {
  at::Tensor images;   // uint8 [N, 3, 32, 32] (undefined when not requested)
  at::Tensor factors;  // float64 [N, 5]: angle°, hue, scale, x, y
  at::Tensor bins;     // int64 [N, 5]: the row's grid cell (stratum of each factor)
};

// Rows `indices` of the set for `seed` (the whole set when undefined). Row i is cell i of the
// grid (y fastest); its values are uniform within the cell, drawn from a counter-based stream
// of (seed, i), so any subset equals the same rows of the whole set.
Tetrominoes tetrominoes(const at::Tensor& indices, int64_t seed, bool with_images);

// Renders J tetrominoes for arbitrary factor rows (float64 [N, 5], the columns of
// Tetrominoes::factors; any finite angle). uint8 [N, 3, 32, 32].
at::Tensor render_tetrominoes(const at::Tensor& factors);

// The train/test splits of §4.2 (row indices into the set of `data_seed`, each increasing):
//   "random"        50/50 at random (= "cv" with ratio 0.5);
//   "checkerboard"  every factor range cut in two halves; a row trains when the sum of its five
//                   half indices is even;
//   "cv"            constant volume: round(ratio·N) rows at random train, the rest test;
//   "cd"            constant density: the random 50/50 split, both halves restricted to the box
//                   whose every factor range is shrunk about its centre to ratio^(1/5) of its
//                   width (volume ratio, so N_train ≈ ratio · N / 2).
// `seed` draws the random permutation (random, cv, cd).
struct Split {
  at::Tensor train, test;  // int64
};
Split tetrominoes_split(const std::string& kind, double ratio, int64_t seed, int64_t data_seed);

}  // namespace vaetransfer::data
