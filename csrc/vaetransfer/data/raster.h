// Polygon rasterisation shared by the procedural data sets.
#pragma once
#include <Eigen/Core>
#include <Eigen/Geometry>

namespace vaetransfer::data {

// A polygon as a 2×K matrix of vertices (x right, y down, pixel units; pixel (r, c)
// covers [c, c+1) × [r, r+1)).
using Polygon = Eigen::Matrix2Xf;

// Maps the canonical polygon by `transform` (Eigen affine: translate · rotate · scale).
Polygon transform_polygon(const Polygon& canonical, const Eigen::Affine2f& transform);

// Adds the even-odd-rule coverage of `polygon` to `coverage` (row-major height×width,
// values in [0, 1]): `subrows` horizontal scanlines per pixel row, each contributing
// the exact horizontal overlap of its inside spans with every pixel. subrows = 1 is
// centre-row sampling; 4 gives smooth anti-aliased edges. Each covered area adds
// `value` × its coverage (1 by default), so faces that tile a region without overlap
// can be painted with their own shade into one buffer.
void rasterize_coverage(const Polygon& polygon, int height, int width, int subrows, float* coverage,
                        float value = 1.0f);

// Adds the exact area coverage of `polygon` (non-zero winding; either orientation) to
// `coverage` (row-major height×width): pixel (r, c) gets the area of the polygon inside
// [c, c+1) × [r, r+1), clipped to the image. Each edge is cut where it crosses an integer x
// or y; a piece inside cell (r, k) with height dy and mean x x̄ adds dy·(k+1−x̄) to cell k and
// dy·(x̄−k) to cell k+1 of row r, and a running sum along the row turns these differences into
// the signed area right of the edges. Exact up to double rounding, O(perimeter) per polygon.
void rasterize_area(const Eigen::Matrix2Xd& polygon, int height, int width, double* coverage);

// A regular sampling of a closed parametric curve: vertex k at t = 2πk/K.
template <typename Curve>
Polygon sample_closed_curve(int vertices, Curve curve) {
  Polygon poly(2, vertices);
  for (int k = 0; k < vertices; ++k) {
    const double t = 2.0 * 3.14159265358979323846 * k / vertices;
    poly.col(k) = curve(t).template cast<float>();
  }
  return poly;
}

// Recentres a polygon on its bounding-box centre and scales its largest vertex
// distance from that centre to `radius`.
Polygon normalize_polygon(const Polygon& poly, float radius);

}  // namespace vaetransfer::data
