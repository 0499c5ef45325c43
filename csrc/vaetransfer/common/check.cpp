#include "vaetransfer/common/check.h"

namespace vaetransfer {

void check_defined(const at::Tensor& t, const char* arg) {
  VT_CHECK_TYPE(t.defined(), arg, "expected a tensor, got an undefined tensor");
  VT_CHECK_TYPE(!t.is_meta(), arg, "expected a tensor holding values, got a meta tensor (a shape without data)");
}

void check_dim(const at::Tensor& t, int64_t dim, const char* arg) {
  check_defined(t, arg);
  VT_CHECK_ARG(t.dim() == dim, arg, "expected a ", dim, "-D tensor, got shape ", t.sizes());
}

void check_dtype(const at::Tensor& t, std::initializer_list<at::ScalarType> allowed, const char* arg) {
  check_defined(t, arg);
  for (auto type : allowed) {
    if (t.scalar_type() == type) return;
  }
  std::ostringstream names;
  const char* sep = "";
  for (auto type : allowed) {
    names << sep << c10::toString(type);
    sep = " or ";
  }
  VT_CHECK_TYPE(false, arg, "expected dtype ", names.str(), ", got ", t.scalar_type());
}

void check_integral(const at::Tensor& t, const char* arg) {
  check_defined(t, arg);
  VT_CHECK_TYPE(at::isIntegralType(t.scalar_type(), /*includeBool=*/false), arg,
                "expected an integer tensor, got dtype ", t.scalar_type());
  const auto type = t.scalar_type();  // torch's reductions (min, max) do not take the wide unsigned types
  VT_CHECK_TYPE(type != at::kUInt16 && type != at::kUInt32 && type != at::kUInt64, arg,
                "expected a signed integer tensor (e.g. int64) or uint8, got dtype ", type);
}

void check_floating(const at::Tensor& t, const char* arg) {
  check_defined(t, arg);
  VT_CHECK_TYPE(at::isFloatingType(t.scalar_type()), arg,
                "expected a floating-point tensor, got dtype ", t.scalar_type());
}

void check_finite(const at::Tensor& t, const char* arg) {
  check_floating(t, arg);
  VT_CHECK_ARG(t.numel() == 0 || at::isfinite(t).all().item<bool>(), arg,
               "expected finite values, found NaN or inf");
}

void check_range(const at::Tensor& t, int64_t lo, int64_t hi, const char* arg) {
  check_integral(t, arg);
  if (t.numel() == 0) return;
  const int64_t min = t.min().item<int64_t>();
  const int64_t max = t.max().item<int64_t>();
  VT_CHECK_ARG(min >= lo && max < hi, arg, "expected values in [", lo, ", ", hi, "), got values in [", min,
               ", ", max, "]");
}

void check_same_device(const at::Tensor& a, const char* arg_a, const at::Tensor& b, const char* arg_b) {
  VT_CHECK_ARG(a.device() == b.device(), arg_b, "expected a tensor on ", a.device(), " like '", arg_a,
               "', got one on ", b.device());
}

}  // namespace vaetransfer
