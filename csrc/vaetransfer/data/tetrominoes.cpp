#include "vaetransfer/data/tetrominoes.h"

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/counter_rng.h"
#include "vaetransfer/data/raster.h"

namespace vaetransfer::data {
namespace {

using G = TetrominoesGrid;
constexpr double kPi = 3.14159265358979323846;
constexpr int kSubrows = 4;  // anti-aliasing: 4 scanlines per pixel row

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

}  // namespace

Tetrominoes tetrominoes(const at::Tensor& indices, int64_t seed, bool with_images) {
  VT_CHECK_ARG(seed >= 0, "seed", "expected a non-negative integer, got ", seed);
  at::Tensor idx;
  if (indices.defined()) {
    check_dim(indices, 1, "indices");
    check_range(indices, 0, G::kCount, "indices");
    idx = indices.to(at::kLong).contiguous();
  } else {
    idx = at::arange(G::kCount, at::kLong);
  }
  const int64_t n = idx.size(0);
  constexpr int S = G::kImageSize;
  Tetrominoes out;
  out.factors = at::empty({n, G::kFactors}, at::kDouble);
  out.bins = at::empty({n, G::kFactors}, at::kLong);
  out.centres = at::empty({n, 2}, at::kDouble);
  if (with_images) out.images = at::empty({n, 3, S, S}, at::kByte);

  const int64_t* ip = idx.data_ptr<int64_t>();
  double* fp = out.factors.data_ptr<double>();
  int64_t* bp = out.bins.data_ptr<int64_t>();
  double* cp = out.centres.data_ptr<double>();
  uint8_t* imgp = with_images ? out.images.data_ptr<uint8_t>() : nullptr;
  const uint64_t stream = static_cast<uint64_t>(seed);

  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    std::vector<float> coverage(S * S);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i = ip[r];
      // Stratified design: i = cell·5 + replicate, the cell's base-8 digits are the
      // bins (y fastest), and each value is uniform within its bin.
      int64_t cell = i / G::kPerCell;
      double u[G::kFactors];
      for (int f = G::kFactors - 1; f >= 0; --f) {
        const int64_t bin = cell % G::kBins;
        cell /= G::kBins;
        bp[r * G::kFactors + f] = bin;
        u[f] = (static_cast<double>(bin) + counter_uniform(stream, static_cast<uint64_t>(i) * G::kFactors + f)) / G::kBins;
        fp[r * G::kFactors + f] = G::kLow[f] + (G::kHigh[f] - G::kLow[f]) * u[f];
      }
      const double rotation = fp[r * G::kFactors + 0];
      const double hue = fp[r * G::kFactors + 1];
      const double scale = fp[r * G::kFactors + 2];

      // Rotate and scale about the centroid, then place the centroid so that the
      // rotated shape's bounding box stays inside the image (the adaptive range).
      const Eigen::Affine2f shape_map(Eigen::Rotation2Df(static_cast<float>(rotation * kPi / 180.0)) *
                                      Eigen::Scaling(static_cast<float>(scale)));
      const Polygon local = transform_polygon(canonical_j(), shape_map);
      const Eigen::Vector2f lo = -local.rowwise().minCoeff();
      const Eigen::Vector2f hi = Eigen::Vector2f::Constant(static_cast<float>(S)) - local.rowwise().maxCoeff();
      const Eigen::Vector2f centre(lo.x() + static_cast<float>(u[3]) * (hi.x() - lo.x()),
                                   lo.y() + static_cast<float>(u[4]) * (hi.y() - lo.y()));
      cp[r * 2 + 0] = centre.x();
      cp[r * 2 + 1] = centre.y();
      if (!imgp) continue;

      std::fill(coverage.begin(), coverage.end(), 0.0f);
      rasterize_coverage(Polygon(local.colwise() + centre), S, S, kSubrows, coverage.data());
      const Eigen::Vector3f rgb = hue_to_rgb(hue);
      uint8_t* img = imgp + r * 3 * S * S;
      for (int c = 0; c < 3; ++c) {
        for (int p = 0; p < S * S; ++p) {
          const float v = 255.0f * std::min(coverage[p], 1.0f) * rgb[c];
          img[c * S * S + p] = static_cast<uint8_t>(std::lround(v));
        }
      }
    }
  });
  return out;
}

}  // namespace vaetransfer::data
