"""A training set by registered name: a subset, a class label and a held-out split
(:class:`DataSpec`), as sweeps, the command line and studies name their data."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

import torch

from .._checks import value_error
from ..config import config_from_dict
from .dataset import split, split_indices
from .domains import as_dataset, domain

__all__ = ["DataSpec"]


@dataclass
class DataSpec:
    """Training data by registered name (:data:`vaetransfer.data.DOMAINS`): ``n`` examples drawn
    at random with ``subset_seed`` (0: all), ``label`` a factor whose classes become the labels
    (classification), and ``test_fraction`` of them held out (seeded by ``split_seed``) as the
    evaluation data of ``TrainConfig.eval_every``; ``data_dir`` the folder of a data set read from
    files (left out of the run's config when None, so earlier runs keep their ids)."""

    name: str = "dsprites"
    n: int = 0
    subset_seed: int = 0
    label: str | None = None
    test_fraction: float = 0.0
    split_seed: int = 0
    data_dir: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping | None) -> "DataSpec":
        spec = config_from_dict(cls, d or {}, argument="data")
        domain(spec.name, argument="data.name")
        if spec.n < 0:
            raise value_error("data.n", f"expected a count >= 0 (0: all), got {spec.n}")
        if not 0.0 <= spec.test_fraction < 1.0:
            raise value_error("data.test_fraction", f"expected a fraction in [0, 1), got {spec.test_fraction}")
        return spec

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if d["data_dir"] is None:
            del d["data_dir"]
        return d

    def _domain(self):
        return domain(self.name, argument="data.name")

    def rows(self):
        """(train, held-out) int64 row indices into the whole data set ``name``, each in
        increasing order: the ``n``-row subset (all rows when ``n`` is 0), then the seeded
        ``test_fraction`` split of it (:func:`vaetransfer.data.split_indices`); held-out is None
        without a split. :meth:`build` returns exactly these rows."""
        count = self._domain().size(self.data_dir)
        if self.n > count:
            raise value_error("data.n", f"{self.name} has {count} examples, asked for {self.n}")
        if self.n:
            gen = torch.Generator().manual_seed(self.subset_seed)
            indices = torch.randperm(count, generator=gen)[: self.n].sort().values
        else:
            indices = torch.arange(count)
        if not self.test_fraction:
            return indices, None
        train, test = split_indices(len(indices), self.test_fraction, seed=self.split_seed)
        return indices[train], indices[test]

    def build(self):
        """(train, test) :class:`vaetransfer.data.Dataset` (test is None without a held-out split)."""
        train, test = self.rows()
        rows = train if test is None else torch.cat([train, test]).sort().values  # the n-row subset
        ds = as_dataset(self._domain().build(rows if self.n else None, data_dir=self.data_dir), label=self.label)
        if test is None:
            return ds, None
        # The held-out rows' positions in the subset: exactly the rows rows() names.
        return split(ds, test=torch.searchsorted(rows, test))

    def held_out(self, count: int, *, argument: str = "count", images: bool = True):
        """The first ``count`` held-out rows of :meth:`rows` (distinct, never trained on) as a
        :class:`vaetransfer.data.Dataset` (``images=False``: their factors only); ArgumentError
        naming ``argument`` when the split holds fewer."""
        held = self.rows()[1]
        available = 0 if held is None else len(held)
        if count > available:
            raise value_error(argument, f"{self.name} holds out {available} examples (n = {self.n or 'all'}, "
                                        f"test_fraction = {self.test_fraction}); asked for {count}")
        rows = self._domain().build(held[:count], images=images, data_dir=self.data_dir)
        return as_dataset(rows, label=self.label)
