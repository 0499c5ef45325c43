#include "vaetransfer/data/tetrominoes.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/counter_rng.h"
#include "vaetransfer/data/grid.h"
#include "vaetransfer/data/raster.h"

namespace vaetransfer::data {
namespace {

using G = TetrominoesGrid;
constexpr double kPi = 3.14159265358979323846;

// The generator's J template, 2 blocks wide and 3 high (right column plus the bottom-left
// block), in block units (x right, y down) about its bounding-box centre (1, 1.5):
//   . X
//   . X
//   X X
Eigen::Matrix2Xd template_j() {
  Eigen::Matrix2Xd p(2, 6);
  p << 1, 2, 2, 0, 0, 1,
       0, 0, 3, 3, 2, 2;
  return p.colwise() - Eigen::Vector2d(1.0, 1.5);
}

// HSV(360·hue, 1, 1) as RGB; the value channel (coverage) multiplies it.
Eigen::Vector3d hue_to_rgb(double hue) {
  const double h6 = hue * 6.0;
  const int sector = static_cast<int>(std::floor(h6)) % 6;
  const double f = h6 - std::floor(h6);
  switch (sector) {
    case 0: return {1.0, f, 0.0};
    case 1: return {1.0 - f, 1.0, 0.0};
    case 2: return {0.0, 1.0, f};
    case 3: return {0.0, 1.0 - f, 1.0};
    case 4: return {f, 0.0, 1.0};
    default: return {1.0, 0.0, 1.0 - f};
  }
}

void check_factors(const at::Tensor& f64) {
  auto col_in = [&](int c, double lo, double hi) {
    auto col = f64.select(1, c);
    return col.min().item<double>() >= lo && col.max().item<double>() <= hi;
  };
  VT_CHECK_ARG(col_in(1, 0.0, 1.0), "factors", "expected hue (column 1) in [0, 1]");
  VT_CHECK_ARG(col_in(2, 1e-3, 8.0), "factors", "expected scale (column 2, block side in pixels) in (0, 8]");
  VT_CHECK_ARG(col_in(3, 0.0, G::kImageSize - 1.0) && col_in(4, 0.0, G::kImageSize - 1.0), "factors",
               "expected x, y (columns 3, 4; the centre is at x + 0.5, y + 0.5) in [0, ", G::kImageSize - 1, "]");
}

}  // namespace

at::Tensor render_tetrominoes(const at::Tensor& factors) {
  check_dim(factors, 2, "factors");
  check_floating(factors, "factors");
  check_finite(factors, "factors");
  VT_CHECK_ARG(factors.size(1) == G::kFactors, "factors",
               "expected 5 columns (angle, hue, scale, x, y), got ", factors.size(1));
  const auto f64 = factors.to(at::kDouble).contiguous();
  const int64_t n = f64.size(0);
  if (n > 0) check_factors(f64);
  constexpr int S = G::kImageSize;
  auto images = at::empty({n, 3, S, S}, at::kByte);
  const double* fp = f64.data_ptr<double>();
  uint8_t* imgp = images.data_ptr<uint8_t>();
  const Eigen::Matrix2Xd shape = template_j();

  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    std::vector<double> coverage(S * S);
    for (int64_t r = begin; r < end; ++r) {
      const double* f = fp + r * G::kFactors;
      // The generator's affine map: scale, then [[cos, sin], [−sin, cos]] in image coordinates
      // (y down: a positive angle turns the shape counter-clockwise on screen), then the
      // centre to (x + 0.5, y + 0.5); pixel (row, col) covers [col, col+1) × [row, row+1).
      const double a = f[0] * kPi / 180.0, c = std::cos(a) * f[2], s = std::sin(a) * f[2];
      Eigen::Matrix2d m;
      m << c, s, -s, c;
      const Eigen::Matrix2Xd placed = (m * shape).colwise() + Eigen::Vector2d(f[3] + 0.5, f[4] + 0.5);
      std::fill(coverage.begin(), coverage.end(), 0.0);
      rasterize_area(placed, S, S, coverage.data());
      const Eigen::Vector3d rgb = hue_to_rgb(f[1]);
      uint8_t* img = imgp + r * 3 * S * S;
      for (int ch = 0; ch < 3; ++ch) {
        for (int p = 0; p < S * S; ++p) {
          img[ch * S * S + p] = static_cast<uint8_t>(std::lround(255.0 * coverage[p] * rgb[ch]));
        }
      }
    }
  });
  return images;
}

