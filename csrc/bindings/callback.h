// Python callbacks invoked from C++ code that runs without the GIL.
#pragma once
#include <pybind11/pybind11.h>

#include <chrono>
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

// Polled by a GIL-free loop between iterations: runs Python's pending signal handlers (at most
// every `period`) and reports whether one raised (KeyboardInterrupt; SIGTERM: vaetransfer.interrupts.Interrupted);
// the loop stops cleanly and raise_if_interrupted() re-raises that exception.
class InterruptPoll {
 public:
  explicit InterruptPoll(std::chrono::milliseconds period = std::chrono::milliseconds(20)) : period_(period) {}
  bool operator()() {
    if (error_) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < period_) return false;
    last_ = now;
    pybind11::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() == 0) return false;
    error_ = std::make_shared<pybind11::error_already_set>();
    return true;
  }
  void raise_if_interrupted() {
    if (!error_) return;
    error_->restore();
    throw pybind11::error_already_set();
  }

 private:
  std::chrono::milliseconds period_;
  std::chrono::steady_clock::time_point last_{};
  std::shared_ptr<pybind11::error_already_set> error_;
};

}  // namespace vaetransfer::bindings
