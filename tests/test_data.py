"""Built-in data sets: layout, determinism, geometry, subsets, loaders, bad input."""
import colorsys
import math

import numpy as np
import pytest
import torch

import vaetransfer
from vaetransfer import data


@pytest.fixture(scope="module")
def full_dsprites():
    return data.dsprites()


@pytest.fixture(scope="module")
def full_tetrominoes():
    return data.tetrominoes(seed=3)


# ---------------------------------------------------------------- dSprites
def test_dsprites_factor_grid_matches_the_public_layout(full_dsprites):
    d = full_dsprites
    assert len(d) == 737_280 == data.DSPRITES_COUNT
    assert d.images.shape == (737_280, 1, 64, 64) and d.images.dtype == torch.uint8
    assert d.factor_values.dtype == torch.float64 and d.factors.dtype == torch.int64
    assert d.factor_sizes == data.DSPRITES_SIZES and d.scale == 1.0 and d.labels is None
    # Row i is the mixed-radix expansion of i: colour column first, posY fastest.
    expected = np.stack(np.unravel_index(np.arange(737_280), (1, 3, 6, 40, 32, 32)), axis=1)
    np.testing.assert_array_equal(d.factors.numpy(), expected)
    grids = {
        0: np.array([1.0]),
        1: np.array([1.0, 2.0, 3.0]),
        2: np.linspace(0.5, 1.0, 6),
        3: np.linspace(0.0, 2 * np.pi, 40),
        4: np.linspace(0.0, 1.0, 32),
        5: np.linspace(0.0, 1.0, 32),
    }
    for col, grid in grids.items():
        np.testing.assert_allclose(d.factor_values[:, col].numpy(), grid[expected[:, col]], rtol=0, atol=1e-12)
    assert set(np.unique(d.images[::997].numpy())) == {0, 1}


def test_dsprites_subsets_equal_rows_of_the_full_set(full_dsprites):
    idx = torch.randint(0, data.DSPRITES_COUNT, (500,))
    sub = data.dsprites(idx)
    assert torch.equal(sub.images, full_dsprites.images[idx])
    assert torch.equal(sub.factors, full_dsprites.factors[idx])
    assert torch.equal(data.dsprites(slice(1000, 1100)).images, full_dsprites.images[1000:1100])
    assert torch.equal(data.dsprites(np.arange(5, 9)).factor_values, full_dsprites.factor_values[5:9])
    factors_only = data.dsprites(idx, images=False)
    assert factors_only.images is None and torch.equal(factors_only.factors, sub.factors)
    assert len(factors_only) == len(idx)


def test_dsprites_is_deterministic_and_thread_independent():
    idx = torch.arange(0, data.DSPRITES_COUNT, 1009)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = data.dsprites(idx).images
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, data.dsprites(idx).images)


def test_dsprites_shapes_stay_inside_and_scale_with_their_factor(full_dsprites):
    pixels = full_dsprites.images[:, 0]
    border = torch.cat([pixels[:, 0, :], pixels[:, -1, :], pixels[:, :, 0], pixels[:, :, -1]], dim=1)
    assert int(border.max()) == 0  # no shape touches the border, at any position/scale
    # Chunked: a whole-set reduction of uint8 would first widen 3 GB of pixels to int64.
    area = torch.cat([chunk.flatten(1).sum(1) for chunk in pixels.split(16_384)]).double()
    assert int(area.min()) > 0  # every image shows its shape
    scale = full_dsprites.factor_values[:, 2]
    for shape in (1, 2, 3):
        sel = full_dsprites.factor_values[:, 1] == shape
        small, large = area[sel & (scale == 0.5)].mean(), area[sel & (scale == 1.0)].mean()
        assert large / small == pytest.approx(4.0, rel=0.08)  # area ∝ scale²


def test_dsprites_render_moves_with_position():
    # posX moves the shape right, posY down: the centre of mass follows.
    classes = torch.tensor([[0, 0, 5, 0, x, y] for x, y in [(0, 0), (31, 0), (0, 31)]])
    pixels = data.render_dsprites(classes).double()
    grid = torch.arange(64, dtype=torch.float64) + 0.5
    cx = (pixels.sum(1) * grid).sum(1) / pixels.sum((1, 2))
    cy = (pixels.sum(2) * grid).sum(1) / pixels.sum((1, 2))
    assert cx[1] - cx[0] == pytest.approx(40.0, abs=0.5) and cy[1] == pytest.approx(cy[0], abs=0.5)
    assert cy[2] - cy[0] == pytest.approx(40.0, abs=0.5)


def test_dsprites_npz_loader_reads_the_public_format(tmp_path):
    idx = torch.arange(0, data.DSPRITES_COUNT, 4099)
    src = data.dsprites(idx)
    path = tmp_path / "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz"
    # The public file's keys: imgs [N, 64, 64], latents_values, latents_classes.
    np.savez_compressed(path, imgs=src.images[:, 0].numpy(), latents_values=src.factor_values.numpy(),
                        latents_classes=src.factors.numpy())
    loaded = data.load_dsprites_npz(path)
    assert torch.equal(loaded.images, src.images)
    assert torch.equal(loaded.factor_values, src.factor_values)
    assert torch.equal(loaded.factors, src.factors)
    assert (loaded.name, loaded.factor_names, loaded.scale) == ("dsprites", data.DSPRITES_FACTORS, 1.0)
    part = data.load_dsprites_npz(path, indices=[3, 1])
    assert torch.equal(part.images, src.images[[3, 1]])
    assert loaded.float_images().shape == (len(idx), 1, 64, 64)


