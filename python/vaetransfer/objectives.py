"""Training objectives (tasks) of the C++ core (``csrc/vaetransfer/objectives``), by registered name.

A task turns a batch into a loss and named scalars (the history columns); :func:`registered`
lists the tasks with their parameters, from the core (and the list at the end of this docstring).
``beta-tc-vae`` estimates TC = KL(q(z) ‖ ∏ q(z_j)) by minibatch-weighted (``tc_sampling="mws"``,
Eq. 12) or minibatch-stratified (``"mss"``) sampling over ``dataset_size`` examples, with its
log(n·m) constants (``vaetransfer.estimators``' implementation); ``dip-vae-ii`` uses
Cov[z] = Cov_batch[μ(x)] (1/m) + mean_batch diag σ²(x), λ_d defaulting to λ_od.

VAE objectives: loss per example = −log p(x|z) + R, averaged over the batch, with the
``bernoulli`` (sigmoid cross-entropy) or ``gaussian`` (N(x; logits, σ²), constant included)
likelihood; ``report_tc=True`` also reports the minibatch-weighted TC. Loss weights (``beta``,
``capacity``, ``gamma``, ``lambda_od``, ``lambda_d``) can follow a schedule
(``TrainConfig.schedules``).
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

from . import _C
from ._checks import check_int, check_number, check_seed, check_str, check_tensor, type_error, value_error
from ._registry import RegisteredConfig, listing
from .data import as_dataset
from .estimators import check_sampled_logvar
from .nn import Model

__all__ = ["ObjectiveConfig", "TaskConfig", "make_objective", "registered", "objective_names", "OBJECTIVES",
           "log_likelihood", "negative_log_likelihood", "gaussian_kl", "evaluate", "importance_weighted_log_likelihood"]


def registered() -> list[dict]:
    """Every registered task: ``name, family, doc, aliases, params``."""
    return list(_C.objectives.registered())


def objective_names(family: str | None = None) -> tuple[str, ...]:
    """Names of the registered tasks (of one model family: ``"vae"``, ``"classifier"``)."""
    return tuple(e["name"] for e in registered() if family is None or e["family"] == family)


class TaskConfig(RegisteredConfig):
    """An objective by registered name with its parameters, e.g. ``TaskConfig("beta-tc-vae", beta=6)``
    or ``TaskConfig("classification")``. Unset parameters take the core's defaults."""

    _entries = staticmethod(lambda: _C.objectives.registered())
    _default_name = "beta-vae"
    # Fields of the ObjectiveConfig dataclass of earlier releases, dropped when they do not apply.
    _LEGACY = {"beta", "gamma", "c_max", "iteration_threshold", "lambda_od", "lambda_d", "tc_sampling",
               "dataset_size", "likelihood", "gaussian_std"}

    @classmethod
    def from_dict(cls, d: dict) -> "TaskConfig":
        if not isinstance(d, Mapping):
            raise type_error("objective", f"expected an object with the objective's name and parameters, got {d!r}")
        d = dict(d)
        name = d.pop("name", None)
        e = cls.entry(name) if isinstance(name, str) else None
        if e is not None and set(d) >= cls._LEGACY - {"dataset_size", "lambda_d"}:  # an old config.json
            declared = {p["name"] for p in e["params"]}
            d = {k: v for k, v in d.items() if k in declared}
        return cls(name, **d)

    def to_params(self, dataset_size: int | None = None) -> dict:
        """The parameters for the core, with ``dataset_size`` filled in when the task declares it."""
        params = dict(self.params)
        e = self.entry(self.name) if isinstance(self.name, str) else None
        declared = {p["name"] for p in e["params"]} if e else set()
        if dataset_size is not None and "dataset_size" in declared and "dataset_size" not in params:
            params["dataset_size"] = int(dataset_size)
        return params


#: The name used by the VAE-centred API of earlier releases.
ObjectiveConfig = TaskConfig
OBJECTIVES = objective_names("vae")


def make_objective(config: TaskConfig, dataset_size: int | None = None) -> "_C.objectives.Task":
    """The core task. A VAE objective can be called as ``obj(x, logits, mean, logvar, z, step)`` → dict
    of terms (``loss, reconstruction, kl, kl_per_dim, latent_penalty, neg_elbo, tc``) and weights at ``step``."""
    if not isinstance(config, TaskConfig):
        raise type_error("config", f"expected a TaskConfig, got {type(config).__name__}")
    if not isinstance(config.name, str):
        raise type_error("objective", f"expected a string, got {type(config.name).__name__}")
    if dataset_size is not None:
        dataset_size = check_int(dataset_size, "dataset_size", 1, what="a data set size")
    return _C.objectives.make_task(config.name, config.to_params(dataset_size))


