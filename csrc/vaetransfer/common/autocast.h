// Mixed precision: an RAII scope that turns ATen's autocast on for one device type with a
// lower-precision dtype (bf16 or fp16) and restores the previous state on exit. Inside it,
// autocast-listed ops (convolutions, matrix products) run in the lower precision while their
// fp32 inputs — the parameters (master weights) — stay fp32; the cast cache is cleared when the
// outermost scope closes, as torch.autocast does.
#pragma once
#include <ATen/autocast_mode.h>

#include <string>

namespace vaetransfer {

class AutocastScope {
 public:
  AutocastScope(at::DeviceType device, at::ScalarType dtype)
      : device_(device),
        was_enabled_(at::autocast::is_autocast_enabled(device)),
        previous_dtype_(at::autocast::get_autocast_dtype(device)) {
    at::autocast::set_autocast_enabled(device, true);
    at::autocast::set_autocast_dtype(device, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, previous_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::DeviceType device_;
  bool was_enabled_;
  at::ScalarType previous_dtype_;
};

// "fp32" → Float (autocast off), "bf16" → BFloat16, "fp16" → Half; ArgumentError naming `arg`.
at::ScalarType precision_dtype(const std::string& precision, const char* arg = "precision");
std::string precision_name(at::ScalarType dtype);

}  // namespace vaetransfer
