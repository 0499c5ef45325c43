"""The similarity measures registered in the core, by name: lookup, options, one-pair CKA and
Procrustes, and the one table of the measures' display names (figure titles, report tables)."""
from __future__ import annotations

from typing import Literal

import torch

from .. import _C
from .._C import ArgumentError, ArgumentTypeError
from .._checks import argument_error as _error
from .._checks import check_flag, check_tensor

_S = _C.similarity

Measure = str  # any registered measure (:func:`registered`)
ProcrustesForm = Literal["nu", "2-2nu", "1-nu", "arccos", "sqrt(2-2nu)"]

__all__ = ["MEASURES", "PROCRUSTES_FORMS", "Measure", "ProcrustesForm", "cka", "display_name", "procrustes",
           "registered"]


def registered() -> list[dict]:
    """The similarity measures registered in the core (``name, family, doc, aliases, params``):
    family ``gram`` measures score pairs from streamed Gram inner products, ``factor`` measures fit
    each layer once (e.g. a Procrustes factor) and score pairs from the fits."""
    return list(_S.registered())


#: The measures registered when the package was imported (:func:`registered` also lists later ones).
MEASURES: tuple[str, ...] = tuple(e["name"] for e in registered())
PROCRUSTES_FORMS: tuple[str, ...] = ("nu", "2-2nu", "1-nu", "arccos", "sqrt(2-2nu)")
_CKA_FORMS = {"auto": 0, "feature": 1, "gram": 2}

#: Display name of each measure: ``name → (name, short name)`` (see :func:`display_name`).
_DISPLAY_NAMES: dict[str, tuple[str, str]] = {
    "cka": ("CKA", "CKA"),
    "cka_debiased": ("debiased CKA", "debiased CKA"),
    "cka_minibatch": ("minibatch CKA", "minibatch CKA"),
    "cka_rbf": ("RBF CKA", "RBF CKA"),
    "procrustes": ("Procrustes similarity", "Procrustes"),
    "min": ("min(CKA, Procrustes)", "min(CKA, Procrustes)"),
    "cca": ("CCA R²", "CCA"),
    "svcca": ("SVCCA", "SVCCA"),
    "pwcca": ("PWCCA", "PWCCA"),
    "rsa": ("RSA", "RSA"),
    "mutual_knn": ("mutual k-NN", "mutual k-NN"),
    "cknna": ("CKNNA", "CKNNA"),
}


def display_name(measure: str, *, short: bool = False) -> str:
    """The name of ``measure`` in figures and tables: ``"cka"`` → ``"CKA"``, ``"procrustes"`` →
    ``"Procrustes similarity"`` (``short=True``: ``"Procrustes"``), ``"min"`` → ``"min(CKA,
    Procrustes)"``, …; an alias gives its measure's name, any other string is returned as is."""
    if not isinstance(measure, str):
        raise _error(ArgumentTypeError, "measure", f"expected a measure name, got {type(measure).__name__}")
    names = _DISPLAY_NAMES.get(measure)
    if names is None:
        canonical = next((e["name"] for e in registered() if measure in e["aliases"]), None)
        names = _DISPLAY_NAMES.get(canonical) if canonical is not None else None
    if names is None:
        return measure
    return names[1] if check_flag(short, "short") else names[0]


def measure_entry(measure) -> dict:
    """The registry entry (:func:`registered`) of a measure name or alias; ArgumentError otherwise."""
    if not isinstance(measure, str):
        raise _error(ArgumentTypeError, "measure", f"expected a measure name, got {type(measure).__name__}")
    for e in registered():
        if measure == e["name"] or measure in e["aliases"]:
            return e
    names = ", ".join(repr(e["name"]) for e in registered())
    raise _error(ArgumentError, "measure", f"expected one of {names}, got {measure!r}")


def cka_form_code(form: str) -> int:
    """The core's code of a ``cka_form`` (``"auto"``, ``"feature"``, ``"gram"``)."""
    if not isinstance(form, str) or form not in _CKA_FORMS:
        raise _error(ArgumentError, "cka_form", f"expected one of {sorted(_CKA_FORMS)}, got {form!r}")
    return _CKA_FORMS[form]


def constant_flag(constant: str) -> bool:
    """``constant="zero"`` (a pair with a constant layer scores 0) → True; ``"raise"`` → False."""
    if constant not in ("raise", "zero"):
        raise _error(ArgumentError, "constant", f"expected 'raise' or 'zero', got {constant!r}")
    return constant == "zero"


def cka(X: torch.Tensor, Y: torch.Tensor, *, debiased: bool = False, cka_form: str = "auto") -> float:
    """Linear CKA (Eq. 2) of ``X: (n, p_x)`` and ``Y: (n, p_y)``.

    ``cka_form``: ``"auto"`` picks the feature form (``‖YcᵀXc‖_F²``, cost ``n·p_x·p_y``) or the Gram
    form (``⟨K, L⟩``, cost ``n²(p_x + p_y)/2``) by cost; ``"feature"``/``"gram"`` force one.
    ``debiased``: unbiased HSIC (needs n ≥ 4); the result then lies in [−1, 1].
    """
    check_tensor(X, "x")
    check_tensor(Y, "y")
    return float(_S.cka(X, Y, check_flag(debiased, "debiased"), cka_form_code(cka_form)))


def procrustes(X: torch.Tensor, Y: torch.Tensor, *, form: ProcrustesForm = "nu") -> float:
    """Procrustes similarity ``ν = ‖ẎᵀẊ‖_*`` (Eq. 5, 7) of ``X: (n, p_x)``, ``Y: (n, p_y)``, or a
    distance form of it (``"2-2nu"``, ``"1-nu"``, ``"arccos"``, ``"sqrt(2-2nu)"``)."""
    check_tensor(X, "x")
    check_tensor(Y, "y")
    if not isinstance(form, str):
        raise _error(ArgumentTypeError, "form", f"expected one of {list(PROCRUSTES_FORMS)}, got {type(form).__name__}")
    return float(_S.procrustes(X, Y, form))
