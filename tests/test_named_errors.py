"""Bad input to the public API raises a named error: the core's ``ArgumentError`` (a ValueError) or
``ArgumentTypeError`` (a TypeError) with ``.argument`` the name the caller used and the message
form ``argument 'NAME': ...`` — never a generic IndexError/KeyError/AttributeError, a RuntimeError
of torch, a silently clipped or wrapped value, or a NaN result.

One row per fault found by probing every public function of the modules below with bad input
(wrong types, out-of-range sizes, counts, fractions and seeds, NaN/inf, wrong shapes, unknown
names, unusable devices)."""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest
import torch

import vaetransfer as vt
from vaetransfer import activations as acts_mod
from vaetransfer import config as cfgmod
from vaetransfer import estimators as est
from vaetransfer import nn, objectives, plots, probes, regularizers, rr, schedules, similarity as sim
from vaetransfer._C import ArgumentError, ArgumentTypeError
from vaetransfer._checks import check_device
from vaetransfer.text import T5Config, T5VAE, T5VAEConfig
from vaetransfer.text import corpus
from vaetransfer.studies.kit import t5_vae_metrics

E, T = ArgumentError, ArgumentTypeError


# ------------------------------------------------------------------------------ small fixtures
@functools.lru_cache(maxsize=None)
def _vae():
    return nn.build_model(nn.ModelConfig("mlp", input_shape=[1, 8, 8], latent_dim=3, hidden=[16]))


@functools.lru_cache(maxsize=None)
def _clf():
    return nn.build_model(nn.ModelConfig("mlp-classifier", input_shape=[12], hidden=[10, 7], num_classes=3))


@functools.lru_cache(maxsize=None)
def _t5vae():
    return T5VAE(T5VAEConfig(_t5_config(), latent_dim=4))


def _t5_config():
    return T5Config(vocab_size=40, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2)


def _ids():
    ids = torch.randint(2, 40, (6, 5), generator=torch.Generator().manual_seed(0))
    ids[:, -1] = 1
    return ids


def _dataset():
    return vt.data.Dataset(torch.zeros(10, 1, 4, 4, dtype=torch.uint8), labels=torch.arange(10) % 3)


Z, M, LV = torch.randn(8, 3), torch.randn(8, 3), torch.zeros(8, 3)
X8 = torch.rand(4, 1, 8, 8)
NAN = torch.full((8, 3), math.nan)


def _lv(value):
    return torch.full((8, 3), float(value))


def _decoder(z):
    return torch.zeros(z.shape[0], 4)


@dataclasses.dataclass
class _Config:
    n: int = 1
    ratio: float = 0.5


class _RowsDropped:
    """A custom model whose activations lose rows (silently left uninitialised before)."""

    def activations(self, x, layers=None):
        return {"a": x[:2]}


class _ListActivations:
    def activations(self, x, layers=None):
        return [x]


class _OtherLayers:
    def activations(self, x, layers=None):
        return {"a": x}


