#include <torch/python.h>

#include "bindings/bindings.h"
#include "vaetransfer/metrics/discretize.h"
#include "vaetransfer/metrics/mutual_information.h"
#include "vaetransfer/metrics/votes.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

// The disentanglement metrics' counting kernels; they run without the GIL.
void init_metrics(py::module_& m) {
  using namespace vaetransfer::metrics;
  using release_gil = py::call_guard<py::gil_scoped_release>;
  m.def("discretize", &histogram_discretize, py::arg("codes"), py::arg("bins") = 20, release_gil(),
        "Histogram bins of each column of ``codes`` (floating [N, D]): int64 [N, D] in [0, bins), "
        "disentanglement_lib's np.histogram + np.digitize(x, edges[:-1]) labels minus one.");
  m.def("mutual_information", &discrete_mutual_information, py::arg("a"), py::arg("b"), release_gil(),
        "Plug-in mutual information in nats between every column of ``a`` (integer [N, D]) and of ``b`` "
        "(integer [N, K]): float64 [D, K], scikit-learn's mutual_info_score per pair.");
  m.def("entropy", &discrete_entropy, py::arg("a"), release_gil(),
        "Plug-in entropy in nats of every column of ``a`` (integer [N, K]): float64 [K].");
  m.def("vote_counts", &vote_counts, py::arg("rows"), py::arg("cols"), py::arg("num_rows"), py::arg("num_cols"),
        release_gil(),
        "How many times each (rows[m], cols[m]) pair occurs: int64 [num_rows, num_cols] (FactorVAE's "
        "majority-vote table).");
}

}  // namespace vaetransfer::bindings