def test_dsprites_npz_loader_rejects_bad_files(tmp_path):
    with pytest.raises(ValueError, match="argument 'path': no such file"):
        data.load_dsprites_npz(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    np.savez(bad, imgs=np.zeros((2, 64, 64), np.uint8), latents_values=np.zeros((2, 6)))
    with pytest.raises(ValueError, match="missing \\['latents_classes'\\]"):
        data.load_dsprites_npz(bad)
    np.savez(bad, imgs=np.zeros((2, 32, 32), np.uint8), latents_values=np.zeros((2, 6)),
             latents_classes=np.zeros((2, 6), np.int64))
    with pytest.raises(ValueError, match="imgs of shape"):
        data.load_dsprites_npz(bad)
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(ValueError, match="argument 'path'"):
        data.load_dsprites_npz(tmp_path / "junk.npz")
    # values outside the format: refused, never wrapped (a float 300.7 cast to uint8 would be 44)
    for imgs, values, match in ((np.full((2, 64, 64), 300.7), np.zeros((2, 6)), "0..255"),
                                (np.full((2, 64, 64), 0.5), np.zeros((2, 6)), "0..255"),
                                (np.zeros((2, 64, 64), np.uint8), np.full((2, 6), np.nan), "finite")):
        np.savez(bad, imgs=imgs, latents_values=values, latents_classes=np.zeros((2, 6), np.int64))
        with pytest.raises(ValueError, match=match):
            data.load_dsprites_npz(bad)
    np.savez(bad, imgs=np.ones((2, 64, 64), np.float64), latents_values=np.zeros((2, 6)),
             latents_classes=np.zeros((2, 6), np.int64))
    assert data.load_dsprites_npz(bad).images.max().item() == 1   # whole numbers in range: read as uint8


# ---------------------------------------------------------------- Tetrominoes
SIZES = (16, 8, 5, 16, 16)
RANGES = ((0.0, 337.5), (0.0, 0.875), (2.0, 5.0), (8.0, 23.0), (8.0, 23.0))  # the public generator's


def test_tetrominoes_are_one_uniform_sample_per_cell(full_tetrominoes):
    t = full_tetrominoes
    assert len(t) == 163_840 == 16 * 8 * 5 * 16 * 16 == data.TETROMINOES_COUNT
    assert data.TETROMINOES_SIZES == SIZES and data.TETROMINOES_RANGES == RANGES
    assert t.images.shape == (163_840, 3, 32, 32) and t.images.dtype == torch.uint8
    # Row i is cell i of the grid (y fastest): exactly one sample per cell.
    expected = np.stack(np.unravel_index(np.arange(163_840), SIZES), axis=1)
    assert np.array_equal(t.factors.numpy(), expected) and t.factor_sizes == SIZES
    for f, ((lo, hi), k) in enumerate(zip(RANGES, SIZES)):
        width = (hi - lo) / k
        v = t.factor_values[:, f]
        # each value lies in its cell's interval [lo + b·w, lo + (b+1)·w) ...
        assert (v >= lo + t.factors[:, f] * width).all() and (v < lo + (t.factors[:, f] + 1) * width).all()
        # ... uniformly: the position inside the cell is U[0, 1) (mean 1/2, variance 1/12)
        u = ((v - lo) / width - t.factors[:, f]).numpy()
        assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert 0.0 <= float(t.factor_values[:, 0].min()) and float(t.factor_values[:, 0].max()) < 337.5


def test_tetrominoes_determinism_by_seed():
    idx = torch.arange(0, data.TETROMINOES_COUNT, 97)
    a, b, c = data.tetrominoes(idx, seed=1), data.tetrominoes(idx, seed=1), data.tetrominoes(idx, seed=2)
    assert torch.equal(a.images, b.images) and torch.equal(a.factor_values, b.factor_values)
    assert torch.equal(a.factors, c.factors)  # the cell design does not depend on the seed
    assert not torch.allclose(a.factor_values, c.factor_values)
    assert a.extras["seed"] == 1 and c.extras["seed"] == 2
    assert (a.images != c.images).any()


def test_tetrominoes_subsets_equal_rows_of_the_full_set(full_tetrominoes):
    idx = torch.randint(0, data.TETROMINOES_COUNT, (300,))
    sub = data.tetrominoes(idx, seed=3)
    for name in ("images", "factor_values", "factors"):
        assert torch.equal(getattr(sub, name), getattr(full_tetrominoes, name)[idx]), name


def _clip(poly, x0, x1, y0, y1):
    """Sutherland–Hodgman: the convex polygon `poly` (list of (x, y)) cut to the box."""
    for inside, cross in (
            (lambda p: p[0] >= x0, lambda p, q: (x0, p[1] + (q[1] - p[1]) * (x0 - p[0]) / (q[0] - p[0]))),
            (lambda p: p[0] <= x1, lambda p, q: (x1, p[1] + (q[1] - p[1]) * (x1 - p[0]) / (q[0] - p[0]))),
            (lambda p: p[1] >= y0, lambda p, q: (p[0] + (q[0] - p[0]) * (y0 - p[1]) / (q[1] - p[1]), y0)),
            (lambda p: p[1] <= y1, lambda p, q: (p[0] + (q[0] - p[0]) * (y1 - p[1]) / (q[1] - p[1]), y1))):
        out = []
        for k in range(len(poly)):
            p, q = poly[k - 1], poly[k]
            if inside(q):
                if not inside(p):
                    out.append(cross(p, q))
                out.append(q)
            elif inside(p):
                out.append(cross(p, q))
        poly = out
        if not poly:
            return []
    return poly


def _area(poly):
    return 0.5 * abs(sum(p[0] * q[1] - q[0] * p[1] for p, q in zip(poly, poly[1:] + poly[:1])))


def _reference_coverage(angle, scale, x, y, size=32):
    """The public generator's geometry, written out independently: the 300 × 200 template (right
    column plus bottom row, blocks of 100 px) about its centre (100, 150), scaled to blocks of
    `scale` px, mapped by [[cos, sin], [−sin, cos]] (y down), centred at (x + 0.5, y + 0.5). The
    coverage of each pixel is the exact area of the four blocks inside it: area coverage at 16×
    box-downsampled to 32×32 is exactly this (the box mean of the 256 sub-pixel areas)."""
    a = math.radians(angle)
    c, s = math.cos(a), math.sin(a)

    def place(u, v):  # template pixels → image
        u, v = (u - 100.0) * scale / 100.0, (v - 150.0) * scale / 100.0
        return (c * u + s * v + x + 0.5, -s * u + c * v + y + 0.5)

    blocks = [(100, 0), (100, 100), (100, 200), (0, 200)]  # top-left corners (u, v) of the four blocks
    cov = np.zeros((size, size))
    for u0, v0 in blocks:
        quad = [place(u0, v0), place(u0 + 100, v0), place(u0 + 100, v0 + 100), place(u0, v0 + 100)]
        xs, ys = [p[0] for p in quad], [p[1] for p in quad]
        for r in range(max(0, math.floor(min(ys))), min(size, math.ceil(max(ys)))):
            for col in range(max(0, math.floor(min(xs))), min(size, math.ceil(max(xs)))):
                piece = _clip(quad, col, col + 1, r, r + 1)
                if len(piece) >= 3:
                    cov[r, col] += _area(piece)
    return cov


@pytest.mark.parametrize("row", [
    (0.0, 0.0, 2.0, 8.0, 8.0),            # the first corner of the ranges
    (90.0, 0.5, 5.0, 23.0, 23.0),         # the largest shape at the last position, a quarter turn
    (37.3, 0.3, 3.3, 15.2, 12.7),
    (337.49, 0.875, 5.0, 8.0, 23.0),      # top of the angle and hue ranges, clipped at the left edge
    (201.7, 0.66, 4.1, 19.9, 9.4),
    (45.0, 0.125, 5.0, 8.0, 8.0),         # the widest reach past the image edge
])
def test_tetromino_rendering_matches_exact_coverage_and_hsv(row):
    angle, hue, scale, x, y = row
    img = data.render_tetrominoes(torch.tensor([row], dtype=torch.float64))[0].double().numpy() / 255.0
    cov = _reference_coverage(angle, scale, x, y)
    rgb = np.array([[colorsys.hsv_to_rgb(hue, 1.0, v) for v in line] for line in cov]).transpose(2, 0, 1)
    assert np.abs(img - rgb).max() <= 1.0 / 255.0 + 1e-12
    # The coverage is the J's area (4 blocks) less what falls outside the image.
    assert img.max(0).sum() == pytest.approx(cov.sum(), abs=0.5 * 1024 / 255)
    if row[2] == 2.0:
        assert cov.sum() == pytest.approx(4 * 2.0 ** 2)


def test_tetrominoes_rows_render_their_factors(full_tetrominoes):
    t = full_tetrominoes
    idx = torch.arange(0, len(t), 4093)
    assert torch.equal(data.render_tetrominoes(t.factor_values[idx]), t.images[idx])


def _coverage(images):
    """Per-pixel coverage in [0, 1]: the colour has value 1, so its largest channel is the coverage."""
    return images.double().amax(1) / 255.0


def test_tetromino_has_no_rotational_symmetry():
    angles = [0.0, 90.0, 180.0, 270.0, 360.0]
    factors = torch.tensor([[a, 0.3, 4.0, 15.5, 15.5] for a in angles], dtype=torch.float64)
    masks = _coverage(data.render_tetrominoes(factors))
    for i in range(4):
        for j in range(i + 1, 4):
            assert (masks[i] - masks[j]).abs().sum() > 10.0, (angles[i], angles[j])
    assert torch.allclose(masks[0], masks[4], atol=0.01)  # a full turn is the identity
    # The generator's positive angles turn the shape counter-clockwise on screen (y down): the
    # render at +90° is the 0° render turned a quarter counter-clockwise about the centre (16, 16).
    for k in range(3):
        turned = torch.rot90(masks[k], k=1, dims=(0, 1))
        assert (turned - masks[k + 1]).abs().max() < 0.01


def test_float_images_convert_on_demand():
    t = data.tetrominoes([0, 5, 7])
    x = t.float_images()
    assert x.dtype == torch.float32 and x.shape == (3, 3, 32, 32)
    assert torch.allclose(x, t.images.float() / 255.0)
    assert torch.equal(t.float_images([1]), x[1:2])
    with pytest.raises(ValueError, match="argument 'images'"):
        data.tetrominoes([0], images=False).float_images()


def test_registry_builds_by_name():
    assert data.load("tetrominoes", indices=[4], seed=1).factors.shape == (1, 5)
    with pytest.raises(ValueError, match="argument 'name'"):
        data.load("no_such_set")
    with pytest.raises(ValueError, match="argument 'data_dir'"):
        data.load("mnist")  # a loader of files: it needs their folder


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, exc, arg",
    [
        (lambda: data.dsprites([data.DSPRITES_COUNT]), ValueError, "indices"),
        (lambda: data.dsprites([-1]), ValueError, "indices"),
        (lambda: data.dsprites([0.5, 1.5]), TypeError, "indices"),
        (lambda: data.dsprites(torch.zeros(2, 2, dtype=torch.long)), ValueError, "indices"),
        (lambda: data.dsprites(3), TypeError, "indices"),
        (lambda: data.dsprites(["a"]), TypeError, "indices"),
        (lambda: data.tetrominoes([data.TETROMINOES_COUNT]), ValueError, "indices"),
        (lambda: data.tetrominoes([0], seed=-1), ValueError, "seed"),
        (lambda: data.tetrominoes([0], seed=1.5), TypeError, "seed"),
        (lambda: data.render_dsprites(torch.zeros(2, 5, dtype=torch.long)), ValueError, "factors"),
        (lambda: data.render_dsprites(torch.tensor([[0, 3, 0, 0, 0, 0]])), ValueError, "factors"),
        (lambda: data.render_dsprites(torch.zeros(1, 6)), TypeError, "factors"),
        (lambda: data.render_tetrominoes(torch.tensor([[0.0, 0.5, 20.0, 15.0, 15.0]])), ValueError, "factor_values"),
        (lambda: data.render_tetrominoes(torch.tensor([[math.nan, 0.5, 3.0, 15.0, 15.0]])), ValueError,
         "factor_values"),
        (lambda: data.render_tetrominoes(torch.tensor([[0.0, 0.5, 3.0, 40.0, 15.0]])), ValueError, "factor_values"),
        (lambda: data.render_tetrominoes(torch.tensor([[0.0, 1.5, 3.0, 15.0, 15.0]])), ValueError, "factor_values"),
        (lambda: data.render_tetrominoes(torch.zeros(2, 4, dtype=torch.float64)), ValueError, "factor_values"),
        (lambda: data.tetrominoes_split("diagonal"), ValueError, "kind"),
        (lambda: data.tetrominoes_split("cv"), TypeError, "ratio"),
        (lambda: data.tetrominoes_split("cv", 1.5), ValueError, "ratio"),
        (lambda: data.tetrominoes_split("cd", 0.0), ValueError, "ratio"),
        (lambda: data.tetrominoes_split("random", 0.3), ValueError, "ratio"),
        (lambda: data.tetrominoes_split("random", seed=-2), ValueError, "seed"),
        (lambda: data.tetrominoes_split("checkerboard", data_seed=0.5), TypeError, "data_seed"),
    ],
)
def test_bad_arguments_raise_named_errors(call, exc, arg):
    with pytest.raises(exc, match=f"argument '{arg}'") as info:
        call()
    assert info.value.argument == arg
    assert isinstance(info.value, (vaetransfer.ArgumentError, vaetransfer.ArgumentTypeError))