# (id, call, exception class, .argument, a word of the message)
CASES = [
    # ---- devices (check_device, used by every public entry taking a device)
    ("check_device unknown name", lambda: check_device("gpu"), E, "device", "device"),
    ("check_device int", lambda: check_device(3), T, "device", "torch.device"),
    ("check_device None", lambda: check_device(None), T, "device", "device"),
    ("check_device cuda index", lambda: check_device("cuda:99"), E, "device", "cuda"),
    ("check_device own argument", lambda: check_device("gpu", argument="to"), E, "to", "device"),
    ("build_model device", lambda: nn.build_model(nn.ModelConfig("mlp", input_shape=[1, 8, 8]), device="cuda:99"),
     E, "device", "cuda"),
    ("build_model device type", lambda: nn.build_model(nn.ModelConfig("mlp", input_shape=[1, 8, 8]), device=None),
     T, "device", "device"),
    ("VAE device", lambda: nn.VAE(nn.ModelConfig("mlp", input_shape=[1, 8, 8]), device="gpu"), E, "device", "device"),
    ("Model.to", lambda: _vae().to("gpu"), E, "device", "device"),
    ("activations device", lambda: acts_mod.activations(_vae(), X8, device="cuda:99"), E, "device", "cuda"),
    ("Dataset.float_images device", lambda: _dataset().float_images(device="gpu"), E, "device", "device"),
    ("T5VAE device", lambda: T5VAE(T5VAEConfig(_t5_config(), latent_dim=4), device="gpu"), E, "device", "device"),

    # ---- estimators: the user's argument names (logvar, not the core's internal 'offset'; z, qmean)
    ("rate_decomposition logvar overflow", lambda: est.rate_decomposition(M, _lv(200)), E, "logvar", "log-variances"),
    ("rate_decomposition whole logvar overflow",
     lambda: est.rate_decomposition(M, _lv(200), estimator="whole-dataset"), E, "logvar", "log-variances"),
    ("rate_decomposition var overflow", lambda: est.rate_decomposition(M, var=torch.full((8, 3), 1e80, dtype=torch.float64)),
     E, "var", "variances"),
    ("rate_decomposition logvar underflow (wrong MI)", lambda: est.rate_decomposition(M, _lv(-200)),
     E, "logvar", "float32"),
    ("mutual_information logvar overflow", lambda: est.mutual_information(M, _lv(200)), E, "logvar", "log-variances"),
    ("whole_data_kl logvar overflow", lambda: est.whole_data_kl_decomposition(M, _lv(200)), E, "logvar", "exp"),
    ("sample_gaussian logvar overflow (inf samples)", lambda: est.sample_gaussian(M, _lv(200)), E, "logvar", "exp"),
    ("importance_weighted logvar overflow",
     lambda: est.importance_weighted_log_likelihood(torch.rand(8, 4), M, _lv(200), decoder=_decoder),
     E, "logvar", "log-variances"),
    ("gaussian_log_density_matrix logvar NaN result", lambda: est.gaussian_log_density_matrix(Z, M, _lv(-100)),
     E, "logvar", "float64"),
    ("logsumexp_log_density logvar NaN result", lambda: est.logsumexp_log_density(Z, M, _lv(-100)),
     E, "logvar", "float32"),
    ("minibatch_total_correlation logvar NaN result",
     lambda: est.minibatch_total_correlation(Z, M, _lv(-100), dataset_size=10), E, "logvar", "float32"),
    ("minibatch_rate_terms z NaN named z", lambda: est.minibatch_rate_terms(M, LV, z=NAN, dataset_size=10),
     E, "z", "finite"),
    ("minibatch_rate_terms z shape (was RuntimeError)",
     lambda: est.minibatch_rate_terms(M, LV, z=torch.randn(8, 4), dataset_size=10), E, "z", "shape"),
    ("minibatch_rate_terms z 1-D (was broadcast)", lambda: est.minibatch_rate_terms(M, LV, z=Z[0], dataset_size=10),
     E, "z", "shape"),
    ("minibatch_rate_terms z list", lambda: est.minibatch_rate_terms(M, LV, z=[1, 2], dataset_size=10),
     T, "z", "tensor"),
    ("minibatch_rate_terms mean NaN named mean (was 'z')",
     lambda: est.minibatch_rate_terms(NAN, LV, z=M, dataset_size=10), E, "mean", "finite"),
    ("minibatch_rate_terms mean None", lambda: est.minibatch_rate_terms(None, LV, z=Z, dataset_size=10),
     T, "mean", "tensor"),
    ("minibatch_rate_terms var shape named var",
     lambda: est.minibatch_rate_terms(M, var=torch.ones(8, 2), z=M, dataset_size=10), E, "var", "shape"),
    ("minibatch_rate_terms dataset_size float (was truncated)",
     lambda: est.minibatch_rate_terms(M, LV, z=Z, dataset_size=9.7), T, "dataset_size", "size"),
    ("at_offsets qmean NaN named qmean (was 'z')",
     lambda: est.gaussian_log_density_matrix_at_offsets(NAN, M, M, LV), E, "qmean", "finite"),
    ("logsumexp_at_offsets qmean NaN", lambda: est.logsumexp_log_density_at_offsets(NAN, M, M, LV),
     E, "qmean", "finite"),
    ("at_offsets logvar underflow", lambda: est.gaussian_log_density_matrix_at_offsets(M, M, M, _lv(-200)),
     E, "logvar", "float32"),
    ("gaussian_log_density_matrix logvar str", lambda: est.gaussian_log_density_matrix(Z, M, "x"), T, "logvar", "tensor"),
    ("gaussian_log_density_matrix z None", lambda: est.gaussian_log_density_matrix(None, M, LV), T, "z", "tensor"),
    ("logsumexp_log_density options", lambda: est.logsumexp_log_density(Z, M, LV, options="x"), T, "options",
     "DensityOptions"),
    ("rate_decomposition options unused chunk", lambda: est.rate_decomposition(M, LV, options=est.DensityOptions(0, 4)),
     E, "row_chunk", "chunk"),
    ("sample_gaussian samples float", lambda: est.sample_gaussian(M, LV, samples=2.5), T, "samples", "samples"),
    ("sample_gaussian samples bool", lambda: est.sample_gaussian(M, LV, samples=True), T, "samples", "samples"),
    ("sample_gaussian seed negative (was wrapped)", lambda: est.sample_gaussian(M, LV, seed=-1), E, "seed", "seed"),
    ("sample_gaussian seed float (was truncated)", lambda: est.sample_gaussian(M, LV, seed=1.5), T, "seed", "seed"),
    ("sample_gaussian seed str", lambda: est.sample_gaussian(M, LV, seed="a"), T, "seed", "seed"),
    ("sample_gaussian seed huge", lambda: est.sample_gaussian(M, LV, seed=2**70), E, "seed", "2^63"),
    ("sample_gaussian generator", lambda: est.sample_gaussian(M, LV, generator=3), T, "generator", "Generator"),
    ("minibatch_total_correlation dataset_size None",
     lambda: est.minibatch_total_correlation(Z, M, LV, dataset_size=None), T, "dataset_size", "size"),
    ("minibatch_total_correlation sampling list",
     lambda: est.minibatch_total_correlation(Z, M, LV, dataset_size=10, sampling=[]), E, "sampling", "mws"),
    ("tc_log_weights batch float", lambda: est.tc_log_weights(2.5, 10), T, "batch_size", "batch"),
    ("whole_data_kl max_queries negative (was 'all')", lambda: est.whole_data_kl_decomposition(M, LV, max_queries=-3),
     E, "max_queries", ">= 1"),
    ("whole_data_kl max_queries float", lambda: est.whole_data_kl_decomposition(M, LV, max_queries=2.5),
     T, "max_queries", "query"),
    ("rate_decomposition estimator list", lambda: est.rate_decomposition(M, LV, estimator=[]), E, "estimator",
     "minibatch"),
    ("rate_decomposition batch float", lambda: est.rate_decomposition(M, LV, batch_size=2.5), T, "batch_size", "batch"),
    ("rate_decomposition samples bool", lambda: est.rate_decomposition(M, LV, samples=True), T, "samples", "samples"),
    ("mutual_information batch float (was truncated)", lambda: est.mutual_information(M, LV, batch_size=2.5),
     T, "batch_size", "batch"),
    ("nearest_neighbours query_chunk float", lambda: est.nearest_neighbours(Z, M, query_chunk=2.5), T, "query_chunk",
     "int"),
    ("nearest_neighbours queries list", lambda: est.nearest_neighbours([1, 2], M, progress=True), T, "queries",
     "tensor"),
    ("active_units threshold str", lambda: est.active_units(M, threshold="a"), T, "threshold", "number"),
    ("active_units unbiased str", lambda: est.active_units(M, unbiased="no"), T, "unbiased", "bool"),
    ("active_units list", lambda: est.active_units([[1.0, 2.0]]), T, "mean", "tensor"),
    ("importance_weighted num_samples float",
     lambda: est.importance_weighted_log_likelihood(torch.rand(8, 4), M, LV, decoder=_decoder, num_samples=2.5),
     T, "num_samples", "samples"),
    ("binned_mutual_information bins float", lambda: est.binned_mutual_information(Z, torch.zeros(8, dtype=torch.long),
                                                                                    2.5), T, "num_bins", "bins"),
    ("bin_activations list", lambda: est.bin_activations([1.0], 3), T, "activations", "tensor"),

    # ---- models
    ("build_model seed huge", lambda: nn.build_model(nn.ModelConfig("mlp", input_shape=[1, 8, 8]), seed=2**64),
     E, "seed", "2^63"),
    ("Model.train mode str", lambda: _vae().train("no"), T, "mode", "bool"),
    ("Model.group int", lambda: _vae().group(3), T, "group", "str"),
    ("Model.freeze int", lambda: _vae().freeze(3), T, "groups", "group"),
    ("Model.reinitialize seed", lambda: _vae().reinitialize("all", seed=-1), E, "seed", "seed"),
    ("Model.load_state_dict list", lambda: _vae().load_state_dict([1]), T, "state", "mapping"),
    ("Model.load_state_dict values", lambda: _vae().load_state_dict({k: 1 for k in _vae().state_dict()}),
     T, "state", "tensor"),
    ("Model.activations layers int", lambda: _vae().activations(X8, 3), T, "layers", "layer"),
    ("Model.activations chunk float", lambda: _vae().activations(X8, chunk_size=2.5), T, "chunk_size", "chunk"),
    ("Model.activations x list", lambda: _vae().activations([1, 2]), T, "x", "tensor"),
    ("Model.activations seed", lambda: _vae().activations(X8, seed=-1), E, "seed", "seed"),
    ("Model.noise n float (was truncated)", lambda: _vae().noise(2.5), T, "n", "examples"),
    ("VAE.encode list", lambda: _vae().encode([1]), T, "x", "tensor"),
    ("VAE.reconstruct chunk float", lambda: _vae().reconstruct(X8, chunk_size=2.5), T, "chunk_size", "chunk"),
    ("VAE.reconstruct seed", lambda: _vae().reconstruct(X8, sample=True, seed=-1), E, "seed", "seed"),
    ("VAE.sample n float", lambda: _vae().sample(2.5), T, "n", "samples"),
    ("VAE.traverse steps negative (was RuntimeError)", lambda: _vae().traverse(X8[:1], steps=-3), E, "steps", ">= 1"),
    ("VAE.traverse steps zero (was empty)", lambda: _vae().traverse(X8[:1], steps=0), E, "steps", ">= 1"),
    ("VAE.traverse limit NaN (was NaN images)", lambda: _vae().traverse(X8[:1], limit=math.nan), E, "limit", "finite"),
    ("VAE.traverse values NaN", lambda: _vae().traverse(X8[:1], values=[math.nan]), E, "values", "finite"),
    ("VAE.traverse values str", lambda: _vae().traverse(X8[:1], values="a"), T, "values", "sequence"),
    ("Classifier.predict chunk zero (was ZeroDivision-like)", lambda: _clf().predict(torch.rand(5, 12), chunk_size=0),
     E, "chunk_size", ">= 1"),
    ("Classifier.predict chunk negative (was torch.cat)", lambda: _clf().predict(torch.rand(5, 12), chunk_size=-1),
     E, "chunk_size", ">= 1"),
    ("Classifier.predict list", lambda: _clf().predict([1]), T, "x", "tensor"),

    # ---- activations
    ("activations seed", lambda: acts_mod.activations(_vae(), X8, seed=-1), E, "seed", "seed"),
    ("activations layers int", lambda: acts_mod.activations(_vae(), X8, layers=3), T, "layers", "layer"),
    ("activations custom rows lost (was uninitialised rows)", lambda: acts_mod.activations(_RowsDropped(), torch.rand(5, 4)),
     E, "model", "row"),
    ("activations custom returns list", lambda: acts_mod.activations(_ListActivations(), torch.rand(5, 4)),
     T, "model", "mapping"),
    ("activations custom unknown layer (was ignored)",
     lambda: acts_mod.activations(_OtherLayers(), torch.rand(5, 4), layers=["b"]), E, "layers", "unknown"),

    # ---- similarity
    ("cka list", lambda: sim.cka([1, 2], Z), T, "x", "tensor"),
    ("cka cka_form list", lambda: sim.cka(Z, M, cka_form=[]), E, "cka_form", "auto"),
    ("procrustes form int", lambda: sim.procrustes(Z, M, form=3), T, "form", "nu"),
    ("similarity list", lambda: sim.similarity([1], M), T, "X", "tensor"),
    ("similarity_matrix memory str", lambda: sim.similarity_matrix({"a": Z}, {"b": M}, memory_bytes="a"),
     T, "memory_bytes", "bytes"),
    ("similarity_matrix memory float (was truncated)", lambda: sim.similarity_matrix({"a": Z}, {"b": M}, memory_bytes=2.5),
     T, "memory_bytes", "bytes"),
    ("similarity_matrix power_iterations negative (was ignored)",
     lambda: sim.similarity_matrix({"a": Z}, {"b": M}, power_iterations=-1), E, "power_iterations", ">= 0"),
    ("similarity_matrix progress str", lambda: sim.similarity_matrix({"a": Z}, {"b": M}, "procrustes", progress="x"),
     T, "progress", "True"),
    ("SimilarityMatrix unknown layer", lambda: sim.similarity_matrix({"a": Z}, {"b": M})["x", "b"], E, "key", "row"),
    ("SimilarityMatrix key int", lambda: sim.similarity_matrix({"a": Z}, {"b": M})[1], T, "key", "layer"),
    ("decoder_start int", lambda: sim.decoder_start(3), T, "names", "sequence"),
    ("encoder_layers None", lambda: sim.encoder_layers(None), T, "names", "sequence"),
    ("fit_layers chunk float", lambda: sim.fit_layers({"a": Z}, chunk_features=2.5), T, "chunk_features", "features"),
    ("fit_layers cache list", lambda: sim.fit_layers({"a": Z}, cache=[]), T, "cache", "dict"),
    ("sanity_matrices n str", lambda: sim.sanity_matrices("a"), T, "n", "examples"),
    ("sanity_matrices n float", lambda: sim.sanity_matrices(2.5), T, "n", "examples"),
    ("sanity_matrices features negative (was RuntimeError)", lambda: sim.sanity_matrices(10, features=-2),
     E, "features", ">= 1"),
    ("sanity_matrices features zero (was empty)", lambda: sim.sanity_matrices(10, features=0), E, "features", ">= 1"),
    ("sanity_matrices shared str", lambda: sim.sanity_matrices(10, shared="ab"), T, "shared", "fractions"),
    ("sanity_matrices seed negative", lambda: sim.sanity_matrices(10, seed=-1), E, "seed", "seed"),
    ("sanity_matrices dtype int", lambda: sim.sanity_matrices(10, dtype=torch.int64), T, "dtype", "floating"),
    ("sanity_study repeats zero (was NaN)", lambda: sim.sanity_study(ns=[10], repeats=0), E, "repeats", ">= 1"),
    ("sanity_study repeats negative (was -0)", lambda: sim.sanity_study(ns=[10], repeats=-1), E, "repeats", ">= 1"),
    ("sanity_study ns float (was truncated)", lambda: sim.sanity_study(ns=[3.5]), T, "ns[0]", "examples"),
    ("sanity_study ns str (named 'n')", lambda: sim.sanity_study(ns="10"), T, "ns", "sequence"),
    ("sanity_study shared empty (named 'acts_a')", lambda: sim.sanity_study(ns=[10], shared=[]), E, "shared", "fraction"),

    # ---- data
    ("dsprites images str", lambda: vt.data.dsprites([1], images="no"), T, "images", "bool"),
    ("dsprites images None (was False)", lambda: vt.data.dsprites([1], images=None), T, "images", "bool"),
    ("tetrominoes images str", lambda: vt.data.tetrominoes([1], images="no"), T, "images", "bool"),
    ("render_dsprites str", lambda: vt.data.render_dsprites("a"), T, "factors", "tensor"),
    ("render_tetrominoes str", lambda: vt.data.render_tetrominoes("ab"), T, "factor_values", "tensor"),
    ("render_solids object", lambda: vt.data.render_solids(object()), T, "factor_values", "tensor"),
    ("tetrominoes_split cd tiny ratio (was empty split)", lambda: vt.data.tetrominoes_split("cd", 1e-9),
     E, "ratio", "empty"),
    ("split slice step zero", lambda: vt.data.split(_dataset(), test=slice(None, None, 0)), E, "test", "step"),
    ("Dataset.subset slice step zero", lambda: _dataset().subset(slice(None, None, 0)), E, "indices", "step"),
    ("dsprites slice step zero", lambda: vt.data.dsprites(slice(0, 5, 0)), E, "indices", "step"),
    ("load unknown keyword", lambda: vt.data.load("dsprites", foo=1), T, "foo", "keyword"),

    # ---- objectives
    ("evaluate model str", lambda: objectives.evaluate("m", "beta-vae", X8), T, "model", "model"),
    ("evaluate batch float (was truncated)", lambda: objectives.evaluate(_vae(), "beta-vae", X8, batch_size=2.5),
     T, "batch_size", "batch"),
    ("evaluate seed negative", lambda: objectives.evaluate(_vae(), "beta-vae", X8, seed=-1), E, "seed", "seed"),
    ("evaluate seed float (was truncated)", lambda: objectives.evaluate(_vae(), "beta-vae", X8, seed=1.5),
     T, "seed", "seed"),
    ("evaluate z list", lambda: objectives.evaluate(_vae(), "beta-vae", X8, z=[1]), T, "z", "tensor"),
    ("importance_weighted logvar overflow (named 'decoder')",
     lambda: objectives.importance_weighted_log_likelihood(_vae(), "beta-vae", X8, mean=torch.zeros(4, 3),
                                                           logvar=torch.full((4, 3), 200.0)), E, "logvar", "exp"),
    ("importance_weighted num_samples float",
     lambda: objectives.importance_weighted_log_likelihood(_vae(), "beta-vae", X8, mean=torch.zeros(4, 3),
                                                           logvar=torch.zeros(4, 3), num_samples=2.5),
     T, "num_samples", "samples"),
    ("importance_weighted seed negative",
     lambda: objectives.importance_weighted_log_likelihood(_vae(), "beta-vae", X8, mean=torch.zeros(4, 3),
                                                           logvar=torch.zeros(4, 3), seed=-1), E, "seed", "seed"),
    ("make_objective dataset_size str", lambda: objectives.make_objective(objectives.TaskConfig("beta-tc-vae"),
                                                                          dataset_size="a"), T, "dataset_size", "size"),
    ("make_objective dataset_size float", lambda: objectives.make_objective(objectives.TaskConfig("beta-tc-vae"),
                                                                            dataset_size=2.5), T, "dataset_size", "size"),
    ("TaskConfig.from_dict list", lambda: objectives.TaskConfig.from_dict([1]), T, "objective", "object"),
    ("log_likelihood shape (was RuntimeError)", lambda: objectives.log_likelihood(torch.rand(4, 6), torch.rand(4, 5)),
     E, "output", "shape"),
    ("log_likelihood x list", lambda: objectives.log_likelihood([1], torch.rand(4, 5)), T, "x", "tensor"),
    ("log_likelihood likelihood int", lambda: objectives.log_likelihood(torch.rand(4, 6), torch.rand(4, 6), 3),
     T, "likelihood", "str"),
    ("gaussian_kl shape (was RuntimeError)", lambda: objectives.gaussian_kl(torch.rand(4, 6), torch.rand(4, 3)),
     E, "logvar", "shape"),
    ("gaussian_kl NaN (was NaN result)", lambda: objectives.gaussian_kl(torch.full((4, 6), math.nan), torch.rand(4, 6)),
     E, "mean", "finite"),

    # ---- schedules and regularizers
    ("make_schedule kind int", lambda: schedules.make_schedule(schedules.ScheduleConfig(3)), T, "schedule", "str"),
    ("ScheduleConfig.from_dict list", lambda: schedules.ScheduleConfig.from_dict([1]), T, "schedule", "object"),
    ("RegularizerConfig.from_dict list", lambda: regularizers.RegularizerConfig.from_dict([1]), T, "regularizers",
     "object"),
    ("make_regularizer label int", lambda: regularizers.make_regularizer(regularizers.RegularizerConfig("l2", label=3)),
     T, "label", "str"),

    # ---- rr
    ("reverse_pass variant int", lambda: rr.reverse_pass(_clf(), torch.rand(5, 12), 3), T, "variant", "str"),
    ("term_names str", lambda: rr.term_names("m"), T, "model", "Model"),
    ("rr_regularizer layer_weights str", lambda: rr.rr_regularizer(1.0, layer_weights="ab"), T, "layer_weights",
     "sequence"),
    ("rr_regularizer layer_weights NaN", lambda: rr.rr_regularizer(1.0, layer_weights=[math.nan]), E,
     "layer_weights", "finite"),
    ("srip_regularizer iterations float (was truncated)", lambda: rr.srip_regularizer(iterations=2.5), T, "iterations",
     "iterations"),
    ("srip_regularizer groups ints", lambda: rr.srip_regularizer(groups=[1]), T, "groups", "group"),
    ("public_lambda_to_ours batch str", lambda: rr.public_lambda_to_ours(1.0, "a"), T, "batch_size", "batch"),
    ("public_lambda_to_ours batch float", lambda: rr.public_lambda_to_ours(1.0, 2.5), T, "batch_size", "batch"),
    ("public_lambda_to_ours public NaN", lambda: rr.public_lambda_to_ours(math.nan, 2), E, "public", "finite"),
    ("public_lambda_to_ours pixel_range zero", lambda: rr.public_lambda_to_ours(1.0, 2, input_term=True, pixel_range=0),
     E, "pixel_range", "> 0"),
    ("gram_residual empty (was RuntimeError)", lambda: rr.gram_residual(torch.zeros(0, 3)), E, "weight", "non-empty"),
    ("gram_residual NaN", lambda: rr.gram_residual(torch.full((3, 3), math.nan)), E, "weight", "finite"),
    ("spectral_norm iterations float (was truncated)", lambda: rr.spectral_norm(torch.eye(3), 2.5), T, "iterations",
     "iterations"),
    ("spectral_norm v list", lambda: rr.spectral_norm(torch.eye(3), v=[1, 2, 3]), T, "v", "tensor"),
    ("spectral_norm v zero (was sigma 0)", lambda: rr.spectral_norm(torch.eye(3), v=torch.zeros(3)), E, "v", "non-zero"),
    ("spectral_norm a int", lambda: rr.spectral_norm(torch.eye(3, dtype=torch.long)), T, "a", "floating"),
    ("spectral_norm a NaN", lambda: rr.spectral_norm(torch.full((3, 3), math.nan)), E, "a", "finite"),
    ("spectral_norm seed float", lambda: rr.spectral_norm(torch.eye(3), seed=1.5), T, "seed", "seed"),
    ("right_singular_vectors model str", lambda: rr.right_singular_vectors("m"), T, "model", "Model"),
    ("pattern_match list", lambda: rr.pattern_match([1], torch.rand(2, 4)), T, "vectors", "tensor"),
    ("pattern_match empty (was RuntimeError)", lambda: rr.pattern_match(torch.rand(0, 4), torch.rand(2, 4)),
     E, "vectors", "row"),
    ("pattern_match NaN", lambda: rr.pattern_match(torch.full((3, 4), math.nan), torch.rand(2, 4)), E, "vectors",
     "finite"),
    ("greedy_pretraining steps str", lambda: rr.greedy_pretraining(_clf().config, None, "/tmp/x", steps_per_layer="a"),
     T, "steps_per_layer", "steps"),

    # ---- probes
    ("gbt_probe test_fraction str", lambda: probes.gbt_probe(Z, torch.zeros(8, dtype=torch.long), test_fraction="a"),
     T, "test_fraction", "number"),
    ("gbt_probe seed negative", lambda: probes.gbt_probe(Z, torch.zeros(8, dtype=torch.long), seed=-1), E, "seed",
     "seed"),
    ("gbt_probe threads zero (was ignored)", lambda: probes.gbt_probe(Z, torch.zeros(8, dtype=torch.long), threads=0),
     E, "threads", ">= 1"),
    ("gbt_probe features complex", lambda: probes.gbt_probe(Z.to(torch.complex64), torch.zeros(8, dtype=torch.long)),
     T, "features", "real"),
    ("gbt_probe no features", lambda: probes.gbt_probe(Z[:, :0], torch.zeros(8, dtype=torch.long)), E, "features",
     "feature"),

    # ---- plots
    ("image_grid ncols zero (was ZeroDivisionError)", lambda: plots.image_grid(X8, 0), E, "ncols", ">= 1"),
    ("image_grid list", lambda: plots.image_grid([1]), T, "images", "tensor"),
    ("image_grid titles short (was IndexError)", lambda: plots.image_grid(X8, titles=["a"]), E, "titles", "title"),
    ("image_grid 2 channels", lambda: plots.image_grid(torch.rand(2, 2, 8, 8)), E, "images", "C"),
    ("loss_curves smooth float", lambda: plots.loss_curves({"a": {"step": torch.arange(3), "loss": torch.rand(3)}},
                                                           smooth=2.5), T, "smooth", "window"),
    ("loss_curves no step (was KeyError)", lambda: plots.loss_curves({"a": {"loss": torch.rand(10)}}), E, "histories",
     "step"),
    ("loss_curves histories list", lambda: plots.loss_curves([1]), T, "histories", "mapping"),
    ("reconstructions models list", lambda: plots.reconstructions([_vae()], X8), T, "models", "mapping"),
    ("latent_traversal kl short (was IndexError)", lambda: plots.latent_traversal(_vae(), X8[:1], kl_per_dim=[1.0]),
     E, "kl_per_dim", "latent"),
    ("similarity_heatmap 1-D (was IndexError)", lambda: plots.similarity_heatmap(torch.rand(3)), E, "matrix", "matrix"),
    ("similarity_heatmap rows short (was silent)", lambda: plots.similarity_heatmap(torch.rand(3, 2), rows=["a"]),
     E, "rows", "names"),
    ("similarity_heatmap cmap", lambda: plots.similarity_heatmap(torch.rand(2, 2), cmap="nope"), E, "cmap", "colormap"),
    ("sanity_study_figure str", lambda: plots.sanity_study_figure("x"), T, "study", "SanityStudy"),
    ("save_figure not a figure", lambda: plots.save_figure(object(), "/tmp/never_written.png"), T, "fig", "figure"),

    # ---- config
    ("apply_sets None", lambda: cfgmod.apply_sets(_Config(), None), T, "set", "key=value"),
    ("override value not JSON (was json TypeError)", lambda: cfgmod.override(_Config(), {"n": object()}), T, "n",
     "integer"),
    ("diff_keys list", lambda: cfgmod.diff_keys([1], {}), T, "a", "object"),
    ("field_hints int", lambda: cfgmod.field_hints(3), T, "config", "class"),
    ("coerce NaN float", lambda: cfgmod.coerce(math.nan, float, "ratio"), E, "ratio", "number"),

    # ---- text corpus
    ("Corpus.subset negative (was wrapped)", lambda: corpus.generate(5).subset([-1]), E, "indices", "[0, 5)"),
    ("Corpus.subset slice step zero", lambda: corpus.generate(5).subset(slice(None, None, 0)), E, "indices", "step"),
    ("Corpus.labels list", lambda: corpus.generate(2).labels([]), E, "attribute", "topic"),
    ("Corpus attribute_names str (was split into chars)", lambda: corpus.Corpus(["a"], {"x": [0]}, {"x": "ab"}),
     T, "attribute_names", "list"),
    ("load_lines_folder pattern field (was KeyError)", lambda: corpus.load_lines_folder("/tmp", pattern="{split}{x}"),
     E, "pattern", "split"),
    ("write_lines corpus int", lambda: corpus.write_lines(3, "/tmp/never_written.txt"), T, "corpus", "iterable"),

    # ---- T5-VAE
    ("T5VAEConfig t5 str (was AttributeError)", lambda: T5VAE(T5VAEConfig("x")), T, "t5", "T5Config"),
    ("T5VAE config str", lambda: T5VAE("x"), T, "config", "T5VAEConfig"),
    ("T5VAE.from_t5 int", lambda: T5VAE.from_t5(3), T, "t5", "T5"),
    ("T5VAE.posterior list", lambda: _t5vae().posterior([1]), T, "input_ids", "tensor"),
    ("T5VAE.decode_latent z shape", lambda: _t5vae().decode_latent(_ids(), torch.zeros(6, 3)), E, "z", "latents"),
    ("T5VAE.decode_latent z NaN (was NaN logits)",
     lambda: _t5vae().decode_latent(_ids(), torch.full((6, 4), math.nan)), E, "z", "finite"),
    ("T5VAE.generate_latent max_new_tokens float (was truncated)",
     lambda: _t5vae().generate_latent(torch.zeros(2, 4), max_new_tokens=2.5), T, "max_new_tokens", "tokens"),
    ("T5VAE.generate_latent do_sample str", lambda: _t5vae().generate_latent(torch.zeros(2, 4), do_sample="no"),
     T, "do_sample", "bool"),
    ("T5VAE.generate_latent seed negative", lambda: _t5vae().generate_latent(torch.zeros(2, 4), seed=-1),
     E, "seed", "seed"),
    ("T5VAE.generate_latent z NaN", lambda: _t5vae().generate_latent(torch.full((2, 4), math.nan)), E, "z", "finite"),
    ("T5VAE.forward noise shape (was RuntimeError)",
     lambda: _t5vae().forward(_ids(), labels=_ids(), noise=torch.zeros(6, 3)), E, "noise", "shape"),
    ("t5_vae_metrics.evaluate batch float", lambda: t5_vae_metrics.evaluate(_t5vae(), _ids(), batch_size=2.5), T, "batch_size",
     "batch"),
    ("t5_vae_metrics.evaluate iw_samples negative", lambda: t5_vae_metrics.evaluate(_t5vae(), _ids(), iw_samples=-1), E, "iw_samples",
     ">= 0"),
    ("t5_vae_metrics.evaluate mi_samples zero", lambda: t5_vae_metrics.evaluate(_t5vae(), _ids(), mi_samples=0), E, "mi_samples",
     ">= 1"),
    ("t5_vae_metrics.evaluate attributes list (was AttributeError)", lambda: t5_vae_metrics.evaluate(_t5vae(), _ids(), attributes=[1]),
     T, "attributes", "mapping"),
    ("t5_vae_metrics.evaluate attributes negative (was RuntimeError)",
     lambda: t5_vae_metrics.evaluate(_t5vae(), _ids(), attributes={"a": [-1] * 6}), E, "attributes", ">= 0"),
    ("t5_vae_metrics.evaluate attributes float (was truncated)",
     lambda: t5_vae_metrics.evaluate(_t5vae(), _ids(), attributes={"a": [0.5] * 6}), T, "attributes", "integer"),
    ("t5_vae_metrics.evaluate seed negative", lambda: t5_vae_metrics.evaluate(_t5vae(), _ids(), seed=-1), E, "seed", "seed"),
    # text.T5, data loaders, registered configs, the core's density options and float32 overflow
    ("T5.generate max_new_tokens float (was truncated)", lambda: _t5().generate(_ids(), max_new_tokens=2.5), T,
     "max_new_tokens", "int"),
    ("T5.generate do_sample str (was True)", lambda: _t5().generate(_ids(), do_sample="no"), T, "do_sample", "bool"),
    ("T5.generate seed negative (was a pybind TypeError)", lambda: _t5().generate(_ids(), seed=-1), E, "seed", "seed"),
    ("T5.generate sampling at temperature zero", lambda: _t5().generate(_ids(), do_sample=True, temperature=0.0), E,
     "temperature", "0"),
    ("T5.from_pretrained int (was os.fspath's TypeError)", lambda: vt.text.T5.from_pretrained(3), T, "folder", "path"),
    ("load_sklearn_digits images str (was True)", lambda: vt.data.load_sklearn_digits(images="no"), T, "images",
     "bool"),
    ("DensityOptions row_chunk 0 (was checked only when used)", lambda: est.DensityOptions(0, 4), E, "row_chunk",
     "positive"),
    # meta tensors (a shape, no data) and unsigned indices: named, not torch's NotImplementedError/RuntimeError
    ("similarity meta tensor (was Tensor.item() on meta)", lambda: sim.similarity(torch.randn(10, 3, device="meta"),
                                                                                  torch.randn(10, 3)), T, "X", "meta"),
    ("similarity_matrix meta tensor", lambda: sim.similarity_matrix({"a": torch.randn(10, 3, device="meta")},
                                                                    {"b": torch.randn(10, 3)}), T, "acts_a['a']", "meta"),
    ("metrics.mig meta codes (was Cannot copy out of meta)", lambda: __import__("vaetransfer.metrics").metrics.mig(
        torch.randn(10, 3, device="meta"), np.zeros((10, 2), dtype=np.int64)), T, "codes", "meta"),
    ("Model.encode meta x", lambda: _vae().encode(torch.rand(2, 1, 64, 64, device="meta")), T, "x", "meta"),
    ("dsprites uint64 index beyond int64 (was min_all for UInt64)",
     lambda: vt.data.dsprites(torch.tensor([2**64 - 1], dtype=torch.uint64)), E, "indices", "18446744073709551615"),
    ("Dataset.subset uint64 index beyond its rows", lambda: vt.data.dsprites([0, 1, 2]).subset(
        torch.tensor([7], dtype=torch.uint64)), E, "indices", "up to 7"),
]


