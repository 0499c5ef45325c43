"""The labelled domains of Study 3: the generated CIFAR-like and SVHN-like sets, scikit-learn's
digits, the CIFAR-10 and SVHN file loaders (on files written here in those formats) and the label
transforms of "Similarity of Pre-trained and Fine-tuned Representations" (§3.1, §4)."""
import os
import pickle

import numpy as np
import pytest
import torch

import vaetransfer as vt
from vaetransfer import data
from vaetransfer.nn import ModelConfig
from vaetransfer.objectives import TaskConfig
from vaetransfer.train import OptimizerConfig, TrainConfig, train

GENERATORS = {"object_shapes": data.object_shapes, "street_digits": data.street_digits}


# ---------------------------------------------------------------------------------- label transforms
@pytest.mark.parametrize("d", [0, 1, 2, 4, 9])
def test_partially_random_labels_follow_eq_1_and_2(d):
    n_per_class = 6000
    y = torch.arange(10).repeat_interleave(n_per_class)
    yd = data.partially_random_labels(y, d, num_classes=10, seed=3)
    assert yd.dtype == torch.int64 and yd.shape == y.shape
    offset = (yd - y) % 10
    for label in range(10):  # every class: Y uniform on {0..d}, never beyond
        counts = torch.bincount(offset[y == label], minlength=10).double()
        assert counts[d + 1:].sum() == 0
        p = 1.0 / (d + 1)
        se = (p * (1 - p) / n_per_class) ** 0.5
        assert ((counts[:d + 1] / n_per_class - p).abs() < 5 * se + 1e-12).all(), (label, counts)
    if d == 0:
        assert torch.equal(yd, y)
    if d == 9:  # fully random: y_d independent of y, uniform
        for label in range(10):
            counts = torch.bincount(yd[y == label], minlength=10).double() / n_per_class
            assert (counts - 0.1).abs().max() < 5 * (0.09 / n_per_class) ** 0.5


def test_label_transforms_are_deterministic_by_seed_and_shift_is_exact():
    y = torch.randint(0, 10, (500,), generator=torch.Generator().manual_seed(0))
    a = data.partially_random_labels(y, 4, seed=1)
    assert torch.equal(a, data.partially_random_labels(y.numpy(), 4, seed=1))
    assert not torch.equal(a, data.partially_random_labels(y, 4, seed=2))
    for s in range(1, 10):
        assert torch.equal(data.shifted_labels(y, s), (y + s) % 10)
    assert torch.equal(data.shifted_labels(torch.tensor([0, 1, 2]), 2, num_classes=3), torch.tensor([2, 0, 1]))


@pytest.mark.parametrize("call, argument", [
    (lambda: data.partially_random_labels(torch.arange(3), 10), "d"),
    (lambda: data.partially_random_labels(torch.arange(3), -1), "d"),
    (lambda: data.partially_random_labels(torch.tensor([0, 10]), 1), "labels"),
    (lambda: data.partially_random_labels(torch.tensor([0.5]), 1), "labels"),
    (lambda: data.partially_random_labels(torch.arange(3), 1, seed=-1), "seed"),
    (lambda: data.shifted_labels(torch.arange(3), 0), "s"),
    (lambda: data.shifted_labels(torch.arange(3), 10), "s"),
    (lambda: data.shifted_labels(torch.arange(3), 1, num_classes=1), "num_classes"),
])
def test_label_transform_errors_name_the_argument(call, argument):
    with pytest.raises((vt.ArgumentError, vt.ArgumentTypeError)) as e:
        call()
    assert argument in str(e.value)


# ---------------------------------------------------------------------------------- generators
@pytest.mark.parametrize("name", list(GENERATORS))
def test_generated_domains_are_deterministic_by_index(name):
    gen = GENERATORS[name]
    full = gen(range(40), seed=5)
    pick = [33, 2, 17, 2]
    part = gen(pick, seed=5)
    assert torch.equal(part.images, full.images[pick]) and torch.equal(part.factors, full.factors[pick])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = gen(range(40), seed=5)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(single.images, full.images)
    other = gen(range(40), seed=6)
    assert not torch.equal(other.images, full.images)
    assert torch.equal(other.factors[:, 0], full.factors[:, 0])  # labels: row mod 10
    assert full.images.dtype == torch.uint8 and full.images.shape == (40, 3, 32, 32) and full.extras["seed"] == 5
    labels_only = gen(range(40), seed=5, images=False)
    assert labels_only.images is None and torch.equal(labels_only.factors, full.factors)