def test_empty_subsets_are_empty():
    assert len(data.dsprites([])) == 0 and data.dsprites([]).images.shape == (0, 1, 64, 64)
    assert data.tetrominoes([]).images.shape == (0, 3, 32, 32)


# ---------------------------------------------------------------- Dataset, as_dataset, split
SPREAD = torch.arange(0, data.DSPRITES_COUNT, 3001)  # 246 rows over the whole factor grid


def _named(exc, arg, call):
    with pytest.raises(exc, match=f"argument '{arg}'") as info:
        call()
    assert info.value.argument == arg
    assert isinstance(info.value, (vaetransfer.ArgumentError, vaetransfer.ArgumentTypeError))
    return info.value


def _tiny(n=10, labelled=True):
    """n one-pixel 'images' whose value is their row index, labels row % 3, one continuous factor
    = 2·row (no factor classes)."""
    images = torch.arange(n, dtype=torch.float32).reshape(n, 1)
    return data.Dataset(images, labels=torch.arange(n) % 3 if labelled else None,
                        factor_values=2.0 * torch.arange(n, dtype=torch.float64)[:, None], factor_names=("double",),
                        name="tiny")


def test_as_dataset_takes_dsprites_labels_from_a_factor():
    src = data.dsprites(SPREAD)
    assert isinstance(src, data.Dataset) and src.labels is None and src.num_classes is None
    ds = data.as_dataset(src, label="shape")
    assert isinstance(ds, data.Dataset) and len(ds) == len(SPREAD) and ds.name == "dsprites"
    assert ds.images.shape == (len(SPREAD), 1, 64, 64) and ds.images.dtype == torch.uint8
    assert ds.input_shape == (1, 64, 64) and ds.scale == 1.0
    assert ds.images is src.images  # labelling shares the rows
    assert ds.labels.dtype == torch.int64 and torch.equal(ds.labels, src.factors[:, 1])
    assert ds.num_classes == 3 and set(ds.labels.tolist()) == {0, 1, 2}
    assert ds.factor_values.dtype == torch.float64 and torch.equal(ds.factor_values, src.factor_values)
    assert ds.factor_names == data.DSPRITES_FACTORS
    x = ds.float_images()
    assert x.dtype == torch.float32 and x.shape == (len(SPREAD), 1, 64, 64) and torch.equal(x, src.float_images())
    pos = data.as_dataset(src, label="posX")
    assert pos.num_classes == 32 and torch.equal(pos.labels, src.factors[:, 4])
    assert data.as_dataset(src.subset([0]), label="posX").num_classes == 32  # a subset keeps the grid's classes
    via = data.as_dataset(src, label="orientation")
    assert via.num_classes == 40 and torch.equal(via.labels, src.factors[:, 3])


