#include "vaetransfer/common/autocast.h"

#include "vaetransfer/common/check.h"

namespace vaetransfer {

at::ScalarType precision_dtype(const std::string& precision, const char* arg) {
  if (precision == "fp32") return at::kFloat;
  if (precision == "bf16") return at::kBFloat16;
  if (precision == "fp16") return at::kHalf;
  VT_CHECK_ARG(false, arg, "expected 'fp32', 'bf16' or 'fp16', got '", precision, "'");
  return at::kFloat;
}

std::string precision_name(at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? "bf16" : dtype == at::kHalf ? "fp16" : "fp32";
}

}  // namespace vaetransfer
