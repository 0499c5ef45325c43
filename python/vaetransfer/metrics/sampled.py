"""Disentanglement metrics that draw their own data from a factor grid, and the one call studies use.

* :class:`FactorSampler` (:mod:`.factor_sampler`) — the ground truth the metrics draw from: a
  procedural factor grid rendered by index, your renderer, or a pool of your labelled examples.
* :func:`codes` — a model's representation of images: the posterior mean or one seeded sample.
* :func:`beta_vae_score` — Higgins et al. 2017, "β-VAE: Learning Basic Visual Concepts with a
  Constrained Variational Framework" (§3, the disentanglement metric).
* :func:`factor_vae_score` — Kim & Mnih 2018, "Disentangling by Factorising" (§4).
* :func:`disentanglement` — every metric of :mod:`vaetransfer.metrics` for one model on one
  domain, as plain dicts.

Defaults are disentanglement_lib's (Locatello et al. 2019, "Challenging Common Assumptions in the
Unsupervised Learning of Disentangled Representations", and the metric configurations of its
``unsupervised_study_v1``): BetaVAE and FactorVAE with batches of 64, 10,000 training and 5,000
evaluation points, FactorVAE's variances from 10,000 codes and dimensions pruned below a standard
deviation of 0.05.
"""
from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from .. import _C
from .._checks import MAX_COUNT, check_fits, check_flag, check_int, check_number, check_seed, check_str, sequence, type_error, value_error
from ..nn import Model
from . import supervised, unsupervised
from ._common import Result, frozen
from .factor_sampler import FactorSampler, as_sampler

__all__ = ["FactorSampler", "codes", "beta_vae_score", "factor_vae_score", "BetaVAEScore", "FactorVAEScore",
           "disentanglement", "ALL_METRICS"]

#: Every metric :func:`disentanglement` computes, in the order of its result.
ALL_METRICS = ("beta_vae", "factor_vae", "mig", "sap", "dci", "modularity_explicitness", "irs",
               "gaussian_total_correlation", "gaussian_wasserstein_correlation")

_REPRESENTATIONS = ("mean", "sampled")
#: Images rendered and encoded per call in the sampled metrics (a fixed number: the result of a
#: sampled representation depends on how its noise is drawn per call, so it must not vary).
_IMAGES_PER_CALL = 2048


# ---------------------------------------------------------------- codes
def _is_core_vae(model) -> bool:
    return isinstance(model, Model) and model.family == "vae"


def codes(model, images, *, representation: str = "mean", seed: int = 0, batch_size: int = 256) -> torch.Tensor:
    """The representation of ``images`` [N, *input_shape] (float, in the model's scale) by
    ``model``: float32 [N, D] on the CPU.

    * a VAE of :mod:`vaetransfer.nn`: ``representation="mean"`` gives the posterior mean of
      q(z|x) = N(mean, diag exp(logvar)) (disentanglement_lib's ``mean`` representation, the
      default of its studies); ``"sampled"`` one draw ``mean + exp(logvar/2)·ε``, ε the model's
      own per-example noise for N examples from ``seed`` (``model.noise(N, seed=seed)``, one draw
      for all rows, so the codes do not depend on ``batch_size``). The encoder runs in eval mode
      without autograd, in chunks of ``batch_size`` (the model's mode is restored after).
    * any callable ``images -> codes [B, D]`` (tensor or array): its output is the
      representation; ``representation`` must then be ``"mean"`` (the callable chooses).
    """
    representation = check_str(representation, "representation", _REPRESENTATIONS)
    seed = check_seed(seed)
    batch_size = check_int(batch_size, "batch_size", 1, what="a batch size")
    if not isinstance(images, torch.Tensor):
        raise type_error("images", f"expected a tensor of images, got {type(images).__name__}")
    if images.dim() < 2 or images.shape[0] < 1 or not images.is_floating_point():
        raise value_error("images", f"expected float images [N, ...] with N >= 1, got {images.dtype} "
                                    f"{list(images.shape)}")
    if _is_core_vae(model):
        return _vae_codes(model, images, representation, seed, batch_size)
    if callable(model):
        if representation != "mean":
            raise value_error("representation", "a callable gives its own codes: leave representation='mean'")
        return _checked_codes(model(images), images.shape[0], "model")
    raise type_error("model", f"expected a vaetransfer VAE or a callable images -> codes, got {type(model).__name__}")