@pytest.mark.parametrize("name", list(GENERATORS))
def test_generated_domains_balance_classes_and_vary_nuisances(name):
    d = GENERATORS[name](range(1000, 3000), images=False)
    assert torch.equal(torch.bincount(d.factors[:, 0], minlength=10), torch.full((10,), 200))
    for f in range(1, len(d.factor_names)):  # every nuisance kind occurs, roughly evenly
        counts = torch.bincount(d.factors[:, f], minlength=d.factor_sizes[f])
        assert counts.numel() == d.factor_sizes[f] and counts.min() > 2000 / d.factor_sizes[f] * 0.8
    ds = data.as_dataset(GENERATORS[name](range(10)), label="label")
    assert ds.num_classes == 10 and ds.input_shape == (3, 32, 32) and ds.scale == pytest.approx(1 / 255)


@pytest.mark.parametrize("name", list(GENERATORS))
def test_generator_errors_name_the_argument(name):
    gen = GENERATORS[name]
    count = {"object_shapes": data.OBJECT_SHAPES_COUNT, "street_digits": data.STREET_DIGITS_COUNT}[name]
    with pytest.raises(vt.ArgumentError, match="indices"):
        gen([count])
    with pytest.raises(vt.ArgumentError, match="seed"):
        gen([0], seed=-1)


@pytest.mark.parametrize("name", list(GENERATORS))
def test_a_tiny_classifier_learns_each_generated_domain_well_above_chance(name, tmp_path):
    """The classes differ beyond noise and nuisances: a small conv net learns them."""
    gen = GENERATORS[name]
    train_set = data.as_dataset(gen(range(3000)), label="label")
    test_set = data.as_dataset(gen(range(55_000, 55_600)), label="label")
    cfg = TrainConfig(model=ModelConfig("conv4", input_shape=(3, 32, 32), num_classes=10, channels=12),
                      objective=TaskConfig("classification"), optimizer=OptimizerConfig("adam", lr=3e-3),
                      steps=500, batch_size=64, seed=0, threads=2)
    model = train(cfg, train_set, tmp_path / "run", progress=False).model()
    accuracy = float((model.predict(test_set.float_images()) == test_set.labels).float().mean())
    assert accuracy > 0.35, accuracy  # chance: 0.1


# ---------------------------------------------------------------------------------- scikit-learn digits
def test_sklearn_digits_are_the_shipped_images_resized():
    from sklearn.datasets import load_digits

    ref = load_digits()
    d = data.load_sklearn_digits()
    assert d.images.shape == (1797, 3, 32, 32) and d.images.dtype == torch.uint8
    assert len(d) == data.SKLEARN_DIGITS_COUNT
    assert torch.equal(d.factors[:, 0], torch.from_numpy(ref.target.astype(np.int64)))
    assert torch.equal(d.images[:, 0], d.images[:, 2])  # grey in every channel
    raw = data.load_sklearn_digits(image_size=None, channels=1, indices=[0, 5])
    expected = np.rint(ref.images[[0, 5]] * 255.0 / 16.0).astype(np.uint8)
    assert raw.images.shape == (2, 1, 8, 8) and np.array_equal(raw.images[:, 0].numpy(), expected)
    # Bilinear resizing keeps the mean brightness (to rounding) and the dark/bright layout.
    big = d.images[[0, 5], 0].double()
    assert torch.allclose(big.mean(dim=(1, 2)), torch.from_numpy(expected).double().mean(dim=(1, 2)), atol=4.0)
    with pytest.raises(vt.ArgumentError, match="channels"):
        data.load_sklearn_digits(channels=2)
    assert data.as_dataset("sklearn_digits", label="label").num_classes == 10


