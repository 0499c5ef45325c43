"""The one form of data: :class:`Dataset`, its splits (:func:`split`, :func:`split_indices`) and
the checks of row indices, seeds and flags that every generator and loader shares."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence, Union

import numpy as np
import torch

from .. import _C
from .._checks import argument_error, check_device, check_seed, is_int, type_error, value_error

Indices = Union[None, slice, range, Sequence[int], np.ndarray, torch.Tensor]


# ---------------------------------------------------------------- argument checks
# Shared by this package's generators and loaders: public names, internal to vaetransfer.data.
def _slice_rows(indices: slice, n: int, argument: str) -> torch.Tensor:
    """The rows of ``range(n)[indices]`` (negative steps included) as int64."""
    try:
        rows = range(n)[indices]
    except (TypeError, ValueError) as exc:  # step 0, non-integer bounds
        raise value_error(argument, f"expected a slice with integer bounds and a non-zero step, got {indices!r}") from exc
    return torch.from_numpy(np.arange(rows.start, rows.stop, rows.step, dtype=np.int64))


def index_tensor(indices: Indices, count: int) -> torch.Tensor | None:
    """The accepted index forms as an int64 tensor for the core's generators, which check the
    range themselves (None: every row)."""
    if indices is None:
        return None
    if isinstance(indices, slice):
        return _slice_rows(indices, count, "indices")
    if is_int(indices):
        raise type_error("indices", "expected a sequence of indices, got a single int (wrap it in a list)")
    try:
        idx = torch.as_tensor(np.asarray(indices) if isinstance(indices, range) else indices)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise type_error("indices", f"expected a sequence of integers, got {type(indices).__name__}") from exc
    if idx.numel() == 0:
        return idx.long()  # `[]` comes out as float
    return _signed(idx, count, "indices")


_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def _signed(idx: torch.Tensor, n: int, argument: str) -> torch.Tensor:
    """Unsigned indices (uint16/32/64, which torch's reductions do not take) as int64, a value beyond
    int64 named with its true value; other tensors unchanged."""
    if idx.dtype not in _UNSIGNED:
        return idx
    values = idx.cpu().numpy()
    top = int(values.max())
    if top >= n:
        raise value_error(argument, f"expected values in [0, {n}), got values up to {top}")
    return torch.from_numpy(values.astype(np.int64))


def checked_indices(indices, n: int, argument: str) -> torch.Tensor:
    """int64 [k] row indices in [0, n) from a sequence, range, slice, array, integer tensor or
    boolean mask of length n; anything else raises a named error for ``argument``."""
    if isinstance(indices, slice):
        return _slice_rows(indices, n, argument)
    if is_int(indices):
        raise type_error(argument, "expected a sequence of indices, got a single int (wrap it in a list)")
    if indices is None or isinstance(indices, (str, bytes)):
        raise type_error(argument, f"expected a sequence of integers, got {type(indices).__name__}")
    try:
        idx = torch.as_tensor(np.asarray(indices) if isinstance(indices, range) else indices)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise type_error(argument, f"expected a sequence of integers, got {type(indices).__name__}") from exc
    if idx.dim() != 1:
        raise value_error(argument, f"expected a 1-D sequence of indices, got shape {list(idx.shape)}")
    idx = idx.cpu()
    if idx.dtype == torch.bool:
        if idx.numel() != n:
            raise value_error(argument, f"expected a boolean mask of length {n}, got length {idx.numel()}")
        return idx.nonzero().squeeze(1)
    if idx.numel() == 0:
        return idx.long()  # `[]` comes out as float
    if idx.is_floating_point() or idx.is_complex():
        raise type_error(argument, f"expected integer indices, got {str(idx.dtype).replace('torch.', '')}")
    idx = _signed(idx, n, argument).long()
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= n:
        raise value_error(argument, f"expected values in [0, {n}), got values in [{lo}, {hi}]")
    return idx


def row_indices(indices: Indices, count: int) -> torch.Tensor:
    """The rows a loader reads: all ``count`` of them, or the checked ``indices``."""
    return torch.arange(count) if indices is None else checked_indices(indices, count, "indices")


def label_tensor(labels) -> torch.Tensor:
    if isinstance(labels, torch.Tensor):
        return labels
    if isinstance(labels, (str, bytes)) or is_int(labels):
        raise type_error("labels", f"expected a sequence of class labels, got {type(labels).__name__}")
    try:
        return torch.as_tensor(np.asarray(labels))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise type_error("labels", f"expected a sequence of class labels, got {type(labels).__name__}") from exc


def as_tensor(value, argument: str) -> torch.Tensor:
    """``value`` (a tensor, an array or nested numbers) as a tensor; anything else a named error."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (str, bytes)):
        raise type_error(argument, f"expected a tensor or an array of numbers, got {type(value).__name__}")
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise type_error(argument, f"expected a tensor or an array of numbers, got {type(value).__name__}") from exc


def core_call(call, argument: str):
    """Runs ``call``, a renderer of the core whose one tensor argument keeps the name of the public
    files' key, so that its errors name this module's ``argument`` instead."""
    try:
        return call()
    except (_C.ArgumentError, _C.ArgumentTypeError) as exc:
        core = getattr(exc, "argument", argument)
        raise argument_error(type(exc), argument, str(exc).removeprefix(f"argument '{core}': ")) from None


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


# ---------------------------------------------------------------- the data set
@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """Rows of a data set: images with optional class labels and generative factors, the one form
    that every generator and loader returns and that training, splitting and evaluation take
    (:func:`vaetransfer.data.as_dataset` turns the other accepted inputs into one).

    * ``images``: uint8 or floating [N, C, H, W] on the CPU (greyscale sets included, as
      [N, 1, H, W]); inputs [N, D] for the synthetic tasks; for text, int64 token ids [N, L]
      (trailing padding; :mod:`vaetransfer.text`). None for rows built with ``images=False``
      (their factors and labels only).
    * ``labels``: int64 [N] class labels in [0, ``num_classes``), or None (any integer dtype is
      stored as int64). A set's factor becomes its labels with ``as_dataset(ds, label=name)``. For
      sequence-to-sequence text, target ids [N, T] with -100 where there is no target
      (``num_classes`` stays None).
    * ``factors``: int64 [N, F], the class of each generative factor in [0, ``factor_sizes[f]``)
      (dSprites' grid classes, Tetrominoes' strata), or None.
    * ``factor_values``: float64 [N, F], each factor's continuous value (dSprites' latent values,
      Tetrominoes' sampled factors, SmallNORB's angles in degrees), or None where a set's factors
      are only classes (any real dtype is stored as float64).
    * ``factor_names``: the F column names (empty without factors); ``factor_sizes``: the class
      count of each factor column, which a subset keeps (inferred as the column maxima + 1 when
      not given).
    * ``scale``: ``images.float() * scale`` lies in [0, 1]: 1/255 for 0..255 uint8 images,
      1 for dSprites' {0, 1} uint8 images and for float images already in [0, 1]. (The
      contract is documented, not checked: checking would read every pixel.)
    * ``name``: a description (a registered name, or ``"tensor"``); ``num_classes``: the
      number of classes, None without labels; inferred as ``max(labels) + 1`` when labels
      are given without it.
    * ``extras``: what a set has beyond these fields that describes the whole set, by name (the
      peak task's ``patterns``, the 12-bit task's ``vertices``, a generator's ``seed``, a
      loader's ``split``); ``row_extras``: per-row tensors [N, ...] or tuples of N entries
      (colour dSprites' ``colors``, texture_shapes' ``masks``, CelebA's ``filenames``), which
      :meth:`subset` selects with the rows. Each generator and loader documents its keys.

    Frozen: :meth:`subset` and :func:`dataclasses.replace` make new ones (sharing tensors
    where they can). Bad fields raise ``ArgumentError``/``ArgumentTypeError`` naming the field.
    """

    images: torch.Tensor | None
    labels: torch.Tensor | None = None
    factors: torch.Tensor | None = None
    factor_values: torch.Tensor | None = None
    factor_names: tuple[str, ...] = ()
    factor_sizes: tuple[int, ...] = ()
    scale: float = 1.0
    name: str = "tensor"
    num_classes: int | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)
    row_extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: normalised fields are set once, here
        for name in ("images", "labels", "factors", "factor_values"):  # NumPy arrays, as train() takes them
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                try:
                    put(self, name, torch.from_numpy(np.ascontiguousarray(value)))
                except TypeError:
                    raise type_error(name, f"expected a numeric array, got dtype {value.dtype}") from None
        n = self._check_images()
        if isinstance(self.scale, (bool, np.bool_)) or not isinstance(self.scale, (int, float, np.integer, np.floating)):
            raise type_error("scale", f"expected a number, got {type(self.scale).__name__}")
        if not (math.isfinite(float(self.scale)) and float(self.scale) > 0):
            raise value_error("scale", f"expected a finite number > 0, got {self.scale!r}")
        put(self, "scale", float(self.scale))
        if not isinstance(self.name, str):
            raise type_error("name", f"expected a str, got {type(self.name).__name__}")
        self._check_labels(n)
        self._check_factors(n)
        if not isinstance(self.extras, Mapping) or not all(isinstance(k, str) for k in self.extras):
            raise type_error("extras", f"expected a dict by name, got {type(self.extras).__name__}")
        put(self, "extras", dict(self.extras))
        if not isinstance(self.row_extras, Mapping):
            raise type_error("row_extras", f"expected a dict by name, got {type(self.row_extras).__name__}")
        rows = {}
        for key, value in self.row_extras.items():
            if isinstance(value, list):
                value = tuple(value)
            if not isinstance(value, (torch.Tensor, tuple)) or (isinstance(value, torch.Tensor) and value.dim() == 0):
                raise type_error("row_extras", f"{key!r}: expected a tensor [N, ...] or a tuple of N entries, got "
                                               f"{type(value).__name__}")
            if len(value) != n:
                raise value_error("row_extras", f"{key!r}: expected {n} rows, got {len(value)}")
            rows[key] = value
        put(self, "row_extras", rows)

    def _check_images(self) -> int:
        """The row count N, from the images or, without them, from the factors or labels."""
        x = self.images
        if x is None:
            present = [t for t in (self.factors, self.factor_values, self.labels) if isinstance(t, torch.Tensor)]
            if not present:
                raise type_error("images", "expected a tensor (or, for rows without images, factors or labels)")
            return int(present[0].shape[0]) if present[0].dim() else 0
        if not isinstance(x, torch.Tensor):
            raise type_error("images", f"expected a tensor, got {type(x).__name__}")
        if x.dtype not in (torch.uint8, torch.int64) and not x.is_floating_point():
            raise type_error("images", f"expected uint8 or floating images or int64 token ids, got {_dtype(x)}")
        if x.dim() < 2:
            raise value_error("images", f"expected [N, *input_shape] with at least 2 axes, got shape {list(x.shape)}")
        if x.device.type != "cpu":
            raise value_error("images", f"expected a CPU tensor, got one on {x.device}")
        return int(x.shape[0])

    def _check_labels(self, n: int) -> None:
        put = object.__setattr__
        k = self.num_classes
        if k is not None:
            if not is_int(k):
                raise type_error("num_classes", f"expected an int, got {type(k).__name__}")
            if k < 1:
                raise value_error("num_classes", f"expected at least 1 class, got {k}")
            k = int(k)
        y = self.labels
        if y is not None:
            if not isinstance(y, torch.Tensor):
                raise type_error("labels", f"expected a tensor, got {type(y).__name__}")
            if y.dtype == torch.bool or y.is_floating_point() or y.is_complex():
                raise type_error("labels", f"expected integer class labels, got {_dtype(y)}")
            sequences = y.dim() == 2 and self.images is not None and self.images.dtype == torch.int64  # text targets
            if not sequences and (y.dim() != 1 or y.shape[0] != n):
                raise value_error("labels", f"expected shape [{n}] (one label per image), got {list(y.shape)}")
            if sequences and y.shape[0] != n:
                raise value_error("labels", f"expected target ids [{n}, T], got {list(y.shape)}")
            if y.device.type != "cpu":
                raise value_error("labels", f"expected a CPU tensor, got one on {y.device}")
            y = y.long()
            if sequences:
                if k is not None:
                    raise value_error("num_classes", "target sequences have no classes; leave num_classes unset")
                if y.numel() and bool((y < 0).logical_and(y != -100).any()):
                    raise value_error("labels", "expected target ids >= 0, or -100 where there is no target")
            elif y.numel():
                lo, hi = int(y.min()), int(y.max())
                if k is None:
                    k = hi + 1
                if lo < 0 or hi >= k:
                    raise value_error("labels", f"expected values in [0, {k}), got values in [{lo}, {hi}]")
            elif k is None:
                raise value_error("num_classes", "cannot be inferred from an empty set of labels; give it")
            put(self, "labels", y)
        elif k is not None:
            raise value_error("num_classes", f"given ({k}) without labels")
        put(self, "num_classes", k)

    def _check_factors(self, n: int) -> None:
        put = object.__setattr__
        names = () if self.factor_names is None else self.factor_names
        if isinstance(names, str) or not isinstance(names, (tuple, list)) or not all(isinstance(s, str) for s in names):
            raise type_error("factor_names", f"expected a tuple of str, got {names!r}")
        names = tuple(names)
        columns = None
        for key, integer in (("factors", True), ("factor_values", False)):
            f = getattr(self, key)
            if f is None:
                continue
            if not isinstance(f, torch.Tensor):
                raise type_error(key, f"expected a tensor, got {type(f).__name__}")
            wrong = (f.is_floating_point() or f.dtype == torch.bool) if integer else f.dtype == torch.bool
            if wrong or f.is_complex():
                what = "integer factor classes" if integer else "real factor values"
                raise type_error(key, f"expected {what}, got {_dtype(f)}")
            if f.dim() != 2 or f.shape[0] != n or (columns is not None and f.shape[1] != columns):
                raise value_error(key, f"expected shape [{n}, {columns if columns is not None else 'F'}], "
                                       f"got {list(f.shape)}")
            if f.device.type != "cpu":
                raise value_error(key, f"expected a CPU tensor, got one on {f.device}")
            columns = int(f.shape[1])
            put(self, key, f.long() if integer else f.to(torch.float64))
        if columns is None:
            if names:
                raise value_error("factor_names", f"given ({list(names)}) without factors")
            if self.factor_sizes:
                raise value_error("factor_sizes", f"given ({list(self.factor_sizes)}) without factor classes")
            put(self, "factor_names", ())
            put(self, "factor_sizes", ())
            return
        if len(names) != columns:
            raise value_error("factor_names", f"expected {columns} names (one per factor column), got {len(names)}")
        put(self, "factor_names", names)
        put(self, "factor_sizes", self._factor_sizes(columns))

    def _factor_sizes(self, columns: int) -> tuple[int, ...]:
        sizes, f = self.factor_sizes, self.factors
        if f is None:
            if sizes:
                raise value_error("factor_sizes", "given without factor classes (factors)")
            return ()
        if not sizes:
            if not f.shape[0]:
                raise value_error("factor_sizes", "cannot be inferred from an empty set of factors; give it")
            return tuple(int(v) + 1 for v in f.amax(0))
        if isinstance(sizes, str) or not isinstance(sizes, (tuple, list)) or not all(is_int(s) and s >= 1 for s in sizes):
            raise type_error("factor_sizes", f"expected a tuple of class counts >= 1, got {sizes!r}")
        if len(sizes) != columns:
            raise value_error("factor_sizes", f"expected {columns} sizes (one per factor column), got {len(sizes)}")
        sizes = tuple(int(s) for s in sizes)
        if f.shape[0] and (bool((f < 0).any()) or bool((f >= torch.tensor(sizes)).any())):
            raise value_error("factors", f"expected each column's classes in [0, factor_sizes) = {list(sizes)}")
        return sizes

    def __len__(self) -> int:
        for t in (self.images, self.factors, self.factor_values, self.labels):
            if t is not None:
                return int(t.shape[0])
        return 0  # unreachable: __post_init__ requires one of them

    def _images(self) -> torch.Tensor:
        if self.images is None:
            raise value_error("images", "this data set was created with images=False")
        return self.images

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one example, ``images.shape[1:]`` (e.g. (1, 64, 64))."""
        return tuple(self._images().shape[1:])

    def subset(self, indices: Indices) -> "Dataset":
        """The rows ``indices`` (a sequence, range, slice, array, integer tensor in [0, N) or
        boolean mask of length N), in that order, with the other fields unchanged."""
        idx = checked_indices(indices, len(self), "indices")

        def pick(t):
            if t is None:
                return None
            return tuple(t[i] for i in idx.tolist()) if isinstance(t, tuple) else t[idx]

        return replace(self, images=pick(self.images), labels=pick(self.labels), factors=pick(self.factors),
                       factor_values=pick(self.factor_values),
                       row_extras={k: pick(v) for k, v in self.row_extras.items()})

    def float_images(self, indices: Indices = None, device: str | torch.device | None = None) -> torch.Tensor:
        """float32 [n, *input_shape] = images · scale in [0, 1], all rows or the rows
        ``indices``, on ``device`` (default: the CPU). Shares memory with ``images`` only when
        they are float32 already, ``scale`` is 1 and no indices/device change them."""
        images = self._images()
        x = images if indices is None else images[checked_indices(indices, len(self), "indices")]
        if device is not None:
            x = x.to(check_device(device))
        out = x.to(torch.float32)
        if self.scale != 1.0:
            out = out * self.scale if out is images else out.mul_(self.scale)
        return out

    def __repr__(self) -> str:
        labels = "None" if self.labels is None else f"{self.num_classes} classes"
        shape = None if self.images is None else self.input_shape
        dtype = None if self.images is None else _dtype(self.images)
        extras = f", extras={sorted(self.extras)}" if self.extras else ""
        rows = f", row_extras={sorted(self.row_extras)}" if self.row_extras else ""
        return (f"Dataset(name={self.name!r}, n={len(self)}, input_shape={shape}, dtype={dtype}, scale={self.scale:g}, "
                f"labels={labels}, factors={list(self.factor_names) or None}{extras}{rows})")


def labelled_by(ds: Dataset, label) -> Dataset:
    """``ds`` with the classes of its factor ``label`` as labels, that factor's class count as
    ``num_classes``."""
    if not isinstance(label, str):
        raise type_error("label", f"expected a factor name (str), got {type(label).__name__}")
    if ds.factors is None:
        raise value_error("label", f"{ds.name!r} has no factor classes to take labels from; pass labels=..., or "
                                   "an (images, labels) pair")
    if label not in ds.factor_names:
        raise value_error("label", f"expected one of {list(ds.factor_names)}, got {label!r}")
    column = ds.factor_names.index(label)
    return replace(ds, labels=ds.factors[:, column].contiguous(), num_classes=ds.factor_sizes[column])


def dataset_from_tensor(images) -> Dataset:
    """Images [N, *input_shape] as a Dataset: uint8 gets scale 1/255 when its maximum exceeds 1
    (else 1) and a channel axis when 3-D; floating and int64 (token ids) get scale 1."""
    if isinstance(images, np.ndarray):
        images = torch.from_numpy(np.ascontiguousarray(images))
    if not isinstance(images, torch.Tensor):
        raise type_error("data", f"expected images as a tensor, got {type(images).__name__}")
    if images.dtype == torch.uint8:
        if images.dim() == 3:  # single-channel [N, H, W]: add the channel axis
            images = images.unsqueeze(1)
        scale = 1.0 / 255.0 if images.numel() and int(images.max()) > 1 else 1.0
    elif images.is_floating_point() or images.dtype == torch.int64:  # int64: token ids
        scale = 1.0
    else:
        raise type_error("data", f"expected uint8 or floating images or int64 token ids, got {_dtype(images)}")
    if images.dim() < 2:
        raise value_error("data", f"expected images [N, *input_shape] with at least 2 axes, got shape {list(images.shape)}")
    if images.device.type != "cpu":
        raise value_error("data", f"expected images in CPU memory, got a tensor on {images.device}")
    return Dataset(images, scale=scale, name="tensor")


# ---------------------------------------------------------------- splits
def split_indices(n: int, test_fraction: float = 0.1, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, test) int64 row indices of a seeded random split of ``n`` examples, each in
    increasing order: a permutation ``torch.randperm(n)`` drawn from a generator seeded
    with ``seed``; its first ``round(test_fraction · n)`` entries (Python's ``round``,
    halves to even) are the test rows, the rest the training rows. Every row, the last one
    included, is a test row with probability ``round(test_fraction · n) / n``. (The public
    code of *How good are variational autoencoders at transfer learning?*, whose Table 5 sets
    a 90/10 train/test split, never put the last example in its test split.) Both parts must
    be non-empty."""
    if not is_int(n) or n < 0:
        raise value_error("n", f"expected a count >= 0, got {n!r}")
    if isinstance(test_fraction, (bool, np.bool_)) or not isinstance(test_fraction, (int, float, np.integer, np.floating)):
        raise type_error("test_fraction", f"expected a number in (0, 1), got {type(test_fraction).__name__}")
    f = float(test_fraction)
    if not 0.0 < f < 1.0:  # NaN fails too
        raise value_error("test_fraction", f"expected a fraction in (0, 1), got {test_fraction!r}")
    seed = check_seed(seed)
    k = round(f * int(n))
    if not 0 < k < n:
        raise value_error("test_fraction", f"{f:g} of {n} examples gives {k} test examples; "
                                           f"expected 1 to {max(int(n) - 1, 1)} (both splits non-empty)")
    perm = torch.randperm(int(n), generator=torch.Generator().manual_seed(seed))
    return perm[k:].sort().values, perm[:k].sort().values