def _vae_codes(model, images: torch.Tensor, representation: str, seed: int, batch_size: int) -> torch.Tensor:
    n = images.shape[0]
    noise = model.noise(n, seed=seed) if representation == "sampled" else None
    device = torch.device(model.device)
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.no_grad():
            for start in range(0, n, batch_size):
                mean, logvar = model.encode(images[start:start + batch_size].to(device))
                if noise is not None:
                    mean = mean + torch.exp(0.5 * logvar) * noise[start:start + batch_size].to(mean.device)
                out.append(mean.float().cpu())
    finally:
        model.train(was_training)
    return _checked_codes(torch.cat(out), n, "model")


def _checked_codes(z, n: int, argument: str) -> torch.Tensor:
    """An encoder's output as float32 [n, D], finite."""
    if isinstance(z, np.ndarray):
        z = torch.from_numpy(z)
    if not isinstance(z, torch.Tensor):
        raise type_error(argument, f"expected the encoder to return codes (a tensor or an array), got "
                                   f"{type(z).__name__}")
    if z.dim() != 2 or z.shape[0] != n or z.shape[1] < 1:
        raise value_error(argument, f"expected codes [{n}, D] from the encoder, got shape {list(z.shape)}")
    z = z.detach().to("cpu", torch.float32)
    if not bool(torch.isfinite(z).all()):
        raise value_error(argument, "the encoder returned NaN or inf codes")
    return z


class _Encoder:
    """``encode`` as the sampled metrics call it: codes as float64 NumPy [B, D], checked; a VAE
    is wrapped so that every call draws fresh noise for a sampled representation (seeded by the
    seed and the call's number)."""

    def __init__(self, encode, representation: str = "mean", seed: int = 0, batch_size: int = 256):
        if not (callable(encode) or _is_core_vae(encode)):
            raise type_error("encode", f"expected a callable images -> codes or a vaetransfer VAE, got "
                                       f"{type(encode).__name__}")
        if representation != "mean" and not _is_core_vae(encode):
            raise value_error("representation", "a callable gives its own codes: leave representation='mean'")
        self.encode, self.representation, self.seed, self.batch_size = encode, representation, seed, batch_size
        self.calls = 0
        self.dim: int | None = None

    def __call__(self, images: torch.Tensor) -> np.ndarray:
        if _is_core_vae(self.encode):
            # One fresh seed per call, so that no two batches share their noise.
            z = _vae_codes(self.encode, images, self.representation, _call_seed(self.seed, self.calls), self.batch_size)
        else:
            z = _checked_codes(self.encode(images), images.shape[0], "encode")
        self.calls += 1
        if self.dim is None:
            self.dim = int(z.shape[1])
        elif z.shape[1] != self.dim:
            raise value_error("encode", f"expected codes of {self.dim} dimensions in every call, got {z.shape[1]}")
        return z.numpy().astype(np.float64)