def test_as_dataset_takes_tetrominoes_labels_from_the_strata():
    src = data.tetrominoes(range(0, data.TETROMINOES_COUNT, 1013), seed=2)
    ds = data.as_dataset(src, label="hue")
    assert ds.name == "tetrominoes" and ds.input_shape == (3, 32, 32) and ds.scale == pytest.approx(1 / 255)
    assert torch.equal(ds.images, src.images) and torch.equal(ds.factor_values, src.factor_values)
    assert torch.equal(ds.labels, src.factors[:, 1]) and ds.num_classes == 8
    assert data.as_dataset(src, label="scale").num_classes == 5 and data.as_dataset(src, label="angle").num_classes == 16
    assert ds.factor_names == data.TETROMINOES_FACTORS
    assert torch.equal(ds.float_images([3, 0]), src.float_images([3, 0]))
    assert float(ds.float_images().max()) <= 1.0


@pytest.mark.parametrize("obj", ["dsprites", "tetrominoes"])
def test_as_dataset_names_unknown_factors(obj):
    src = data.dsprites([0, 1]) if obj == "dsprites" else data.tetrominoes([0, 1])
    err = _named(ValueError, "label", lambda: data.as_dataset(src, label="colour_of_the_sky"))
    assert "colour_of_the_sky" in str(err)
    _named(TypeError, "label", lambda: data.as_dataset(src, label=1))
    _named(ValueError, "label", lambda: data.as_dataset(src, label="nope"))
    no_images = data.dsprites([0], images=False) if obj == "dsprites" else data.tetrominoes([0], images=False)
    _named(ValueError, "images", lambda: no_images.float_images())
    _named(ValueError, "images", lambda: no_images.input_shape)
    assert data.as_dataset(no_images, label="shape" if obj == "dsprites" else "hue").labels.shape == (1,)


