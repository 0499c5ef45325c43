#include "vaetransfer/text/denoise.h"

#include <vector>

#include "vaetransfer/common/check.h"

namespace vaetransfer::text {

std::pair<at::Tensor, at::Tensor> delete_tokens(const at::Tensor& ids, double rate, int64_t pad_id, int64_t eos_id,
                                                at::Generator& gen) {
  check_defined(ids, "ids");
  VT_CHECK_ARG(ids.dim() == 2 && ids.size(1) >= 1, "ids", "expected token ids [B, L], got ", ids.sizes());
  VT_CHECK_ARG(rate >= 0 && rate < 1, "deletion", "expected a deletion rate in [0, 1), got ", rate);
  const int64_t B = ids.size(0), L = ids.size(1);
  auto host = ids.to(at::kCPU, at::kLong).contiguous();
  // One draw per batch on the generator's device, then host logic.
  auto u = at::rand({B, L}, gen, at::TensorOptions().device(gen.device())).to(at::kCPU, at::kFloat).contiguous();
  const auto* t = host.data_ptr<int64_t>();
  const auto* r = u.data_ptr<float>();
  std::vector<std::vector<int64_t>> rows(B);
  int64_t longest = 1;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* row = t + b * L;
    int64_t n = 0;
    while (n < L && row[n] != pad_id) ++n;
    const int64_t last = (n > 0 && row[n - 1] == eos_id) ? n - 1 : n;  // a final eos always stays
    auto& out = rows[b];
    for (int64_t i = 0; i < last; ++i)
      if (!(r[b * L + i] < rate)) out.push_back(row[i]);
    if (out.empty() && last > 0) out.push_back(row[0]);
    for (int64_t i = last; i < n; ++i) out.push_back(row[i]);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(out.size()));
  }
  auto out_ids = at::full({B, longest}, pad_id, at::kLong);
  auto mask = at::zeros({B, longest}, at::kLong);
  for (int64_t b = 0; b < B; ++b) {
    const auto n = static_cast<int64_t>(rows[b].size());
    std::copy(rows[b].begin(), rows[b].end(), out_ids.data_ptr<int64_t>() + b * longest);
    mask[b].slice(0, 0, n).fill_(1);
  }
  return {out_ids.to(ids.device()), mask.to(ids.device())};
}

}  // namespace vaetransfer::text