def _encode_groups(encoder: _Encoder, sampler: FactorSampler, factors: np.ndarray) -> np.ndarray:
    """Codes [P, B, D] of factor groups [P, B, K], rendered and encoded a fixed number of images
    at a time."""
    p, b, k = factors.shape
    per_call = max(1, _IMAGES_PER_CALL // b)
    out = None
    for start in range(0, p, per_call):
        block = factors[start:start + per_call].reshape(-1, k)
        z = encoder(sampler.images(block)).reshape(-1, b, encoder.dim)
        if out is None:
            out = np.empty((p, b, z.shape[2]), dtype=np.float64)
        out[start:start + z.shape[0]] = z
    return out


def _encode_rows(encoder: _Encoder, sampler: FactorSampler, factors: np.ndarray) -> np.ndarray:
    return _encode_groups(encoder, sampler, factors[:, None, :])[:, 0, :]


# ---------------------------------------------------------------- results
@dataclass(frozen=True, eq=False)
class BetaVAEScore(Result):
    """The BetaVAE metric: ``score`` = ``eval_accuracy`` of the linear classifier of the fixed
    factor; ``train_accuracy`` on its training points; ``converged``: the solver converged within
    its iteration limit; ``factor_names``: the classes (the factors that vary)."""

    score: float
    train_accuracy: float
    eval_accuracy: float
    converged: bool
    factor_names: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class FactorVAEScore(Result):
    """The FactorVAE metric: ``score`` = ``eval_accuracy`` of the majority-vote classifier;
    ``num_active_dims``: the dimensions kept after pruning (0: every dimension pruned, the scores
    are then 0); ``active_dims`` [D] which ones; ``votes`` [D, K] and ``eval_votes`` [D, K]: the
    training and evaluation vote tables (dimension of least normalised variance × fixed factor);
    ``factor_names``: the K factors that vary."""

    score: float
    train_accuracy: float
    eval_accuracy: float
    num_active_dims: int
    active_dims: np.ndarray = field(repr=False)
    votes: np.ndarray = field(repr=False)
    eval_votes: np.ndarray = field(repr=False)
    factor_names: tuple[str, ...] = ()


def _check_sizes(batch_size, num_train, num_eval, minimum_batch: int, sampler: FactorSampler) -> tuple[int, int, int]:
    """The sizes, in range, and each set's factor combinations (``num · batch_size`` rows of K int64,
    held about three times while the pairs are built) within memory — before anything is drawn."""
    sizes = (check_int(batch_size, "batch_size", minimum_batch, MAX_COUNT, what="a batch size"),
             check_int(num_train, "num_train", 1, MAX_COUNT, what="a number of training points"),
             check_int(num_eval, "num_eval", 1, MAX_COUNT, what="a number of evaluation points"))
    for argument, num in (("num_train", sizes[1]), ("num_eval", sizes[2])):
        check_fits(3 * 8 * num * sizes[0] * sampler.num_factors, argument,
                   f"{num} points of {sizes[0]} examples ({sampler.num_factors} factors each)")
    return sizes


# ---------------------------------------------------------------- BetaVAE
def beta_vae_score(encode, sampler: FactorSampler, *, batch_size: int = 64, num_train: int = 10_000,
                   num_eval: int = 5_000, seed: int = 0, representation: str = "mean",
                   classifier_options: Mapping[str, Any] | None = None) -> BetaVAEScore:
    """The BetaVAE disentanglement metric (Higgins et al. 2017, "β-VAE: Learning Basic Visual
    Concepts with a Constrained Variational Framework", §3 and Appendix A.4), as
    disentanglement_lib's ``compute_beta_vae_sklearn`` computes it.

    One point: a factor k drawn uniformly among the factors that vary; two batches of
    ``batch_size`` uniform factor combinations, the second sharing the first's class of factor k
    pair by pair; the point's features are ``mean_b |z1_b − z2_b|`` [D] over the pairs of codes,
    its label k. A scikit-learn ``LogisticRegression`` with default settings (the current
    defaults: lbfgs, C = 1, 100 iterations; ``classifier_options`` overrides them — e.g.
    ``{"solver": "liblinear"}`` is the one-vs-rest default of the scikit-learn releases before
    0.22 under which disentanglement_lib's published numbers were computed) is trained on
    ``num_train`` points; the score is its accuracy on ``num_eval`` fresh points.

    Defaults are disentanglement_lib's study configuration (``beta_vae_sklearn.batch_size = 64,
    num_train = 10000, num_eval = 5000``): 1.92 M images rendered and encoded — lower them for a
    cheaper estimate. Draws (NumPy ``default_rng(seed)``, training set then evaluation set):
    labels ``integers(0, K_varying, num)``, then the first and the second batches' combinations
    (:meth:`FactorSampler.sample_factors`, ``num · batch_size`` rows each, point after point).

    ``encode``: a callable images → codes [B, D] (see :func:`codes`) or a vaetransfer VAE, encoded
    with ``representation`` (a sampled representation draws fresh noise in every call);
    ``sampler``: a :class:`FactorSampler` with at least two varying factors.
    """
    sampler = as_sampler(sampler)
    batch_size, num_train, num_eval = _check_sizes(batch_size, num_train, num_eval, 1, sampler)
    seed = check_seed(seed)
    encoder = _Encoder(encode, check_str(representation, "representation", _REPRESENTATIONS), seed)
    options = _classifier_options(classifier_options)
    rng = np.random.default_rng(seed)
    varying = np.asarray(sampler.varying)
    x_train, y_train = _beta_vae_points(encoder, sampler, varying, batch_size, num_train, rng)
    if np.unique(y_train).size < 2:
        raise value_error("num_train", f"the {num_train} training points fix a single factor; draw more points")
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(**{"random_state": seed, **options})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(x_train, y_train)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    train_accuracy = float(np.mean(model.predict(x_train) == y_train))
    x_eval, y_eval = _beta_vae_points(encoder, sampler, varying, batch_size, num_eval, rng)
    eval_accuracy = float(np.mean(model.predict(x_eval) == y_eval))
    names = tuple(sampler.factor_names[k] for k in sampler.varying)
    return BetaVAEScore(eval_accuracy, train_accuracy, eval_accuracy, converged, names)


def _classifier_options(options) -> dict:
    if options is None:
        return {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise type_error("classifier_options", f"expected a mapping of LogisticRegression arguments, got {options!r}")
    return dict(options)


def _beta_vae_points(encoder, sampler, varying, batch_size, num, rng) -> tuple[np.ndarray, np.ndarray]:
    """(features [num, D], labels [num]) of the BetaVAE metric; labels are factor column indices."""
    labels = varying[rng.integers(0, len(varying), size=num)]
    k = sampler.num_factors
    first = sampler.sample_factors(num * batch_size, rng).reshape(num, batch_size, k)
    if sampler._pool is not None:  # rows of the pool that share the fixed factor's class with the first
        second = sampler.sample_sharing(first.reshape(-1, k), np.repeat(labels, batch_size), rng)
        second = second.reshape(num, batch_size, k)
    else:
        second = sampler.sample_factors(num * batch_size, rng).reshape(num, batch_size, k)
        points = np.arange(num)
        second[points, :, labels] = first[points, :, labels]
    # The two batches of a point are encoded in one call, a fixed number of points at a time.
    pairs = np.concatenate([first, second], axis=1)
    z = _encode_groups(encoder, sampler, pairs)
    features = np.abs(z[:, :batch_size] - z[:, batch_size:]).mean(axis=1)
    return features, labels


# ---------------------------------------------------------------- FactorVAE
def factor_vae_score(encode, sampler: FactorSampler, *, batch_size: int = 64, num_train: int = 10_000,
                     num_eval: int = 5_000, num_variance_estimate: int = 10_000, prune_dims_threshold: float = 0.05,
                     seed: int = 0, representation: str = "mean") -> FactorVAEScore:
    """The FactorVAE disentanglement metric (Kim & Mnih 2018, "Disentangling by Factorising",
    §4), as disentanglement_lib's ``compute_factor_vae`` computes it, with two of its faults fixed.

    The variance of every code dimension over ``num_variance_estimate`` uniform examples
    (``ddof=1``); dimensions whose standard deviation is below ``prune_dims_threshold`` are pruned
    (disentanglement_lib's ``prune_dims``: ``sqrt(variance) >= threshold`` keeps a dimension;
    0.05 in its studies). One point: a factor k drawn uniformly among the factors that vary, a
    batch of ``batch_size`` uniform combinations sharing one random class of factor k; its vote
    goes to the active dimension whose within-batch variance (``ddof=1``), divided by its global
    variance (the codes normalised by their standard deviation), is least — ties to the lowest
    dimension, as ``np.argmin``. The votes of ``num_train`` points form a table [D, K]
    (``_C.metrics.vote_counts``); the classifier maps each dimension to the factor with the most
    votes, and the score is its accuracy on the votes of ``num_eval`` fresh points.

    Fixed here, where disentanglement_lib differs:

    * ``num_active_dims`` counts the dimensions kept after pruning (disentanglement_lib reports
      the length of its mask: every dimension);
    * a dimension whose most votes are tied between factors predicts each of them with equal
      probability, and the accuracies are the expected accuracy of that classifier: the dimension
      contributes the mean of its tied factors' votes (disentanglement_lib's ``argmax`` gives the
      tie to the lowest factor index, favouring the factors listed first). A dimension with no
      training votes ties all K factors. The rule needs no random draw.

    Every dimension pruned (constant codes, a collapsed posterior): both accuracies are 0 and
    ``num_active_dims`` is 0, as disentanglement_lib returns. Defaults are disentanglement_lib's
    study configuration (``factor_vae_score.batch_size = 64, num_train = 10000, num_eval = 5000,
    num_variance_estimate = 10000``, ``prune_dims.threshold = 0.05``): 970,000 images rendered and
    encoded. Draws (``default_rng(seed)``): the variance examples; then for the training set and
    the evaluation set the labels ``integers(0, K_varying, num)`` and ``num · batch_size``
    combinations, each batch's factor k set to its first row's class.
    """
    sampler = as_sampler(sampler)
    batch_size, num_train, num_eval = _check_sizes(batch_size, num_train, num_eval, 2, sampler)
    num_variance_estimate = check_int(num_variance_estimate, "num_variance_estimate", 2, MAX_COUNT,
                                      what="a number of examples")
    check_fits(8 * num_variance_estimate * sampler.num_factors, "num_variance_estimate",
               f"{num_variance_estimate} examples' factors")
    threshold = check_number(prune_dims_threshold, "prune_dims_threshold", minimum=0.0)
    seed = check_seed(seed)
    encoder = _Encoder(encode, check_str(representation, "representation", _REPRESENTATIONS), seed)
    rng = np.random.default_rng(seed)
    varying = np.asarray(sampler.varying)
    names = tuple(sampler.factor_names[k] for k in sampler.varying)

    z = _encode_rows(encoder, sampler, sampler.sample_factors(num_variance_estimate, rng))
    global_variance = z.var(axis=0, ddof=1)
    active = np.sqrt(global_variance) >= threshold
    d = z.shape[1]
    if not active.any():
        empty = np.zeros((d, len(varying)), dtype=np.int64)
        return FactorVAEScore(0.0, 0.0, 0.0, 0, frozen(active), frozen(empty), frozen(empty), names)
    train_votes = _factor_vae_votes(encoder, sampler, varying, batch_size, num_train, rng, global_variance, active)
    eval_votes = _factor_vae_votes(encoder, sampler, varying, batch_size, num_eval, rng, global_variance, active)
    weights = _tie_weights(train_votes)
    train_accuracy = float((weights * train_votes).sum() / train_votes.sum())
    eval_accuracy = float((weights * eval_votes).sum() / eval_votes.sum())
    return FactorVAEScore(eval_accuracy, train_accuracy, eval_accuracy, int(active.sum()), frozen(active),
                          frozen(train_votes), frozen(eval_votes), names)


def _factor_vae_votes(encoder, sampler, varying, batch_size, num, rng, global_variance, active) -> np.ndarray:
    """The vote table [D, K_varying] of ``num`` FactorVAE points."""
    choice = rng.integers(0, len(varying), size=num)
    labels = varying[choice]
    f = sampler.sample_factors(num * batch_size, rng).reshape(num, batch_size, sampler.num_factors)
    if sampler._pool is not None:  # a batch: rows of the pool sharing the first row's class of the factor
        first = np.repeat(f[:, :1], batch_size, axis=1).reshape(-1, sampler.num_factors)
        f = sampler.sample_sharing(first, np.repeat(labels, batch_size), rng).reshape(f.shape)
    else:
        points = np.arange(num)
        f[points, :, labels] = f[points, :1, labels]
    z = _encode_groups(encoder, sampler, f)
    ratio = z.var(axis=1, ddof=1)[:, active] / global_variance[active]
    dims = np.flatnonzero(active)[np.argmin(ratio, axis=1)]
    return _vote_counts(dims, choice, len(global_variance), len(varying))


def _vote_counts(rows: np.ndarray, cols: np.ndarray, num_rows: int, num_cols: int) -> np.ndarray:
    """The majority-vote table [num_rows, num_cols] (counts of each (row, col) pair), in C++."""
    table = _C.metrics.vote_counts(torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int64)),
                                   torch.from_numpy(np.ascontiguousarray(cols, dtype=np.int64)), num_rows, num_cols)
    return table.numpy() if isinstance(table, torch.Tensor) else np.asarray(table)