def log_likelihood(x: torch.Tensor, output: torch.Tensor, likelihood: str = "bernoulli", gaussian_std: float = 1.0,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """log p(x | output) per example [N], summed over the other axes: ``bernoulli`` (logits),
    ``gaussian`` (mean, σ = gaussian_std) or ``categorical`` (logits [N, ..., V], x class ids, optional mask)."""
    check_tensor(x, "x")
    check_tensor(output, "output")
    check_str(likelihood, "likelihood")
    check_tensor(mask, "mask", optional=True)
    gaussian_std = check_number(gaussian_std, "gaussian_std", finite=False)
    if likelihood in ("bernoulli", "gaussian") and x.shape != output.shape:
        raise value_error("output", f"expected the shape of x {list(x.shape)}, got {list(output.shape)}")
    return _C.objectives.log_likelihood(x, output, likelihood, gaussian_std, mask)


def negative_log_likelihood(x: torch.Tensor, logits: torch.Tensor, likelihood: str = "bernoulli",
                            gaussian_std: float = 1.0) -> torch.Tensor:
    """−log p(x|z) per example [N], summed over pixels."""
    return -log_likelihood(x, logits, likelihood, gaussian_std)


def gaussian_kl(mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mean, exp(logvar)) ‖ N(0, 1)) per example and latent, [N, latent]."""
    check_tensor(mean, "mean")
    check_tensor(logvar, "logvar")
    if logvar.shape != mean.shape:
        raise value_error("logvar", f"expected the shape of 'mean' {list(mean.shape)}, got {list(logvar.shape)}")
    for name, t in (("mean", mean), ("logvar", logvar)):
        if not bool(torch.isfinite(t.detach()).all()):
            raise value_error(name, "expected finite values, found NaN or inf")
    return _C.objectives.gaussian_kl(mean, logvar)


def _task(objective, n: int) -> "_C.objectives.Task":
    """The core task of ``objective``; its minibatch estimators' data-set size (unused by the
    evaluation, required by some objectives) is the ``n`` evaluated examples."""
    if isinstance(objective, str):
        objective = TaskConfig(objective)
    if isinstance(objective, TaskConfig):
        return make_objective(objective, dataset_size=n)
    if isinstance(objective, _C.objectives.Task):
        return objective
    raise type_error("objective", f"expected a TaskConfig, a registered name or a core task, got {type(objective).__name__}")


def _model_impl(model):
    if not isinstance(model, Model):
        raise type_error("model", f"expected a vaetransfer model, got {type(model).__name__}")
    return model._impl


def _examples(data, label: str | None):
    """(x, y, data_scale) of anything :func:`vaetransfer.data.as_dataset` accepts."""
    ds = as_dataset(data, label=label)
    return ds.images, ds.labels, float(ds.scale)


def evaluate(model, objective="beta-vae", data=None, *, label: str | None = None, batch_size: int = 512,
             seed: int = 0, z: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The objective's per-example evaluation terms on ``data`` (anything
    :func:`vaetransfer.data.as_dataset` accepts), computed by the core in eval mode without
    autograd: ``{name: [N, ...]}`` on the CPU. The one place evaluation terms come from:

    * VAE objectives: ``distortion`` −log p(x|z) (z one draw of q(z|x), batch i seeded by
      (``seed``, i)), ``rate`` KL(q(z|x) ‖ N(0, I)), ``neg_elbo``, ``mean``, ``logvar`` and the
      drawn ``z`` — nats per example;
    * ``classification``: ``cross_entropy`` −log p(y|x) and ``correct`` (needs labels);
    * ``t5-vae``: ``reconstruction`` (token NLL summed over each sentence's real tokens), ``kl``,
      ``neg_elbo``, ``tokens``, ``mean``, ``logvar``, ``z`` — per sentence, the plain ELBO.

    With latents ``z`` [N, latent] (e.g. the posterior means, or another example's), only the
    decoder runs: a VAE's ``distortion``, a T5-VAE's ``reconstruction`` and ``tokens`` of decoding them.

    ``objective``: a :class:`TaskConfig`, a registered name or a core task (its likelihood is the
    one the model trained with)."""
    impl = _model_impl(model)
    batch_size = check_int(batch_size, "batch_size", 1, what="a batch size")
    seed = check_seed(seed)
    check_tensor(z, "z", optional=True)
    x, y, scale = _examples(data, label)
    task = _task(objective, len(x))
    return dict(_C.objectives.evaluate(impl, task, x, y if task.needs_labels else None, batch_size, seed, scale, z))


def importance_weighted_log_likelihood(model, objective="beta-vae", data=None, *, mean: torch.Tensor,
                                       logvar: torch.Tensor, num_samples: int = 500, samples_per_chunk: int = 50,
                                       batch_size: int = 512, seed: int = 0):
    """``log p(x)`` of every example of ``data`` by importance sampling (Burda et al. 2016) with K =
    ``num_samples`` draws of q(z|x) = N(``mean``, diag exp(``logvar``)) [N, latent] (e.g. from
    :func:`evaluate`) and the objective's own likelihood decoded by the core model — no Python
    callback. Returns :class:`vaetransfer.estimators.IWEstimate` (``log_px`` and the Monte-Carlo
    ``elbo`` of the same samples, [N] each)."""
    impl = _model_impl(model)
    check_tensor(mean, "mean")
    check_tensor(logvar, "logvar")
    num_samples = check_int(num_samples, "num_samples", 1, what="a number of samples")
    samples_per_chunk = check_int(samples_per_chunk, "samples_per_chunk", 1, what="a number of samples per chunk")
    batch_size = check_int(batch_size, "batch_size", 1, what="a batch size")
    seed = check_seed(seed)
    check_sampled_logvar(mean, logvar)
    x, _, scale = _examples(data, None)
    task = _task(objective, len(x))
    return _C.objectives.importance_weighted_log_likelihood(impl, task, x, mean, logvar, num_samples, samples_per_chunk,
                                                            seed, batch_size, scale)


__doc__ = (__doc__ or "") + listing(registered())