def test_as_dataset_accepts_tensors_and_pairs():
    raw = torch.randint(0, 256, (6, 3, 8, 8), dtype=torch.uint8)
    ds = data.as_dataset(raw)
    assert ds.images is raw and ds.scale == pytest.approx(1 / 255) and ds.labels is None and ds.name == "tensor"
    binary = data.as_dataset(torch.randint(0, 2, (6, 8, 8), dtype=torch.uint8))  # 3-D uint8: channel axis added
    assert binary.input_shape == (1, 8, 8) and binary.scale == 1.0
    floats = data.as_dataset(torch.rand(6, 5, dtype=torch.float64))
    assert floats.scale == 1.0 and floats.input_shape == (5,) and floats.float_images().dtype == torch.float32
    assert data.as_dataset(np.zeros((4, 2, 2), np.float32)).input_shape == (2, 2)  # floats keep their shape
    y = torch.tensor([0, 2, 1, 2, 0, 1])
    pair = data.as_dataset((raw, y), name="mine")
    assert torch.equal(pair.labels, y) and pair.num_classes == 3 and pair.name == "mine"
    assert data.as_dataset((raw, y), num_classes=10).num_classes == 10
    kw = data.as_dataset(raw, labels=[0, 1, 0, 1, 0, 1])
    assert kw.labels.dtype == torch.int64 and kw.num_classes == 2
    assert data.as_dataset(raw, labels=y.int()).labels.dtype == torch.int64


def test_as_dataset_passes_datasets_through_and_relabels_them():
    ds = _tiny()
    assert data.as_dataset(ds) is ds
    relabelled = data.as_dataset(ds, labels=torch.ones(10, dtype=torch.long), num_classes=4, name="other")
    assert relabelled.num_classes == 4 and relabelled.name == "other" and relabelled.images is ds.images
    assert ds.num_classes == 3 and ds.name == "tiny"  # frozen: the original is unchanged
    assert data.as_dataset(ds, num_classes=5).num_classes == 5


def test_as_dataset_looks_up_registered_names():
    ds = data.as_dataset("tetrominoes", label="x")
    assert len(ds) == data.TETROMINOES_COUNT and ds.name == "tetrominoes" and ds.num_classes == 16
    cells = data.tetrominoes(range(0, data.TETROMINOES_COUNT, 4099), images=False).factors
    assert torch.equal(ds.labels[::4099], cells[:, 3])
    rows = torch.tensor([0, 40_000, 700_000])
    data.register("tiny-sprites", lambda indices=None, images=True: data.dsprites(rows if indices is None else
                                                                                  rows[indices], images=images),
                  count=3, factor_names=data.DSPRITES_FACTORS, label="shape")
    try:
        tiny = data.as_dataset("tiny-sprites", label="shape")
        assert tiny.labels.tolist() == [0, 0, 2] and tiny.input_shape == (1, 64, 64)
    finally:
        data.unregister("tiny-sprites")


def test_as_dataset_labels_any_dataset_with_factor_classes():
    ds = data.Dataset(torch.zeros(4, 2), factors=torch.tensor([[0, 2], [1, 0], [1, 1], [0, 2]]),
                      factor_names=("a", "b"), factor_sizes=(2, 5))
    labelled = data.as_dataset(ds, label="b")
    assert labelled.labels.tolist() == [2, 0, 1, 2] and labelled.num_classes == 5  # the factor's size, not max + 1
    assert data.Dataset(torch.zeros(2, 2), factors=torch.tensor([[0], [3]]), factor_names=("c",)).factor_sizes == (4,)


