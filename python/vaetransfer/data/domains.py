"""The domain registry: every data set usable by name, in one table.

A :class:`Domain` says how to build a set's rows (a generator, or a loader that reads a folder), how
many rows it has (or how to read that from its files), its train/test parts, its factor names and
its default label. Training (``vaetransfer train --dataset``), sweeps
(:class:`vaetransfer.data.DataSpec`) and the studies reach data sets by name through it and hold
no table or row ranges of their own. Registering a new data set is one call::

    data.register("cars", functools.partial(data.load_cars3d, "/data/cars"), count=183 * 96,
                  factor_names=data.CARS3D_FACTORS, label="object")

A loader registered with ``files=True`` is given its folder when rows are built
(``build(..., data_dir=folder)``; the studies pass their ``data_dirs``), and one whose files come
in splits (``splits``) is the splits concatenated, each split a part: CIFAR-10 is rows 0–49,999
(train) and 50,000–59,999 (test), like its generated stand-in ``object_shapes``.

:func:`load` builds a registered set by name, and :func:`as_dataset` turns every accepted input —
a registered name included — into a :class:`~vaetransfer.data.Dataset` (it lives here because it
resolves names).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np
import torch

from .._checks import check_seed, is_int, type_error, value_error
from .dataset import Dataset, Indices, checked_indices, dataset_from_tensor, label_tensor, labelled_by
from .dsprites import DSPRITES_COUNT, DSPRITES_FACTORS, color_dsprites, dsprites, noisy_dsprites
from .labelled import (OBJECT_SHAPES_COUNT, OBJECT_SHAPES_FACTORS, STREET_DIGITS_COUNT, STREET_DIGITS_FACTORS,
                       TEXTURE_SHAPES_COUNT, TEXTURE_SHAPES_FACTORS, TEXTURE_SHAPES_NAMES, object_shapes, street_digits,
                       texture_shapes)
from .loaders import (CARS3D_FACTORS, SKLEARN_DIGITS_COUNT, SMALLNORB_FACTORS, load_cars3d, load_cifar10, load_mnist,
                      load_sklearn_digits, load_smallnorb, load_svhn)
from .solids import SOLIDS_COUNT, SOLIDS_FACTORS, solids
from .tetrominoes import TETROMINOES_COUNT, TETROMINOES_FACTORS, tetrominoes


@dataclass(frozen=True, eq=False)
class Domain:
    """A registered data set (register one with :func:`register`).

    * ``name``: its registered name.
    * ``source``: builds its rows as a :class:`~vaetransfer.data.Dataset`: a generator called as
      ``source(indices=..., images=...)`` (plus ``seed=...`` when ``seeded``), or with ``files`` a
      loader called as ``source(folder, indices=..., images=...)`` — ``source(folder, split, ...)``
      with ``splits``. A subset must equal the same rows of the whole set.
    * ``factor_names``: the factor columns of its rows; ``label``: the factor whose classes are
      its class labels by default (None: no default, e.g. Tetrominoes).
    * ``count``: its number of rows; None for a loader, whose files say how many (read once per
      state of the folder).
    * ``parts``: named, disjoint row ranges ``(start, stop)`` (stop None: to the end), e.g.
      object_shapes' ``{"train": (0, 50_000), "test": (50_000, None)}``; empty for a set without a
      fixed split (the factor grids: studies split those at random themselves).
    * ``shuffled``: the part ranges index a permutation of the rows drawn with the data seed
      (``torch.randperm(size)`` seeded with it) instead of the rows: seeded random parts, e.g.
      sklearn_digits' halves. A part's rows then come in that random order.
    * ``splits``: for a loader whose files come in splits, part name → the loader's split
      (``{"train": "training", "test": "testing"}``): the set is the splits concatenated in this
      order, each one a part.
    * ``seeded``: the generator draws from a seed (the data seed); other sources ignore it.
    * ``files``: the source reads a folder, given as ``data_dir`` when rows are built.
    """

    name: str
    source: Callable[..., Dataset]
    factor_names: tuple[str, ...]
    count: int | None = None
    label: str | None = None
    parts: Mapping[str, tuple[int, int | None]] = field(default_factory=dict)
    shuffled: bool = False
    splits: Mapping[str, str] = field(default_factory=dict)
    seeded: bool = False
    files: bool = False

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: normalised fields are set once, here
        if not isinstance(self.name, str) or not self.name:
            raise type_error("name", f"expected a non-empty str, got {self.name!r}")
        if not callable(self.source):
            raise type_error("source", f"expected a generator or loader, got {type(self.source).__name__}")
        names = self.factor_names
        if isinstance(names, str) or not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
            raise type_error("factor_names", f"expected a tuple of str, got {names!r}")
        put(self, "factor_names", tuple(names))
        if self.label is not None and self.label not in self.factor_names:
            raise value_error("label", f"expected one of the factors {list(self.factor_names)} or None, got {self.label!r}")
        if self.count is None and not self.files:
            raise value_error("count", "expected the number of rows (only a loader of files reads it from them)")
        if self.count is not None and (not is_int(self.count) or self.count < 0):
            raise value_error("count", f"expected a number of rows >= 0, got {self.count!r}")
        put(self, "parts", self._checked_parts())
        if not isinstance(self.splits, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                           for k, v in self.splits.items()):
            raise type_error("splits", f"expected {{part: the loader's split}}, got {self.splits!r}")
        put(self, "splits", dict(self.splits))
        if self.splits and (not self.files or self.parts or self.count is not None):
            raise value_error("splits", "a loader's file splits are its parts: give files=True, no parts and no count")
        if self.shuffled and not self.parts:
            raise value_error("shuffled", "shuffles the parts' rows: give parts")

    def _checked_parts(self) -> dict[str, tuple[int, int | None]]:
        if not isinstance(self.parts, Mapping):
            raise type_error("parts", f"expected {{name: (start, stop)}}, got {self.parts!r}")
        parts = {}
        for part, bounds in self.parts.items():
            start, stop = bounds if isinstance(bounds, (tuple, list)) and len(bounds) == 2 else (None, None)
            if not isinstance(part, str) or not is_int(start) or start < 0 or not (
                    stop is None or (is_int(stop) and stop >= start)):
                raise value_error("parts", f"expected {{name: (start, stop)}} with 0 <= start <= stop (stop None: "
                                           f"to the end), got {part!r}: {bounds!r}")
            parts[part] = (int(start), None if stop is None else int(stop))
        ordered = sorted(parts.values())
        for (_, stop), (start, _) in zip(ordered, ordered[1:]):
            if stop is None or stop > start:
                raise value_error("parts", f"expected disjoint ranges, got {parts}")
        return parts

    # ------------------------------------------------------------ rows and parts
    def _folder(self, data_dir) -> str | None:
        if not self.files:
            if data_dir is not None:
                raise value_error("data_dir", f"{self.name!r} is generated: it reads no files")
            return None
        if data_dir is None:
            raise value_error("data_dir", f"the {self.name!r} domain reads its files: give data_dir (their folder)")
        if not isinstance(data_dir, (str, os.PathLike)):
            raise type_error("data_dir", f"expected a folder, got {type(data_dir).__name__}")
        if not os.path.isdir(data_dir):
            raise value_error("data_dir", f"no such folder: {os.fspath(data_dir)!r}")
        return os.fspath(data_dir)

    def _file_sizes(self, folder: str) -> tuple[int, ...]:
        """The rows of each file split (or of the folder), read once per state of the folder."""
        stamp = []
        for entry in os.scandir(folder):
            stat = entry.stat()
            stamp.append((entry.name, stat.st_size, stat.st_mtime_ns))
        return _file_sizes(self, folder, tuple(sorted(stamp)))

    def size(self, data_dir: str | os.PathLike | None = None) -> int:
        """The number of rows (a loader's read from its files in ``data_dir``)."""
        folder = self._folder(data_dir)
        return self.count if self.count is not None else sum(self._file_sizes(folder))

    def part_ranges(self, data_dir: str | os.PathLike | None = None) -> dict[str, range]:
        """Each part's range: of the rows, or with ``shuffled`` of the seeded permutation of them
        (see :meth:`part_rows`)."""
        folder = self._folder(data_dir)
        if self.splits:
            ends = np.cumsum((0,) + self._file_sizes(folder)).tolist()
            return {part: range(a, b) for part, a, b in zip(self.splits, ends, ends[1:])}
        n = self.size(data_dir)
        ranges = {part: range(start, n if stop is None else stop) for part, (start, stop) in self.parts.items()}
        beyond = {part: r for part, r in ranges.items() if r.start > n or r.stop > n}
        if beyond:
            raise value_error("parts", f"{self.name!r} has {n:,} rows; parts {beyond} reach beyond them")
        return ranges

    def part_rows(self, part: str, *, seed: int = 0, data_dir: str | os.PathLike | None = None) -> torch.Tensor:
        """int64 row indices of the part ``part`` (e.g. ``"train"``, ``"test"``): its range of
        rows, increasing, or with ``shuffled`` its range of ``torch.randperm(size)`` drawn from a
        generator seeded with ``seed`` (the data seed), in that order."""
        ranges = self.part_ranges(data_dir)
        if part not in ranges:
            raise value_error("part", f"expected a part of {self.name!r}, one of {list(ranges)}, got {part!r}")
        r = ranges[part]
        if not self.shuffled:
            return torch.arange(r.start, r.stop)
        order = torch.randperm(self.size(data_dir), generator=torch.Generator().manual_seed(check_seed(seed)))
        return order[r.start:r.stop]

    def build(self, indices: Indices = None, *, images: bool = True, seed: int = 0,
              data_dir: str | os.PathLike | None = None) -> Dataset:
        """The whole set, or the rows ``indices`` of it (a subset equals the same rows of the whole
        set), as a :class:`~vaetransfer.data.Dataset`; ``images=False`` builds only factors and
        labels. ``seed`` is the data seed of a seeded generator (others ignore it); ``data_dir``
        the folder of a loader's files."""
        folder = self._folder(data_dir)
        seed = check_seed(seed)
        if not self.files:
            return self.source(indices=indices, images=images, **({"seed": seed} if self.seeded else {}))
        if not self.splits:
            return self.source(folder, indices=indices, images=images)
        return self._build_from_splits(folder, indices, images)

    def build_part(self, part: str, start: int = 0, count: int | None = None, *, images: bool = True, seed: int = 0,
                   data_dir: str | os.PathLike | None = None) -> Dataset:
        """Rows ``start`` to ``start + count`` (default: to the end) of the part ``part``, in the
        order of :meth:`part_rows` — so the first k rows of a longer build are the build of k rows
        (with ``shuffled``, sorting the slice would break that: a prefix of the sorted 898 rows is
        not the sorted first 500). ArgumentError naming ``count`` when the part holds too few rows."""
        rows = self.part_rows(part, seed=seed, data_dir=data_dir)
        if is_int(start) and count is None:
            count = len(rows) - start
        if not (is_int(start) and is_int(count)) or start < 0 or count < 0 or start + count > len(rows):
            raise value_error("count", f"the {part} part of {self.name!r} has {len(rows):,} rows; asked for "
                                       f"{count!r} rows from row {start!r}")
        return self.build(rows[start:start + count], images=images, seed=seed, data_dir=data_dir)

    def _build_from_splits(self, folder: str, indices: Indices, images: bool) -> Dataset:
        """Rows of the splits concatenated: each split's rows read from its files (only the splits
        the rows touch), then put in the order asked for."""
        ends = np.cumsum((0,) + self._file_sizes(folder)).tolist()
        idx = torch.arange(ends[-1]) if indices is None else checked_indices(indices, ends[-1], "indices")
        which = torch.bucketize(idx, torch.tensor(ends[1:-1], dtype=torch.int64), right=True)
        pieces, positions = [], []
        for k, split in enumerate(self.splits.values()):
            at = (which == k).nonzero().squeeze(1)
            if len(at) or (k == 0 and not len(idx)):  # an empty selection still has the sets' form
                pieces.append(self.source(folder, split, indices=idx[at] - ends[k], images=images))
                positions.append(at)
        ds = pieces[0] if len(pieces) == 1 else _concatenate(pieces)
        order = torch.argsort(torch.cat(positions))
        return ds if torch.equal(order, torch.arange(len(order))) else ds.subset(order)


@functools.lru_cache(maxsize=64)
def _file_sizes(domain: Domain, folder: str, stamp: tuple) -> tuple[int, ...]:
    """Keyed by ``stamp`` (the folder's file names, sizes and modification times): a changed file
    is read again."""
    if not domain.splits:
        return (len(domain.source(folder, images=False)),)
    return tuple(len(domain.source(folder, split, images=False)) for split in domain.splits.values())


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    return bool(a == b)


def _concatenate(pieces: list[Dataset]) -> Dataset:
    """Rows of several file splits of one loader as one data set; of their ``extras``, the ones
    they share (a ``split`` of its own is dropped)."""
    first = pieces[0]

    def cat(values):
        if values[0] is None:
            return None
        return torch.cat(values) if isinstance(values[0], torch.Tensor) else sum(values, ())

    return replace(first, images=cat([p.images for p in pieces]), labels=cat([p.labels for p in pieces]),
                   factors=cat([p.factors for p in pieces]), factor_values=cat([p.factor_values for p in pieces]),
                   extras={k: v for k, v in first.extras.items() if all(_same(v, p.extras.get(k)) for p in pieces)},
                   row_extras={k: cat([p.row_extras[k] for p in pieces]) for k in first.row_extras})


# ---------------------------------------------------------------- the registry
_DOMAINS: dict[str, Domain] = {}
#: The registered domains by name (read-only: :func:`register` adds one).
DOMAINS: Mapping[str, Domain] = MappingProxyType(_DOMAINS)


def register(name: str, source: Callable[..., Dataset], *, factor_names, count: int | None = None,
             label: str | None = None, parts: Mapping | None = None, shuffled: bool = False,
             splits: Mapping | None = None, seeded: bool = False, files: bool = False,
             overwrite: bool = False) -> Domain:
    """Registers a data set under ``name`` (the fields of :class:`Domain`) and returns its record;
    it can then be used by name everywhere (:func:`load`, :func:`as_dataset`, ``vaetransfer train
    --dataset``, :class:`vaetransfer.data.DataSpec`, the studies). ArgumentError naming ``name``
    when it is taken, unless ``overwrite``."""
    record = Domain(name, source, factor_names, count=count, label=label, parts=parts or {}, shuffled=shuffled,
                    splits=splits or {}, seeded=seeded, files=files)
    if name in _DOMAINS and not overwrite:
        raise value_error("name", f"{name!r} is registered already (pass overwrite=True to replace it)")
    _DOMAINS[name] = record
    return record


def unregister(name: str) -> None:
    """Removes the registered domain ``name``."""
    _DOMAINS.pop(domain(name).name)


def domain(name: str, *, argument: str = "name") -> Domain:
    """The registered domain ``name``; ArgumentError naming ``argument`` for an unknown name."""
    if not isinstance(name, str) or name not in _DOMAINS:
        raise value_error(argument, f"expected a registered data set, one of {sorted(_DOMAINS)}, got {name!r}")
    return _DOMAINS[name]


def load(name: str, **kwargs) -> Dataset:
    """Builds the registered data set ``name``: ``domain(name).build(**kwargs)`` (``indices``,
    ``images``, ``seed``, ``data_dir``; see :meth:`Domain.build`)."""
    known = ("indices", "images", "seed", "data_dir")
    for key in kwargs:
        if key not in known:
            raise type_error(key, f"unexpected keyword argument; load takes {', '.join(known)}")
    return domain(name).build(**kwargs)


def as_dataset(data: Any, *, label: str | None = None, labels=None, num_classes: int | None = None,
               name: str | None = None) -> Dataset:
    """``data`` as a :class:`~vaetransfer.data.Dataset`. Accepted forms:

    * a :class:`~vaetransfer.data.Dataset` (returned as is unless an argument changes it);
    * a registered name (a key of :data:`DOMAINS`, e.g. ``"dsprites"``): the whole set;
    * a tensor or NumPy array of images [N, *input_shape], uint8 or floating: uint8 gets
      scale 1/255 when its maximum exceeds 1, else 1; floating gets scale 1 (values in
      [0, 1] expected); a 3-D uint8 tensor [N, H, W] gets a channel axis, [N, 1, H, W];
    * a tuple ``(images, labels)`` of such images and integer labels [N].

    ``label`` names the factor whose classes become the labels (its class count
    ``num_classes``: e.g. ``as_dataset(data.dsprites(), label="shape")``, 3 classes) — the one
    way to label a set by a factor. ``labels`` (integer [N]) replaces the labels and
    ``num_classes`` the class count (default: what the data brings, or ``max(labels) + 1``);
    ``name`` replaces the name. Raises ``ArgumentTypeError`` naming ``data`` for other types,
    ``ArgumentError`` naming ``data`` for an unknown name and naming ``label``/``labels`` for
    conflicting labels or a set without factor classes.
    """
    if label is not None and labels is not None:
        raise value_error("labels", "give either label (a factor name) or labels (class labels), not both")
    if isinstance(data, str):
        data = domain(data, argument="data").build()
    if isinstance(data, Dataset):
        ds = data
    elif isinstance(data, tuple):
        if len(data) != 2:
            raise value_error("data", f"expected an (images, labels) pair, got a tuple of {len(data)}")
        if labels is not None:
            raise value_error("labels", "given twice: in the (images, labels) pair and as labels=")
        ds, labels = dataset_from_tensor(data[0]), data[1]
    elif isinstance(data, (torch.Tensor, np.ndarray)):
        ds = dataset_from_tensor(data)
    else:
        raise type_error("data", "expected a Dataset, a registered name, a tensor or an (images, labels) tuple, got "
                                 f"{type(data).__name__}")
    if label is not None:
        ds = labelled_by(ds, label)
    changes: dict[str, Any] = {}
    if labels is not None:
        changes["labels"], changes["num_classes"] = label_tensor(labels), num_classes
    elif num_classes is not None:
        if ds.labels is None:
            raise value_error("num_classes", f"given ({num_classes}) without labels")
        changes["num_classes"] = num_classes
    if name is not None:
        changes["name"] = name
    return replace(ds, **changes) if changes else ds


# ---------------------------------------------------------------- the built-in domains
#: 50,000 training and 10,000 test rows, as CIFAR-10's files (which object_shapes stands in for).
_CIFAR_PARTS = {"train": (0, 50_000), "test": (50_000, None)}
_FILE_SPLITS = {"train": "train", "test": "test"}

register("dsprites", dsprites, count=DSPRITES_COUNT, factor_names=DSPRITES_FACTORS, label="shape")
register("color_dsprites", color_dsprites, count=DSPRITES_COUNT, factor_names=DSPRITES_FACTORS, label="shape",
         seeded=True)
register("noisy_dsprites", noisy_dsprites, count=DSPRITES_COUNT, factor_names=DSPRITES_FACTORS, label="shape",
         seeded=True)
register("tetrominoes", tetrominoes, count=TETROMINOES_COUNT, factor_names=TETROMINOES_FACTORS, seeded=True)
register("solids", solids, count=SOLIDS_COUNT, factor_names=SOLIDS_FACTORS, label="shape")
register("object_shapes", object_shapes, count=OBJECT_SHAPES_COUNT, factor_names=OBJECT_SHAPES_FACTORS, label="label",
         parts=_CIFAR_PARTS, seeded=True)
# SVHN's 73,257 training and 26,032 test images.
register("street_digits", street_digits, count=STREET_DIGITS_COUNT, factor_names=STREET_DIGITS_FACTORS, label="label",
         parts={"train": (0, 73_257), "test": (73_257, None)}, seeded=True)
for _style, _name in TEXTURE_SHAPES_NAMES.items():  # the same rows (poses) in every style
    register(_name, functools.partial(texture_shapes, style=_style), count=TEXTURE_SHAPES_COUNT,
             factor_names=TEXTURE_SHAPES_FACTORS, label="label", parts=_CIFAR_PARTS, seeded=True)
del _style, _name
# Seeded halves (test first): too few rows for a fixed split to be representative.
register("sklearn_digits", load_sklearn_digits, count=SKLEARN_DIGITS_COUNT, factor_names=("label",), label="label",
         parts={"train": (SKLEARN_DIGITS_COUNT // 2, None), "test": (0, SKLEARN_DIGITS_COUNT // 2)}, shuffled=True)
register("cifar10", load_cifar10, factor_names=("label",), label="label", splits=_FILE_SPLITS, files=True)
register("svhn", load_svhn, factor_names=("label",), label="label", splits=_FILE_SPLITS, files=True)
register("mnist", load_mnist, factor_names=("label",), label="label", splits=_FILE_SPLITS, files=True)
register("fashion_mnist", functools.partial(load_mnist, name="fashion_mnist"), factor_names=("label",),
         label="label", splits=_FILE_SPLITS, files=True)
register("smallnorb", load_smallnorb, factor_names=SMALLNORB_FACTORS, label="category",
         splits={"train": "training", "test": "testing"}, files=True)
register("cars3d", load_cars3d, factor_names=CARS3D_FACTORS, label="object", files=True)
