#include <torch/python.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "vaetransfer/data/dsprites.h"
#include "vaetransfer/data/tetrominoes.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

void init_data(py::module_& m) {
  using namespace vaetransfer::data;
  m.attr("DSPRITES_COUNT") = DSpritesGrid::kCount;
  m.attr("DSPRITES_SIZES") = std::vector<int64_t>(DSpritesGrid::kSizes.begin(), DSpritesGrid::kSizes.end());
  m.attr("TETROMINOES_COUNT") = TetrominoesGrid::kCount;
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
        return py::make_tuple(t.images.defined() ? py::cast(t.images) : py::none(), t.factors, t.bins, t.centres);
      },
      py::arg("indices") = py::none(), py::arg("seed") = 0, py::arg("with_images") = true);

  m.def(
      "render_tetrominoes",
      [](const at::Tensor& factors, bool with_images) {
        std::pair<at::Tensor, at::Tensor> r;
        {
          py::gil_scoped_release no_gil;
          r = render_tetrominoes(factors, with_images);
        }
        return py::make_tuple(r.first.defined() ? py::cast(r.first) : py::none(), r.second);
      },
      py::arg("factors"), py::arg("with_images") = true);
}

}  // namespace vaetransfer::bindings
