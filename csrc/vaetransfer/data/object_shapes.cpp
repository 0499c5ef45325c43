#include "vaetransfer/data/object_shapes.h"

#include <cmath>

#include "vaetransfer/data/shape_classes.h"

namespace vaetransfer::data {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr uint64_t kDomain = 0x6F626A656374ull;  // "object": this domain's streams

void render(int label, int background, RowRng& rng, uint8_t* out) {
  constexpr int S = kLabelledDomainSize;
  Canvas canvas(S);
  const Eigen::Vector3d mean = canvas.fill_background(background, rng);
  const Eigen::Vector3d colour = contrasting_colour(rng, mean, 0.35);
  // Pose: rotation, anisotropic scale (aspect e^±0.2), radius 7–13 px, centre within ±5 px.
  const ShapePose pose = draw_shape_pose(rng, S, 7.0, 13.0, 5.0, 0.2);
  const double radius = pose.radius;
  const Eigen::Vector2d centre = pose.centre;
  add_shape_coverage(place_shape(label, pose), S, canvas.clear_coverage());
  if (rng.uniform() < 0.2) {  // a striped (textured) object
    canvas.paint_striped(colour, rng.uniform(0.0, kPi), rng.uniform(2.5, 6.0), rng.uniform(0.3, 0.7),
                         rng.uniform(0.0, 2.0 * kPi));
  } else {
    canvas.paint(colour);
  }
  if (rng.uniform() < 0.2) {  // a small occluder near the object's outline
    const double t = rng.uniform(0.0, 2.0 * kPi), d = radius * rng.uniform(0.6, 1.1);
    canvas.paint_fragment(rng, centre.x() + d * std::cos(t), centre.y() + d * std::sin(t), rng.uniform(1.5, 3.5),
                          rng.colour());
  }
  canvas.add_noise(rng.uniform(0.0, 0.04), rng);
  canvas.write(out);
}

}  // namespace

LabelledRows object_shapes(const at::Tensor& indices, int64_t seed, bool with_images) {
  return generate_labelled(indices, kObjectShapesCount, seed, with_images, kDomain, 2,
                           [](int label, RowRng& rng, int64_t* nuisances, uint8_t* image) {
                             const int background = rng.integer(kBackgroundKinds);
                             nuisances[0] = background;
                             if (image) render(label, background, rng, image);
                           });
}

}  // namespace vaetransfer::data
