#include "vaetransfer/text/span_corruption.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "vaetransfer/common/check.h"

namespace vaetransfer::text {
namespace {

// Lengths of k non-empty runs that add up to m: cut points are the k−1 smallest of m−1 random keys.
std::vector<int64_t> segment(int64_t m, int64_t k, const float* keys) {
  std::vector<int64_t> order(m - 1);
  for (int64_t i = 0; i < m - 1; ++i) order[i] = i;
  std::partial_sort(order.begin(), order.begin() + (k - 1), order.end(),
                    [&](int64_t a, int64_t b) { return keys[a] < keys[b] || (keys[a] == keys[b] && a < b); });
  std::vector<int64_t> cuts(order.begin(), order.begin() + (k - 1));
  for (auto& c : cuts) c += 1;  // a cut after position c: runs are non-empty
  std::sort(cuts.begin(), cuts.end());
  std::vector<int64_t> lengths;
  int64_t prev = 0;
  for (auto c : cuts) {
    lengths.push_back(c - prev);
    prev = c;
  }
  lengths.push_back(m - prev);
  return lengths;
}

}  // namespace

Corrupted span_corrupt(const at::Tensor& tokens, const SpanCorruptionSpec& spec, at::Generator& gen) {
  check_defined(tokens, "tokens");
  VT_CHECK_TYPE(tokens.scalar_type() == at::kLong || tokens.scalar_type() == at::kInt, "tokens",
                "expected integer token ids, got dtype ", tokens.scalar_type());
  VT_CHECK_ARG(tokens.dim() == 2 && tokens.size(1) >= 1, "tokens", "expected [B, L] token ids, got ", tokens.sizes());
  VT_CHECK_ARG(spec.density > 0 && spec.density < 1, "noise_density", "expected in (0, 1), got ", spec.density);
  VT_CHECK_ARG(spec.mean_span_length >= 1, "mean_span_length", "expected >= 1, got ", spec.mean_span_length);
  VT_CHECK_ARG(spec.max_sentinels >= 1, "max_sentinels", "expected >= 1, got ", spec.max_sentinels);
  const int64_t B = tokens.size(0), L = tokens.size(1);
  // One draw per batch (3 key rows per example: noise runs, kept runs, roll), on the generator's
  // device, then host logic.
  const int64_t W = std::max<int64_t>(L, 1);
  auto keys = at::rand({B, 3, W}, gen, at::TensorOptions().device(gen.device())).to(at::kCPU, at::kFloat).contiguous();
  auto host = tokens.to(at::kCPU, at::kLong).contiguous();
  const auto* t = host.data_ptr<int64_t>();
  const auto* k = keys.data_ptr<float>();
  // With the roll a span may wrap around the end and count twice: keep one sentinel in reserve.
  const int64_t span_cap = spec.random_roll ? std::max<int64_t>(1, spec.max_sentinels - 1) : spec.max_sentinels;
  std::vector<std::vector<int64_t>> inputs(B), targets(B);
  std::vector<char> noisy;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* row = t + b * L;
    const float* key = k + b * 3 * W;
    int64_t n = 0;
    while (n < L && row[n] != spec.pad_id) ++n;
    if (n > 0 && row[n - 1] == spec.eos_id) --n;
    auto& in = inputs[b];
    auto& out = targets[b];
    noisy.assign(n, 0);
    if (n >= 2) {
      const int64_t noise = std::clamp<int64_t>(std::llrint(n * spec.density), 1, n - 1);
      const int64_t spans =
          std::clamp<int64_t>(std::llrint(noise / spec.mean_span_length), 1, std::min({noise, n - noise, span_cap}));
      const auto noise_runs = segment(noise, spans, key);
      const auto kept_runs = segment(n - noise, spans, key + W);
      const int64_t offset = spec.random_roll ? std::min<int64_t>(n - 1, static_cast<int64_t>(key[2 * W] * n)) : 0;
      int64_t pos = 0;
      for (int64_t s = 0; s < spans; ++s) {
        pos += kept_runs[s];
        for (int64_t j = 0; j < noise_runs[s]; ++j) noisy[(pos + j + offset) % n] = 1;
        pos += noise_runs[s];
      }
    }
    // Each maximal run of noise becomes one sentinel in the input and opens its span in the target.
    int64_t sentinel = spec.first_sentinel + 1;
    for (int64_t i = 0; i < n; ++i) {
      if (!noisy[i]) {
        in.push_back(row[i]);
        continue;
      }
      if (i == 0 || !noisy[i - 1]) {
        --sentinel;
        in.push_back(sentinel);
        out.push_back(sentinel);
      }
      out.push_back(row[i]);
    }
    in.push_back(spec.eos_id);
    out.push_back(spec.eos_id);
  }
  size_t S = 0, T = 0;
  for (int64_t b = 0; b < B; ++b) {
    S = std::max(S, inputs[b].size());
    T = std::max(T, targets[b].size());
  }
  auto input_ids = at::full({B, static_cast<int64_t>(S)}, spec.pad_id, at::kLong);
  auto mask = at::zeros({B, static_cast<int64_t>(S)}, at::kLong);
  auto labels = at::full({B, static_cast<int64_t>(T)}, -100, at::kLong);
  auto* pi = input_ids.data_ptr<int64_t>();
  auto* pm = mask.data_ptr<int64_t>();
  auto* pl = labels.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    std::copy(inputs[b].begin(), inputs[b].end(), pi + b * S);
    std::fill(pm + b * S, pm + b * S + inputs[b].size(), 1);
    std::copy(targets[b].begin(), targets[b].end(), pl + b * T);
  }
  return {input_ids.to(tokens.device()), mask.to(tokens.device()), labels.to(tokens.device())};
}

}  // namespace vaetransfer::text
