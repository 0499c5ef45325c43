#include "vaetransfer/data/solids.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "vaetransfer/common/check.h"
#include "vaetransfer/data/grid.h"
#include "vaetransfer/data/raster.h"

namespace vaetransfer::data {
namespace {

using G = SolidsGrid;
constexpr double kPi = 3.14159265358979323846;
constexpr int kSubrows = 8;     // scanlines per pixel row (coverage is exact along x)
constexpr int kSegments = 32;   // facets around the axis of the cone and the cylinder

// A triangle mesh with one outward unit normal per triangle (the normal of the face it
// came from, so a quad's two triangles get the same shade).
struct Mesh {
  std::vector<Eigen::Vector3f> vertices;
  std::vector<std::array<int, 3>> triangles;
  std::vector<Eigen::Vector3f> normals;
};

// Builds a mesh from convex faces (vertex index lists, any winding): each face becomes
// a fan of triangles; its normal points away from the solid's interior point (the mean
// of the vertices, inside any convex solid).
Mesh make_mesh(std::vector<Eigen::Vector3d> vertices, const std::vector<std::vector<int>>& faces) {
  Eigen::Vector3d inside = Eigen::Vector3d::Zero();
  for (const auto& v : vertices) inside += v;
  inside /= static_cast<double>(vertices.size());
  Mesh mesh;
  for (const auto& v : vertices) mesh.vertices.push_back(v.cast<float>());
  for (const auto& face : faces) {
    Eigen::Vector3d centre = Eigen::Vector3d::Zero();
    for (int k : face) centre += vertices[k];
    centre /= static_cast<double>(face.size());
    Eigen::Vector3d normal = (vertices[face[1]] - vertices[face[0]]).cross(vertices[face[2]] - vertices[face[0]]);
    normal.normalize();
    if (normal.dot(centre - inside) < 0) normal = -normal;
    for (size_t k = 1; k + 1 < face.size(); ++k) {
      mesh.triangles.push_back({face[0], face[k], face[k + 1]});
      mesh.normals.push_back(normal.cast<float>());
    }
  }
  return mesh;
}

// The faces of the convex hull of a few points in convex position (the Platonic
// solids): the planes through vertex triples that leave every other vertex on one
// side, each face listed once with its vertices in angular order.
std::vector<std::vector<int>> hull_faces(const std::vector<Eigen::Vector3d>& v) {
  const int n = static_cast<int>(v.size());
  std::vector<std::vector<int>> faces;
  std::vector<std::vector<bool>> seen;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      for (int c = b + 1; c < n; ++c) {
        Eigen::Vector3d normal = (v[b] - v[a]).cross(v[c] - v[a]);
        if (normal.norm() < 1e-9) continue;
        normal.normalize();
        const double offset = normal.dot(v[a]);
        int above = 0, below = 0;
        std::vector<bool> on(n, false);
        for (int k = 0; k < n; ++k) {
          const double d = normal.dot(v[k]) - offset;
          if (d > 1e-9) ++above;
          else if (d < -1e-9) ++below;
          else on[k] = true;
        }
        if (above && below) continue;
        bool duplicate = false;
        for (const auto& s : seen) duplicate = duplicate || s == on;
        if (duplicate) continue;
        seen.push_back(on);
        // Order the face's vertices around its centre so the fan is a simple polygon.
        std::vector<int> face;
        Eigen::Vector3d centre = Eigen::Vector3d::Zero();
        for (int k = 0; k < n; ++k) {
          if (on[k]) {
            face.push_back(k);
            centre += v[k];
          }
        }
        centre /= static_cast<double>(face.size());
        const Eigen::Vector3d u = (v[face[0]] - centre).normalized();
        const Eigen::Vector3d w = normal.cross(u);
        std::sort(face.begin(), face.end(), [&](int i, int j) {
          const Eigen::Vector3d di = v[i] - centre, dj = v[j] - centre;
          return std::atan2(di.dot(w), di.dot(u)) < std::atan2(dj.dot(w), dj.dot(u));
        });
        faces.push_back(face);
      }
    }
  }
  return faces;
}

Mesh platonic(std::vector<Eigen::Vector3d> vertices) {
  for (auto& p : vertices) p.normalize();  // circumscribed sphere: the unit sphere
  return make_mesh(vertices, hull_faces(vertices));
}

