// Shared scene building of the procedural labelled domains (object_shapes, street_digits): a
// float RGB canvas, backgrounds (gradient, grating, value noise, clutter), alpha painting of a
// coverage mask, pixel noise and the uint8 output. All randomness comes from a counter-based
// stream per (seed, row), so a row never depends on which other rows are generated.
#pragma once
#include <Eigen/Core>

#include <array>
#include <cstdint>
#include <vector>

#include "vaetransfer/common/counter_rng.h"

namespace vaetransfer::data {

// Draws of one row: draw k is counter_uniform(stream(seed, row), k).
class RowRng {
 public:
  RowRng(int64_t seed, int64_t row, uint64_t domain)
      : stream_(splitmix64(static_cast<uint64_t>(seed) ^ splitmix64(domain)) ^ static_cast<uint64_t>(row)) {}
  double uniform() { return counter_uniform(stream_, counter_++); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int integer(int n) { return std::min(n - 1, static_cast<int>(uniform() * n)); }  // U{0..n-1}
  double normal();  // Box–Muller
  Eigen::Vector3d colour() { return {uniform(), uniform(), uniform()}; }

 private:
  uint64_t stream_;
  uint64_t counter_ = 0;
};

// The number of background kinds of fill_background.
inline constexpr int kBackgroundKinds = 4;

class Canvas {
 public:
  explicit Canvas(int size) : size_(size), rgb_(3 * size * size, 0.0), cover_(size * size, 0.0) {}
  int size() const { return size_; }
  // Fills the background with `kind`: 0 a two-colour linear gradient, 1 a sinusoidal grating
  // between two colours, 2 bilinear value noise (a random 5×5 colour lattice), 3 clutter: a
  // plain colour with 2–4 random polygons (radius 2–6 px) (triangles, quadrilaterals) of other colours.
  // Returns the mean colour of the filled canvas.
  Eigen::Vector3d fill_background(int kind, RowRng& rng);
  // Scratch coverage in [0, 1] (row-major size×size) for the next paint(); zeroed.
  double* clear_coverage();
  // Paints `colour` over the canvas with the scratch coverage (clamped to [0, 1]) as alpha.
  void paint(const Eigen::Vector3d& colour);
  // As paint(), the colour modulated by a grating: colour·(1 − depth·(1 + sin(phase))/2).
  void paint_striped(const Eigen::Vector3d& colour, double angle, double period, double depth, double phase);
  // A random filled polygon (a triangle or quadrilateral of radius r about (cx, cy)) in `colour`.
  void paint_fragment(RowRng& rng, double cx, double cy, double r, const Eigen::Vector3d& colour);
  // Adds N(0, sigma²) to every value.
  void add_noise(double sigma, RowRng& rng);
  // The canvas as uint8 [3, size, size] (rounded, clamped) into `out`.
  void write(uint8_t* out) const;
  const std::vector<double>& coverage() const { return cover_; }

 private:
  int size_;
  std::vector<double> rgb_;    // [3][size][size]
  std::vector<double> cover_;  // [size][size]
};

// Colour at least `min_distance` (Euclidean, RGB in [0, 1]) from `avoid`, by rejection (the last
// draw after 16 tries).
Eigen::Vector3d contrasting_colour(RowRng& rng, const Eigen::Vector3d& avoid, double min_distance);

}  // namespace vaetransfer::data