def split(dataset: Dataset, test_fraction: float | None = None, *, seed: int = 0,
          test: Indices = None) -> tuple[Dataset, Dataset]:
    """(train, test) subsets of ``dataset``.

    Random (default): ``test_fraction`` (default 0.1) of the examples, ``round(test_fraction
    · N)``, go to the test split, chosen by a permutation seeded with ``seed`` (see
    :func:`split_indices`; every example, the last included, can be a test example); both
    splits keep the data set's order. Explicit: ``test`` (indices or a boolean mask, no
    repeats) are the test examples in the order given, and the training split is the rest,
    in order; ``seed`` is not used. Both splits must be non-empty. Raises ``ArgumentError``
    naming ``test_fraction`` or ``test`` for a bad split, ``ArgumentTypeError`` naming
    ``dataset`` when it is not a :class:`Dataset` (convert with :func:`as_dataset`).
    """
    if not isinstance(dataset, Dataset):
        raise type_error("dataset", f"expected a Dataset (convert with as_dataset), got {type(dataset).__name__}")
    n = len(dataset)
    if test is None:
        train_idx, test_idx = split_indices(n, 0.1 if test_fraction is None else test_fraction, seed=seed)
    else:
        if test_fraction is not None:
            raise value_error("test_fraction", "give either test_fraction or test (explicit indices), not both")
        test_idx = checked_indices(test, n, "test")
        if torch.unique(test_idx).numel() != test_idx.numel():
            raise value_error("test", "expected distinct indices, got repeats")
        if not 0 < test_idx.numel() < n:
            raise value_error("test", f"expected 1 to {max(n - 1, 1)} test examples of {n}, got {test_idx.numel()}")
        keep = torch.ones(n, dtype=torch.bool)
        keep[test_idx] = False
        train_idx = keep.nonzero().squeeze(1)
    return dataset.subset(train_idx), dataset.subset(test_idx)
