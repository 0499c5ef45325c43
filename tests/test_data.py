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
    assert d.imgs.shape == (737_280, 64, 64) and d.imgs.dtype == torch.uint8
    assert d.latents_values.dtype == torch.float64 and d.latents_classes.dtype == torch.int64
    # Row i is the mixed-radix expansion of i: colour column first, posY fastest.
    expected = np.stack(np.unravel_index(np.arange(737_280), (1, 3, 6, 40, 32, 32)), axis=1)
    np.testing.assert_array_equal(d.latents_classes.numpy(), expected)
    grids = {
        0: np.array([1.0]),
        1: np.array([1.0, 2.0, 3.0]),
        2: np.linspace(0.5, 1.0, 6),
        3: np.linspace(0.0, 2 * np.pi, 40),
        4: np.linspace(0.0, 1.0, 32),
        5: np.linspace(0.0, 1.0, 32),
    }
    for col, grid in grids.items():
        np.testing.assert_allclose(d.latents_values[:, col].numpy(), grid[expected[:, col]], rtol=0, atol=1e-12)
    assert set(np.unique(d.imgs[::997].numpy())) == {0, 1}


def test_dsprites_subsets_equal_rows_of_the_full_set(full_dsprites):
    idx = torch.randint(0, data.DSPRITES_COUNT, (500,))
    sub = data.dsprites(idx)
    assert torch.equal(sub.imgs, full_dsprites.imgs[idx])
    assert torch.equal(sub.latents_classes, full_dsprites.latents_classes[idx])
    assert torch.equal(data.dsprites(slice(1000, 1100)).imgs, full_dsprites.imgs[1000:1100])
    assert torch.equal(data.dsprites(np.arange(5, 9)).latents_values, full_dsprites.latents_values[5:9])
    latents_only = data.dsprites(idx, images=False)
    assert latents_only.imgs is None and torch.equal(latents_only.latents_classes, sub.latents_classes)


def test_dsprites_is_deterministic_and_thread_independent():
    idx = torch.arange(0, data.DSPRITES_COUNT, 1009)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = data.dsprites(idx).imgs
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, data.dsprites(idx).imgs)


def test_dsprites_shapes_stay_inside_and_scale_with_their_factor(full_dsprites):
    imgs = full_dsprites.imgs
    border = torch.cat([imgs[:, 0, :], imgs[:, -1, :], imgs[:, :, 0], imgs[:, :, -1]], dim=1)
    assert int(border.max()) == 0  # no shape touches the border, at any position/scale
    # Chunked: a whole-set reduction of uint8 would first widen 3 GB of pixels to int64.
    area = torch.cat([chunk.flatten(1).sum(1) for chunk in imgs.split(16_384)]).double()
    assert int(area.min()) > 0  # every image shows its shape
    scale = full_dsprites.latents_values[:, 2]
    for shape in (1, 2, 3):
        sel = full_dsprites.latents_values[:, 1] == shape
        small, large = area[sel & (scale == 0.5)].mean(), area[sel & (scale == 1.0)].mean()
        assert large / small == pytest.approx(4.0, rel=0.08)  # area ∝ scale²


def test_dsprites_render_moves_with_position():
    # posX moves the shape right, posY down: the centre of mass follows.
    classes = torch.tensor([[0, 0, 5, 0, x, y] for x, y in [(0, 0), (31, 0), (0, 31)]])
    imgs = data.render_dsprites(classes).double()
    grid = torch.arange(64, dtype=torch.float64) + 0.5
    cx = (imgs.sum(1) * grid).sum(1) / imgs.sum((1, 2))
    cy = (imgs.sum(2) * grid).sum(1) / imgs.sum((1, 2))
    assert cx[1] - cx[0] == pytest.approx(40.0, abs=0.5) and cy[1] == pytest.approx(cy[0], abs=0.5)
    assert cy[2] - cy[0] == pytest.approx(40.0, abs=0.5)


def test_dsprites_npz_loader_reads_the_public_format(tmp_path):
    idx = torch.arange(0, data.DSPRITES_COUNT, 4099)
    src = data.dsprites(idx)
    path = tmp_path / "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz"
    np.savez_compressed(path, imgs=src.imgs.numpy(), latents_values=src.latents_values.numpy(),
                        latents_classes=src.latents_classes.numpy())
    loaded = data.load_dsprites_npz(path)
    assert torch.equal(loaded.imgs, src.imgs)
    assert torch.equal(loaded.latents_values, src.latents_values)
    assert torch.equal(loaded.latents_classes, src.latents_classes)
    part = data.load_dsprites_npz(path, indices=[3, 1])
    assert torch.equal(part.imgs, src.imgs[[3, 1]])
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


