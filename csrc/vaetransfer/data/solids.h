// Solids: 64×64 greyscale renders of convex 3-D solids on a fixed factor grid, a
// procedural stand-in for the Symsol / SmallNORB domains of "How good are variational
// autoencoders at transfer learning?" (§4.2): it shares position, scale and rotation
// with dSprites but not shape.
//
// Each solid is a triangle mesh inscribed in the unit sphere (the shape's vertical axis
// is y). A render rotates it by the azimuth (about the vertical axis) and then by the
// elevation (the camera raised above the horizon, looking down), projects it
// orthographically along the view axis, culls the back faces and fills each front
// triangle with its own shade (Lambert: ambient + diffuse · max(0, n·l) with the face
// normal n and a directional light l fixed in the camera frame). The front faces of a
// convex solid tile its silhouette, so exact horizontal coverage on 8 scanlines per
// pixel row anti-aliases every edge without a depth buffer.
#pragma once
#include <ATen/ATen.h>

#include <array>

namespace vaetransfer::data {

struct SolidsGrid {
  static constexpr int kImageSize = 64;
  static constexpr int kFactors = 7;
  static constexpr int kShapes = 6;  // tetrahedron, cube, octahedron, icosahedron, cone, cylinder
  // shape, azimuth, elevation, light, scale, posX, posY — posY varies fastest.
  static constexpr std::array<int64_t, kFactors> kSizes = {6, 12, 4, 4, 4, 8, 8};
  static constexpr int64_t kCount = 6LL * 12 * 4 * 4 * 4 * 8 * 8;  // 294,912
  // Geometry (pixels): a solid of scale s has its circumscribed sphere of radius
  // s·kRadiusAtScale1 projected around a centre in [kMargin, 64 − kMargin]², so no
  // pose of any solid leaves the image.
  static constexpr float kRadiusAtScale1 = 11.0f;
  static constexpr float kMargin = 12.0f;
  // Lighting: the light is kLightTilt radians off the view axis (towards the viewer),
  // at the light factor's angle in the image plane (0 = from the right, π/2 = from above).
  static constexpr double kLightTilt = 3.14159265358979323846 / 4.0;
  static constexpr float kAmbient = 0.25f;
};

enum class SolidsShading {
  kLambert,  // per-face Lambert shade (default)
  kFlat,     // every visible face at full intensity: the silhouette only (the light factor has no effect)
};

struct Solids {
  at::Tensor imgs;             // uint8 [N, 64, 64], 0..255 (undefined when not requested)
  at::Tensor latents_values;   // float64 [N, 7]
  at::Tensor latents_classes;  // int64 [N, 7]
};

// Value of grid class `cls` of factor `factor` (radians for the angles, fraction of the
// admissible centre range for posX/posY, the shape's class index for shape).
double solids_factor_value(int factor, int64_t cls);

// Rows `indices` (int64 [N], each in [0, kCount)) of the grid, or the whole grid when
// `indices` is undefined. Images are rendered in parallel; row i depends only on i.
Solids solids(const at::Tensor& indices, bool with_images, SolidsShading shading);

// Renders arbitrary factor rows (float64 [N, 7], the columns of Solids::latents_values):
// shape an integer class in [0, 6), any finite angles, scale in (0, 1], posX/posY in [0, 1].
at::Tensor render_solids(const at::Tensor& latents_values, SolidsShading shading);

}  // namespace vaetransfer::data