@pytest.mark.parametrize(
    "call, exc, arg",
    [
        (lambda: data.as_dataset(3), TypeError, "data"),
        (lambda: data.as_dataset([torch.zeros(2, 2)]), TypeError, "data"),
        (lambda: data.as_dataset({"x": torch.zeros(2, 2)}), TypeError, "data"),
        (lambda: data.as_dataset(torch.zeros(4, 2, dtype=torch.int32)), TypeError, "data"),  # int64: token ids,
        (lambda: data.as_dataset(torch.zeros(4, dtype=torch.float32)), ValueError, "data"),
        (lambda: data.as_dataset("no_such_set"), ValueError, "data"),
        (lambda: data.as_dataset("mnist"), ValueError, "data_dir"),
        (lambda: data.as_dataset((torch.zeros(4, 2), torch.zeros(4, dtype=torch.long), None)), ValueError, "data"),
        (lambda: data.as_dataset(("images", torch.zeros(4, dtype=torch.long))), TypeError, "data"),
        (lambda: data.as_dataset(torch.zeros(4, 2), label="shape"), ValueError, "label"),
        (lambda: data.as_dataset(_tiny(), label="double"), ValueError, "label"),
        (lambda: data.as_dataset(data.dsprites([0]), label="shape", labels=[0]), ValueError, "labels"),
        (lambda: data.as_dataset((torch.zeros(4, 2), torch.zeros(4, dtype=torch.long)), labels=[0] * 4), ValueError,
         "labels"),
        (lambda: data.as_dataset(torch.zeros(4, 2), labels=[0, 1, 2]), ValueError, "labels"),
        (lambda: data.as_dataset(torch.zeros(4, 2), labels=[0.0, 1.0, 0.0, 1.0]), TypeError, "labels"),
        (lambda: data.as_dataset(torch.zeros(4, 2), labels=[True, False, True, True]), TypeError, "labels"),
        (lambda: data.as_dataset(torch.zeros(4, 2), labels=[0, 1, 5, 1], num_classes=3), ValueError, "labels"),
        (lambda: data.as_dataset(torch.zeros(4, 2), labels=[0, -1, 1, 1]), ValueError, "labels"),
        (lambda: data.as_dataset(torch.zeros(4, 2), labels="0101"), TypeError, "labels"),
        (lambda: data.as_dataset(torch.zeros(4, 2), num_classes=3), ValueError, "num_classes"),
        (lambda: data.as_dataset(_tiny(), num_classes=2), ValueError, "labels"),
        (lambda: data.as_dataset(_tiny(), num_classes=2.5), TypeError, "num_classes"),
        (lambda: data.Dataset([[0.0]]), TypeError, "images"),
        (lambda: data.Dataset(torch.zeros(3, 2), scale=0.0), ValueError, "scale"),
        (lambda: data.Dataset(torch.zeros(3, 2), scale="1"), TypeError, "scale"),
        (lambda: data.Dataset(torch.zeros(3, 2), factor_values=torch.zeros(2, 1), factor_names=("a",)), ValueError,
         "factor_values"),
        (lambda: data.Dataset(torch.zeros(3, 2), factor_values=torch.zeros(3, 2), factor_names=("a",)), ValueError,
         "factor_names"),
        (lambda: data.Dataset(torch.zeros(3, 2), factors=torch.zeros(3, 1), factor_names=("a",)), TypeError, "factors"),
        (lambda: data.Dataset(torch.zeros(3, 2), factors=torch.zeros(3, 1, dtype=torch.long),
                              factor_values=torch.zeros(3, 2), factor_names=("a",)), ValueError, "factor_values"),
        (lambda: data.Dataset(torch.zeros(2, 2), factors=torch.tensor([[0], [3]]), factor_names=("a",),
                              factor_sizes=(3,)), ValueError, "factors"),
        (lambda: data.Dataset(torch.zeros(2, 2), factor_sizes=(3,)), ValueError, "factor_sizes"),
        (lambda: data.Dataset(torch.zeros(2, 2), row_extras={"masks": torch.zeros(3, 4)}), ValueError, "row_extras"),
        (lambda: data.Dataset(torch.zeros(2, 2), row_extras={"masks": 3}), TypeError, "row_extras"),
        (lambda: data.Dataset(torch.zeros(2, 2), extras=[1]), TypeError, "extras"),
        (lambda: data.Dataset(None), TypeError, "images"),
        (lambda: data.Dataset(torch.zeros(3, 2), factor_names=("a",)), ValueError, "factor_names"),
        (lambda: data.Dataset(torch.zeros(3, 2), labels=torch.zeros(0, dtype=torch.long)), ValueError, "labels"),
        (lambda: data.Dataset(torch.zeros(0, 2), labels=torch.zeros(0, dtype=torch.long)), ValueError, "num_classes"),
        (lambda: data.Dataset(torch.zeros(3, 2), name=3), TypeError, "name"),
    ],
)
def test_dataset_bad_arguments_raise_named_errors(call, exc, arg):
    _named(exc, arg, call)


