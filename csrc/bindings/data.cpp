#include <torch/python.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "vaetransfer/common/check.h"
#include "vaetransfer/data/dsprites.h"
#include "vaetransfer/data/dsprites_variants.h"
#include "vaetransfer/data/object_shapes.h"
#include "vaetransfer/data/solids.h"
#include "vaetransfer/data/street_digits.h"
#include "vaetransfer/data/tetrominoes.h"
#include "vaetransfer/data/texture_shapes.h"

namespace py = pybind11;

namespace vaetransfer::bindings {
namespace {

data::SolidsShading parse_shading(const std::string& name) {
  if (name == "lambert") return data::SolidsShading::kLambert;
  VT_CHECK_ARG(name == "flat", "shading", "expected 'lambert' or 'flat', got '", name, "'");
  return data::SolidsShading::kFlat;
}

data::DSpritesVariant parse_variant(const std::string& name) {
  if (name == "color") return data::DSpritesVariant::kColor;
  VT_CHECK_ARG(name == "noisy", "variant", "expected 'color' or 'noisy', got '", name, "'");
  return data::DSpritesVariant::kNoisy;
}

data::TextureShapesStyle parse_texture_style(const std::string& name) {
  if (name == "textured") return data::TextureShapesStyle::kTextured;
  if (name == "filled") return data::TextureShapesStyle::kFilled;
  VT_CHECK_ARG(name == "edges", "style", "expected 'textured', 'filled' or 'edges', got '", name, "'");
  return data::TextureShapesStyle::kEdges;
}

}  // namespace

void init_data(py::module_& m) {
  using namespace vaetransfer::data;
  m.attr("DSPRITES_COUNT") = DSpritesGrid::kCount;
  m.attr("DSPRITES_SIZES") = std::vector<int64_t>(DSpritesGrid::kSizes.begin(), DSpritesGrid::kSizes.end());
  m.attr("SOLIDS_COUNT") = SolidsGrid::kCount;
  m.attr("SOLIDS_SIZES") = std::vector<int64_t>(SolidsGrid::kSizes.begin(), SolidsGrid::kSizes.end());
  m.attr("OBJECT_SHAPES_COUNT") = kObjectShapesCount;
  m.attr("STREET_DIGITS_COUNT") = kStreetDigitsCount;
  m.attr("TEXTURE_SHAPES_COUNT") = kTextureShapesCount;
  m.attr("TETROMINOES_COUNT") = TetrominoesGrid::kCount;
  m.attr("TETROMINOES_SIZES") = std::vector<int64_t>(TetrominoesGrid::kSizes.begin(), TetrominoesGrid::kSizes.end());
  m.attr("TETROMINOES_LOW") = std::vector<double>(TetrominoesGrid::kLow.begin(), TetrominoesGrid::kLow.end());
  m.attr("TETROMINOES_HIGH") = std::vector<double>(TetrominoesGrid::kHigh.begin(), TetrominoesGrid::kHigh.end());

  m.def(
      "dsprites",
      [](std::optional<at::Tensor> indices, bool with_images) {
        DSprites d;
        {
          py::gil_scoped_release no_gil;
          d = dsprites(indices.value_or(at::Tensor()), with_images);
        }
        return py::make_tuple(d.imgs.defined() ? py::cast(d.imgs) : py::none(), d.latents_values, d.latents_classes);
      },
      py::arg("indices") = py::none(), py::arg("with_images") = true);

  m.def(
      "render_dsprites",
      [](const at::Tensor& latents_classes) {
        py::gil_scoped_release no_gil;
        return render_dsprites(latents_classes);
      },
      py::arg("latents_classes"));

  m.def(
      "tetrominoes",
      [](std::optional<at::Tensor> indices, int64_t seed, bool with_images) {
        Tetrominoes t;
        {
          py::gil_scoped_release no_gil;
          t = tetrominoes(indices.value_or(at::Tensor()), seed, with_images);
        }
        return py::make_tuple(t.images.defined() ? py::cast(t.images) : py::none(), t.factors, t.bins);
      },
      py::arg("indices") = py::none(), py::arg("seed") = 0, py::arg("with_images") = true);

  m.def(
      "render_tetrominoes",
      [](const at::Tensor& factors) {
        py::gil_scoped_release no_gil;
        return render_tetrominoes(factors);
      },
      py::arg("factors"));

  m.def(
      "tetrominoes_split",
      [](const std::string& kind, double ratio, int64_t seed, int64_t data_seed) {
        Split s;
        {
          py::gil_scoped_release no_gil;
          s = tetrominoes_split(kind, ratio, seed, data_seed);
        }
        return py::make_tuple(s.train, s.test);
      },
      py::arg("kind"), py::arg("ratio"), py::arg("seed"), py::arg("data_seed"));

  m.def(
      "solids",
      [](std::optional<at::Tensor> indices, bool with_images, const std::string& shading) {
        const auto mode = parse_shading(shading);
        Solids d;
        {
          py::gil_scoped_release no_gil;
          d = solids(indices.value_or(at::Tensor()), with_images, mode);
        }
        return py::make_tuple(d.imgs.defined() ? py::cast(d.imgs) : py::none(), d.latents_values, d.latents_classes);
      },
      py::arg("indices") = py::none(), py::arg("with_images") = true, py::arg("shading") = "lambert");

  m.def(
      "render_solids",
      [](const at::Tensor& latents_values, const std::string& shading) {
        const auto mode = parse_shading(shading);
        py::gil_scoped_release no_gil;
        return render_solids(latents_values, mode);
      },
      py::arg("latents_values"), py::arg("shading") = "lambert");

  m.def(
      "dsprites_variant",
      [](std::optional<at::Tensor> indices, const std::string& variant, int64_t seed, bool with_images) {
        const auto kind = parse_variant(variant);
        DSpritesVariantRows d;
        {
          py::gil_scoped_release no_gil;
          d = dsprites_variant(indices.value_or(at::Tensor()), kind, seed, with_images);
        }
        return py::make_tuple(d.imgs.defined() ? py::cast(d.imgs) : py::none(), d.latents_values, d.latents_classes,
                              d.colors.defined() ? py::cast(d.colors) : py::none());
      },
      py::arg("indices") = py::none(), py::arg("variant") = "color", py::arg("seed") = 0,
      py::arg("with_images") = true);

  // The labelled domains: (images or None, factors int64 [N, F]; column 0 the label).
  for (auto [name, generate] : {std::pair{"object_shapes", &object_shapes}, std::pair{"street_digits", &street_digits}}) {
    m.def(
        name,
        [generate](std::optional<at::Tensor> indices, int64_t seed, bool with_images) {
          LabelledRows d;
          {
            py::gil_scoped_release no_gil;
            d = generate(indices.value_or(at::Tensor()), seed, with_images);
          }
          return py::make_tuple(d.images.defined() ? py::cast(d.images) : py::none(), d.factors);
        },
        py::arg("indices") = py::none(), py::arg("seed") = 0, py::arg("with_images") = true);
  }

  // (images or None, factors int64 [N, 3], masks uint8 [N, 32, 32] or None).
  m.def(
      "texture_shapes",
      [](std::optional<at::Tensor> indices, int64_t seed, const std::string& style, bool with_images) {
        const auto kind = parse_texture_style(style);
        TextureShapeRows d;
        {
          py::gil_scoped_release no_gil;
          d = texture_shapes(indices.value_or(at::Tensor()), seed, kind, with_images);
        }
        return py::make_tuple(d.images.defined() ? py::cast(d.images) : py::none(), d.factors,
                              d.masks.defined() ? py::cast(d.masks) : py::none());
      },
      py::arg("indices") = py::none(), py::arg("seed") = 0, py::arg("style") = "textured",
      py::arg("with_images") = true);
}

}  // namespace vaetransfer::bindings
