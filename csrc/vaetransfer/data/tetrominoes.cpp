#include "vaetransfer/data/tetrominoes.h"

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/counter_rng.h"
#include "vaetransfer/data/grid.h"
#include "vaetransfer/data/raster.h"

namespace vaetransfer::data {
namespace {

using G = TetrominoesGrid;
constexpr double kPi = 3.14159265358979323846;
constexpr int kSubrows = 16;  // anti-aliasing: 16 scanlines per pixel row (area error < 1 px)

// The J tetromino in block units, centred on its centroid:
//   X . .
//   X X X
const Polygon& canonical_j() {
  static const Polygon j = [] {
    Polygon p(2, 6);
    p << 0, 1, 1, 3, 3, 0,
         0, 0, 1, 1, 2, 2;
    const Eigen::Vector2f centroid(1.25f, 1.25f);  // mean of the four block centres
    return Polygon(p.colwise() - centroid);
  }();
  return j;
}

Eigen::Vector3f hue_to_rgb(double hue) {  // HSV with saturation = value = 1
  const double h6 = hue * 6.0;
  const int sector = static_cast<int>(std::floor(h6)) % 6;
  const float f = static_cast<float>(h6 - std::floor(h6));
  switch (sector) {
    case 0: return {1.0f, f, 0.0f};
    case 1: return {1.0f - f, 1.0f, 0.0f};
    case 2: return {0.0f, 1.0f, f};
    case 3: return {0.0f, 1.0f - f, 1.0f};
    case 4: return {f, 0.0f, 1.0f};
    default: return {1.0f, 0.0f, 1.0f - f};
  }
}

// Largest block size whose J fits the image at every rotation (its farthest vertex
// from the centroid is √(1.75² + 0.75²) blocks away).
const double kMaxScale = G::kImageSize / (2.0 * std::sqrt(1.75 * 1.75 + 0.75 * 0.75));

}  // namespace

std::pair<at::Tensor, at::Tensor> render_tetrominoes(const at::Tensor& factors, bool with_images) {
  check_dim(factors, 2, "factors");
  check_finite(factors, "factors");
  VT_CHECK_ARG(factors.size(1) == G::kFactors, "factors",
               "expected 5 columns (rotation, hue, scale, x, y), got ", factors.size(1));
  const auto f64 = factors.to(at::kDouble).contiguous();
  const int64_t n = f64.size(0);
  if (n > 0) {
    auto col_in = [&](int c, double lo, double hi) {
      auto col = f64.select(1, c);
      return col.min().item<double>() >= lo && col.max().item<double>() <= hi;
    };
    VT_CHECK_ARG(col_in(1, 0.0, 1.0), "factors", "expected hue (column 1) in [0, 1]");
    VT_CHECK_ARG(col_in(2, 1e-3, kMaxScale), "factors", "expected scale (column 2) in (0, ", kMaxScale,
                 "] so the shape fits the image");
    VT_CHECK_ARG(col_in(3, 0.0, 1.0) && col_in(4, 0.0, 1.0), "factors", "expected x, y (columns 3, 4) in [0, 1]");
  }
  constexpr int S = G::kImageSize;
  auto centres = at::empty({n, 2}, at::kDouble);
  at::Tensor images;
  if (with_images) images = at::empty({n, 3, S, S}, at::kByte);
  const double* fp = f64.data_ptr<double>();
  double* cp = centres.data_ptr<double>();
  uint8_t* imgp = with_images ? images.data_ptr<uint8_t>() : nullptr;

  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    std::vector<float> coverage(S * S);
    for (int64_t r = begin; r < end; ++r) {
      const double* f = fp + r * G::kFactors;
      // Rotate and scale about the centroid, then place the centroid so that the
      // rotated shape's bounding box stays inside the image (the adaptive range):
      // x = 0 puts the box against the left edge, x = 1 against the right one.
      const Eigen::Affine2f shape_map(Eigen::Rotation2Df(static_cast<float>(f[0] * kPi / 180.0)) *
                                      Eigen::Scaling(static_cast<float>(f[2])));
      const Polygon local = transform_polygon(canonical_j(), shape_map);
      const Eigen::Vector2f lo = -local.rowwise().minCoeff();
      const Eigen::Vector2f hi = Eigen::Vector2f::Constant(static_cast<float>(S)) - local.rowwise().maxCoeff();
      const Eigen::Vector2f centre(lo.x() + static_cast<float>(f[3]) * (hi.x() - lo.x()),
                                   lo.y() + static_cast<float>(f[4]) * (hi.y() - lo.y()));
      cp[r * 2 + 0] = centre.x();
      cp[r * 2 + 1] = centre.y();
      if (!imgp) continue;

      std::fill(coverage.begin(), coverage.end(), 0.0f);
      rasterize_coverage(Polygon(local.colwise() + centre), S, S, kSubrows, coverage.data());
      const Eigen::Vector3f rgb = hue_to_rgb(f[1]);
      uint8_t* img = imgp + r * 3 * S * S;
      for (int c = 0; c < 3; ++c) {
        for (int p = 0; p < S * S; ++p) {
          img[c * S * S + p] = static_cast<uint8_t>(std::lround(255.0f * std::min(coverage[p], 1.0f) * rgb[c]));
        }
      }
    }
  });
  return {images, centres};
}

Tetrominoes tetrominoes(const at::Tensor& indices, int64_t seed, bool with_images) {
  VT_CHECK_ARG(seed >= 0, "seed", "expected a non-negative integer, got ", seed);
  const at::Tensor idx = grid_rows(indices, G::kCount);
  const int64_t n = idx.size(0);
  Tetrominoes out;
  out.factors = at::empty({n, G::kFactors}, at::kDouble);
  out.bins = at::empty({n, G::kFactors}, at::kLong);
  const int64_t* ip = idx.data_ptr<int64_t>();
  double* fp = out.factors.data_ptr<double>();
  int64_t* bp = out.bins.data_ptr<int64_t>();
  const uint64_t stream = static_cast<uint64_t>(seed);

  // Stratified design: i = cell·5 + replicate; the cell's base-8 digits are the bins
  // (y fastest) and each value is uniform within its bin, drawn from a counter-based
  // stream so that row i does not depend on which other rows are generated.
  at::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i = ip[r];
      int64_t cell = i / G::kPerCell;
      for (int f = G::kFactors - 1; f >= 0; --f) {
        const int64_t bin = cell % G::kBins;
        cell /= G::kBins;
        const double u =
            (static_cast<double>(bin) + counter_uniform(stream, static_cast<uint64_t>(i) * G::kFactors + f)) / G::kBins;
        bp[r * G::kFactors + f] = bin;
        fp[r * G::kFactors + f] = G::kLow[f] + (G::kHigh[f] - G::kLow[f]) * u;
      }
    }
  });
  std::tie(out.images, out.centres) = render_tetrominoes(out.factors, with_images);
  return out;
}

}  // namespace vaetransfer::data