def test_subset_selects_rows_of_every_field():
    ds = _tiny()
    sub = ds.subset([7, 2, 9])
    assert sub.images[:, 0].tolist() == [7.0, 2.0, 9.0] and sub.labels.tolist() == [1, 2, 0]
    assert sub.factor_values[:, 0].tolist() == [14.0, 4.0, 18.0]
    assert (sub.name, sub.factor_names, sub.num_classes, sub.scale) == (ds.name, ds.factor_names, 3, ds.scale)
    assert ds.subset([0, 3]).num_classes == 3  # keeps the class count although class 1, 2 are absent
    assert ds.subset(slice(8, None)).images[:, 0].tolist() == [8.0, 9.0]
    assert ds.subset(range(2)).labels.tolist() == [0, 1]
    assert ds.subset(np.array([4])).factor_values.tolist() == [[8.0]]
    extra = data.Dataset(torch.zeros(3, 1), row_extras={"id": torch.arange(3), "file": ("a", "b", "c")},
                         extras={"kind": "x"})
    picked = extra.subset([2, 0])
    assert picked.row_extras["id"].tolist() == [2, 0] and picked.row_extras["file"] == ("c", "a")
    assert picked.extras == {"kind": "x"}
    mask = torch.arange(10) % 4 == 0
    assert ds.subset(mask).images[:, 0].tolist() == [0.0, 4.0, 8.0]
    assert len(ds.subset([])) == 0 and ds.subset([]).labels.shape == (0,)
    unlabelled = _tiny(labelled=False).subset([1])
    assert unlabelled.labels is None and unlabelled.num_classes is None
    _named(ValueError, "indices", lambda: ds.subset([10]))
    _named(ValueError, "indices", lambda: ds.subset([-1]))
    _named(TypeError, "indices", lambda: ds.subset([0.5]))
    _named(TypeError, "indices", lambda: ds.subset(3))
    _named(ValueError, "indices", lambda: ds.subset(torch.ones(5, dtype=torch.bool)))
    _named(ValueError, "indices", lambda: ds.subset(torch.zeros(2, 2, dtype=torch.long)))


def test_float_images_scale_and_never_write_into_the_images():
    raw = torch.full((2, 1, 2, 2), 255.0)
    ds = data.Dataset(raw, scale=1 / 255)
    assert torch.equal(ds.float_images(), torch.ones(2, 1, 2, 2))
    assert float(raw.max()) == 255.0  # scaled out of place
    u8 = data.as_dataset(torch.tensor([[0, 51], [255, 102]], dtype=torch.uint8).reshape(2, 2, 1))
    assert u8.float_images().flatten().tolist() == pytest.approx([0.0, 0.2, 1.0, 0.4])
    assert u8.float_images([1]).flatten().tolist() == pytest.approx([1.0, 0.4])
    assert u8.float_images(device="cpu").shape == (2, 1, 2, 1)  # 3-D uint8 got its channel axis


def test_split_is_a_seeded_partition():
    n = 1000
    ds = data.as_dataset(torch.arange(n, dtype=torch.float32)[:, None], labels=torch.arange(n) % 7)
    train, test = data.split(ds, 0.25, seed=3)
    assert (len(train), len(test)) == (750, 250)
    tr, te = train.images[:, 0].long(), test.images[:, 0].long()
    assert torch.equal(torch.sort(torch.cat([tr, te])).values, torch.arange(n))  # disjoint and covering
    assert bool((tr[1:] > tr[:-1]).all()) and bool((te[1:] > te[:-1]).all())  # each keeps the data's order
    assert torch.equal(train.labels, tr % 7) and torch.equal(test.labels, te % 7)  # labels follow their rows
    assert train.num_classes == test.num_classes == 7
    again = data.split(ds, 0.25, seed=3)[1].images
    assert torch.equal(again, test.images)
    assert not torch.equal(data.split(ds, 0.25, seed=4)[1].images, test.images)
    train_idx, test_idx = data.split_indices(n, 0.25, seed=3)
    assert torch.equal(test_idx, te) and torch.equal(train_idx, tr)
    assert len(data.split(ds)[1]) == 100  # default test_fraction 0.1
    # round(test_fraction · N) test examples (Python's round).
    for n_small, fraction in [(10, 0.25), (10, 0.35), (7, 0.5), (3, 0.4)]:
        _, t = data.split_indices(n_small, fraction)
        assert len(t) == round(fraction * n_small)


def test_split_can_put_every_example_in_the_test_split_the_last_one_included():
    # The public code of the vae-transfer-cka paper never put the last example in its test
    # split. Here each index is a test example for about test_fraction of the seeds.
    n, fraction, seeds = 10, 0.3, 200
    counts = torch.zeros(n)
    for seed in range(seeds):
        _, test_idx = data.split_indices(n, fraction, seed=seed)
        counts[test_idx] += 1
    assert counts.sum() == seeds * 3
    assert counts[-1] > 0
    # Binomial(200, 0.3): mean 60, sd 6.5; ±5 sd keeps this deterministic test far from the edge.
    assert bool(((counts - 60).abs() < 33).all()), counts.tolist()
    # A data set split through `split`: its last row reaches the test split too.
    ds = _tiny()
    assert any(float(data.split(ds, 0.3, seed=s)[1].images[-1, 0]) == 9.0 for s in range(20))


