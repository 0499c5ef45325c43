"""The one domain registry (vaetransfer.data.DOMAINS): every registered domain builds, has the size
and factor names it declares, its parts are disjoint and within range, a subset equals the same rows
of the whole set; a file domain is its splits concatenated; registering a data set is one call and
then works in train_main and DataSpec; the studies keep no domain table or row ranges of their own."""
from pathlib import Path

import numpy as np
import pytest
import torch

import vaetransfer as vt
from vaetransfer import cli, data, studies, sweep
from vaetransfer.studies import finetune_similarity as fs, rr_pretraining as rr, transfer
from vaetransfer.train import train_main

from test_domains import _write_cars, _write_idx, _write_norb
from test_labelled_domains import _write_cifar


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict:
    """Small files in each public format, one folder per file domain."""
    import scipy.io

    root = tmp_path_factory.mktemp("files")
    dirs = {name: root / name for name, d in data.DOMAINS.items() if d.files}
    for folder in dirs.values():
        folder.mkdir()
    _write_cifar(dirs["cifar10"], rows_per_batch=4)  # 20 train, 4 test
    rng = np.random.default_rng(3)
    for split, n in (("train", 9), ("test", 5)):
        scipy.io.savemat(dirs["svhn"] / f"{split}_32x32.mat", {"X": rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8),
                                                               "y": rng.integers(1, 11, (n, 1)).astype(np.uint8)})
    for name in ("mnist", "fashion_mnist"):
        for prefix, n in (("train", 12), ("t10k", 5)):
            _write_idx(dirs[name] / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), 0x08)
            _write_idx(dirs[name] / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n).astype(np.uint8), 0x08)
    _write_norb(dirs["smallnorb"], "training", n=6)
    _write_norb(dirs["smallnorb"], "testing", n=4)
    _write_cars(dirs["cars3d"], n_cars=2, size=16)
    return {name: str(folder) for name, folder in dirs.items()}