Tetrominoes tetrominoes(const at::Tensor& indices, int64_t seed, bool with_images) {
  VT_CHECK_ARG(seed >= 0, "seed", "expected a non-negative integer, got ", seed);
  const at::Tensor idx = grid_rows(indices, G::kCount);
  Tetrominoes out;
  // Stratified design: row i is grid cell i; value = low + (bin + u)·width, u ~ U[0, 1) from the
  // counter-based stream (seed, 5i + f), so row i never depends on which other rows are drawn.
  const uint64_t stream = static_cast<uint64_t>(seed);
  const int64_t* ip = idx.data_ptr<int64_t>();
  std::tie(out.bins, out.factors) = decode_grid(idx, G::kSizes, [](int, int64_t c) { return static_cast<double>(c); });
  double* fp = out.factors.data_ptr<double>();
  const int64_t n = idx.size(0);
  at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int f = 0; f < G::kFactors; ++f) {
        const double u = counter_uniform(stream, static_cast<uint64_t>(ip[r]) * G::kFactors + f);
        const double width = (G::kHigh[f] - G::kLow[f]) / static_cast<double>(G::kSizes[f]);
        fp[r * G::kFactors + f] = G::kLow[f] + (fp[r * G::kFactors + f] + u) * width;
      }
    }
  });
  if (with_images) out.images = render_tetrominoes(out.factors);
  return out;
}

Split tetrominoes_split(const std::string& kind, double ratio, int64_t seed, int64_t data_seed) {
  VT_CHECK_ARG(kind == "random" || kind == "checkerboard" || kind == "cv" || kind == "cd", "kind",
               "expected 'random', 'checkerboard', 'cv' or 'cd', got '", kind, "'");
  VT_CHECK_ARG(seed >= 0, "seed", "expected a non-negative integer, got ", seed);
  const bool takes_ratio = kind == "cv" || kind == "cd";
  if (takes_ratio) {
    VT_CHECK_ARG(std::isfinite(ratio) && ratio > 0.0 && ratio < 1.0, "ratio", "expected a fraction in (0, 1) for '",
                 kind, "', got ", ratio);
  }
  const int64_t n = G::kCount;
  at::Tensor train_mask;
  if (kind == "checkerboard") {
    // Half index of every factor; the generator widens each range by 1e-9 so the top value
    // falls in the upper half.
    const auto f = tetrominoes({}, data_seed, false).factors;
    auto parity = at::zeros({n}, at::kLong);
    for (int c = 0; c < G::kFactors; ++c) {
      const double half = (G::kHigh[c] + 1e-9 - G::kLow[c]) / 2.0;
      parity += at::floor((f.select(1, c) - G::kLow[c]) / half).to(at::kLong);
    }
    train_mask = parity.remainder(2) == 0;
  } else {
    const double train_fraction = kind == "cv" ? ratio : 0.5;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
    const auto perm = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
    const int64_t cut = static_cast<int64_t>(std::llround(train_fraction * static_cast<double>(n)));
    VT_CHECK_ARG(cut >= 1 && cut < n, "ratio", "gives ", cut, " training rows of ", n);
    train_mask = at::zeros({n}, at::kBool);
    train_mask.index_fill_(0, perm.narrow(0, 0, cut), true);
  }
  at::Tensor keep = at::ones({n}, at::kBool);
  if (kind == "cd") {
    const auto f = tetrominoes({}, data_seed, false).factors;
    const double shrink = std::pow(ratio, 1.0 / G::kFactors);
    for (int c = 0; c < G::kFactors; ++c) {
      const double centre = 0.5 * (G::kLow[c] + G::kHigh[c]), half = 0.5 * shrink * (G::kHigh[c] - G::kLow[c]);
      keep &= (f.select(1, c) - centre).abs() <= half;
    }
  }
  Split s;
  s.train = (train_mask & keep).nonzero().squeeze(1);
  s.test = ((~train_mask) & keep).nonzero().squeeze(1);
  return s;
}

}  // namespace vaetransfer::data
