#include "vaetransfer/data/dsprites.h"

#include "vaetransfer/common/check.h"
#include "vaetransfer/data/grid.h"
#include "vaetransfer/data/raster.h"

namespace vaetransfer::data {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Geometry (pixel units on the 64×64 canvas). A shape of scale s has its farthest
// vertex s·kRadiusAtScale1 from its centre; centres span [kMargin, 64 − kMargin],
// so even the largest shape never leaves the image.
constexpr float kRadiusAtScale1 = 10.0f;
constexpr float kMargin = 12.0f;

double factor_value(int factor, int64_t cls) {
  switch (factor) {
    case 0: return 1.0;                                  // color: white only
    case 1: return static_cast<double>(cls + 1);         // shape: 1 square, 2 ellipse, 3 heart
    case 2: return 0.5 + 0.1 * static_cast<double>(cls); // scale: linspace(0.5, 1, 6)
    case 3: return 2.0 * kPi * static_cast<double>(cls) / 39.0;  // orientation: linspace(0, 2π, 40)
    default: return static_cast<double>(cls) / 31.0;     // posX, posY: linspace(0, 1, 32)
  }
}

// Canonical shapes, farthest vertex at distance 1 from the centre.
const std::array<Polygon, 3>& canonical_shapes() {
  static const std::array<Polygon, 3> shapes = [] {
    const float a = static_cast<float>(1.0 / std::sqrt(2.0));
    Polygon square(2, 4);
    square << -a, a, a, -a,
              -a, -a, a, a;
    Polygon ellipse = sample_closed_curve(64, [](double t) { return Eigen::Vector2d(std::cos(t), 0.5 * std::sin(t)); });
    // Classic heart curve, y flipped so the point is at the bottom of the image.
    Polygon heart = normalize_polygon(sample_closed_curve(96, [](double t) {
      const double s = std::sin(t);
      return Eigen::Vector2d(16.0 * s * s * s,
                             -(13.0 * std::cos(t) - 5.0 * std::cos(2 * t) - 2.0 * std::cos(3 * t) - std::cos(4 * t)));
    }), 1.0f);
    return std::array<Polygon, 3>{square, ellipse, heart};
  }();
  return shapes;
}

}  // namespace

at::Tensor render_dsprites(const at::Tensor& latents_classes) {
  check_dim(latents_classes, 2, "latents_classes");
  check_dtype(latents_classes, {at::kLong}, "latents_classes");
  VT_CHECK_ARG(latents_classes.size(1) == DSpritesGrid::kFactors, "latents_classes",
               "expected 6 columns (color, shape, scale, orientation, posX, posY), got ", latents_classes.size(1));
  for (int f = 0; f < DSpritesGrid::kFactors; ++f) {
    check_range(latents_classes.select(1, f), 0, DSpritesGrid::kSizes[f], "latents_classes");
  }
  const auto classes = latents_classes.contiguous();
  const int64_t n = classes.size(0);
  constexpr int S = DSpritesGrid::kImageSize;
  auto imgs = at::zeros({n, S, S}, at::kByte);
  const int64_t* cls = classes.data_ptr<int64_t>();
  uint8_t* out = imgs.data_ptr<uint8_t>();
  const auto& shapes = canonical_shapes();

  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    std::vector<float> coverage(S * S);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t* c = cls + i * DSpritesGrid::kFactors;
      const float scale = static_cast<float>(factor_value(2, c[2]));
      const float angle = static_cast<float>(factor_value(3, c[3]));
      const Eigen::Vector2f centre(kMargin + (S - 2 * kMargin) * static_cast<float>(factor_value(4, c[4])),
                                   kMargin + (S - 2 * kMargin) * static_cast<float>(factor_value(5, c[5])));
      const Eigen::Affine2f transform =
          Eigen::Translation2f(centre) * Eigen::Rotation2Df(angle) * Eigen::Scaling(scale * kRadiusAtScale1);
      std::fill(coverage.begin(), coverage.end(), 0.0f);
      rasterize_coverage(transform_polygon(shapes[c[1]], transform), S, S, /*subrows=*/1, coverage.data());
      uint8_t* img = out + i * S * S;
      for (int p = 0; p < S * S; ++p) img[p] = coverage[p] >= 0.5f ? 1 : 0;
    }
  });
  return imgs;
}

DSprites dsprites(const at::Tensor& indices, bool with_images) {
  auto [classes, values] = decode_grid(grid_rows(indices, DSpritesGrid::kCount), DSpritesGrid::kSizes, factor_value);
  DSprites result{at::Tensor(), values, classes};
  if (with_images) result.imgs = render_dsprites(classes);
  return result;
}

}  // namespace vaetransfer::data
