#include "vaetransfer/data/texture_shapes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "vaetransfer/data/grid.h"
#include "vaetransfer/data/shape_classes.h"

namespace vaetransfer::data {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr uint64_t kDomain = 0x7465787368617065ull;  // "texshape": this domain's streams
constexpr int S = static_cast<int>(kLabelledDomainSize);
constexpr int P = S * S;

// A two-colour texture: value(x, y) in [0, 1] blends colour a (0) into b (1).
struct Texture {
  int kind = 0;
  Eigen::Vector3d a, b;
  double cos_t = 1.0, sin_t = 0.0;  // orientation (grating, checkerboard, dots)
  double scale = 1.0;               // period, cell size, dot spacing or lattice cell (px)
  double phase = 0.0, radius = 0.0, ox = 0.0, oy = 0.0;
  int lattice_size = 0;
  std::vector<double> lattice;  // value noise: lattice_size² values in [0, 1]

  double value(double x, double y) const {
    const double u = cos_t * x + sin_t * y, v = -sin_t * x + cos_t * y;
    switch (kind) {
      case 0:
        return 0.5 + 0.5 * std::sin(2.0 * kPi * u / scale + phase);
      case 1: {
        const auto cu = static_cast<int64_t>(std::floor((u + ox) / scale));
        const auto cv = static_cast<int64_t>(std::floor((v + oy) / scale));
        return ((cu + cv) & 1) ? 1.0 : 0.0;
      }
      case 2: {
        double du = (u + ox) / scale, dv = (v + oy) / scale;
        du -= std::round(du);
        dv -= std::round(dv);
        return std::clamp(radius - scale * std::hypot(du, dv) + 0.5, 0.0, 1.0);
      }
      default: {
        const double gx = (x + ox) / scale, gy = (y + oy) / scale;
        const int ix = std::clamp(static_cast<int>(gx), 0, lattice_size - 2);
        const int iy = std::clamp(static_cast<int>(gy), 0, lattice_size - 2);
        double fx = gx - ix, fy = gy - iy;
        fx = fx * fx * (3.0 - 2.0 * fx);  // smoothstep
        fy = fy * fy * (3.0 - 2.0 * fy);
        const double* row0 = lattice.data() + iy * lattice_size + ix;
        const double* row1 = row0 + lattice_size;
        return (1.0 - fy) * ((1.0 - fx) * row0[0] + fx * row0[1]) + fy * ((1.0 - fx) * row1[0] + fx * row1[1]);
      }
    }
  }