@functools.lru_cache(maxsize=None)
def _t5():
    return vt.text.T5(T5Config(vocab_size=40, d_model=8, d_ff=16, d_kv=4, num_heads=2, num_layers=1), seed=0)


@pytest.mark.parametrize("call, exc, argument, word", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_bad_input_raises_a_named_error(call, exc, argument, word):
    with pytest.raises(exc) as e:
        call()
    assert type(e.value) in (ArgumentError, ArgumentTypeError), type(e.value)
    assert e.value.argument == argument, str(e.value)
    assert str(e.value).startswith(f"argument '{argument}': "), str(e.value)
    assert word in str(e.value), str(e.value)


def test_named_errors_are_value_and_type_errors():
    assert issubclass(ArgumentError, ValueError) and issubclass(ArgumentTypeError, TypeError)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_is_a_named_error():
    for call in (lambda: check_device("cuda"), lambda: nn.build_model(nn.ModelConfig("mlp", input_shape=[1, 8, 8]),
                                                                      device="cuda"),
                 lambda: check_device(torch.device("cuda", 0))):
        with pytest.raises(ArgumentError) as e:
            call()
        assert e.value.argument == "device" and "CUDA is not available" in str(e.value)


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS is available here")
def test_mps_without_mps_is_a_named_error():
    with pytest.raises(ArgumentError) as e:
        check_device("mps")
    assert e.value.argument == "device" and "MPS" in str(e.value)


def test_check_device_accepts_usable_devices():
    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("cpu")) == torch.device("cpu")
    if torch.cuda.is_available():
        assert check_device("cuda").type == "cuda"
        assert check_device(f"cuda:{torch.cuda.device_count() - 1}").type == "cuda"


