#include "vaetransfer/data/shape_classes.h"

#include <algorithm>
#include <cmath>

#include "vaetransfer/data/raster.h"

namespace vaetransfer::data {
namespace {

constexpr double kPi = 3.14159265358979323846;

Eigen::Matrix2Xd polygon(std::initializer_list<double> xy) {
  const std::vector<double> v(xy);
  Eigen::Matrix2Xd p(2, v.size() / 2);
  for (size_t k = 0; k < v.size() / 2; ++k) p.col(k) << v[2 * k], v[2 * k + 1];
  return p;
}

template <class F>
Eigen::Matrix2Xd curve(int n, double t0, double t1, F f) {  // n points of f(t), t from t0 to t1 inclusive
  Eigen::Matrix2Xd p(2, n);
  for (int k = 0; k < n; ++k) p.col(k) = f(t0 + (t1 - t0) * k / (n - 1));
  return p;
}

Eigen::Matrix2Xd circle(double r, double cx = 0.0, int n = 48) {
  return curve(n, 0.0, 2.0 * kPi * (n - 1) / n, [&](double t) { return Eigen::Vector2d(cx + r * std::cos(t), r * std::sin(t)); });
}

Eigen::Matrix2Xd regular_star(int points, double inner) {
  Eigen::Matrix2Xd p(2, 2 * points);
  for (int k = 0; k < 2 * points; ++k) {
    const double t = -kPi / 2 + kPi * k / points, r = k % 2 ? inner : 1.0;
    p.col(k) << r * std::cos(t), r * std::sin(t);
  }
  return p;
}

// The crescent: the unit disk less the disk of radius 0.85 about (0.5, 0). The circles meet at
// x = 0.5275, y = ±0.8496; the outline runs along the unit circle through its left side, then
// back along the inner circle's left side.
Eigen::Matrix2Xd crescent() {
  const double xi = (1.0 - 0.85 * 0.85 + 0.25) / 1.0, yi = std::sqrt(1.0 - xi * xi);
  const double outer0 = std::atan2(yi, xi), inner0 = std::atan2(-yi, xi - 0.5);
  Eigen::Matrix2Xd a = curve(32, outer0, 2.0 * kPi - outer0, [](double t) { return Eigen::Vector2d(std::cos(t), std::sin(t)); });
  const double inner_span = 2.0 * kPi - 2.0 * std::abs(inner0);  // the inner circle's arc through its left side
  Eigen::Matrix2Xd b = curve(32, inner0, inner0 - inner_span,
                             [](double t) { return Eigen::Vector2d(0.5 + 0.85 * std::cos(t), 0.85 * std::sin(t)); });
  Eigen::Matrix2Xd p(2, a.cols() + b.cols());
  p << a, b;
  return p;
}

Eigen::Matrix2Xd heart() {  // the classical heart curve, scaled to radius about 1, point down (y down)
  return curve(64, 0.0, 2.0 * kPi * 63 / 64, [](double t) {
    const double x = 16 * std::pow(std::sin(t), 3), y = 13 * std::cos(t) - 5 * std::cos(2 * t) - 2 * std::cos(3 * t) - std::cos(4 * t);
    return Eigen::Vector2d(x / 17.0, -(y + 2.5) / 17.0);
  });
}

const std::vector<Contours>& shapes_table() {
  static const std::vector<Contours> all = {
      {{circle(1.0), 1.0}},                                                           // 0 disk
      {{polygon({-0.8, -0.8, 0.8, -0.8, 0.8, 0.8, -0.8, 0.8}), 1.0}},                 // 1 square
      {{polygon({0.0, -1.0, 0.866, 0.5, -0.866, 0.5}), 1.0}},                         // 2 triangle
      {{regular_star(5, 0.45), 1.0}},                                                 // 3 star
      {{polygon({-0.3, -1, 0.3, -1, 0.3, -0.3, 1, -0.3, 1, 0.3, 0.3, 0.3, 0.3, 1, -0.3, 1, -0.3, 0.3, -1, 0.3,
                 -1, -0.3, -0.3, -0.3}), 1.0}},                                       // 4 cross
      {{circle(1.0), 1.0}, {circle(0.55), -1.0}},                                     // 5 ring
      {{crescent(), 1.0}},                                                            // 6 crescent
      {{polygon({-1, -0.25, 0.2, -0.25, 0.2, -0.7, 1, 0, 0.2, 0.7, 0.2, 0.25, -1, 0.25}), 1.0}},  // 7 arrow
      {{heart(), 1.0}},                                                               // 8 heart
      {{polygon({-0.8, -1, 0.8, -1, 0.12, 0, 0.8, 1, -0.8, 1, -0.12, 0}), 1.0}},      // 9 hourglass
  };
  return all;
}

}  // namespace

const std::vector<Contours>& shape_class_contours() { return shapes_table(); }

ShapePose draw_shape_pose(RowRng& rng, int size, double min_radius, double max_radius, double max_shift,
                          double max_log_aspect) {
  ShapePose pose;
  const double angle = rng.uniform(0.0, 2.0 * kPi);
  pose.radius = rng.uniform(min_radius, max_radius);
  const double stretch = std::exp(rng.uniform(-max_log_aspect, max_log_aspect));
  const double cy = size / 2.0 + rng.uniform(-max_shift, max_shift);  // y before x (object_shapes' order)
  const double cx = size / 2.0 + rng.uniform(-max_shift, max_shift);
  pose.centre << cx, cy;
  Eigen::Matrix2d m;
  m << std::cos(angle), -std::sin(angle), std::sin(angle), std::cos(angle);
  pose.linear = m * Eigen::DiagonalMatrix<double, 2>(pose.radius * stretch, pose.radius / stretch);
  return pose;
}

Contours place_shape(int label, const ShapePose& pose) {
  Contours placed;
  for (const auto& [contour, sign] : shapes_table()[label]) placed.emplace_back((pose.linear * contour).colwise() + pose.centre, sign);
  return placed;
}

void add_shape_coverage(const Contours& placed, int size, double* cover) {
  std::vector<double> cut;
  for (const auto& [contour, sign] : placed) {
    if (sign > 0) {
      rasterize_area(contour, size, size, cover);
    } else {
      cut.assign(static_cast<size_t>(size) * size, 0.0);
      rasterize_area(contour, size, size, cut.data());
      for (size_t p = 0; p < cut.size(); ++p) cover[p] -= cut[p];
    }
  }
}

}  // namespace vaetransfer::data