# ---------------------------------------------------------------------------------- every domain
@pytest.mark.parametrize("name", list(data.DOMAINS))
def test_every_registered_domain_builds_with_its_declared_size_and_factors(name, folders):
    d = data.domain(name)
    folder = folders.get(name)
    n = d.size(folder)
    assert d.name == name and n > 0 and (d.count is None) == d.files
    rows = torch.tensor(sorted({0, n // 3, n // 2, n - 1}))  # spread over the set, the last row included
    ds = d.build(rows, seed=1, data_dir=folder)
    assert isinstance(ds, data.Dataset) and len(ds) == len(rows) and ds.images.dim() == 4
    assert ds.factor_names == d.factor_names and ds.factors.shape == (len(rows), len(d.factor_names))
    if d.label is not None:
        assert data.as_dataset(ds, label=d.label).num_classes == ds.factor_sizes[d.factor_names.index(d.label)]
    with pytest.raises(vt.ArgumentError, match="indices"):
        d.build([n], data_dir=folder)
    # The whole set has the declared size, and any subset (any order, repeats) is the same rows of it.
    whole = d.build(images=n <= 5_000, seed=1, data_dir=folder)
    assert len(whole) == n
    pick = torch.tensor([n - 1, 0, n // 2, n // 2])
    sub = d.build(pick, seed=1, data_dir=folder)
    assert torch.equal(sub.factors, whole.factors[pick])
    if whole.images is not None:
        assert torch.equal(sub.images, whole.images[pick])
    else:  # too large to build here: the images of a block of rows of it instead
        block = d.build(range(n - 40, n), seed=1)
        assert torch.equal(d.build([n - 1, n - 40, n - 7], seed=1).images, block.images[[39, 0, 33]])


@pytest.mark.parametrize("name", [n for n, d in data.DOMAINS.items() if d.parts or d.splits])
def test_parts_are_disjoint_and_within_range(name, folders):
    d = data.domain(name)
    folder = folders.get(name)
    n = d.size(folder)
    for seed in (0, 3):
        parts = {p: d.part_rows(p, seed=seed, data_dir=folder) for p in d.part_ranges(folder)}
        assert set(parts) == {"train", "test"} and all(len(rows) for rows in parts.values())
        every = torch.cat(list(parts.values()))
        assert every.unique().numel() == every.numel()  # disjoint, no repeats
        assert int(every.min()) >= 0 and int(every.max()) < n
        if not d.shuffled:
            assert all(torch.equal(rows, torch.arange(int(rows[0]), int(rows[0]) + len(rows))) for rows in parts.values())
    test = parts["test"]
    part = d.build_part("test", 1, 3, seed=3, data_dir=folder)
    assert torch.equal(part.factors, d.build(test[1:4], seed=3, data_dir=folder).factors)
    # A prefix of a longer build is the shorter build (the sklearn_digits CKA pairing rests on it).
    longer = d.build_part("test", 1, len(test) - 1, seed=3, data_dir=folder)
    assert torch.equal(longer.factors[:3], part.factors) and torch.equal(longer.images[:3], part.images)
    with pytest.raises(vt.ArgumentError, match="count"):
        d.build_part("test", 0, len(test) + 1, data_dir=folder)
    with pytest.raises(vt.ArgumentError, match="part"):
        d.part_rows("validation", data_dir=folder)


def test_seeded_parts_are_halves_of_a_seeded_permutation():
    d = data.domain("sklearn_digits")
    assert d.shuffled and d.size() == data.SKLEARN_DIGITS_COUNT == 1797
    perm = torch.randperm(1797, generator=torch.Generator().manual_seed(5))
    assert torch.equal(d.part_rows("test", seed=5), perm[:898]) and torch.equal(d.part_rows("train", seed=5), perm[898:])
    assert torch.equal(torch.cat([d.part_rows("test", seed=5), d.part_rows("train", seed=5)]).sort().values,
                       torch.arange(1797))
    assert not torch.equal(d.part_rows("test", seed=6), perm[:898])


def test_a_file_domain_is_its_splits_concatenated(folders):
    d, folder = data.domain("cifar10"), folders["cifar10"]
    train, test = data.load_cifar10(folder, "train"), data.load_cifar10(folder, "test")
    assert d.size(folder) == 24 and d.part_ranges(folder) == {"train": range(0, 20), "test": range(20, 24)}
    ds = d.build([22, 3, 20, 19], data_dir=folder)
    assert torch.equal(ds.images, torch.cat([test.images[[2]], train.images[[3]], test.images[[0]], train.images[[19]]]))
    assert torch.equal(ds.factors[:, 0], torch.cat([test.factors[[2, 0], 0], train.factors[[3, 19], 0]])[[0, 2, 1, 3]])
    assert ds.extras == {"classes": data.CIFAR10_CLASSES}  # rows of both splits: no split of their own
    assert d.build([21, 23], data_dir=folder).extras["split"] == "test"
    whole = d.build(data_dir=folder)
    assert torch.equal(whole.images, torch.cat([train.images, test.images])) and len(d.build([], data_dir=folder)) == 0
    norb = data.domain("smallnorb")  # part names the study's, splits the loader's
    assert norb.splits == {"train": "training", "test": "testing"} and norb.size(folders["smallnorb"]) == 10
    with pytest.raises(vt.ArgumentError, match="data_dir"):
        d.build([0])
    with pytest.raises(vt.ArgumentError, match="data_dir"):
        data.domain("dsprites").build([0], data_dir=folder)


# ---------------------------------------------------------------------------------- registering
def _stripes(indices=None, *, images=True):
    """48 rows of 8×8 vertical stripes: row i has class i % 2 (the phase) and period i // 2 % 4 + 1."""
    rows = torch.arange(48) if indices is None else torch.arange(48)[torch.as_tensor(np.asarray(indices), dtype=torch.long)]
    factors = torch.stack([rows % 2, rows // 2 % 4], 1)
    pixels = None
    if images:
        column = (torch.arange(8)[None, :] // (factors[:, 1:] + 1) + factors[:, :1]) % 2
        pixels = (column[:, None, None, :] * 255).expand(-1, 1, 8, -1).to(torch.uint8).contiguous()
    return data.Dataset(pixels, factors=factors, factor_names=("label", "period"), factor_sizes=(2, 4),
                        scale=1 / 255, name="stripes")


@pytest.fixture
def stripes():
    record = data.register("stripes", _stripes, count=48, factor_names=("label", "period"), label="label",
                           parts={"train": (0, 40), "test": (40, None)})
    yield record
    data.unregister("stripes")


def test_registering_a_data_set_is_one_call(stripes, tmp_path):
    assert data.DOMAINS["stripes"] is stripes and "stripes" in cli.registries()["datasets"]
    assert len(data.load("stripes")) == 48 and data.as_dataset("stripes", label="period").num_classes == 4
    assert stripes.build_part("test", 0, 3).factors[:, 0].tolist() == [0, 1, 0]  # rows 40, 41, 42
    # train_main lists the registered names: a VAE, and a classifier of the set's own label.
    assert train_main(["--dataset", "stripes", "--steps", "2", "--out", str(tmp_path / "vae"), "--quiet"]) == 0
    run = vt.load_run(tmp_path / "vae")
    assert run.finished and run.config.dataset == "stripes" and run.config.model.architecture == "mlp"
    assert train_main(["--dataset", "stripes", "--architecture", "mlp-classifier", "--n", "32", "--steps", "2",
                       "--out", str(tmp_path / "classifier"), "--quiet"]) == 0
    assert vt.load_run(tmp_path / "classifier").config.model.num_classes == 2
    # ... and sweeps (DataSpec): a subset, the label, a held-out split.
    spec = sweep.DataSpec.from_dict({"name": "stripes", "n": 24, "label": "label", "test_fraction": 0.25})
    train_set, test_set = spec.build()
    assert (len(train_set), len(test_set), train_set.num_classes) == (18, 6, 2)
    assert "data_dir" not in spec.to_dict()  # runs declared before data_dir keep their ids
    assert len(spec.held_out(6)) == 6
    with pytest.raises(vt.ArgumentError) as e:
        spec.held_out(7, argument="probe_n")
    assert e.value.argument == "probe_n"


@pytest.mark.parametrize("fields, argument", [
    (dict(count=10, factor_names=("a",), label="b"), "label"),
    (dict(count=10, factor_names=("a",), parts={"train": (0, 6), "test": (5, None)}), "parts"),
    (dict(count=10, factor_names=("a",), parts={"train": (0, None), "test": (5, 8)}), "parts"),
    (dict(count=10, factor_names=("a",), parts={"train": (4, 2)}), "parts"),
    (dict(factor_names=("a",)), "count"),
    (dict(count=-1, factor_names=("a",)), "count"),
    (dict(count=10, factor_names=("a",), splits={"train": "train"}), "splits"),
    (dict(count=10, factor_names=("a",), shuffled=True), "shuffled"),
    (dict(count=10, factor_names="a"), "factor_names"),
])
def test_register_refuses_bad_records(fields, argument):
    with pytest.raises((vt.ArgumentError, vt.ArgumentTypeError)) as e:
        data.register("bad", data.dsprites, **fields)
    assert e.value.argument == argument and "bad" not in data.DOMAINS


def test_the_registry_is_changed_only_by_register():
    with pytest.raises(vt.ArgumentError, match="name"):
        data.register("dsprites", data.dsprites, count=1, factor_names=())
    with pytest.raises(TypeError):
        data.DOMAINS["mine"] = data.domain("dsprites")  # read-only
    with pytest.raises(vt.ArgumentError, match="name"):
        data.unregister("mine")
    with pytest.raises(vt.ArgumentError, match="dataset"):
        data.domain("mine", argument="dataset")


# ---------------------------------------------------------------------------------- the studies
def test_the_studies_keep_no_domain_table_of_their_own():
    for module in (fs, rr, transfer):
        for gone in ("GENERATED", "FILE_DOMAINS", "DOMAINS", "TRANSFER_TEST_START", "_held_out_rows"):
            assert not hasattr(module, gone), (module.__name__, gone)
    for path in Path(studies.__file__).parent.glob("*.py"):  # no part boundary written into a study
        text = path.read_text()
        assert "73_257" not in text and "range(50_000" not in text, path.name
    for c in fs.PRESETS.values():
        for name in {c.domain} | {t.domain for t in c.tasks if t.domain}:
            d = data.domain(name)
            assert d.label == "label" and set(d.part_ranges()) == {"train", "test"}
    for c in transfer.PRESETS.values():
        data.domain(c.source), data.domain(c.target)
    assert {data.domain(data.TEXTURE_SHAPES_NAMES[s]).parts["test"] for s in rr.STYLES} == {(50_000, None)}


def test_the_studies_rows_are_the_registry_parts(folders):
    """The rows each study took before the registry (its own tables), pinned."""
    shapes = fs.domain_rows("object_shapes", "test", 2, 3)
    assert torch.equal(shapes.images, data.object_shapes(range(50_002, 50_005)).images)
    digits = fs.domain_rows("street_digits", "test", 0, 2, data_seed=4)
    assert torch.equal(digits.images, data.street_digits(range(73_257, 73_259), seed=4).images)
    assert digits.labels.tolist() == [7, 8] and digits.num_classes == 10
    perm = torch.randperm(1797, generator=torch.Generator().manual_seed(5))
    real = fs.domain_rows("sklearn_digits", "train", 10, 6, data_seed=5)
    # The same rows as before the registry, now in the seeded permutation's order (no longer sorted:
    # a sorted slice made the first cka_n rows of a longer build differ from a cka_n build).
    assert torch.equal(real.images, data.load_sklearn_digits(indices=perm[898:][10:16]).images)
    assert fs.part_size("sklearn_digits", "test", {}) == 898 and fs.part_size("street_digits", "train", {}) == 73_257
    c = rr.PRESETS["smoke"]
    x, y = rr.stages.shape_images(c, "edges", "test", 4)
    ref = data.texture_shapes(range(50_000, 50_004), seed=c.data_seed, style="edges")
    assert torch.equal(x, ref.images.float() * ref.scale) and torch.equal(y, ref.factors[:, 0])
    with pytest.raises(vt.ArgumentError, match="domain"):
        fs.domain_rows("mnist", "test", 0, 2, data_dirs=folders)  # 1 × 28 × 28: not the study's images