def test_checks_keep_correct_input_working():
    # numpy integers are integers; the boundaries of the log-variance ranges are accepted
    assert est.sample_gaussian(M, LV, samples=np.int64(2), seed=np.int64(3)).shape == (2, 8, 3)
    r = est.rate_decomposition(M, _lv(-90.0), batch_size=4)  # narrow posteriors: exact in the offset form
    assert math.isfinite(r.mutual_information)
    assert torch.isfinite(est.gaussian_log_density_matrix(Z, M, _lv(-88.0))).any()
    lv64 = torch.full((8, 3), -200.0, dtype=torch.float64)  # float64 has the range float32 lacks
    assert math.isfinite(est.rate_decomposition(M.double(), lv64, batch_size=4).mutual_information)
    # a slice with a negative step selects rows in that order
    assert vt.data.dsprites(slice(4, 0, -2), images=False).factors.shape[0] == 2
    assert _dataset().subset(slice(None, None, -1)).labels.tolist() == (torch.arange(10) % 3).flip(0).tolist()
    # an empty batch has no predictions; one group name is a group
    assert _clf().predict(torch.rand(0, 12)).shape == (0,)
    assert rr.srip_regularizer(groups="all").params["groups"] == ["all"]
    # a layer selection given as the keys of a mapping
    assert list(_vae().activations(X8, {"mean": 0, "logvar": 0}.keys())) == ["mean", "logvar"]


def test_numpy_and_tensor_forms_of_counts_and_sequences_still_work():
    from vaetransfer._checks import check_int, is_int

    assert check_int(torch.tensor(3), "n") == 3 and check_int(np.int64(4), "n") == 4
    assert not is_int(torch.tensor(True)) and not is_int(torch.tensor(2.0)) and not is_int(torch.tensor([1, 2]))
    assert not is_int(torch.tensor([3])) and not is_int(np.array([3]))  # one-element sequences stay sequences
    assert rr.rr_regularizer(layer_weights=np.array([1.0, 0.5])).params["layer_weights"] == [1.0, 0.5]
    assert rr.rr_regularizer(layer_weights=torch.tensor([2.0])).params["layer_weights"] == [2.0]
    with pytest.raises(ArgumentError, match="one-dimensional"):
        rr.rr_regularizer(layer_weights=np.ones((2, 2)))
    study = sim.sanity_study(ns=np.array([8, 16]), shared=np.array([0.5]), features=4, repeats=1)
    assert study.ns == [8, 16] and study.shared == [0.5]