  // Mean of value() over the 2×2 sub-samples of pixel (r, c).
  double pixel(int r, int c) const {
    return 0.25 * (value(c + 0.25, r + 0.25) + value(c + 0.75, r + 0.25) + value(c + 0.25, r + 0.75) +
                   value(c + 0.75, r + 0.75));
  }
};

// Parameters of a texture of `kind`: an orientation in [0, π), then per kind
// grating period 3–8 px and phase; checkerboard cell 2.5–5 px and offset; dots spacing 4–7 px,
// radius 0.2–0.35 of it and offset; value noise cell 4–8 px, offset and a lattice of U(0, 1).
Texture draw_texture(RowRng& rng, int kind, const Eigen::Vector3d& a, const Eigen::Vector3d& b) {
  Texture t;
  t.kind = kind;
  t.a = a;
  t.b = b;
  const double angle = rng.uniform(0.0, kPi);
  t.cos_t = std::cos(angle);
  t.sin_t = std::sin(angle);
  if (kind == 0) {
    t.scale = rng.uniform(3.0, 8.0);
    t.phase = rng.uniform(0.0, 2.0 * kPi);
  } else if (kind == 1) {
    t.scale = rng.uniform(2.5, 5.0);
    t.ox = rng.uniform(0.0, t.scale);
    t.oy = rng.uniform(0.0, t.scale);
  } else if (kind == 2) {
    t.scale = rng.uniform(4.0, 7.0);
    t.radius = t.scale * rng.uniform(0.2, 0.35);
    t.ox = rng.uniform(0.0, t.scale);
    t.oy = rng.uniform(0.0, t.scale);
  } else {
    t.scale = rng.uniform(4.0, 8.0);
    t.ox = rng.uniform(0.0, t.scale);
    t.oy = rng.uniform(0.0, t.scale);
    t.lattice_size = static_cast<int>((S + t.scale) / t.scale) + 2;
    t.lattice.resize(static_cast<size_t>(t.lattice_size) * t.lattice_size);
    for (auto& v : t.lattice) v = rng.uniform();
  }
  return t;
}

// Stroke coverage of the contours' outlines, `width` px wide: each pixel gets
// clamp(width/2 + 1/2 − d, 0, 1), d the distance from its centre to the nearest outline segment.
void outline_coverage(const Contours& placed, double width, double* ink) {
  std::array<double, P> dist;
  dist.fill(std::numeric_limits<double>::infinity());
  const double reach = 0.5 * width + 0.5;
  for (const auto& [contour, sign] : placed) {
    const auto k = contour.cols();
    for (Eigen::Index i = 0; i < k; ++i) {
      const Eigen::Vector2d p = contour.col(i), q = contour.col((i + 1) % k), e = q - p;
      const double len2 = e.squaredNorm();
      const int c0 = std::max(0, static_cast<int>(std::floor(std::min(p.x(), q.x()) - reach)));
      const int c1 = std::min(S - 1, static_cast<int>(std::floor(std::max(p.x(), q.x()) + reach)));
      const int r0 = std::max(0, static_cast<int>(std::floor(std::min(p.y(), q.y()) - reach)));
      const int r1 = std::min(S - 1, static_cast<int>(std::floor(std::max(p.y(), q.y()) + reach)));
      for (int r = r0; r <= r1; ++r)
        for (int c = c0; c <= c1; ++c) {
          const Eigen::Vector2d w(c + 0.5 - p.x(), r + 0.5 - p.y());
          const double t = len2 > 0.0 ? std::clamp(w.dot(e) / len2, 0.0, 1.0) : 0.0;
          dist[r * S + c] = std::min(dist[r * S + c], (w - t * e).norm());
        }
    }
  }
  for (int p = 0; p < P; ++p) ink[p] = std::clamp(reach - dist[p], 0.0, 1.0);
}

void write_rgb(const std::vector<double>& rgb, uint8_t* out) {
  for (size_t i = 0; i < rgb.size(); ++i)
    out[i] = static_cast<uint8_t>(std::lround(255.0 * std::clamp(rgb[i], 0.0, 1.0)));
}

// The row's image (uint8 [3, S, S]) and mask (uint8 [S, S]) after its pose and texture kinds.
void render(int label, const ShapePose& pose, int shape_kind, int background_kind, TextureShapesStyle style,
            RowRng& rng, uint8_t* image, uint8_t* mask) {
  const Contours placed = place_shape(label, pose);
  std::vector<double> cover(P, 0.0), rgb(3 * P);
  add_shape_coverage(placed, S, cover.data());
  for (int p = 0; p < P; ++p) {
    cover[p] = std::clamp(cover[p], 0.0, 1.0);
    mask[p] = static_cast<uint8_t>(std::lround(255.0 * cover[p]));
  }
  auto set = [&](int p, const Eigen::Vector3d& c) {
    for (int ch = 0; ch < 3; ++ch) rgb[ch * P + p] = c[ch];
  };
  if (style == TextureShapesStyle::kTextured) {
    const Eigen::Vector3d ba = rng.colour();
    const Eigen::Vector3d bb = rng.colour();
    const Texture background = draw_texture(rng, background_kind, ba, bb);
    const Eigen::Vector3d mean = 0.5 * (ba + bb);
    const Eigen::Vector3d sa = contrasting_colour(rng, mean, 0.4);
    const Eigen::Vector3d sb = contrasting_colour(rng, mean, 0.4);
    const Texture shape = draw_texture(rng, shape_kind, sa, sb);
    const double sigma = rng.uniform(0.0, 0.03);
    for (int r = 0; r < S; ++r)
      for (int c = 0; c < S; ++c) {
        const int p = r * S + c;
        const double alpha = cover[p];
        Eigen::Vector3d colour = Eigen::Vector3d::Zero();
        if (alpha < 1.0) {
          const double t = background.pixel(r, c);
          colour += (1.0 - alpha) * ((1.0 - t) * ba + t * bb);
        }
        if (alpha > 0.0) {
          const double t = shape.pixel(r, c);
          colour += alpha * ((1.0 - t) * sa + t * sb);
        }
        set(p, colour);
      }
    if (sigma > 0.0)
      for (auto& v : rgb) v += sigma * rng.normal();
  } else {
    const Eigen::Vector3d back = rng.colour();
    const Eigen::Vector3d front = contrasting_colour(rng, back, 0.4);
    if (style == TextureShapesStyle::kEdges) {
      const double width = rng.uniform(1.0, 1.5);
      outline_coverage(placed, width, cover.data());
    }
    for (int p = 0; p < P; ++p) set(p, (1.0 - cover[p]) * back + cover[p] * front);
  }
  write_rgb(rgb, image);
}

}  // namespace

TextureShapeRows texture_shapes(const at::Tensor& indices, int64_t seed, TextureShapesStyle style, bool with_images) {
  VT_CHECK_ARG(seed >= 0, "seed", "expected a non-negative integer, got ", seed);
  const at::Tensor idx = grid_rows(indices, kTextureShapesCount);
  const int64_t n = idx.size(0);
  constexpr int kFactors = 3;
  TextureShapeRows out;
  out.factors = at::empty({n, kFactors}, at::kLong);
  if (with_images) {
    out.images = at::empty({n, 3, S, S}, at::kByte);
    out.masks = at::empty({n, S, S}, at::kByte);
  }
  const int64_t* ip = idx.data_ptr<int64_t>();
  int64_t* fp = out.factors.data_ptr<int64_t>();
  uint8_t* imgp = with_images ? out.images.data_ptr<uint8_t>() : nullptr;
  uint8_t* maskp = with_images ? out.masks.data_ptr<uint8_t>() : nullptr;
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      RowRng rng(seed, ip[r], kDomain);
      const int label = static_cast<int>(ip[r] % kDomainClasses);
      // Pose: rotation, aspect e^±0.2, radius 7–11 px, centre within ±4 px of the image centre.
      const ShapePose pose = draw_shape_pose(rng, S, 7.0, 11.0, 4.0, 0.2);
      const int shape_kind = rng.integer(kTextureKinds);
      const int background_kind = (shape_kind + 1 + rng.integer(kTextureKinds - 1)) % kTextureKinds;
      fp[r * kFactors] = label;
      fp[r * kFactors + 1] = shape_kind;
      fp[r * kFactors + 2] = background_kind;
      if (with_images) render(label, pose, shape_kind, background_kind, style, rng, imgp + r * 3 * P, maskp + r * P);
    }
  });
  return out;
}

}  // namespace vaetransfer::data
