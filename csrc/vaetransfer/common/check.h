// Argument checks shared by every domain. A failed check throws ArgumentError
// (ValueError in Python) or ArgumentTypeError (TypeError in Python); both carry
// the argument's name so the message reads "argument 'x': expected ..., got ...".
#pragma once
#include <ATen/ATen.h>

#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>

namespace vaetransfer {

class ArgumentError : public std::invalid_argument {
 public:
  ArgumentError(std::string argument, const std::string& message)
      : std::invalid_argument("argument '" + argument + "': " + message), argument_(std::move(argument)) {}
  const std::string& argument() const noexcept { return argument_; }

 private:
  std::string argument_;
};

class ArgumentTypeError : public ArgumentError {
 public:
  using ArgumentError::ArgumentError;
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

// VT_CHECK_ARG(cond, "name", "expected ..., got ", value): value errors.
#define VT_CHECK_ARG(cond, arg, ...)                                                    \
  do {                                                                                  \
    if (!(cond)) throw ::vaetransfer::ArgumentError((arg), ::vaetransfer::detail::concat(__VA_ARGS__)); \
  } while (0)

// VT_CHECK_TYPE(cond, "name", ...): wrong kind of object (dtype, tensor-ness).
#define VT_CHECK_TYPE(cond, arg, ...)                                                   \
  do {                                                                                  \
    if (!(cond)) throw ::vaetransfer::ArgumentTypeError((arg), ::vaetransfer::detail::concat(__VA_ARGS__)); \
  } while (0)

// Tensor checks used at every public boundary.
void check_defined(const at::Tensor& t, const char* arg);
void check_dim(const at::Tensor& t, int64_t dim, const char* arg);
void check_dtype(const at::Tensor& t, std::initializer_list<at::ScalarType> allowed, const char* arg);
void check_integral(const at::Tensor& t, const char* arg);
void check_floating(const at::Tensor& t, const char* arg);
void check_finite(const at::Tensor& t, const char* arg);
void check_range(const at::Tensor& integral, int64_t lo, int64_t hi, const char* arg);  // lo <= t < hi
void check_same_device(const at::Tensor& a, const char* arg_a, const at::Tensor& b, const char* arg_b);

}  // namespace vaetransfer
