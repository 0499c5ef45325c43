"""The transfer study's heatmaps: every layer of one set of models against every layer of another,
averaged over pairs of different seeds, under the config's measures, and their JSON form."""
from __future__ import annotations

import torch

from ... import similarity
from ...train import Run
from ..kit.stats import interval_keywords
from .config import Config

# Measures whose heatmaps get intervals: replicates reuse each layer's Gram (the C++ fast path);
# any other measure would re-run the whole engine per replicate.
_WITH_INTERVALS = ("cka", "cka_debiased")


def model_activations(run: Run, x: torch.Tensor, device: str, step: int | None = None):
    """Every layer of ``run``'s model (its snapshot at ``step``; None: the final one) on ``x``."""
    # z = mean + σ·ε in `sampled` and the decoder: each model draws ε from its own seed. The
    # forward and the similarity engine run on the study's device (exact Procrustes at paper scale
    # is GPU work); the engine returns its heatmaps in CPU memory.
    return similarity.activations(run.model(step, device=device), x, seed=run.config.seed, device=device)


def compare(c: Config, acts_a: dict, acts_b: dict, measures: tuple[str, ...]) -> dict[str, similarity.SimilarityMatrix]:
    """Cross-seed averaged heatmaps of models A (seed → activations) against models B: each measure,
    and min(CKA, Procrustes) per pair when both are asked for (``c.procrustes_rank``: approximate
    Procrustes, its bounds carried into the min view). CKA heatmaps carry the config's interval of
    the seed-pair mean (rows resampled jointly for every model)."""
    sa, sb = list(acts_a), list(acts_b)
    out = {}
    for m in measures:
        ci = interval_keywords(c) if m in _WITH_INTERVALS else {}
        out[m] = similarity.cka_avg([acts_a[s] for s in sa], [acts_b[s] for s in sb], m, seeds_a=sa, seeds_b=sb,
                                    progress=False, procrustes_rank=c.procrustes_rank, **ci)
    if "procrustes" in out:
        # The registered measure "min" gives the same numbers bit for bit, but through a second pass of the
        # engine: every layer's Procrustes fit and every pair again, the costliest part at paper scale. Its
        # per-pair minimum of the two heatmaps already computed, averaged over the same pairs, is free.
        keep = torch.tensor([[a != b for b in sb] for a in sa])
        per_pair = torch.minimum(out["cka"].per_pair, out["procrustes"].per_pair)
        out["min"] = similarity.SimilarityMatrix(per_pair[keep].mean(0), out["cka"].rows, out["cka"].cols, "min",
                                                 n_pairs=int(keep.sum()), n=out["cka"].n, bound=out["procrustes"].bound)
    return out


def _rounded(t: torch.Tensor) -> list:
    return [[round(float(e), 4) for e in row] for row in t]


def matrix_json(m: similarity.SimilarityMatrix) -> dict:
    """A heatmap as JSON: values, quadrant means, and with an interval each entry's and each
    quadrant mean's bounds (``ci_low``/``ci_high``, ``<quadrant>_ci``)."""
    q = m.quadrants()
    bound = {} if m.bound is None else {"max_bound": round(float(m.bound.max()), 4)}  # approximate Procrustes
    ci = {}
    if m.ci_low is not None:
        ci = {"ci": m.ci, "resampling": m.resampling, "ci_low": _rounded(m.ci_low), "ci_high": _rounded(m.ci_high),
              **{f"{k}_ci": None if v is None else [round(v[0], 4), round(v[1], 4)]
                 for k, v in m.quadrant_intervals().items()}}
    return {"rows": m.rows, "cols": m.cols, "n_pairs": m.n_pairs, "n": m.n, **bound,
            "values": _rounded(m.values), **{k: (None if v is None else round(v, 4)) for k, v in q.items()}, **ci}


def comparisons(c: Config, acts_a: dict, acts_b: dict) -> dict:
    """The heatmaps of :func:`compare` with the config's measures, as JSON."""
    return {k: matrix_json(v) for k, v in compare(c, acts_a, acts_b, c.measures).items()}


def line_mean(m: similarity.SimilarityMatrix, layer: str, axis: str) -> float:
    """Mean similarity of one layer (a row of A or a column of B) to every layer of the other
    model but its input."""
    if axis == "row":
        cols = [j for j, n in enumerate(m.cols) if n != "input"]
        return float(m.values[m.rows.index(layer), cols].mean())
    rows = [i for i, n in enumerate(m.rows) if n != "input"]
    return float(m.values[rows, m.cols.index(layer)].mean())
