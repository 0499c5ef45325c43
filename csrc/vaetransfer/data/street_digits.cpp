#include "vaetransfer/data/street_digits.h"

#include <algorithm>
#include <cmath>
#include <vector>


namespace vaetransfer::data {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr uint64_t kDomain = 0x646967697473ull;  // "digits": this domain's streams

// A glyph: polylines in the unit box (x right, y down; the digit spans [0, 1]²).
using Stroke = std::vector<Eigen::Vector2d>;
using Glyph = std::vector<Stroke>;

// Points of the ellipse arc about (cx, cy) with radii (rx, ry) from a0 to a1 degrees (y down:
// 90° is the bottom), about one point per 10°.
Stroke arc(double cx, double cy, double rx, double ry, double a0, double a1) {
  const int n = std::max(3, static_cast<int>(std::abs(a1 - a0) / 10.0) + 1);
  Stroke s;
  for (int k = 0; k < n; ++k) {
    const double t = (a0 + (a1 - a0) * k / (n - 1)) * kPi / 180.0;
    s.emplace_back(cx + rx * std::cos(t), cy + ry * std::sin(t));
  }
  return s;
}

Stroke line(std::initializer_list<double> xy) {
  const std::vector<double> v(xy);
  Stroke s;
  for (size_t k = 0; k + 1 < v.size(); k += 2) s.emplace_back(v[k], v[k + 1]);
  return s;
}

Stroke joined(Stroke a, const Stroke& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A sans-serif stroke font.
const std::vector<Glyph>& sans() {
  static const std::vector<Glyph> g = {
      {arc(0.5, 0.5, 0.4, 0.5, 0, 360)},
      {line({0.25, 0.2, 0.55, 0.0, 0.55, 1.0})},
      {joined(arc(0.5, 0.28, 0.38, 0.28, 160, 380), line({0.1, 1.0, 0.9, 1.0}))},
      {arc(0.5, 0.26, 0.36, 0.26, 200, 450), arc(0.5, 0.74, 0.4, 0.26, 270, 520)},
      {line({0.7, 1.0, 0.7, 0.0, 0.05, 0.68, 0.95, 0.68})},
      {joined(line({0.85, 0.0, 0.2, 0.0, 0.15, 0.45}), arc(0.5, 0.68, 0.38, 0.32, 220, 500))},
      {arc(0.5, 0.7, 0.38, 0.3, 0, 360), line({0.75, 0.02, 0.4, 0.2, 0.17, 0.5, 0.12, 0.7})},
      {line({0.1, 0.0, 0.9, 0.0, 0.35, 1.0})},
      {arc(0.5, 0.25, 0.3, 0.25, 0, 360), arc(0.5, 0.73, 0.38, 0.27, 0, 360)},
      {arc(0.5, 0.3, 0.38, 0.3, 0, 360), line({0.88, 0.3, 0.82, 1.0})},
  };
  return g;
}

// A seven-segment font: segments a (top), b, c (right), d (bottom), e, f (left), g (middle).
const std::vector<Glyph>& segments() {
  static const std::vector<Glyph> g = [] {
    const Stroke seg[7] = {line({0.1, 0, 0.9, 0}),     line({0.9, 0, 0.9, 0.5}), line({0.9, 0.5, 0.9, 1}),
                           line({0.1, 1, 0.9, 1}),     line({0.1, 0.5, 0.1, 1}), line({0.1, 0, 0.1, 0.5}),
                           line({0.1, 0.5, 0.9, 0.5})};
    const char* lit[10] = {"abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg", "abfgcd"};
    std::vector<Glyph> out;
    for (const char* s : lit) {
      Glyph glyph;
      for (const char* c = s; *c; ++c) glyph.push_back(seg[*c - 'a']);
      out.push_back(glyph);
    }
    return out;
  }();
  return g;
}

double segment_distance(const Eigen::Vector2d& p, const Eigen::Vector2d& a, const Eigen::Vector2d& b) {
  const Eigen::Vector2d ab = b - a;
  const double len2 = ab.squaredNorm();
  const double t = len2 > 0 ? std::clamp((p - a).dot(ab) / len2, 0.0, 1.0) : 0.0;
  return (p - (a + t * ab)).norm();
}

struct Layout {
  double height, width, shear, stroke;  // pixels; shear: x += shear·(0.5 − y) in glyph units
};

// Adds the anti-aliased coverage of `glyph` (box centred at `centre`) to `cover`: a pixel at
// distance d from the nearest stroke gets clamp(stroke/2 + 0.5 − d, 0, 1); the union of several
// glyphs takes the maximum.
void draw_glyph(const Glyph& glyph, const Layout& L, const Eigen::Vector2d& centre, int size, double* cover) {
  std::vector<std::pair<Eigen::Vector2d, Eigen::Vector2d>> pieces;
  auto place = [&](const Eigen::Vector2d& u) {
    return Eigen::Vector2d(centre.x() + L.width * (u.x() - 0.5 + L.shear * (0.5 - u.y())),
                           centre.y() + L.height * (u.y() - 0.5));
  };
  for (const auto& stroke : glyph)
    for (size_t k = 0; k + 1 < stroke.size(); ++k) pieces.emplace_back(place(stroke[k]), place(stroke[k + 1]));
  // Only pixels within `reach` of a piece's bounding box can be covered by it.
  const double reach = L.stroke / 2 + 0.5;
  std::vector<double> distance(size * size, reach);
  for (const auto& [a, b] : pieces) {
    const int c0 = std::max(0, static_cast<int>(std::floor(std::min(a.x(), b.x()) - reach)));
    const int c1 = std::min(size - 1, static_cast<int>(std::ceil(std::max(a.x(), b.x()) + reach)));
    const int r0 = std::max(0, static_cast<int>(std::floor(std::min(a.y(), b.y()) - reach)));
    const int r1 = std::min(size - 1, static_cast<int>(std::ceil(std::max(a.y(), b.y()) + reach)));
    for (int r = r0; r <= r1; ++r)
      for (int c = c0; c <= c1; ++c) {
        double& d = distance[r * size + c];
        d = std::min(d, segment_distance(Eigen::Vector2d(c + 0.5, r + 0.5), a, b));
      }
  }
  for (int p = 0; p < size * size; ++p) cover[p] = std::max(cover[p], std::clamp(reach - distance[p], 0.0, 1.0));
}

void render(int label, int style, int background, RowRng& rng, uint8_t* out) {
  constexpr int S = kLabelledDomainSize;
  Canvas canvas(S);
  const Eigen::Vector3d mean = canvas.fill_background(background, rng);
  const Eigen::Vector3d colour = contrasting_colour(rng, mean, 0.3);
  Layout L;
  L.height = rng.uniform(16.0, 26.0);
  L.width = L.height * rng.uniform(0.45, 0.65) * (style == 2 ? 0.85 : 1.0);
  L.stroke = L.height * rng.uniform(0.08, 0.14) * (style == 2 ? 1.6 : style == 3 ? 1.3 : 1.0);
  L.shear = style == 1 ? rng.uniform(0.2, 0.4) : style == 3 ? rng.uniform(0.0, 0.15) : rng.uniform(-0.05, 0.05);
  const auto& font = style == 3 ? segments() : sans();
  const Eigen::Vector2d centre(S / 2.0 + rng.uniform(-2.0, 2.0), S / 2.0 + rng.uniform(-2.0, 2.0));
  double* cover = canvas.clear_coverage();
  draw_glyph(font[label], L, centre, S, cover);
  // Neighbouring house-number digits, cut by the image edges.
  for (double side : {-1.0, 1.0}) {
    const int digit = rng.integer(kDomainClasses);
    const double gap = L.width * rng.uniform(0.15, 0.5);
    if (rng.uniform() < 0.7)
      draw_glyph(font[digit], L, centre + Eigen::Vector2d(side * (L.width + gap), 0.0), S, cover);
  }
  canvas.paint(colour);
  canvas.add_noise(rng.uniform(0.0, 0.06), rng);
  canvas.write(out);
}

}  // namespace

LabelledRows street_digits(const at::Tensor& indices, int64_t seed, bool with_images) {
  return generate_labelled(indices, kStreetDigitsCount, seed, with_images, kDomain, 3,
                           [](int label, RowRng& rng, int64_t* nuisances, uint8_t* image) {
                             const int style = rng.integer(kDigitStyles), background = rng.integer(kBackgroundKinds);
                             nuisances[0] = style;
                             nuisances[1] = background;
                             if (image) render(label, style, background, rng, image);
                           });
}

}  // namespace vaetransfer::data