def _tie_weights(votes: np.ndarray) -> np.ndarray:
    """[D, K]: the probability that the majority-vote classifier predicts factor k for dimension
    d — uniform over the factors with the most votes of row d."""
    winners = votes == votes.max(axis=1, keepdims=True)
    return winners / winners.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------- every metric at once
def _metric_kwargs(fn, options: Mapping[str, Any], metric: str, **given) -> dict:
    """``given`` arguments the metric takes, then the study's ``options`` for it (checked names)."""
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in given.items() if k in params}
    for key, value in options.items():
        if key not in params:
            raise value_error("options", f"{metric!r} takes no argument {key!r} (it takes "
                                         f"{[p for p in params if p not in ('codes', 'factors', 'encode', 'sampler')]})")
        kwargs[key] = value
    return kwargs


def disentanglement(model, domain, *, n: int = 10_000, representation: str = "mean",
                    metrics: Sequence[str] = ALL_METRICS, seed: int = 0, data_seed: int = 0,
                    factor_names: Sequence[str] | None = None, batch_size: int = 256,
                    options: Mapping[str, Mapping[str, Any]] | None = None,
                    progress: bool = False) -> dict[str, Any]:
    """Every requested disentanglement metric of ``model`` on ``domain``: the one call studies use.

    ``model``: a VAE of :mod:`vaetransfer.nn` (its ``representation``, ``"mean"`` or
    ``"sampled"``, see :func:`codes`) or a callable images → codes. ``domain``: what
    :class:`FactorSampler` takes (a registered procedural domain such as ``"dsprites"`` or
    ``"solids"``, a Domain, a Dataset holding a full grid) or a FactorSampler; ``data_seed`` seeds
    a seeded domain's generator.

    The metrics on codes (MIG, SAP, DCI, modularity/explicitness, IRS, and the Gaussian total and
    Wasserstein correlations) share one set of ``n`` examples: factor combinations drawn uniformly
    and exactly from the grid (``default_rng(seed)``), rendered and encoded in chunks of
    ``batch_size``; their factors are the ones that vary (a factor of one class, like dSprites'
    ``color``, is left out as disentanglement_lib leaves it out), named by ``factor_names``
    (default: the domain's names). BetaVAE and FactorVAE draw their own batches from the grid with
    ``seed`` (disentanglement_lib's defaults: ~2.9 M images together — make them cheaper with
    ``options={"beta_vae": {"num_train": 1000, "num_eval": 500}, ...}``). ``options`` maps a
    metric to keyword arguments of its function (e.g. ``{"dci": {"regressor": "lasso"}}``).

    ``progress=True`` shows a bar: the shared codes, then one step per metric (BetaVAE and
    FactorVAE with their defaults take minutes).

    Returns ``{metric: result.to_dict()}`` for each metric in ``metrics`` (the Gaussian
    correlations as ``{"score": ...}``, the Wasserstein one with its ``normalized`` value),
    plus ``"n"``, ``"representation"``, ``"factor_names"``, ``"domain"`` and ``"seed"``.
    """
    representation = check_str(representation, "representation", _REPRESENTATIONS)
    n = check_int(n, "n", 2, what="a number of examples")
    seed, data_seed = check_seed(seed), check_seed(data_seed, "data_seed")
    batch_size = check_int(batch_size, "batch_size", 1, what="a batch size")
    if isinstance(metrics, str):
        metrics = [metrics]
    metrics = sequence(metrics, "metrics", "a sequence of metric names")
    for m in metrics:
        check_str(m, "metrics", ALL_METRICS)
    if len(set(metrics)) != len(metrics):
        raise value_error("metrics", f"expected distinct metric names, got {metrics!r}")
    options = {} if options is None else options
    if not isinstance(options, Mapping) or not all(isinstance(v, Mapping) for v in options.values()):
        raise type_error("options", f"expected {{metric: {{argument: value}}}}, got {options!r}")
    for m in options:
        if m not in metrics:
            raise value_error("options", f"options for {m!r}, which is not among the metrics {list(metrics)}")
    if not (_is_core_vae(model) or callable(model)):
        raise type_error("model", f"expected a vaetransfer VAE or a callable images -> codes, got {type(model).__name__}")
    if representation != "mean" and not _is_core_vae(model):
        raise value_error("representation", "a callable gives its own codes: leave representation='mean'")
    sampler = domain if isinstance(domain, FactorSampler) else FactorSampler(domain, seed=data_seed)
    sampler = as_sampler(sampler, "domain")
    varying = list(sampler.varying)
    names = tuple(sampler.factor_names[k] for k in varying)
    if factor_names is not None:
        given = sequence(factor_names, "factor_names", "a sequence of factor names")
        if len(given) != len(varying) or not all(isinstance(s, str) for s in given):
            raise value_error("factor_names", f"expected {len(varying)} names (the factors that vary: {list(names)}), "
                                              f"got {given!r}")
        names = tuple(given)

    result: dict[str, Any] = {}
    on_codes = [m for m in metrics if m not in ("beta_vae", "factor_vae")]
    bar = None
    if check_flag(progress, "progress"):
        from tqdm.auto import tqdm
        bar = tqdm(total=len(metrics) + bool(on_codes), desc=f"disentanglement on {sampler.name}", unit="step")
    if on_codes:
        factors = sampler.sample_factors(n, np.random.default_rng(seed))
        z = torch.cat([codes(model, sampler.images(factors[s:s + _IMAGES_PER_CALL]), representation=representation,
                             seed=_call_seed(seed, i), batch_size=batch_size)
                       for i, s in enumerate(range(0, n, _IMAGES_PER_CALL))])
        y = factors[:, varying]
        if bar is not None:
            bar.set_postfix_str("codes", refresh=False)
            bar.update()
    for m in metrics:
        if bar is not None:
            bar.set_postfix_str(m, refresh=True)
        opts = dict(options.get(m, {}))
        if m in ("beta_vae", "factor_vae"):
            fn = beta_vae_score if m == "beta_vae" else factor_vae_score
            kwargs = _metric_kwargs(fn, opts, m, seed=seed, representation=representation)
            value = fn(model, sampler, **kwargs).to_dict()
            value["factor_names"] = list(names)
        elif m in ("gaussian_total_correlation", "gaussian_wasserstein_correlation"):
            if opts:
                raise value_error("options", f"{m!r} takes no options, got {sorted(opts)}")
            if m == "gaussian_total_correlation":
                value = {"score": unsupervised.gaussian_total_correlation(z)}
            else:
                value = {"score": unsupervised.gaussian_wasserstein_correlation(z),
                         "normalized": unsupervised.gaussian_wasserstein_correlation(z, normalized=True)}
        else:
            fn = getattr(supervised, m)
            value = fn(z, y, **_metric_kwargs(fn, opts, m, seed=seed, factor_names=list(names))).to_dict()
        result[m] = value
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    result.update(n=n, representation=representation, factor_names=list(names), domain=sampler.name, seed=seed)
    return result


def _call_seed(seed: int, call: int) -> int:
    """The noise seed of the ``call``-th chunk of a sampled representation."""
    return int(np.random.SeedSequence([seed, call]).generate_state(1, np.uint64)[0] >> 1)
