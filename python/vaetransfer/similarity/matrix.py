"""A layer × layer similarity heatmap (:class:`SimilarityMatrix`), its intervals and its quadrants."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import intervals
from .._C import ArgumentError, ArgumentTypeError
from .._checks import argument_error as _error
from .layout import aligned_parts, decoder_layers, encoder_layers

__all__ = ["SimilarityMatrix"]


@dataclass
class SimilarityMatrix:
    """A layer × layer heatmap: ``values[k, l] = measure(A layer k, B layer l)``.

    ``values``: ``(L_a, L_b)`` float64; ``rows``/``cols``: layer names of A / B; ``n_pairs``: how
    many model pairs were averaged (Eq. 6: 25 for 5 × 5 seeds); ``n``: examples per layer.
    Optional per-entry uncertainty (``ci_low``, ``ci_high``) and permutation null (``null_mean``,
    ``null_std``, ``null_quantile``, :attr:`calibrated`): see :func:`similarity_matrix`.
    ``row_parts``/``col_parts``: each row's / column's part as its model declares it (``input``,
    ``encoder``, ``latent``, ``decoder``, ``head``; a list aligned with the names, or given as a
    mapping ``name → part``), which :meth:`quadrants` reads (:mod:`vaetransfer.similarity.layout`);
    None: not known, the quadrants are read from the layer names.
    """

    values: torch.Tensor
    rows: list[str]
    cols: list[str]
    measure: str
    form: str = "nu"
    n_pairs: int = 1
    n: int = 0
    per_pair: torch.Tensor | None = field(default=None, repr=False)  # (M_a, M_b, L_a, L_b) when averaged
    #: Approximate Procrustes only: ``(L_a, L_b)`` bound on ``|value − exact value|`` of ν (of an
    #: average: the mean of the pairs' bounds). None for exact measures.
    bound: torch.Tensor | None = field(default=None, repr=False)
    #: With ``ci``: the confidence level, how the examples were resampled (``"bootstrap"`` or
    #: ``"jackknife"``) and how many replicates; ``ci_low``/``ci_high`` ``(L_a, L_b)`` float64 bounds
    #: of each entry's interval, ``replicates`` ``(R, L_a, L_b)`` the replicate values (bootstrap:
    #: also ``acceleration_replicates``, the ``(G, L_a, L_b)`` jackknife values of BCa's
    #: acceleration). None without. :meth:`interval_of` forms the interval of any linear summary.
    ci: float | None = None
    resampling: str | None = None
    resamples: int = 0
    ci_low: torch.Tensor | None = field(default=None, repr=False)
    ci_high: torch.Tensor | None = field(default=None, repr=False)
    replicates: torch.Tensor | None = field(default=None, repr=False)
    acceleration_replicates: torch.Tensor | None = field(default=None, repr=False)
    #: With ``null="permutation"``: ``permutations`` draws of B's rows; ``null_mean``/``null_std``
    #: ``(L_a, L_b)`` of each entry's permutation null, ``null_quantile`` its permutation p-value
    #: ``(1 + #{null ≥ value}) / (1 + permutations)``, ``null`` ``(K, L_a, L_b)`` the null values.
    permutations: int = 0
    null_mean: torch.Tensor | None = field(default=None, repr=False)
    null_std: torch.Tensor | None = field(default=None, repr=False)
    null_quantile: torch.Tensor | None = field(default=None, repr=False)
    null: torch.Tensor | None = field(default=None, repr=False)
    #: The declared part of each row / column layer (None: not known; see the class docstring).
    row_parts: list[str] | None = field(default=None, repr=False)
    col_parts: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.row_parts = aligned_parts(self.rows, self.row_parts, "row_parts")
        self.col_parts = aligned_parts(self.cols, self.col_parts, "col_parts")

    @property
    def calibrated(self) -> torch.Tensor | None:
        """``values − null_mean``: the similarity above what the same layers score once the
        examples are unpaired (a width-independent zero for linear CKA); None without a null."""
        return None if self.null_mean is None else self.values - self.null_mean

    def __getitem__(self, key: tuple[str, str]) -> float:
        if not isinstance(key, tuple) or len(key) != 2:
            raise _error(ArgumentTypeError, "key", f"expected (row layer, column layer), got {key!r}")
        r, c = key
        if r not in self.rows:
            raise _error(ArgumentError, "key", f"expected a row layer, one of {self.rows}, got {r!r}")
        if c not in self.cols:
            raise _error(ArgumentError, "key", f"expected a column layer, one of {self.cols}, got {c!r}")
        return float(self.values[self.rows.index(r), self.cols.index(c)])

    def interval_of(self, summary) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``ci`` interval of a summary of the entries, e.g. a mean over some layers:
        ``summary`` maps a ``(..., L_a, L_b)`` tensor to ``(..., *S)`` and is applied to the values
        and to every replicate, so the summary's interval is formed from the same resampled rows
        (jackknife: ± z·se; bootstrap: BCa, :mod:`vaetransfer.intervals`). It should be a
        smooth function of the entries (a mean, a difference): the jackknife assumes so.
        ``summary = lambda t: t`` gives back ``(ci_low, ci_high)``."""
        if self.replicates is None:
            raise _error(ArgumentError, "ci", "this matrix has no interval: pass ci=... to the call that made it")
        observed, reps = summary(self.values), summary(self.replicates)
        if self.resampling == "jackknife":
            return intervals.jackknife_interval(observed, reps, self.ci)
        low, high, _ = intervals.bca_interval(observed, reps, summary(self.acceleration_replicates), self.ci)
        return low, high

    def _quadrant_summaries(self) -> dict:
        """name → summary ``(..., L_a, L_b) → (...)`` of :meth:`quadrants` (None: no such layers)."""
        def mean(rows, cols):
            if not rows or not cols:
                return None
            r = torch.tensor([self.rows.index(n) for n in rows])
            c = torch.tensor([self.cols.index(n) for n in cols])
            return lambda t: t.index_select(-2, r).index_select(-1, c).mean(dim=(-2, -1))

        enc_r, enc_c = encoder_layers(self.rows, self.row_parts), encoder_layers(self.cols, self.col_parts)
        common = [n for n in enc_r if n in enc_c]
        r = torch.tensor([self.rows.index(n) for n in common])
        c = torch.tensor([self.cols.index(n) for n in common])
        return {"encoder_mean": mean(enc_r, enc_c),
                "decoder_mean": mean(decoder_layers(self.rows, self.row_parts),
                                     decoder_layers(self.cols, self.col_parts)),
                "encoder_diagonal_mean": (lambda t: t[..., r, c].mean(dim=-1)) if common else None}

    def quadrants(self, *, strict: bool = False) -> dict:
        """Means over the paper's quadrants (§4): ``encoder_mean`` over encoder rows × encoder
        columns (:func:`~vaetransfer.similarity.layout.encoder_layers` of each side's parts: the
        input, the same for every model, and the noisy ``sampled`` layer left out),
        ``decoder_mean`` over decoder × decoder (None when a side has no decoder, e.g. a
        classifier), ``encoder_diagonal_mean`` over the encoder layers both sides have (same name;
        None if none). Without ``row_parts``/``col_parts`` the layers are told apart by name
        (:mod:`vaetransfer.similarity.layout`). :meth:`quadrant_reasons` says why a quadrant is None;
        ``strict=True`` raises an ArgumentError saying it instead of returning None."""
        out = {k: None if f is None else float(f(self.values)) for k, f in self._quadrant_summaries().items()}
        missing = {k: why for k, why in self.quadrant_reasons().items() if why is not None}
        if strict and missing:
            raise _error(ArgumentError, "matrix", "cannot split it into the paper's quadrants: "
                                                  + "; ".join(f"{k}: {why}" for k, why in missing.items()))
        return out

    def quadrant_reasons(self) -> dict:
        """Why each quadrant of :meth:`quadrants` is None (None where it is defined)."""
        def side(names, parts, which, kind):
            found = (encoder_layers if kind == "encoder" else decoder_layers)(names, parts)
            if found:
                return None
            how = f"its parts {sorted(set(parts))}" if parts else "their names (no parts declared)"
            return f"model {which}'s layers have no {kind} part by {how}"
        enc = [side(self.rows, self.row_parts, "A", "encoder"), side(self.cols, self.col_parts, "B", "encoder")]
        dec = [side(self.rows, self.row_parts, "A", "decoder"), side(self.cols, self.col_parts, "B", "decoder")]
        enc_why = "; ".join(w for w in enc if w) or None
        common = set(encoder_layers(self.rows, self.row_parts)) & set(encoder_layers(self.cols, self.col_parts))
        return {"encoder_mean": enc_why, "decoder_mean": "; ".join(w for w in dec if w) or None,
                "encoder_diagonal_mean": enc_why or (None if common else "the two models share no encoder layer name")}

    def quadrant_intervals(self) -> dict:
        """The ``ci`` interval ``(low, high)`` of each of :meth:`quadrants` (None where it is None)."""
        return {k: None if f is None else tuple(float(v) for v in self.interval_of(f))
                for k, f in self._quadrant_summaries().items()}