# ---------------------------------------------------------------------------------- CIFAR-10 files
def _write_cifar(folder, rows_per_batch=3, seed=0):
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    written = {}
    for stem in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        x = rng.integers(0, 256, (rows_per_batch, 3072), dtype=np.uint8)
        y = rng.integers(0, 10, rows_per_batch).tolist()
        with open(os.path.join(folder, stem), "wb") as f:
            pickle.dump({b"batch_label": stem.encode(), b"labels": y, b"data": x,
                         b"filenames": [b"f%d.png" % i for i in range(rows_per_batch)]}, f, protocol=2)
        written[stem] = (x, y)
    return written


def test_cifar10_loader_reads_python_batches(tmp_path):
    w = _write_cifar(tmp_path)
    tr = data.load_cifar10(tmp_path)
    assert tr.images.shape == (15, 3, 32, 32) and tr.extras["classes"][0] == "airplane"
    x1, y1 = w["data_batch_1"]
    # Row layout: 1,024 red, then green, then blue values, each plane row-major.
    assert np.array_equal(tr.images[1, 1, 2, 5].item(), x1[1, 1024 + 2 * 32 + 5])
    assert tr.factors[:3, 0].tolist() == y1
    assert tr.factors[3:6, 0].tolist() == w["data_batch_2"][1]
    te = data.load_cifar10(tmp_path, "test", indices=[2, 0])
    assert np.array_equal(te.images.reshape(2, -1).numpy(), w["test_batch"][0][[2, 0]])
    assert data.load_cifar10(tmp_path, images=False).images is None
    ds = data.as_dataset(te, label="label")
    assert ds.input_shape == (3, 32, 32) and ds.labels.tolist() == [w["test_batch"][1][2], w["test_batch"][1][0]]


def test_cifar10_loader_refuses_bad_and_unsafe_files(tmp_path):
    _write_cifar(tmp_path)
    with pytest.raises(vt.ArgumentError, match="split"):
        data.load_cifar10(tmp_path, "valid")
    with pytest.raises(vt.ArgumentError, match="path"):
        data.load_cifar10(tmp_path / "missing")

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo unsafe",))

    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump({b"data": Evil(), b"labels": [0]}, f)
    with pytest.raises(vt.ArgumentError, match="refusing"):
        data.load_cifar10(tmp_path, "test")
    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, f)
    with pytest.raises(vt.ArgumentError, match="3072"):
        data.load_cifar10(tmp_path, "test")
    os.remove(tmp_path / "data_batch_3")
    with pytest.raises(vt.ArgumentError, match="data_batch_3"):
        data.load_cifar10(tmp_path)


# ---------------------------------------------------------------------------------- SVHN files
def test_svhn_loader_reads_mat_files_and_maps_10_to_0(tmp_path):
    import scipy.io

    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (32, 32, 3, 7), dtype=np.uint8)
    y = np.array([[10], [1], [2], [10], [9], [5], [3]], dtype=np.uint8)
    scipy.io.savemat(tmp_path / "test_32x32.mat", {"X": x, "y": y})
    d = data.load_svhn(tmp_path, "test")
    assert d.images.shape == (7, 3, 32, 32)
    assert d.images[4, 2, 7, 11].item() == x[7, 11, 2, 4]  # [n, c, h, w] = X[h, w, c, n]
    assert d.factors[:, 0].tolist() == [0, 1, 2, 0, 9, 5, 3]
    part = data.load_svhn(tmp_path, "test", indices=[6, 1])
    assert torch.equal(part.images, d.images[[6, 1]]) and part.factors[:, 0].tolist() == [3, 1]
    with pytest.raises(vt.ArgumentError, match="train_32x32"):
        data.load_svhn(tmp_path, "train")
    scipy.io.savemat(tmp_path / "extra_32x32.mat", {"X": x[:, :, :2], "y": y})
    with pytest.raises(vt.ArgumentError, match="path"):
        data.load_svhn(tmp_path, "extra")
    scipy.io.savemat(tmp_path / "train_32x32.mat", {"X": x, "y": y * 0})
    with pytest.raises(vt.ArgumentError, match="1..10"):
        data.load_svhn(tmp_path, "train")
