// Registries and typed parameters seen from Python: parameters arrive as a dict of plain values
// (None entries dropped) and entries are listed as dicts, so Python reads what the core offers.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "vaetransfer/common/check.h"
#include "vaetransfer/common/params.h"

namespace vaetransfer::bindings {

inline std::map<std::string, ParamValue> to_params(const pybind11::dict& d) {
  std::map<std::string, ParamValue> out;
  for (const auto& [k, v] : d) {
    if (v.is_none()) continue;
    const auto key = pybind11::cast<std::string>(k);
    try {
      out[key] = pybind11::cast<ParamValue>(v);
    } catch (const pybind11::cast_error&) {
      throw ArgumentTypeError(key, "expected a bool, int, float, str or a list of them, got " +
                                       pybind11::cast<std::string>(pybind11::str(v.get_type().attr("__name__"))));
    }
  }
  return out;
}

inline pybind11::dict params_dict(const Params& p) {
  pybind11::dict d;
  for (const auto& [k, v] : p.values()) d[pybind11::str(k)] = pybind11::cast(v);
  return d;
}

template <typename R>
pybind11::list registry_entries(const R& registry) {
  pybind11::list out;
  for (const auto* e : registry.entries()) {
    pybind11::list params;
    for (const auto& s : e->params) {
      pybind11::dict p;
      p["name"] = s.name;
      p["type"] = to_string(s.type);
      p["default"] = pybind11::cast(s.default_value);
      p["doc"] = s.doc;
      params.append(p);
    }
    pybind11::dict d;
    d["name"] = e->name;
    d["family"] = e->family;
    d["doc"] = e->doc;
    d["aliases"] = e->aliases;
    d["params"] = params;
    out.append(d);
  }
  return out;
}

}  // namespace vaetransfer::bindings
