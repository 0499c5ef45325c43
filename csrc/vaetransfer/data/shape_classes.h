// The 10 shape classes shared by the labelled shape domains (object_shapes, texture_shapes): disk,
// square, triangle, star, cross, ring, crescent, arrow, heart, hourglass as contours about the
// origin (radius about 1), their random pose and their exact-area rasterisation.
#pragma once
#include <Eigen/Core>

#include <utility>
#include <vector>

#include "vaetransfer/data/scene.h"

namespace vaetransfer::data {

// A shape: closed contours (vertices 2×K) that add (+1) or cut out (−1) area; cut-outs lie
// inside an added contour.
using Contours = std::vector<std::pair<Eigen::Matrix2Xd, double>>;

// The contours of class 0..9, in the order above (y down).
const std::vector<Contours>& shape_class_contours();

// Where a shape sits: image point = linear · contour point + centre.
struct ShapePose {
  Eigen::Matrix2d linear;  // rotation · diag(radius · stretch, radius / stretch)
  Eigen::Vector2d centre;  // pixel units (x right, y down)
  double radius;
};

// Five draws, in this order: angle U(0, 2π), radius U(min_radius, max_radius) px, log-stretch
// U(−max_log_aspect, max_log_aspect), then the centre's y and x, each size/2 + U(−max_shift, max_shift).
ShapePose draw_shape_pose(RowRng& rng, int size, double min_radius, double max_radius, double max_shift,
                          double max_log_aspect);

// The contours of class `label` placed by `pose` (image coordinates).
Contours place_shape(int label, const ShapePose& pose);

// Adds the exact area coverage of placed contours to `cover` (row-major size×size): added
// contours add their coverage, cut-outs subtract theirs.
void add_shape_coverage(const Contours& placed, int size, double* cover);

}  // namespace vaetransfer::data
