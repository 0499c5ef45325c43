#include "vaetransfer/data/raster.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace vaetransfer::data {

Polygon transform_polygon(const Polygon& canonical, const Eigen::Affine2f& transform) {
  return (transform.linear() * canonical).colwise() + transform.translation();
}

Polygon normalize_polygon(const Polygon& poly, float radius) {
  const Eigen::Vector2f centre = 0.5f * (poly.rowwise().minCoeff() + poly.rowwise().maxCoeff());
  Polygon centred = poly.colwise() - centre;
  const float max_distance = centred.colwise().norm().maxCoeff();
  return centred * (radius / max_distance);
}

void rasterize_coverage(const Polygon& polygon, int height, int width, int subrows, float* coverage, float value) {
  const int k = static_cast<int>(polygon.cols());
  if (k < 3) return;
  const float ymin = std::max(0.0f, polygon.row(1).minCoeff());
  const float ymax = std::min(static_cast<float>(height), polygon.row(1).maxCoeff());
  const int row_begin = static_cast<int>(std::floor(ymin));
  const int row_end = static_cast<int>(std::ceil(ymax));
  const float weight = 1.0f / static_cast<float>(subrows);
  const float amount = weight * value;

  // Crossings of one scanline; a simple polygon with K edges has at most K.
  constexpr int kMaxStack = 256;
  float stack_buffer[kMaxStack];
  std::vector<float> heap_buffer;
  float* xs = stack_buffer;
  if (k > kMaxStack) {
    heap_buffer.resize(k);
    xs = heap_buffer.data();
  }

  for (int row = row_begin; row < row_end; ++row) {
    float* out = coverage + static_cast<int64_t>(row) * width;
    for (int s = 0; s < subrows; ++s) {
      const float y = static_cast<float>(row) + (static_cast<float>(s) + 0.5f) * weight;
      int n = 0;
      for (int i = 0, j = k - 1; i < k; j = i++) {
        const float yi = polygon(1, i), yj = polygon(1, j);
        // Half-open in y so a vertex on the scanline is counted once.
        if ((yi <= y) != (yj <= y)) {
          const float xi = polygon(0, i), xj = polygon(0, j);
          xs[n++] = xi + (y - yi) * (xj - xi) / (yj - yi);
        }
      }
      std::sort(xs, xs + n);
      for (int p = 0; p + 1 < n; p += 2) {
        const float x0 = std::max(0.0f, xs[p]);
        const float x1 = std::min(static_cast<float>(width), xs[p + 1]);
        if (x1 <= x0) continue;
        const int c0 = static_cast<int>(std::floor(x0));
        const int c1 = std::min(width, static_cast<int>(std::ceil(x1)));
        for (int c = c0; c < c1; ++c) {
          const float overlap = std::min(x1, c + 1.0f) - std::max(x0, static_cast<float>(c));
          out[c] += amount * overlap;
        }
      }
    }
  }
}

}  // namespace vaetransfer::data

namespace vaetransfer::data {

void rasterize_area(const Eigen::Matrix2Xd& polygon, int height, int width, double* coverage) {
  const int k = static_cast<int>(polygon.cols());
  if (k < 3 || height <= 0 || width <= 0) return;
  // Signed differences along each row (one spare cell on the right), summed at the end.
  std::vector<double> diff(static_cast<size_t>(height) * (width + 1), 0.0);
  std::vector<double> cuts;
  for (int i = 0; i < k; ++i) {
    const Eigen::Vector2d p = polygon.col(i), q = polygon.col((i + 1) % k);
    const double dy_total = q.y() - p.y();
    if (dy_total == 0.0) continue;  // horizontal edges add no area
    // Parameters t in (0, 1) where the edge crosses an integer x or y line.
    cuts.assign({0.0, 1.0});
    for (int axis = 0; axis < 2; ++axis) {
      const double a = p[axis], b = q[axis];
      if (a == b) continue;
      const double lo = std::min(a, b), hi = std::max(a, b);
      for (double v = std::floor(lo) + 1.0; v < hi; v += 1.0) cuts.push_back((v - a) / (b - a));
    }
    std::sort(cuts.begin(), cuts.end());
    for (size_t j = 0; j + 1 < cuts.size(); ++j) {
      const double t0 = cuts[j], t1 = cuts[j + 1];
      if (t1 <= t0) continue;
      const Eigen::Vector2d a = p + t0 * (q - p), b = p + t1 * (q - p);
      const double dy = b.y() - a.y();  // signed: the winding direction
      const double ym = 0.5 * (a.y() + b.y()), xm = 0.5 * (a.x() + b.x());
      const int row = static_cast<int>(std::floor(ym));
      if (row < 0 || row >= height) continue;
      double* line = diff.data() + static_cast<size_t>(row) * (width + 1);
      const double cell = std::floor(xm);
      if (cell < 0.0) {
        line[0] += dy;  // left of the image: the whole row right of it is inside
      } else if (cell < width) {
        const int c = static_cast<int>(cell);
        line[c] += dy * (cell + 1.0 - xm);
        line[c + 1] += dy * (xm - cell);
      }  // right of the image: nothing inside it
    }
  }
  for (int r = 0; r < height; ++r) {
    const double* line = diff.data() + static_cast<size_t>(r) * (width + 1);
    double acc = 0.0;
    for (int c = 0; c < width; ++c) {
      acc += line[c];
      coverage[static_cast<int64_t>(r) * width + c] += std::min(std::abs(acc), 1.0);
    }
  }
}

}  // namespace vaetransfer::data
