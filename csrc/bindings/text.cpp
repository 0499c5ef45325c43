#include <torch/python.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "vaetransfer/common/check.h"
#include "vaetransfer/text/denoise.h"
#include "vaetransfer/text/span_corruption.h"
#include "vaetransfer/text/t5.h"
#include "vaetransfer/text/t5_vae.h"

namespace py = pybind11;

namespace vaetransfer::bindings {

namespace {
at::Tensor or_undefined(const std::optional<at::Tensor>& t) { return t.value_or(at::Tensor()); }
}  // namespace

void init_text(py::module_& m) {
  using namespace vaetransfer::text;
  py::class_<T5, nn::Model, std::shared_ptr<T5>>(m, "T5")
      .def_property_readonly("config",
                             [](const T5& t) {
                               const auto& c = t.config();
                               py::dict d;
                               d["vocab_size"] = c.vocab_size;
                               d["d_model"] = c.d_model;
                               d["d_kv"] = c.d_kv;
                               d["d_ff"] = c.d_ff;
                               d["num_layers"] = c.num_layers;
                               d["num_decoder_layers"] = c.num_decoder_layers;
                               d["num_heads"] = c.num_heads;
                               d["relative_attention_num_buckets"] = c.relative_attention_num_buckets;
                               d["relative_attention_max_distance"] = c.relative_attention_max_distance;
                               d["dropout_rate"] = c.dropout_rate;
                               d["layer_norm_epsilon"] = c.layer_norm_epsilon;
                               d["initializer_factor"] = c.initializer_factor;
                               d["feed_forward_proj"] = c.gated ? "gated-gelu" : "relu";
                               d["tie_word_embeddings"] = c.tie_word_embeddings;
                               d["scale_decoder_outputs"] = c.scale_decoder_outputs;
                               d["pad_token_id"] = c.pad_token_id;
                               d["eos_token_id"] = c.eos_token_id;
                               d["decoder_start_token_id"] = c.decoder_start_token_id;
                               return d;
                             })
      .def(
          "encode",
          [](T5& t, const at::Tensor& ids, const std::optional<at::Tensor>& mask) {
            py::gil_scoped_release no_gil;
            return t.encode(ids, or_undefined(mask));
          },
          py::arg("input_ids"), py::arg("attention_mask") = py::none())
      .def(
          "decode",
          [](T5& t, const at::Tensor& decoder_ids, const at::Tensor& memory, const std::optional<at::Tensor>& mask) {
            py::gil_scoped_release no_gil;
            return t.decode(decoder_ids, memory, or_undefined(mask));
          },
          py::arg("decoder_input_ids"), py::arg("memory"), py::arg("memory_mask") = py::none())
      .def(
          "forward",
          [](T5& t, const at::Tensor& ids, const std::optional<at::Tensor>& mask, const at::Tensor& decoder_ids) {
            py::gil_scoped_release no_gil;
            return t.forward(ids, or_undefined(mask), decoder_ids);
          },
          py::arg("input_ids"), py::arg("attention_mask"), py::arg("decoder_input_ids"))
      .def(
          "loss",
          [](T5& t, const at::Tensor& ids, const std::optional<at::Tensor>& mask, const at::Tensor& labels,
             const std::string& reduction) {
            py::gil_scoped_release no_gil;
            auto m = or_undefined(mask);
            auto logits = t.forward(ids, m, t.shift_right(labels));
            auto loss = token_loss(logits, labels);
            return std::make_tuple(loss.reduce(reduction), logits, loss.per_sequence, loss.tokens);
          },
          py::arg("input_ids"), py::arg("attention_mask"), py::arg("labels"), py::arg("reduction") = "token_mean")
      .def("shift_right", &T5::shift_right, py::arg("labels"))
      .def(
          "generate",
          [](T5& t, const at::Tensor& ids, const std::optional<at::Tensor>& mask, int64_t max_new_tokens, bool do_sample,
             double temperature, int64_t top_k, uint64_t seed) {
            GenerateOptions o{max_new_tokens, do_sample, temperature, top_k, seed};
            py::gil_scoped_release no_gil;
            return t.generate(ids, or_undefined(mask), o);
          },
          py::arg("input_ids"), py::arg("attention_mask"), py::arg("max_new_tokens"), py::arg("do_sample"),
          py::arg("temperature"), py::arg("top_k"), py::arg("seed"));

  py::class_<T5VAE, T5, std::shared_ptr<T5VAE>>(m, "T5VAE")
      .def_property_readonly("latent_dim", &T5VAE::latent_dim)
      .def_property_readonly("pooling", &T5VAE::pooling)
      .def_property_readonly("injection", &T5VAE::injection)
      .def(
          "posterior",
          [](T5VAE& t, const at::Tensor& ids, const std::optional<at::Tensor>& mask) {
            Posterior q;
            {
              py::gil_scoped_release no_gil;
              q = t.posterior(ids, or_undefined(mask));
            }
            return py::make_tuple(q.mean, q.log_sigma);
          },
          py::arg("input_ids"), py::arg("attention_mask") = py::none())
      .def(
          "decode_latent",
          [](T5VAE& t, const at::Tensor& decoder_ids, const at::Tensor& z) {
            py::gil_scoped_release no_gil;
            return t.decode_latent(decoder_ids, z);
          },
          py::arg("decoder_input_ids"), py::arg("z"))
      .def(
          "generate_latent",
          [](T5VAE& t, const at::Tensor& z, int64_t max_new_tokens, bool do_sample, double temperature, int64_t top_k,
             uint64_t seed) {
            GenerateOptions o{max_new_tokens, do_sample, temperature, top_k, seed};
            py::gil_scoped_release no_gil;
            return t.generate_latent(z, o);
          },
          py::arg("z"), py::arg("max_new_tokens"), py::arg("do_sample"), py::arg("temperature"), py::arg("top_k"),
          py::arg("seed"));

  m.def(
      "span_corrupt",
      [](const at::Tensor& tokens, double density, double mean_span_length, int64_t first_sentinel, int64_t max_sentinels,
         int64_t pad_id, int64_t eos_id, bool random_roll, uint64_t seed) {
        SpanCorruptionSpec spec{density, mean_span_length, first_sentinel, max_sentinels, pad_id, eos_id, random_roll};
        py::gil_scoped_release no_gil;
        auto gen = nn::make_generator(tokens.device(), seed);
        auto c = span_corrupt(tokens, spec, gen);
        return std::make_tuple(c.input_ids, c.attention_mask, c.labels);
      },
      py::arg("tokens"), py::arg("noise_density"), py::arg("mean_span_length"), py::arg("first_sentinel"),
      py::arg("max_sentinels"), py::arg("pad_id"), py::arg("eos_id"), py::arg("random_roll"), py::arg("seed"));
  m.def(
      "delete_tokens",
      [](const at::Tensor& ids, double rate, int64_t pad_id, int64_t eos_id, uint64_t seed) {
        py::gil_scoped_release no_gil;
        auto gen = nn::make_generator(ids.device(), seed);
        return delete_tokens(ids, rate, pad_id, eos_id, gen);
      },
      py::arg("ids"), py::arg("rate"), py::arg("pad_id"), py::arg("eos_id"), py::arg("seed"));
  m.def(
      "relative_position_bucket",
      [](const at::Tensor& relative_position, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
        return relative_position_bucket(relative_position.to(at::kLong), bidirectional, num_buckets, max_distance);
      },
      py::arg("relative_position"), py::arg("bidirectional"), py::arg("num_buckets"), py::arg("max_distance"));
}

}  // namespace vaetransfer::bindings