# ---------------------------------------------------------------- Tetrominoes
def test_tetrominoes_are_stratified(full_tetrominoes):
    t = full_tetrominoes
    assert len(t) == 163_840 == 8**5 * 5
    assert t.images.shape == (163_840, 3, 32, 32) and t.images.dtype == torch.uint8
    for f, (lo, hi) in enumerate(data.TETROMINOES_RANGES):
        # Each of the 8 strata of every factor holds exactly 1/8 of the set ...
        assert torch.bincount(t.bins[:, f], minlength=8).tolist() == [163_840 // 8] * 8
        # ... and each value lies in its stratum.
        u = (t.factors[:, f] - lo) / (hi - lo)
        assert torch.equal(torch.floor(u * 8).long().clamp(max=7), t.bins[:, f])
    # Every 5-D cell holds exactly 5 samples.
    cells = (t.bins * torch.tensor([8**4, 8**3, 8**2, 8, 1])).sum(1)
    assert torch.bincount(cells, minlength=8**5).unique().tolist() == [5]
    # Within a stratum the values are spread out, not a fixed grid.
    assert t.factors[:, 0].unique().numel() > 160_000


def test_tetrominoes_determinism_by_seed():
    idx = torch.arange(0, data.TETROMINOES_COUNT, 97)
    a, b, c = data.tetrominoes(idx, seed=1), data.tetrominoes(idx, seed=1), data.tetrominoes(idx, seed=2)
    assert torch.equal(a.images, b.images) and torch.equal(a.factors, b.factors)
    assert torch.equal(a.bins, c.bins)  # the stratum design does not depend on the seed
    assert not torch.allclose(a.factors, c.factors)
    assert (a.images != c.images).any()


def test_tetrominoes_subsets_equal_rows_of_the_full_set(full_tetrominoes):
    idx = torch.randint(0, data.TETROMINOES_COUNT, (300,))
    sub = data.tetrominoes(idx, seed=3)
    for name in ("images", "factors", "bins", "centres"):
        assert torch.equal(getattr(sub, name), getattr(full_tetrominoes, name)[idx]), name


def _coverage(images):
    """Per-pixel coverage in [0, 1]: the colour has value 1, so its largest channel is the coverage."""
    return images.double().amax(1) / 255.0


def test_tetrominoes_shape_is_inside_with_area_of_four_blocks(full_tetrominoes):
    t = full_tetrominoes
    idx = torch.arange(0, len(t), 11)
    area = _coverage(t.images[idx]).sum((1, 2))
    expected = 4.0 * t.factors[idx, 2] ** 2  # four blocks of side `scale`
    # Anti-aliased coverage sums to the polygon area when nothing is clipped; sampling
    # 16 scanlines per row errs by at most perimeter (10 blocks) / (2 · 16) pixels.
    bound = 10.0 * t.factors[idx, 2] / 32.0
    assert ((area - expected).abs() <= bound).all()
    # The extreme positions really touch the edges (the range is adaptive, not padded).
    left = t.images[t.factors[:, 3] < 0.002]
    assert (_coverage(left)[:, :, 0] > 0.3).any(dim=1).float().mean() > 0.9


def test_tetrominoes_hue_and_scale_really_vary(full_tetrominoes):
    t = full_tetrominoes
    idx = torch.arange(0, len(t), 53)
    imgs, factors = t.images[idx].double() / 255.0, t.factors[idx]
    cov = imgs.amax(1)
    weights = (cov > 0.99).double()  # fully covered pixels carry the pure colour
    rgb = (imgs * weights[:, None]).sum((2, 3)) / weights.sum((1, 2))[:, None]
    hues = torch.tensor([colorsys.rgb_to_hsv(*map(float, c))[0] for c in rgb], dtype=torch.float64)
    diff = (hues - factors[:, 1]).abs()
    assert torch.minimum(diff, 1 - diff).max() < 0.01
    area = cov.sum((1, 2))
    corr = np.corrcoef(area.numpy(), factors[:, 2].numpy() ** 2)[0, 1]
    assert corr > 0.99


def test_tetromino_has_no_rotational_symmetry():
    angles = [0.0, 90.0, 180.0, 270.0, 360.0]
    factors = torch.tensor([[a, 0.3, 4.0, 0.5, 0.5] for a in angles], dtype=torch.float64)
    masks = _coverage(data.render_tetrominoes(factors))
    for i in range(4):
        for j in range(i + 1, 4):
            assert (masks[i] - masks[j]).abs().sum() > 10.0, (angles[i], angles[j])
    assert torch.allclose(masks[0], masks[4], atol=0.02)  # a full turn is the identity
    # Rotating the rendered image by a quarter turn gives the render at +90° (y points down).
    for k in range(3):
        turned = torch.rot90(masks[k], k=-1, dims=(0, 1))
        assert (turned - masks[k + 1]).abs().mean() < 0.02


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
        data.load("mnist")


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
        (lambda: data.render_dsprites(torch.zeros(2, 5, dtype=torch.long)), ValueError, "latents_classes"),
        (lambda: data.render_dsprites(torch.tensor([[0, 3, 0, 0, 0, 0]])), ValueError, "latents_classes"),
        (lambda: data.render_dsprites(torch.zeros(1, 6)), TypeError, "latents_classes"),
        (lambda: data.render_tetrominoes(torch.tensor([[0.0, 0.5, 20.0, 0.5, 0.5]])), ValueError, "factors"),
        (lambda: data.render_tetrominoes(torch.tensor([[math.nan, 0.5, 3.0, 0.5, 0.5]])), ValueError, "factors"),
        (lambda: data.render_tetrominoes(torch.tensor([[0.0, 0.5, 3.0, 1.5, 0.5]])), ValueError, "factors"),
    ],
)
def test_bad_arguments_raise_named_errors(call, exc, arg):
    with pytest.raises(exc, match=f"argument '{arg}'") as info:
        call()
    assert info.value.argument == arg
    assert isinstance(info.value, (vaetransfer.ArgumentError, vaetransfer.ArgumentTypeError))


def test_empty_subsets_are_empty():
    assert len(data.dsprites([])) == 0 and data.dsprites([]).imgs.shape == (0, 64, 64)
    assert data.tetrominoes([]).images.shape == (0, 3, 32, 32)
