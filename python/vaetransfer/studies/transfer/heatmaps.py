"""The transfer study's heatmaps: every layer of one set of models against every layer of another,
averaged over pairs of different seeds, under the config's measures, and their JSON form."""
from __future__ import annotations

import dataclasses

import torch

from ... import similarity
from ...train import Run
from ..kit.stats import interval_keywords
from .config import Config

# Measures whose heatmaps get intervals: replicates reuse each layer's Gram (the C++ fast path);
# any other measure would re-run the whole engine per replicate.
_WITH_INTERVALS = ("cka", "cka_debiased")


def model_activations(run: Run, x: torch.Tensor, device: str, step: int | None = None, use_mean: bool = False):
    """Every layer of ``run``'s model (its snapshot at ``step``; None: the final one; 0: the weights it
    started from) on ``x``. ``use_mean``: z = the posterior mean in ``sampled`` and the decoder (the
    control beside the sample: no posterior noise in the similarity)."""
    # z = mean + σ·ε in `sampled` and the decoder: each model draws ε from its own seed. The
    # forward and the similarity engine run on the study's device (exact Procrustes at paper scale
    # is GPU work); the engine returns its heatmaps in CPU memory.
    return similarity.activations(run.model(step, device=device), x, seed=run.config.seed, device=device,
                                  use_mean=use_mean)


def compare(c: Config, acts_a: dict, acts_b: dict, measures: tuple[str, ...],
            intervals: bool = True) -> dict[str, similarity.SimilarityMatrix]:
    """Cross-seed averaged heatmaps of models A (seed → activations) against models B: each measure,
    and min(CKA, Procrustes) per pair when both are asked for (``c.procrustes_rank``: approximate
    Procrustes, its bounds carried into the min view). CKA heatmaps carry the config's interval of
    the seed-pair mean (rows resampled jointly for every model) unless ``intervals`` is False."""
    sa, sb = list(acts_a), list(acts_b)
    out = {}
    for m in measures:
        ci = interval_keywords(c) if m in _WITH_INTERVALS and intervals else {}
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


def trunk_layers(m: similarity.SimilarityMatrix) -> list[str]:
    """The encoder's layers but mean and variance (and input, sampled) — the layers the paper calls
    highly similar across objectives (App. F, Fig. 15: "all the layers of the encoder except mean and
    variance ... CKA ≥ 0.8"); of the rows, by their declared parts (else the ``enc*`` names)."""
    if m.row_parts is not None:
        parts = dict(zip(m.rows, m.row_parts)) if not isinstance(m.row_parts, dict) else m.row_parts
        return [n for n in m.rows if parts.get(n) == "encoder" and n in m.cols]
    return [n for n in m.rows if str(n).startswith("enc") and n in m.cols]


def pair_summaries(m: similarity.SimilarityMatrix, seeds_a: list, seeds_b: list) -> dict:
    """Per pair of models of different seeds (``"a/b"``: seed of A, seed of B), the summaries the
    findings decide on — the units of their effects: quadrant means, the mean same-layer value over
    the encoder trunk (:func:`trunk_layers`) and over the decoder, and the ``sampled`` row and column
    means (:func:`line_mean`). Empty without the per-pair values."""
    if m.per_pair is None:
        return {}
    trunk = trunk_layers(m)
    dec = [n for n in similarity.decoder_layers(m.rows, m.row_parts) if n in m.cols]
    out = {}
    for i, sa in enumerate(seeds_a):
        for j, sb in enumerate(seeds_b):
            if sa == sb:
                continue
            one = dataclasses.replace(m, values=m.per_pair[i, j], per_pair=None, n_pairs=1, ci_low=None, ci_high=None,
                                      replicates=None, acceleration_replicates=None, ci=None, resamples=0)
            q = one.quadrants()
            diag = lambda names: round(float(sum(one[n, n] for n in names) / len(names)), 5) if names else None  # noqa: E731
            rec = {k: None if v is None else round(v, 5) for k, v in q.items()}
            rec.update(trunk_diagonal_mean=diag(trunk), decoder_diagonal_mean=diag(dec))
            if "sampled" in one.rows and "sampled" in one.cols:
                rec.update(sampled_row=round(line_mean(one, "sampled", "row"), 5),
                           sampled_col=round(line_mean(one, "sampled", "col"), 5))
            out[f"{sa}/{sb}"] = rec
    return out


def matrix_json(m: similarity.SimilarityMatrix, seeds_a: list | None = None, seeds_b: list | None = None) -> dict:
    """A heatmap as JSON: values, quadrant means, with an interval each entry's and each quadrant
    mean's bounds (``ci_low``/``ci_high``, ``<quadrant>_ci``), and given the seeds of an average its
    per-pair summaries (``pairs``, :func:`pair_summaries`)."""
    q = m.quadrants()
    bound = {} if m.bound is None else {"max_bound": round(float(m.bound.max()), 4)}  # approximate Procrustes
    ci = {}
    if m.ci_low is not None:
        ci = {"ci": m.ci, "resampling": m.resampling, "ci_low": _rounded(m.ci_low), "ci_high": _rounded(m.ci_high),
              **{f"{k}_ci": None if v is None else [round(v[0], 4), round(v[1], 4)]
                 for k, v in m.quadrant_intervals().items()}}
    pairs = pair_summaries(m, seeds_a, seeds_b) if seeds_a is not None and seeds_b is not None else {}
    return {"rows": m.rows, "cols": m.cols, "n_pairs": m.n_pairs, "n": m.n, **bound,
            "values": _rounded(m.values), **{k: (None if v is None else round(v, 4)) for k, v in q.items()}, **ci,
            **({"pairs": pairs} if pairs else {})}


def comparisons(c: Config, acts_a: dict, acts_b: dict) -> dict:
    """The heatmaps of :func:`compare` with the config's measures, as JSON (CKA with its per-pair
    summaries)."""
    sa, sb = list(acts_a), list(acts_b)
    return {k: matrix_json(v, sa, sb) if k == "cka" else matrix_json(v)
            for k, v in compare(c, acts_a, acts_b, c.measures).items()}


def line_mean(m: similarity.SimilarityMatrix, layer: str, axis: str) -> float:
    """Mean similarity of one layer (a row of A or a column of B) to every layer of the other
    model but its input."""
    if axis == "row":
        cols = [j for j, n in enumerate(m.cols) if n != "input"]
        return float(m.values[m.rows.index(layer), cols].mean())
    rows = [i for i, n in enumerate(m.rows) if n != "input"]
    return float(m.values[rows, m.cols.index(layer)].mean())


def posterior_mean_control(c: Config, runs_a: dict, runs_b: dict, x: torch.Tensor, device: str) -> dict:
    """The control beside every ``sampled`` / decoder CKA: the same comparison with z = the posterior
    mean (no posterior noise), CKA without intervals: its quadrant means and per-pair summaries.
    ``runs_a`` / ``runs_b``: seed → Run."""
    acts_a = {s: model_activations(r, x, device, use_mean=True) for s, r in runs_a.items()}
    acts_b = {s: model_activations(r, x, device, use_mean=True) for s, r in runs_b.items()}
    m = compare(c, acts_a, acts_b, ("cka",), intervals=False)["cka"]
    q = m.quadrants()
    return {**{k: None if v is None else round(v, 4) for k, v in q.items()},
            "sampled_row": round(line_mean(m, "sampled", "row"), 4) if "sampled" in m.rows else None,
            "sampled_col": round(line_mean(m, "sampled", "col"), 4) if "sampled" in m.cols else None,
            "pairs": pair_summaries(m, list(acts_a), list(acts_b))}
