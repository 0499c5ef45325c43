// Binds a plain C++ struct as a read-only Python class whose fields are named once, in
// field(): each becomes a property, and `_fields`, to_dict(), == and repr are generated from
// that list, so no binding or Python code restates them. Results are also indexable and
// unpackable in field order, like the named tuples they stand for.
#pragma once
#include <pybind11/pybind11.h>

#include <string>

namespace vaetransfer::bindings {

template <typename T>
class Record {
 public:
  Record(pybind11::handle scope, const char* name, const char* doc, bool indexable = true) : cls_(scope, name, doc) {
    namespace py = pybind11;
    cls_.attr("_fields") = py::tuple();
    cls_.def(
        "to_dict",
        [](const py::object& self) {
          py::dict d;
          for (auto f : self.attr("_fields")) d[f] = self.attr(f);
          return d;
        },
        "The fields as a dict, in order.");
    cls_.def("__eq__", [](const py::object& self, const py::object& other) -> py::object {
      if (!py::isinstance<T>(other)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      return py::bool_(self.attr("to_dict")().equal(other.attr("to_dict")()));
    });
    cls_.def("__repr__", [](const py::object& self) {
      std::string out = std::string(py::str(py::type::of(self).attr("__name__"))) + "(";
      const char* sep = "";
      for (auto f : self.attr("_fields")) {
        out += sep + std::string(py::str(f)) + "=" + std::string(py::repr(self.attr(f)));
        sep = ", ";
      }
      return out + ")";
    });
    if (!indexable) return;
    cls_.def("__len__", [](const py::object& self) { return py::len(self.attr("_fields")); });
    cls_.def("__getitem__", [](const py::object& self, py::ssize_t i) {
      py::tuple fields = self.attr("_fields");
      const auto n = static_cast<py::ssize_t>(fields.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) throw py::index_error("field index out of range");
      return self.attr(py::object(fields[static_cast<size_t>(i)]));
    });
  }

  template <typename M>
  Record& field(const char* name, M T::*member) {
    cls_.def_readonly(name, member);
    pybind11::list fields(cls_.attr("_fields"));
    fields.append(name);
    cls_.attr("_fields") = pybind11::tuple(fields);
    return *this;
  }

  pybind11::class_<T>& cls() { return cls_; }

 private:
  pybind11::class_<T> cls_;
};

}  // namespace vaetransfer::bindings
