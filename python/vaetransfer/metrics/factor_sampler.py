"""The ground truth the sampled disentanglement metrics draw from: :class:`FactorSampler` — a
procedural domain's factor grid rendered by index, your own renderer of factors, or a pool of your
labelled examples — drawn from uniformly and exactly (no rejection sampling)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from .._checks import check_int, check_seed, is_int, sequence, type_error, value_error
from ..data import Dataset, Domain
from ..data import domain as registered_domain

__all__ = ["FactorSampler"]


# ---------------------------------------------------------------- the factor grid
def _generator(rng, argument: str = "rng") -> np.random.Generator:
    """A NumPy Generator, or a seed for one."""
    if isinstance(rng, np.random.Generator):
        return rng
    if is_int(rng):
        return np.random.default_rng(check_seed(rng, argument))
    raise type_error(argument, f"expected a numpy.random.Generator or a seed, got {type(rng).__name__}")


class FactorSampler:
    """Draws factor combinations of a factor grid uniformly and renders exactly those rows.

    A procedural domain of :mod:`vaetransfer.data` lays its rows out as a full factor grid: row
    ``r`` holds the factor classes whose mixed-radix number (the last factor varying fastest) in
    the radices ``factor_sizes`` is ``r`` (dSprites, Solids, Tetrominoes and the dSprites
    variants; checked on construction). The sampler draws rows uniformly — every combination of
    factor classes equally likely — and builds exactly those rows by index, so no example is
    rejected or approximated, as disentanglement_lib's ``GroundTruthData.sample_factors`` and
    ``sample_observations_from_factors`` do for its data sets.

    ``source`` is one of:

    * a registered domain name (``"dsprites"``) or a :class:`vaetransfer.data.Domain` whose rows
      are a full factor grid, built from the data seed ``seed`` when the generator is seeded;
    * a :class:`vaetransfer.data.Dataset` holding the full grid, rows in grid order (a loaded
      copy of a file-based set, for example);
    * a sequence of factor class counts (a bare grid, e.g. ``(3, 6, 40, 32, 32)``): there is
      nothing to render, and :meth:`images` returns the factor classes themselves;
    * **your own renderer**: a callable ``render(factors) -> images`` (int64 factor classes
      [num, K] → float images [num, *input_shape] in [0, 1], a tensor or an array) with
      ``factor_sizes`` (the class count of each factor): your simulator or generator, drawn from
      exactly as a procedural domain is;
    * **your own labelled examples**: a :class:`vaetransfer.data.Dataset` with factor classes that is
      not a full grid (samples of a simulator, a labelled collection), with ``pool=True``: factor
      combinations are drawn as rows of the pool (its empirical distribution), and BetaVAE's and
      FactorVAE's batches sharing a factor's class are drawn among the rows of that class, as far as
      the pool has them (rows with equal factor classes are one example).

    ``render=False`` makes :meth:`images` return the factor classes for any source too (float32
    [num, K]): the metrics then run on an encoder of the true factors, without rendering.
    ``factor_names`` names the columns of a bare grid (default ``factor0, factor1, ...``).

    ArgumentError naming ``source`` for a domain that reads files (build it as a Dataset) or whose
    rows are not a factor grid (labelled sets such as ``object_shapes``).
    """

    def __init__(self, source, *, seed: int = 0, render: bool = True,
                 factor_names: Sequence[str] | None = None, factor_sizes: Sequence[int] | None = None,
                 pool: bool = False):
        if not isinstance(render, bool):
            raise type_error("render", f"expected a bool, got {type(render).__name__}")
        if not isinstance(pool, bool):
            raise type_error("pool", f"expected a bool, got {type(pool).__name__}")
        self._seed = check_seed(seed)
        self._domain = self._dataset = self._renderer = self._pool = None
        self.name: str
        if factor_sizes is not None and (not callable(source) or isinstance(source, (Domain, Dataset))):
            raise value_error("factor_sizes", "goes with a renderer (a callable source); a domain or data set brings "
                                              "its own")
        if pool and not isinstance(source, Dataset):
            raise value_error("pool", "draws from a Dataset of labelled examples; give one")
        if isinstance(source, str):
            source = registered_domain(source, argument="source")
        if isinstance(source, Domain):
            self._init_domain(source)
        elif isinstance(source, Dataset) and pool:
            self._init_pool(source)
        elif isinstance(source, Dataset):
            self._init_dataset(source)
        elif callable(source):
            if factor_sizes is None:
                raise value_error("factor_sizes", "a renderer needs the class count of each factor, e.g. (3, 6, 40)")
            sizes = sequence(factor_sizes, "factor_sizes", "factor class counts")
            if not sizes or not all(is_int(v) and v >= 1 for v in sizes):
                raise value_error("factor_sizes", f"expected factor class counts >= 1, got {sizes!r}")
            self._renderer = source
            self.factor_sizes = tuple(int(v) for v in sizes)
            self.factor_names = tuple(f"factor{k}" for k in range(len(sizes)))
            self.name = getattr(source, "__name__", type(source).__name__)
        elif isinstance(source, (Sequence, np.ndarray, torch.Tensor)) and not isinstance(source, (str, bytes)):
            sizes = sequence(source, "source", "factor class counts")
            if not sizes or not all(is_int(s) and s >= 1 for s in sizes):
                raise value_error("source", f"expected factor class counts >= 1, got {sizes!r}")
            self.factor_sizes = tuple(int(s) for s in sizes)
            self.factor_names = tuple(f"factor{k}" for k in range(len(sizes)))
            self.name = "grid"
            render = False
        else:
            raise type_error("source", "expected a registered domain name, a Domain, a Dataset holding a factor grid "
                                       f"or factor class counts, got {type(source).__name__}")
        if factor_names is not None:
            names = sequence(factor_names, "factor_names", "a sequence of factor names")
            if len(names) != len(self.factor_sizes) or not all(isinstance(s, str) for s in names):
                raise value_error("factor_names", f"expected {len(self.factor_sizes)} names (str), got {names!r}")
            self.factor_names = tuple(names)
        self.render = render
        if self._pool is None and math.prod(self.factor_sizes) >= 2**63:  # rows are drawn as int64 indices
            raise value_error("factor_sizes" if factor_sizes is not None else "source",
                              f"the grid {list(self.factor_sizes)} has {math.prod(self.factor_sizes):.3e} combinations, "
                              "more than int64 indices reach (2^63)")
        self.count = len(self._pool["factors"]) if self._pool is not None else math.prod(self.factor_sizes)

    def _init_domain(self, d) -> None:
        if d.files:
            raise value_error("source", f"the {d.name!r} domain reads files; a FactorSampler builds rows by index from "
                                        "a generator. Load the set and pass the Dataset (holding its full factor grid)")
        count = d.size()
        probe = d.build([0], images=False, seed=self._seed)
        sizes = tuple(probe.factor_sizes)
        if probe.factors is None or not sizes or math.prod(sizes) != count:
            raise value_error("source", f"the {d.name!r} domain has no factor grid: its {count:,} rows are not the "
                                        f"combinations of its factor classes {list(sizes)}")
        # The layout check: rows spread over the whole set must hold their own mixed-radix classes.
        rows = np.unique(np.linspace(0, count - 1, num=min(count, 257)).round().astype(np.int64))
        got = d.build(torch.from_numpy(rows), images=False, seed=self._seed).factors.numpy()
        if not np.array_equal(np.ravel_multi_index(tuple(got.T), sizes), rows):
            raise value_error("source", f"the {d.name!r} domain's rows are not its factor grid in mixed-radix order")
        self._domain, self.name = d, d.name
        self.factor_sizes, self.factor_names = sizes, tuple(probe.factor_names)

    def _init_dataset(self, ds) -> None:
        sizes = tuple(ds.factor_sizes)
        if ds.factors is None or not sizes or math.prod(sizes) != len(ds):
            raise value_error("source", f"the data set {ds.name!r} does not hold a full factor grid "
                                        f"({len(ds):,} rows, factor classes {list(sizes)})")
        got = np.ravel_multi_index(tuple(ds.factors.numpy().T), sizes)
        if not np.array_equal(got, np.arange(len(ds))):
            raise value_error("source", f"the rows of {ds.name!r} are not its factor grid in mixed-radix order")
        self._dataset, self.name = ds, ds.name
        self.factor_sizes, self.factor_names = sizes, tuple(ds.factor_names)

    def _init_pool(self, ds) -> None:
        if ds.factors is None or not ds.factor_sizes:
            raise value_error("source", f"the data set {ds.name!r} has no factor classes to draw by")
        if ds.images is None:
            raise value_error("source", f"the data set {ds.name!r} was built without images")
        factors = ds.factors.numpy().astype(np.int64)
        first: dict[tuple, int] = {}
        for r, row in enumerate(map(tuple, factors)):
            first.setdefault(row, r)
        self._pool = {"factors": factors, "row_of": first, "data": ds}
        self.name = ds.name
        self.factor_sizes, self.factor_names = tuple(ds.factor_sizes), tuple(ds.factor_names)

    # -- the grid
    @property
    def num_factors(self) -> int:
        return len(self.factor_sizes)

    @property
    def varying(self) -> tuple[int, ...]:
        """Indices of the factors with more than one class: the ones the metrics fix and predict
        (a factor of one class, like dSprites' ``color``, never varies; disentanglement_lib leaves
        it out of dSprites' factors)."""
        return tuple(k for k, s in enumerate(self.factor_sizes) if s > 1)

    def factor_index(self, factor) -> int:
        """A factor's column index, from its index or its name."""
        if isinstance(factor, str):
            if factor not in self.factor_names:
                raise value_error("factor", f"expected one of {list(self.factor_names)}, got {factor!r}")
            return self.factor_names.index(factor)
        return check_int(factor, "factor", 0, self.num_factors - 1, what="a factor index")

    def rows(self, factors) -> np.ndarray:
        """int64 [num] grid rows of the factor classes ``factors`` [num, K] (mixed radix)."""
        f = self._checked_factors(factors)
        if self._pool is not None:
            return np.array([self._pool["row_of"][tuple(r)] for r in f.tolist()], dtype=np.int64)
        return np.ravel_multi_index(tuple(f.T), self.factor_sizes).astype(np.int64)

    def _checked_factors(self, factors) -> np.ndarray:
        f = factors.numpy() if isinstance(factors, torch.Tensor) else np.asarray(factors)
        if f.ndim != 2 or f.shape[1] != self.num_factors or not np.issubdtype(f.dtype, np.integer):
            raise value_error("factors", f"expected integer factor classes [num, {self.num_factors}], got "
                                         f"{f.dtype} {list(f.shape)}")
        if f.size and ((f < 0).any() or (f >= np.asarray(self.factor_sizes)).any()):
            raise value_error("factors", f"expected each column's classes in [0, factor_sizes) = {list(self.factor_sizes)}")
        return f.astype(np.int64, copy=False)

    def sample_factors(self, num: int, rng) -> np.ndarray:
        """int64 [num, K]: ``num`` factor combinations drawn uniformly from the grid, as
        ``rng.integers(0, count, num)`` rows unravelled in mixed radix (``rng``: a NumPy Generator
        or a seed)."""
        num = check_int(num, "num", 0, what="a number of samples")
        rows = _generator(rng).integers(0, self.count, size=num, dtype=np.int64)
        if self._pool is not None:  # rows of the pool: its own distribution of factor combinations
            return self._pool["factors"][rows]
        return np.stack(np.unravel_index(rows, self.factor_sizes), axis=1).astype(np.int64)

    def sample_fixed(self, num: int, factor, rng) -> np.ndarray:
        """int64 [num, K]: ``num`` uniform combinations whose factor ``factor`` (index or name) is
        set to the class of the first one, one random class shared across the batch (FactorVAE's
        batches)."""
        k = self.factor_index(factor)
        if self._pool is not None:  # rows of the pool sharing the class of the first draw
            rng = _generator(rng)
            pool = self._pool["factors"]
            f = self.sample_factors(1, rng)
            same = np.flatnonzero(pool[:, k] == f[0, k]) if num else np.zeros(0, np.int64)
            return pool[same[rng.integers(0, len(same), size=num)]] if num else f[:0]
        f = self.sample_factors(num, rng)
        if num:
            f[:, k] = f[0, k]
        return f

    def sample_sharing(self, factors, columns, rng) -> np.ndarray:
        """int64 [num, K]: for each row of ``factors``, a combination drawn uniformly among those sharing
        its class of factor ``columns[i]`` — on a grid the other factors drawn anew, in a pool a row of the
        pool with that class (BetaVAE's pairs)."""
        f = self._checked_factors(factors)
        cols = np.asarray(columns, dtype=np.int64)
        rng = _generator(rng)
        if self._pool is None:
            out = self.sample_factors(len(f), rng)
            out[np.arange(len(f)), cols] = f[np.arange(len(f)), cols]
            return out
        pool = self._pool["factors"]
        out = np.empty_like(f)
        classes = f[np.arange(len(f)), cols]
        for k, c in sorted(set(zip(cols.tolist(), classes.tolist()))):
            where = np.flatnonzero((cols == k) & (classes == c))
            rows = np.flatnonzero(pool[:, k] == c)
            out[where] = pool[rows[rng.integers(0, len(rows), size=len(where))]]
        return out

    def images(self, factors) -> torch.Tensor:
        """The rows of ``factors`` [num, K]: float32 images [num, *input_shape] in the model's scale
        (``Dataset.float_images``: pixels · scale in [0, 1]), exactly the grid rows of those factor
        classes; without rendering (a bare grid, ``render=False``) the factor classes as float32
        [num, K]."""
        f = self._checked_factors(factors)
        if not self.render:
            return torch.from_numpy(f.astype(np.float32))
        if self._renderer is not None:
            return self._rendered(f)
        if self._pool is not None:
            try:
                rows = torch.tensor([self._pool["row_of"][tuple(r)] for r in f.tolist()], dtype=torch.int64)
            except KeyError as e:
                raise value_error("factors", f"the combination {list(e.args[0])} is not in the pool") from e
            return self._pool["data"].float_images(rows)
        rows = torch.from_numpy(np.ravel_multi_index(tuple(f.T), self.factor_sizes).astype(np.int64))
        if self._dataset is not None:
            return self._dataset.float_images(rows)
        return self._domain.build(rows, images=True, seed=self._seed).float_images()

    def _rendered(self, f: np.ndarray) -> torch.Tensor:
        """Your renderer's images of ``f``, checked: [num, ...] floating, finite, in [0, 1]."""
        out = self._renderer(f.copy())
        if isinstance(out, np.ndarray):
            out = torch.from_numpy(np.ascontiguousarray(out))
        if not isinstance(out, torch.Tensor) or out.dim() < 2 or out.shape[0] != len(f) or \
                not out.is_floating_point():
            got = f"{out.dtype} {list(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise value_error("source", f"expected the renderer to return float images [{len(f)}, ...], got {got}")
        out = out.float()
        if out.numel() and (not torch.isfinite(out).all() or out.min() < 0 or out.max() > 1):
            raise value_error("source", "expected the renderer's images in [0, 1] (finite)")
        return out

    def __repr__(self) -> str:
        kind = ", renderer" if self._renderer is not None else ", pool" if self._pool is not None else ""
        return (f"FactorSampler({self.name!r}, factors={dict(zip(self.factor_names, self.factor_sizes))}, "
                f"render={self.render}{kind})")


def as_sampler(sampler, argument: str = "sampler") -> FactorSampler:
    if not isinstance(sampler, FactorSampler):
        raise type_error(argument, f"expected a FactorSampler, got {type(sampler).__name__}")
    if len(sampler.varying) < 2:
        raise value_error(argument, f"expected a grid with at least 2 factors that vary, got classes "
                                    f"{list(sampler.factor_sizes)}")
    return sampler
