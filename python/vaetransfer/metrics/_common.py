"""What the disentanglement metrics share: input checks, the train/test split, histogram discretisation,
discrete mutual information and entropies (the last three computed in the C++ core,
``vaetransfer._C.metrics``), and the base of the result records.

Conventions (disentanglement_lib's, "Challenging Common Assumptions in the Unsupervised Learning of
Disentangled Representations", Locatello et al. 2019, unless stated):

* ``codes`` are ``[N, D]`` real numbers (a NumPy array or a tensor; converted to float64), ``factors`` are
  ``[N, K]`` integer classes (a 1-D array is one factor). Rows are examples.
* The train/test split takes the first ``ceil(train_fraction * N)`` rows for training and the rest for
  testing (disentanglement_lib's ``split_train_test``), so shuffle the rows first if their order means
  anything.
* Discretisation is per code: ``bins`` equal bins over the code's observed ``[min, max]`` (np.histogram's
  edges; ``[min - 0.5, max + 0.5]`` for a constant code), labels in ``[0, bins)`` — disentanglement_lib's
  ``np.digitize`` labels minus one, which changes no mutual information.
* Mutual information and entropy are plug-in estimates in nats (scikit-learn's ``mutual_info_score``).
* A factor that takes one value in the data (entropy 0) has nothing to be captured: every metric leaves
  it out of its means, reports NaN in its per-factor arrays (``None`` in ``to_dict()``) and lists its
  index in ``constant_factors``. If every factor is constant the metrics raise ``ArgumentError``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import NamedTuple, Optional, Sequence

import numpy as np
import torch

from .. import _C
from .._checks import check_int, check_number, type_error, value_error

__all__ = ["Split", "as_codes", "as_factors", "discretize", "entropies", "mutual_information_matrix",
           "split_train_test"]

_M = _C.metrics


def _as_array(values, argument: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        if values.is_meta:
            raise type_error(argument, "expected a tensor holding values, got a meta tensor (a shape without data)")
        if values.dtype == torch.bfloat16:  # NumPy has no bfloat16; float64 holds it exactly
            values = values.double()
        return values.detach().cpu().numpy()
    if isinstance(values, np.ndarray):
        return values
    if isinstance(values, (list, tuple)):
        try:
            return np.asarray(values)
        except (ValueError, TypeError):
            raise value_error(argument, "expected a rectangular array of numbers") from None
    raise type_error(argument, f"expected a NumPy array or a tensor, got {type(values).__name__}")


def as_codes(codes, argument: str = "codes", *, min_dims: int = 1) -> np.ndarray:
    """``codes`` (NumPy array, tensor or nested list, real numbers, ``[N, D]``) as a float64 C-contiguous
    array, checked: 2-D, N >= 2, D >= ``min_dims``, every value finite."""
    array = _as_array(codes, argument)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.floating)
                                       or np.issubdtype(array.dtype, np.integer)):
        raise type_error(argument, f"expected real numbers, got dtype {array.dtype}")
    if array.ndim != 2:
        raise value_error(argument, f"expected a 2-D array [N, D], got shape {tuple(array.shape)}")
    if array.shape[0] < 2:
        raise value_error(argument, f"expected at least 2 examples (rows), got {array.shape[0]}")
    if array.shape[1] < min_dims:
        raise value_error(argument, f"expected at least {min_dims} code dimension{'s' * (min_dims > 1)} "
                                    f"(columns), got {array.shape[1]}")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if not np.isfinite(array).all():
        raise value_error(argument, "expected finite values, found NaN or inf")
    return array


def pow2_columns(x: np.ndarray) -> np.ndarray:
    """Each column times the power of two that brings its largest |value| into [0.5, 1): exact, so an
    estimator invariant to each code's scale gives the same result, while its library never sees values
    it cannot hold (scikit-learn's trees work in float32; variances square the values)."""
    peak = np.abs(x).max(axis=0)
    _, e = np.frexp(np.where(peak > 0, peak, 1.0))
    return np.ldexp(x, -e[None, :])


def pow2_scale(x: np.ndarray) -> float:
    """The one power of two bringing the largest |value| of ``x`` into [0.5, 1) (1 for all zeros)."""
    peak = float(np.abs(x).max()) if x.size else 0.0
    return float(np.ldexp(1.0, -np.frexp(peak)[1])) if peak > 0 else 1.0


def as_factors(factors, argument: str = "factors") -> np.ndarray:
    """``factors`` (integer classes, ``[N, K]``, or ``[N]`` for one factor) as an int64 C-contiguous
    ``[N, K]`` array, checked: integer dtype, N >= 2, K >= 1."""
    array = _as_array(factors, argument)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise type_error(argument, f"expected integer classes, got dtype {array.dtype}")
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise value_error(argument, f"expected a 2-D array [N, K] (or 1-D for one factor), got shape "
                                    f"{tuple(array.shape)}")
    if array.shape[0] < 2:
        raise value_error(argument, f"expected at least 2 examples (rows), got {array.shape[0]}")
    if array.shape[1] < 1:
        raise value_error(argument, "expected at least one factor (column), got 0")
    return np.ascontiguousarray(array, dtype=np.int64)


def check_pair(codes, factors, *, min_dims: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``as_codes`` and ``as_factors``, with the same number of rows."""
    c = as_codes(codes, min_dims=min_dims)
    f = as_factors(factors)
    if f.shape[0] != c.shape[0]:
        raise value_error("factors", f"expected {c.shape[0]} rows like 'codes', got {f.shape[0]}")
    return c, f


def check_factor_names(factor_names, k: int) -> Optional[tuple[str, ...]]:
    """None, or K distinct str."""
    if factor_names is None:
        return None
    if isinstance(factor_names, str) or not isinstance(factor_names, Sequence):
        raise type_error("factor_names", f"expected a sequence of {k} str or None, got {type(factor_names).__name__}")
    names = tuple(factor_names)
    if len(names) != k or not all(isinstance(n, str) for n in names):
        raise value_error("factor_names", f"expected {k} str (one per factor), got {list(names)!r}")
    if len(set(names)) != k:
        raise value_error("factor_names", f"expected distinct names, got {list(names)!r}")
    return names


def check_bins(bins) -> int:
    return check_int(bins, "bins", 2, 2**62, what="a number of bins")  # edges computed, never stored


def check_train_fraction(train_fraction, n: int) -> int:
    """The number of training rows, ``ceil(train_fraction * n)``, checked to leave both splits non-empty."""
    fraction = check_number(train_fraction, "train_fraction", minimum=0.0, maximum=1.0, exclusive=True)
    n_train = int(np.ceil(n * fraction))
    if not 1 <= n_train < n:
        raise value_error("train_fraction", f"expected a fraction that leaves at least one training and one test "
                                            f"example of {n}, got {fraction!r} ({n_train} training rows)")
    return n_train


class Split(NamedTuple):
    codes_train: np.ndarray
    factors_train: np.ndarray
    codes_test: np.ndarray
    factors_test: np.ndarray


def split_train_test(codes, factors, train_fraction: float = 0.8) -> Split:
    """The first ``ceil(train_fraction * N)`` rows for training, the rest for testing (disentanglement_lib's
    ``split_train_test``). Returns ``Split(codes_train, factors_train, codes_test, factors_test)`` as
    float64 / int64 arrays."""
    c, f = check_pair(codes, factors)
    n_train = check_train_fraction(train_fraction, c.shape[0])
    return Split(c[:n_train], f[:n_train], c[n_train:], f[n_train:])


def discretize(codes, bins: int = 20) -> np.ndarray:
    """Histogram bin of every code value: int64 ``[N, D]`` in ``[0, bins)``. Per column, ``bins`` equal bins
    over ``[min, max]`` (np.histogram's edges, ``[min - 0.5, max + 0.5]`` for a constant column); the label
    is disentanglement_lib's ``np.digitize(x, edges[:-1])`` minus one (theirs run 1..bins). Computed in
    C++ (``_C.metrics.discretize``), with NumPy's edge arithmetic so values on an edge land alike."""
    c = as_codes(codes)
    return _M.discretize(torch.from_numpy(c), check_bins(bins)).numpy()


def mutual_information_matrix(discrete_codes, factors) -> np.ndarray:
    """Plug-in mutual information in nats between every discrete code and every factor: float64 ``[D, K]``,
    ``I(c_d; f_k) = sum p(c, f) log(p(c, f) / (p(c) p(f)))`` (scikit-learn's ``mutual_info_score`` per
    pair; exactly 0 when either column is constant). Inputs: integer ``[N, D]`` and ``[N, K]``."""
    a = as_factors(discrete_codes, "discrete_codes")
    b = as_factors(factors)
    if b.shape[0] != a.shape[0]:
        raise value_error("factors", f"expected {a.shape[0]} rows like 'discrete_codes', got {b.shape[0]}")
    return _M.mutual_information(torch.from_numpy(a), torch.from_numpy(b)).numpy()


def entropies(factors) -> np.ndarray:
    """Plug-in entropy in nats of every factor: float64 ``[K]`` (0 for a factor with one class)."""
    return _M.entropy(torch.from_numpy(as_factors(factors))).numpy()


def constant_columns(factors: np.ndarray) -> np.ndarray:
    """bool ``[K]``: factors taking a single value. Raises when all are."""
    constant = (factors == factors[:1]).all(axis=0)
    if constant.all():
        raise value_error("factors", "expected at least one factor that takes more than one value; every factor "
                                     "is constant, so no metric is defined")
    return constant


# ---------------------------------------------------------------- results

def _plain(value):
    """JSON-able: floats (NaN → None), ints, str, lists."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()] if value.ndim else _plain(value.item())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only float64/int64 copy (results are immutable)."""
    out = np.array(array, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class Result:
    """Base of the metric records: ``to_dict()`` gives floats and lists; the fields whose metadata says
    ``axis="factor"`` become ``{name: value}`` dicts when ``factor_names`` is set (NaN → None)."""

    def to_dict(self) -> dict:
        names = getattr(self, "factor_names", None)
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "factor_names":
                out[f.name] = None if value is None else list(value)
                continue
            plain = _plain(value)
            if names is not None and f.metadata.get("axis") == "factor":
                plain = dict(zip(names, plain))
            out[f.name] = plain
        return out


def factor_field(**kwargs):
    """A dataclass field holding one value per factor (keyed by factor_names in to_dict())."""
    from dataclasses import field
    return field(metadata={"axis": "factor"}, **kwargs)
