// Span corruption, the T5 pretraining objective (Raffel et al., "Exploring the Limits of Transfer
// Learning with a Unified Text-to-Text Transformer", §3.1.4): a fraction `density` of each
// sequence's tokens, in spans of mean length `mean_span_length`, is cut out; each span is
// replaced in the input by its own sentinel, and the target lists the sentinels each followed by
// the tokens it replaced:
//   tokens  a b c d e f g h          (x rows: ids, trailing pad; a trailing eos is dropped)
//   input   a b <X0> e f g <X1> eos
//   target  <X0> c d <X1> h eos
// As in T5's random_spans_noise_mask (rounding half to even, as np.round): num_noise = round(n·density) clamped to [1, n−1],
// num_spans = round(num_noise / mean_span_length) clamped to [1, min(num_noise, n − num_noise,
// max_sentinels)]; the noise and the kept tokens are each cut into num_spans non-empty runs at
// uniformly drawn cut points, and the runs alternate starting with kept tokens. With
// `random_roll` (T5's later option, on by default here) the noise mask is then rotated by a
// uniform offset: without it the first token is never cut and a single span — all a ~12-token
// sentence gets at density 0.15 — always ends the sentence, so a model learns only endings. A span
// rotated across the end becomes two (num_spans is then capped at max_sentinels − 1). Sequences
// with fewer than 2 tokens are left whole (input = tokens + eos, target = eos).
#pragma once
#include <ATen/ATen.h>

namespace vaetransfer::text {

struct SpanCorruptionSpec {
  double density = 0.15;
  double mean_span_length = 3.0;
  int64_t first_sentinel = 0;  // id of sentinel 0; sentinel i is first_sentinel − i (T5's <extra_id_i>)
  int64_t max_sentinels = 100;
  int64_t pad_id = 0;
  int64_t eos_id = 1;
  bool random_roll = true;
};

struct Corrupted {
  at::Tensor input_ids;  // [B, S] int64, pad after eos
  at::Tensor attention_mask;  // [B, S] int64, 1 on tokens
  at::Tensor labels;  // [B, T] int64, −100 after eos
};

// `tokens` [B, L] int64 on any device (results on the same device); randomness from `gen`.
Corrupted span_corrupt(const at::Tensor& tokens, const SpanCorruptionSpec& spec, at::Generator& gen);

}  // namespace vaetransfer::text