// A ring of kSegments points of radius r at height y (vertex k at angle 2πk/kSegments
// from the +x axis, in the horizontal x–z plane).
void add_ring(std::vector<Eigen::Vector3d>& v, double r, double y) {
  for (int k = 0; k < kSegments; ++k) {
    const double t = 2.0 * kPi * k / kSegments;
    v.emplace_back(r * std::cos(t), y, r * std::sin(t));
  }
}

const std::array<Mesh, G::kShapes>& canonical_solids() {
  static const std::array<Mesh, G::kShapes> solids = [] {
    const double phi = (1.0 + std::sqrt(5.0)) / 2.0;
    // Tetrahedron standing on a face, apex up.
    std::vector<Eigen::Vector3d> tetra = {{0, 1, 0}};
    for (int k = 0; k < 3; ++k) {
      const double t = 2.0 * kPi * k / 3.0 + kPi / 2.0;
      tetra.emplace_back(std::sqrt(8.0) / 3.0 * std::cos(t), -1.0 / 3.0, std::sqrt(8.0) / 3.0 * std::sin(t));
    }
    std::vector<Eigen::Vector3d> cube;
    for (int i = 0; i < 8; ++i) cube.emplace_back(i & 1 ? 1 : -1, i & 2 ? 1 : -1, i & 4 ? 1 : -1);
    std::vector<Eigen::Vector3d> octa = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}};
    std::vector<Eigen::Vector3d> icosa;
    for (int s1 : {-1, 1}) {
      for (int s2 : {-1, 1}) {
        icosa.emplace_back(0, s1, s2 * phi);
        icosa.emplace_back(s1, s2 * phi, 0);
        icosa.emplace_back(s2 * phi, 0, s1);
      }
    }
    // Cone: apex (0, 1, 0), base circle of radius 0.8 at y = −0.6 (0.8² + 0.6² = 1).
    std::vector<Eigen::Vector3d> cone = {{0, 1, 0}};
    add_ring(cone, 0.8, -0.6);
    std::vector<std::vector<int>> cone_faces;
    std::vector<int> base;
    for (int k = 0; k < kSegments; ++k) {
      cone_faces.push_back({0, 1 + k, 1 + (k + 1) % kSegments});
      base.push_back(1 + k);
    }
    cone_faces.push_back(base);
    // Cylinder: radius 0.6, height 1.6 (0.6² + 0.8² = 1).
    std::vector<Eigen::Vector3d> cylinder;
    add_ring(cylinder, 0.6, -0.8);
    add_ring(cylinder, 0.6, 0.8);
    std::vector<std::vector<int>> cylinder_faces;
    std::vector<int> bottom, top;
    for (int k = 0; k < kSegments; ++k) {
      const int next = (k + 1) % kSegments;
      cylinder_faces.push_back({k, next, kSegments + next, kSegments + k});
      bottom.push_back(k);
      top.push_back(kSegments + k);
    }
    cylinder_faces.push_back(bottom);
    cylinder_faces.push_back(top);
    return std::array<Mesh, G::kShapes>{platonic(tetra), platonic(cube), platonic(octa), platonic(icosa),
                                        make_mesh(cone, cone_faces), make_mesh(cylinder, cylinder_faces)};
  }();
  return solids;
}

enum Column { kShape = 0, kAzimuth, kElevation, kLight, kScale, kPosX, kPosY };

}  // namespace

double solids_factor_value(int factor, int64_t cls) {
  const double c = static_cast<double>(cls);
  switch (factor) {
    case kShape: return c;                                           // class index 0..5
    case kAzimuth: return 2.0 * kPi * c / 12.0;                      // 0, 30°, ..., 330°
    case kElevation: return (kPi / 3.0) * c / 3.0;                   // linspace(0, 60°, 4)
    case kLight: return kPi / 4.0 + (kPi / 2.0) * c;                 // 45°, 135°, 225°, 315°
    case kScale: return 0.5 + 0.5 * c / 3.0;                         // linspace(0.5, 1, 4)
    default: return c / 7.0;                                         // posX, posY: linspace(0, 1, 8)
  }
}

