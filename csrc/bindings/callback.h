// Python callbacks invoked from C++ code that runs without the GIL.
#pragma once
#include <pybind11/pybind11.h>

#include <memory>
#include <utility>

namespace vaetransfer::bindings {

// A Python exception (KeyboardInterrupt included) raised inside a callback, carried through the
// C++ loop and re-raised by call_without_gil.
struct CallbackFailed {
  std::shared_ptr<pybind11::error_already_set> error;
};

// Wraps fn(args...) (which calls into Python) so it may be called from a GIL-free C++ loop.
template <typename Fn>
auto with_gil(Fn fn) {
  return [fn = std::move(fn)](auto&&... args) {
    pybind11::gil_scoped_acquire gil;
    try {
      fn(std::forward<decltype(args)>(args)...);
    } catch (pybind11::error_already_set& e) {
      throw CallbackFailed{std::make_shared<pybind11::error_already_set>(std::move(e))};
    }
  };
}

// Runs body() with the GIL released; a callback's Python exception is re-raised as itself.
template <typename Body>
auto call_without_gil(Body&& body) -> decltype(body()) {
  std::shared_ptr<pybind11::error_already_set> failed;
  {
    pybind11::gil_scoped_release no_gil;
    try {
      return body();
    } catch (CallbackFailed& f) {
      failed = std::move(f.error);
    }
  }
  failed->restore();
  throw pybind11::error_already_set();
}

}  // namespace vaetransfer::bindings