def test_split_with_explicit_test_indices():
    ds = _tiny()
    train, test = data.split(ds, test=[9, 0, 4])
    assert test.images[:, 0].tolist() == [9.0, 0.0, 4.0]  # in the order given
    assert train.images[:, 0].tolist() == [1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0]
    mask = torch.zeros(10, dtype=torch.bool)
    mask[[2, 3]] = True
    train, test = data.split(ds, test=mask)
    assert test.labels.tolist() == [2, 0] and len(train) == 8
    _named(ValueError, "test", lambda: data.split(ds, test=[1, 1]))
    _named(ValueError, "test", lambda: data.split(ds, test=[]))
    _named(ValueError, "test", lambda: data.split(ds, test=range(10)))
    _named(ValueError, "test", lambda: data.split(ds, test=[10]))
    _named(TypeError, "test", lambda: data.split(ds, test=[0.5]))
    _named(ValueError, "test_fraction", lambda: data.split(ds, 0.2, test=[1]))


@pytest.mark.parametrize(
    "kwargs, exc, arg",
    [
        (dict(test_fraction=0.0), ValueError, "test_fraction"),
        (dict(test_fraction=1.0), ValueError, "test_fraction"),
        (dict(test_fraction=-0.1), ValueError, "test_fraction"),
        (dict(test_fraction=1.5), ValueError, "test_fraction"),
        (dict(test_fraction=math.nan), ValueError, "test_fraction"),
        (dict(test_fraction=0.01), ValueError, "test_fraction"),  # round(0.1) = 0 test examples of 10
        (dict(test_fraction=0.99), ValueError, "test_fraction"),  # no training example left
        (dict(test_fraction="0.1"), TypeError, "test_fraction"),
        (dict(test_fraction=True), TypeError, "test_fraction"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(seed=0.5), TypeError, "seed"),
    ],
)
def test_split_bad_arguments_raise_named_errors(kwargs, exc, arg):
    _named(exc, arg, lambda: data.split(_tiny(), **kwargs))


def test_split_takes_only_datasets():
    _named(TypeError, "dataset", lambda: data.split(torch.zeros(10, 2)))
    _named(TypeError, "dataset", lambda: data.split((torch.zeros(10, 2), torch.zeros(10, dtype=torch.long))))


# ---------------------------------------------------------------- Tetrominoes splits
def _disjoint_cover(split, total=None):
    tr, te = split.train, split.test
    assert tr.dtype == te.dtype == torch.int64
    assert torch.equal(tr, tr.sort().values) and torch.equal(te, te.sort().values)
    assert tr.unique().numel() == tr.numel() and te.unique().numel() == te.numel()
    assert np.intersect1d(tr.numpy(), te.numpy()).size == 0
    if total is not None:
        assert tr.numel() + te.numel() == total


def test_random_split_is_half_and_half_and_seeded():
    s = data.tetrominoes_split("random")
    assert s.sizes == (81_920, 81_920) and s.name == "random"
    _disjoint_cover(s, 163_840)
    assert torch.equal(data.tetrominoes_split("random").train, s.train)
    other = data.tetrominoes_split("random", seed=1)
    assert not torch.equal(other.train, s.train)


@pytest.mark.parametrize("ratio", [0.01, 0.1, 0.35, 0.5])
def test_cv_split_trains_on_a_random_fraction_of_everything(ratio):
    s = data.tetrominoes_split("cv", ratio, seed=4)
    assert s.sizes[0] == round(ratio * 163_840) and s.name == f"cv({ratio:g})"
    _disjoint_cover(s, 163_840)
    # the training rows are spread over the whole factor box (constant volume)
    f = data.tetrominoes(s.train, images=False).factor_values
    for col, (lo, hi) in enumerate(RANGES):
        assert float(f[:, col].min()) < lo + 0.05 * (hi - lo) and float(f[:, col].max()) > hi - 0.05 * (hi - lo)


def test_checkerboard_split_is_the_parity_of_the_five_half_indices():
    s = data.tetrominoes_split("checkerboard", data_seed=2)
    _disjoint_cover(s, 163_840)
    f = data.tetrominoes(images=False, seed=2).factor_values.numpy()
    halves = sum(((f[:, c] - lo) / ((hi + 1e-9 - lo) / 2)).astype(np.int64) for c, (lo, hi) in enumerate(RANGES))
    assert np.array_equal(np.flatnonzero(halves % 2 == 0), s.train.numpy())
    # Every stratum but scale's middle one lies in one half, so the sizes are near 81,920 each.
    assert abs(s.sizes[0] - 81_920) < 500
    # Each test image differs from training images in one factor's half only: flipping any one
    # half index of a test cell lands in the training set.
    assert set(halves[s.test.numpy()] % 2) == {1}


@pytest.mark.parametrize("ratio", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
def test_cd_split_shrinks_the_factor_box_of_the_random_split(ratio):
    s = data.tetrominoes_split("cd", ratio, seed=3, data_seed=1)
    half = data.tetrominoes_split("random", seed=3, data_seed=1)
    _disjoint_cover(s)
    assert np.isin(s.train.numpy(), half.train.numpy()).all() and np.isin(s.test.numpy(), half.test.numpy()).all()
    f = data.tetrominoes(images=False, seed=1).factor_values.numpy()
    inside = np.ones(len(f), bool)
    for c, (lo, hi) in enumerate(RANGES):
        centre, reach = (lo + hi) / 2, ratio ** 0.2 * (hi - lo) / 2
        inside &= np.abs(f[:, c] - centre) <= reach
    assert np.array_equal(np.sort(np.concatenate([s.train.numpy(), s.test.numpy()])), np.flatnonzero(inside))
    # constant density: the box holds a fraction `ratio` of the stratified samples
    assert abs(s.sizes[0] - ratio * 81_920) < 0.03 * ratio * 81_920
    assert abs(s.sizes[1] - ratio * 81_920) < 0.03 * ratio * 81_920