at::Tensor render_solids(const at::Tensor& latents_values, SolidsShading shading) {
  check_dim(latents_values, 2, "latents_values");
  check_floating(latents_values, "latents_values");
  check_finite(latents_values, "latents_values");
  VT_CHECK_ARG(latents_values.size(1) == G::kFactors, "latents_values",
               "expected 7 columns (shape, azimuth, elevation, light, scale, posX, posY), got ",
               latents_values.size(1));
  const auto values = latents_values.to(at::kDouble).contiguous();
  const int64_t n = values.size(0);
  if (n > 0) {
    auto col = [&](int c) { return values.select(1, c); };
    const auto shape = col(kShape);
    VT_CHECK_ARG(at::equal(shape, shape.round()) && shape.min().item<double>() >= 0 &&
                     shape.max().item<double>() < G::kShapes,
                 "latents_values", "expected shape (column 0) an integer class in [0, 6)");
    VT_CHECK_ARG(col(kScale).min().item<double>() > 0 && col(kScale).max().item<double>() <= 1, "latents_values",
                 "expected scale (column 4) in (0, 1] so the solid fits the image");
    for (int c : {kPosX, kPosY}) {
      VT_CHECK_ARG(col(c).min().item<double>() >= 0 && col(c).max().item<double>() <= 1, "latents_values",
                   "expected posX, posY (columns 5, 6) in [0, 1]");
    }
  }
  constexpr int S = G::kImageSize;
  auto imgs = at::empty({n, S, S}, at::kByte);
  const double* vp = values.data_ptr<double>();
  uint8_t* out = imgs.data_ptr<uint8_t>();
  const auto& meshes = canonical_solids();

  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> coverage(S * S);
    std::vector<Eigen::Vector2f> projected;
    Polygon triangle(2, 3);
    for (int64_t i = begin; i < end; ++i) {
      const double* v = vp + i * G::kFactors;
      const Mesh& mesh = meshes[static_cast<int>(v[kShape])];
      // Object → camera: azimuth about the vertical axis, then elevation about the
      // camera's horizontal axis (the top tilts towards the viewer, who looks along −z).
      const Eigen::Matrix3d rotation = (Eigen::AngleAxisd(v[kElevation], Eigen::Vector3d::UnitX()) *
                                        Eigen::AngleAxisd(v[kAzimuth], Eigen::Vector3d::UnitY()))
                                           .toRotationMatrix();
      const Eigen::Matrix3f r = rotation.cast<float>();
      const Eigen::Vector3f light(static_cast<float>(std::sin(G::kLightTilt) * std::cos(v[kLight])),
                                  static_cast<float>(std::sin(G::kLightTilt) * std::sin(v[kLight])),
                                  static_cast<float>(std::cos(G::kLightTilt)));
      const float radius = static_cast<float>(v[kScale]) * G::kRadiusAtScale1;
      const float cx = G::kMargin + (S - 2 * G::kMargin) * static_cast<float>(v[kPosX]);
      const float cy = G::kMargin + (S - 2 * G::kMargin) * static_cast<float>(v[kPosY]);
      // Orthographic projection: camera x to the right, camera y up (image rows go down).
      projected.resize(mesh.vertices.size());
      for (size_t k = 0; k < mesh.vertices.size(); ++k) {
        const Eigen::Vector3f p = r * mesh.vertices[k];
        projected[k] = Eigen::Vector2f(cx + radius * p.x(), cy - radius * p.y());
      }
      std::fill(coverage.begin(), coverage.end(), 0.0f);
      for (size_t t = 0; t < mesh.triangles.size(); ++t) {
        const Eigen::Vector3f normal = r * mesh.normals[t];
        if (normal.z() <= 1e-6f) continue;  // back face (or seen edge-on)
        const float shade = shading == SolidsShading::kFlat
                                ? 1.0f
                                : G::kAmbient + (1.0f - G::kAmbient) * std::max(0.0f, normal.dot(light));
        for (int k = 0; k < 3; ++k) triangle.col(k) = projected[mesh.triangles[t][k]];
        rasterize_coverage(triangle, S, S, kSubrows, coverage.data(), shade);
      }
      uint8_t* img = out + i * S * S;
      for (int p = 0; p < S * S; ++p) {  // coverage >= 0: adding ½ and truncating rounds
        img[p] = static_cast<uint8_t>(255.0f * std::min(coverage[p], 1.0f) + 0.5f);
      }
    }
  });
  return imgs;
}

Solids solids(const at::Tensor& indices, bool with_images, SolidsShading shading) {
  auto [classes, values] = decode_grid(grid_rows(indices, G::kCount), G::kSizes, solids_factor_value);
  Solids result{at::Tensor(), values, classes};
  if (with_images) result.imgs = render_solids(values, shading);
  return result;
}

}  // namespace vaetransfer::data
