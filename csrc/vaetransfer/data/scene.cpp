#include "vaetransfer/data/scene.h"

#include <algorithm>
#include <cmath>

#include "vaetransfer/data/raster.h"

namespace vaetransfer::data {
namespace {
constexpr double kPi = 3.14159265358979323846;
}

double RowRng::normal() {
  const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

Eigen::Vector3d contrasting_colour(RowRng& rng, const Eigen::Vector3d& avoid, double min_distance) {
  Eigen::Vector3d c = rng.colour();
  for (int i = 0; i < 16 && (c - avoid).norm() < min_distance; ++i) c = rng.colour();
  return c;
}

Eigen::Vector3d Canvas::fill_background(int kind, RowRng& rng) {
  const int S = size_, P = S * S;
  const Eigen::Vector3d a = rng.colour(), b = rng.colour();
  auto set = [&](int p, const Eigen::Vector3d& c) {
    for (int ch = 0; ch < 3; ++ch) rgb_[ch * P + p] = c[ch];
  };
  if (kind == 0 || kind == 1) {
    const double angle = rng.uniform(0.0, 2.0 * kPi), dx = std::cos(angle), dy = std::sin(angle);
    const double period = rng.uniform(3.0, 12.0), phase = rng.uniform(0.0, 2.0 * kPi);
    for (int r = 0; r < S; ++r)
      for (int c = 0; c < S; ++c) {
        const double u = ((c + 0.5) * dx + (r + 0.5) * dy) / S;  // in [-√2, √2]
        const double t = kind == 0 ? std::clamp(0.5 + u / 1.5, 0.0, 1.0)
                                   : 0.5 + 0.5 * std::sin(2.0 * kPi * u * S / period + phase);
        set(r * S + c, (1.0 - t) * a + t * b);
      }
  } else if (kind == 2) {
    constexpr int L = 5;  // lattice of random colours, bilinearly interpolated
    std::array<Eigen::Vector3d, L * L> lattice;
    for (auto& v : lattice) v = (rng.uniform() < 0.5 ? a : b) * 0.6 + 0.4 * rng.colour();
    for (int r = 0; r < S; ++r)
      for (int c = 0; c < S; ++c) {
        const double gy = (r + 0.5) / S * (L - 1), gx = (c + 0.5) / S * (L - 1);
        const int y0 = std::min(static_cast<int>(gy), L - 2), x0 = std::min(static_cast<int>(gx), L - 2);
        const double fy = gy - y0, fx = gx - x0;
        set(r * S + c, (1 - fy) * ((1 - fx) * lattice[y0 * L + x0] + fx * lattice[y0 * L + x0 + 1]) +
                           fy * ((1 - fx) * lattice[(y0 + 1) * L + x0] + fx * lattice[(y0 + 1) * L + x0 + 1]));
      }
  } else {
    for (int p = 0; p < P; ++p) set(p, a);
    const int pieces = 2 + rng.integer(3);
    for (int i = 0; i < pieces; ++i)
      paint_fragment(rng, rng.uniform(0.0, S), rng.uniform(0.0, S), rng.uniform(2.0, 6.0), rng.colour());
  }
  Eigen::Vector3d mean = Eigen::Vector3d::Zero();
  for (int ch = 0; ch < 3; ++ch) {
    for (int p = 0; p < P; ++p) mean[ch] += rgb_[ch * P + p];
    mean[ch] /= P;
  }
  return mean;
}

double* Canvas::clear_coverage() {
  std::fill(cover_.begin(), cover_.end(), 0.0);
  return cover_.data();
}

void Canvas::paint(const Eigen::Vector3d& colour) { paint_striped(colour, 0.0, 1.0, 0.0, 0.0); }

void Canvas::paint_striped(const Eigen::Vector3d& colour, double angle, double period, double depth, double phase) {
  const int S = size_, P = S * S;
  const double dx = std::cos(angle), dy = std::sin(angle);
  for (int r = 0; r < S; ++r)
    for (int c = 0; c < S; ++c) {
      const int p = r * S + c;
      const double alpha = std::clamp(cover_[p], 0.0, 1.0);
      if (alpha <= 0.0) continue;
      const double shade =
          depth > 0.0 ? 1.0 - depth * 0.5 * (1.0 + std::sin(2.0 * kPi * ((c + 0.5) * dx + (r + 0.5) * dy) / period + phase))
                      : 1.0;
      for (int ch = 0; ch < 3; ++ch) rgb_[ch * P + p] = (1.0 - alpha) * rgb_[ch * P + p] + alpha * colour[ch] * shade;
    }
}

void Canvas::paint_fragment(RowRng& rng, double cx, double cy, double r, const Eigen::Vector3d& colour) {
  const int k = 3 + rng.integer(2);
  Eigen::Matrix2Xd poly(2, k);
  const double start = rng.uniform(0.0, 2.0 * kPi);
  for (int i = 0; i < k; ++i) {  // increasing angles: a simple (star-shaped) polygon
    const double t = start + 2.0 * kPi * (i + rng.uniform(0.1, 0.9)) / k, rr = r * rng.uniform(0.5, 1.0);
    poly.col(i) << cx + rr * std::cos(t), cy + rr * std::sin(t);
  }
  rasterize_area(poly, size_, size_, clear_coverage());
  paint(colour);
}

void Canvas::add_noise(double sigma, RowRng& rng) {
  if (sigma <= 0.0) return;
  for (auto& v : rgb_) v += sigma * rng.normal();
}

void Canvas::write(uint8_t* out) const {
  for (size_t i = 0; i < rgb_.size(); ++i)
    out[i] = static_cast<uint8_t>(std::lround(255.0 * std::clamp(rgb_[i], 0.0, 1.0)));
}

}  // namespace vaetransfer::data
