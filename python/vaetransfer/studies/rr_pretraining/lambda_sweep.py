"""The λ diagnostic beside the RR study: one experiment re-run for further λ as a sweep of the
study's output directory (:func:`vaetransfer.studies.pipeline.run_beside`), its findings unchanged."""
from __future__ import annotations

from pathlib import Path

from ..._checks import value_error
from ..kit.declarations import Study
from ..kit.stats import mean_se
from ..pipeline import Execution, run_beside
from .config import LAMBDA_FIELDS, METHODS, Config, seeds_of
from .stages import TRAIN


def run_lambda_sensitivity(study: Study, c: Config, out_dir: str | Path, experiment: str, lambdas, *,
                           methods=("rr",), execution: Execution = Execution(), progress: bool = False) -> dict:
    """:func:`vaetransfer.studies.rr_pretraining.lambda_sensitivity` of ``study`` (the RR study's
    declaration, whose output directory ``out_dir`` is): ``experiment`` re-run for every λ of
    ``lambdas`` with each of ``methods`` and every seed, as the sweep ``sweeps/lambda_<experiment>``.
    Returns {λ: {method: {metric: mean ± se}}} of the runs' headline accuracies, distances and deep
    I(X; D)."""
    if experiment not in LAMBDA_FIELDS:
        raise value_error("experiment", f"expected one of {list(LAMBDA_FIELDS)}, got {experiment!r}")
    if not methods or any(m not in METHODS for m in methods):
        raise value_error("methods", f"expected names of {list(METHODS)}, got {list(methods)}")
    lambdas = [float(v) for v in lambdas]
    if not lambdas or min(lambdas) <= 0:
        raise value_error("lambdas", f"expected positive values, got {lambdas}")
    rows = [{"experiment": experiment, "lambda": lam, "method": m, "seed": s}
            for lam in lambdas for m in methods for s in seeds_of(c, experiment)]
    runs = run_beside(out_dir, study, f"lambda_{experiment}", TRAIN, c, rows, execution, progress)
    out: dict = {}
    for lam in lambdas:
        for m in methods:
            got = [r.measured for r in runs if r.row["lambda"] == lam and r.row["method"] == m]
            keys = [k for k in got[0] if k.startswith(("accuracy", "distance", "deep_ixt"))]
            out.setdefault(lam, {})[m] = {k: mean_se([r[k] for r in got]) for k in keys}
    return out
