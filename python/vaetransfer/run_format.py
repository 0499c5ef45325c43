"""The columns of a run's history.csv and metrics.jsonl across versions, so a run made by an older
release loads (and resumes) under today's names.

Today's VAE columns say what each number is: ``loss`` is the objective being minimised (the
reconstruction plus the objective's latent penalty, plus any regulariser's term), ``latent_penalty``
that penalty (β·KL for the β-VAE, γ|KL − C| for the Annealed VAE, KL + (β − 1)·TC for the β-TC-VAE,
KL plus the DIP terms), ``neg_elbo`` = reconstruction + kl, the −ELBO at β = 1 whatever the objective
(comparable across objectives, where ``loss`` is not). Held-out evaluations carry the same names
prefixed ``eval_``.

Runs written before these names held the latent penalty in a column ``regularizer`` (a clash with
the package's regularisers, RR and SRIP) and no ``neg_elbo``: :func:`upgrade_history` renames the one
and derives the other from the stored reconstruction and kl (float32 values, stored exactly), summed in
float64 and written with 9 significant digits as the trainer does: the very number it writes today.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["RENAMED", "upgrade_history", "upgrade_metrics"]

#: old column → today's
RENAMED = {"regularizer": "latent_penalty"}


def _derived_neg_elbo(header: list[str]) -> bool:
    return "neg_elbo" not in header and "reconstruction" in header and "kl" in header and "latent_penalty" in header


def _renamed(names: list[str]) -> list[str]:
    """Old names → today's, unless today's is already there (then the old name is something else:
    e.g. a regulariser labelled "regularizer" in a run that has a latent_penalty)."""
    return [RENAMED[h] if h in RENAMED and RENAMED[h] not in names else h for h in names]


def upgrade_history(header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """history.csv's header and rows under today's names: old columns renamed, ``neg_elbo`` derived
    just after ``latent_penalty`` where a VAE run lacks it. Today's files come back unchanged."""
    header = _renamed(header)
    if not _derived_neg_elbo(header):
        return header, rows
    rec, kl, at = header.index("reconstruction"), header.index("kl"), header.index("latent_penalty") + 1
    new_rows = []
    for row in rows:
        try:
            # The logged columns are float32 values written with 9 digits: read back as float32
            # (exactly those values), summed in float64 and written as the trainer writes it.
            value = format(float(np.float32(row[rec])) + float(np.float32(row[kl])), ".9g")
        except (ValueError, IndexError):  # a torn or corrupt row: the reader names it as before
            value = "nan"
        new_rows.append(row[:at] + [value] + row[at:] if len(row) == len(header) else row)
    return header[:at] + ["neg_elbo"] + header[at:], new_rows


def upgrade_metrics(records: list[dict]) -> list[dict]:
    """metrics.jsonl's records under today's names (``eval_regularizer`` → ``eval_latent_penalty``,
    ``eval_neg_elbo`` derived). Today's records come back unchanged."""
    out = []
    for record in records:
        names = iter(_renamed([k[5:] for k in record if k.startswith("eval_")]))
        r = {("eval_" + next(names) if k.startswith("eval_") else k): v for k, v in record.items()}
        if "eval_latent_penalty" in r and "eval_neg_elbo" not in r and "eval_reconstruction" in r and "eval_kl" in r:
            try:
                r["eval_neg_elbo"] = float(r["eval_reconstruction"]) + float(r["eval_kl"])
            except (TypeError, ValueError):
                r["eval_neg_elbo"] = math.nan
        out.append(r)
    return out
