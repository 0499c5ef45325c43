"""Second and third domains: Solids, colour/noisy dSprites, and the Cars3D, SmallNORB and
CelebA loaders on small files written here in each public format."""
import gzip
import math
import os
import struct
import sys

import numpy as np
import pytest
import torch

import vaetransfer
from vaetransfer import data

GRID = torch.arange(0, data.SOLIDS_COUNT, 29)  # 10,170 rows spread over the whole grid
CENTRE = 12.0 + 40.0 * 0.5  # posX = posY = 0.5 puts the centre at pixel 32


@pytest.fixture(scope="module")
def grid():
    return data.solids(GRID)


def _row(**factors):
    """A factor-class row of the Solids grid (missing factors: class 0) and its index."""
    classes = [factors.get(name, 0) for name in data.SOLIDS_FACTORS]
    return classes, int(np.ravel_multi_index(classes, data.SOLIDS_SIZES))


def _values(shape=1, azimuth=0.0, elevation=0.0, light=math.pi / 4, scale=1.0, x=0.5, y=0.5):
    return torch.tensor([[shape, azimuth, elevation, light, scale, x, y]], dtype=torch.float64)


def _centroid(img):
    img = img.double()
    grid = torch.arange(img.shape[-1], dtype=torch.float64) + 0.5
    mass = img.sum((-2, -1))
    return (img.sum(-2) * grid).sum(-1) / mass, (img.sum(-1) * grid).sum(-1) / mass


def _square_coverage(cx, cy, half):
    """Exact per-pixel coverage of the axis-aligned square [cx ± half] × [cy ± half]."""
    return _rect_coverage(cx, cy, half, half)


def _rect_coverage(cx, cy, half_w, half_h):
    edges = np.arange(64.0)
    ox = np.clip(np.minimum(edges + 1, cx + half_w) - np.maximum(edges, cx - half_w), 0, 1)
    oy = np.clip(np.minimum(edges + 1, cy + half_h) - np.maximum(edges, cy - half_h), 0, 1)
    return oy[:, None] * ox[None, :]


def _sampled_coverage(inside, sub=16):
    """Per-pixel coverage of the region inside(x, y) from sub × sub samples per pixel."""
    g = (np.arange(64 * sub) + 0.5) / sub
    yy, xx = np.meshgrid(g, g, indexing="ij")
    return inside(xx, yy).reshape(64, sub, 64, sub).mean((1, 3))


# ---------------------------------------------------------------- Solids: the factor grid
def test_solids_factor_grid():
    d = data.solids(images=False)
    assert len(d) == data.SOLIDS_COUNT == 294_912 == math.prod(data.SOLIDS_SIZES)
    assert data.SOLIDS_SIZES == (6, 12, 4, 4, 4, 8, 8) and len(data.SOLIDS_FACTORS) == 7 and d.images is None
    expected = np.stack(np.unravel_index(np.arange(data.SOLIDS_COUNT), data.SOLIDS_SIZES), axis=1)
    np.testing.assert_array_equal(d.factors.numpy(), expected)  # posY fastest
    grids = {
        0: np.arange(6.0),
        1: 2 * np.pi * np.arange(12) / 12,
        2: np.linspace(0, np.pi / 3, 4),
        3: np.pi / 4 + np.pi / 2 * np.arange(4),
        4: np.linspace(0.5, 1.0, 4),
        5: np.linspace(0, 1, 8),
        6: np.linspace(0, 1, 8),
    }
    for col, values in grids.items():
        np.testing.assert_allclose(d.factor_values[:, col].numpy(), values[expected[:, col]], rtol=0, atol=1e-12)
    assert len(data.SOLIDS_SHAPES) == 6 and data.domain("solids").source is data.solids


def test_solids_images_are_inside_and_never_empty(grid):
    assert grid.images.shape == (len(GRID), 1, 64, 64) and grid.images.dtype == torch.uint8
    pixels = grid.images[:, 0]
    border = torch.cat([pixels[:, 0, :], pixels[:, -1, :], pixels[:, :, 0], pixels[:, :, -1]], dim=1)
    assert int(border.max()) == 0
    assert int(pixels.flatten(1).amax(1).min()) > 0
    # Anti-aliased and shaded: many grey levels, not a binary mask.
    assert torch.unique(pixels[:200]).numel() > 100


def test_solids_subsets_equal_rows_and_do_not_depend_on_threads(grid):
    pick = torch.randint(0, len(GRID), (300,))
    sub = data.solids(GRID[pick])
    assert torch.equal(sub.images, grid.images[pick]) and torch.equal(sub.factor_values, grid.factor_values[pick])
    assert torch.equal(data.solids(slice(70, 90)).images, data.solids(range(0, 100)).images[70:90])
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = data.solids(GRID[:400]).images
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, grid.images[:400])


# ---------------------------------------------------------------- Solids: images follow factors
def test_solids_centroid_moves_with_position():
    shifts_x, shifts_y = [], []
    for shape in range(6):
        for az, el, light in [(0, 0, 0), (5, 2, 3), (7, 3, 1)]:
            base = dict(shape=shape, azimuth=az, elevation=el, light=light, scale=2)
            rows = [_row(**base, posX=px, posY=py)[1] for px, py in [(0, 0), (7, 0), (0, 7), (3, 5)]]
            cx, cy = _centroid(data.solids(rows).images[:, 0])
            shifts_x.append([cx[1] - cx[0], cy[1] - cy[0], cx[3] - cx[0]])
            shifts_y.append([cy[2] - cy[0], cx[2] - cx[0], cy[3] - cy[0]])
    sx, sy = torch.tensor(shifts_x), torch.tensor(shifts_y)
    # posX moves right by 40 px over its range (posY down), the other coordinate stays.
    assert torch.allclose(sx[:, 0], torch.full_like(sx[:, 0], 40.0), atol=0.05)
    assert torch.allclose(sy[:, 0], torch.full_like(sy[:, 0], 40.0), atol=0.05)
    assert sx[:, 1].abs().max() < 0.05 and sy[:, 1].abs().max() < 0.05
    # Sub-pixel shifts: the pixel-centre moment of an anti-aliased image is off by a little.
    assert torch.allclose(sx[:, 2], torch.full_like(sx[:, 2], 40.0 * 3 / 7), atol=0.2)
    assert torch.allclose(sy[:, 2], torch.full_like(sy[:, 2], 40.0 * 5 / 7), atol=0.2)


def test_solids_silhouette_area_grows_with_scale_squared(grid):
    # Pairs of rows that differ only in scale (class 0 vs 3, 1 vs 2): scale's stride is 8 · 8.
    for small, large in [(0, 3), (1, 2)]:
        rows = GRID[grid.factors[:, 4] == small]
        pair = data.solids(torch.cat([rows, rows + 64 * (large - small)]), shading="flat")
        area = (pair.images.double().sum((1, 2, 3)) / 255.0).view(2, -1)
        ratio = (pair.factor_values[len(rows), 4] / pair.factor_values[0, 4]) ** 2
        assert torch.allclose(area[1] / area[0], torch.full_like(area[0], float(ratio)), rtol=0.03), (small, large)
    # The shaded images have the same silhouette, never brighter than it and at least the
    # ambient level where the silhouette covers a whole pixel.
    flat = data.solids(GRID[:2000], shading="flat").images
    shaded = grid.images[:2000]
    assert bool((shaded <= flat).all()) and bool(((shaded > 0) <= (flat > 0)).all())
    assert int(shaded[flat == 255].min()) >= round(0.25 * 255)


def test_cube_face_on_matches_a_hand_computed_square():
    half = 11.0 / math.sqrt(3.0)  # circumradius 1 → half side 1/√3, times 11 px at scale 1
    flat = data.render_solids(_values(shape=1), shading="flat")[0].double().numpy() / 255.0
    cov = _square_coverage(CENTRE, CENTRE, half)
    assert np.abs(flat - cov).max() <= 1 / 16 + 1 / 255  # 8 scanlines per row: ≤ 1/16 off on edge rows
    assert ((flat > 0.5) != (cov > 0.5)).sum() <= 4
    # From the grid (azimuth 0, elevation 0, scale 0.5, posX 3/7, posY 6/7), shaded: the one
    # visible face has the Lambert shade of a light 45° off the view axis.
    _, index = _row(shape=1, scale=0, posX=3, posY=6)
    img = data.solids([index]).images[0, 0].double().numpy()
    cov = _square_coverage(12 + 40 * 3 / 7, 12 + 40 * 6 / 7, 0.5 * half)
    shade = 0.25 + 0.75 * math.cos(math.pi / 4)
    assert ((img > 0.5 * 255 * shade) != (cov > 0.5)).sum() <= 4
    assert np.all(img[cov == 1.0] == round(255 * shade))
    assert np.abs(img / (255 * shade) - cov).max() <= 1 / 16 + 1 / 255


def test_known_silhouettes_of_other_poses():
    def mask(values):
        return data.render_solids(values, shading="flat")[0].double().numpy() / 255.0

    # Cylinder (radius 0.6, height 1.6) seen from the side: a 13.2 × 17.6 px rectangle ...
    side = mask(_values(shape=5))
    rect = _rect_coverage(CENTRE, CENTRE, 6.6, 8.8)
    assert ((side > 0.5) != (rect > 0.5)).sum() <= 4 and np.abs(side - rect).max() <= 1 / 16 + 1 / 255
    # ... and from straight above (elevation 90°): a disc of radius 6.6 px (a 32-gon).
    top = mask(_values(shape=5, elevation=math.pi / 2))
    disc = _sampled_coverage(lambda x, y: (x - CENTRE) ** 2 + (y - CENTRE) ** 2 <= 6.6**2)
    assert ((top > 0.5) != (disc > 0.5)).sum() <= 6 and np.abs(top - disc).max() < 0.15
    # Octahedron seen along an axis: a diamond |x| + |y| ≤ 11 px.
    diamond = mask(_values(shape=2))
    ref = _sampled_coverage(lambda x, y: np.abs(x - CENTRE) + np.abs(y - CENTRE) <= 11.0)
    assert np.abs(diamond - ref).max() < 0.15 and np.abs(diamond - ref).sum() < 3.0
    # A cube repeats every quarter turn of azimuth; 45° shows a wider silhouette (two faces).
    cube = [mask(_values(shape=1, azimuth=a)) for a in (0.0, math.pi / 2, math.pi / 4)]
    assert np.abs(cube[0] - cube[1]).max() < 0.01
    width = [(m.max(0) > 0.5).sum() for m in cube]
    assert width[2] - width[0] >= 4  # √2 · 12.7 px vs 12.7 px
    # Raising the camera shows the top: the silhouette gets taller.
    tall = mask(_values(shape=1, elevation=math.radians(40)))
    assert (tall.max(1) > 0.5).sum() - (cube[0].max(1) > 0.5).sum() >= 4


def test_solids_light_and_shapes_change_the_image():
    poses = [_values(shape=s, azimuth=0.5, elevation=0.4, light=light)
             for s in range(6) for light in (math.pi / 4, 5 * math.pi / 4)]
    lambert = data.render_solids(torch.cat(poses))
    flat = data.render_solids(torch.cat(poses), shading="flat")
    for s in range(6):
        right, left = lambert[2 * s].double(), lambert[2 * s + 1].double()
        assert (right - left).abs().sum() > 500, data.SOLIDS_SHAPES[s]  # the light changes the shading ...
        assert torch.equal(flat[2 * s], flat[2 * s + 1])  # ... not the silhouette
        # A light from the upper right brightens the right half more than one from the lower left.
        assert right[:, 32:].sum() - left[:, 32:].sum() > right[:, :32].sum() - left[:, :32].sum()
    silhouettes = (flat[::2] > 127).flatten(1).double()
    differ = torch.cdist(silhouettes, silhouettes, p=1)
    assert differ[~torch.eye(6, dtype=torch.bool)].min() >= 10  # six different shapes


def test_solids_as_labelled_dataset():
    d = data.solids(range(0, data.SOLIDS_COUNT, 997))
    ds = data.as_dataset(d, label="shape")
    assert ds.name == "solids" and ds.input_shape == (1, 64, 64) and ds.scale == pytest.approx(1 / 255)
    assert ds.num_classes == 6 and torch.equal(ds.labels, d.factors[:, 0])
    assert ds.factor_names == data.SOLIDS_FACTORS and torch.equal(ds.factor_values, d.factor_values)
    assert d.extras == {"shading": "lambert"}
    assert data.as_dataset(data.solids([0, 1]), label="azimuth").num_classes == 12
    assert float(ds.float_images().max()) <= 1.0 and d.float_images([0]).shape == (1, 1, 64, 64)
    assert data.as_dataset(data.load("solids", indices=[5, 6]), label="posY").labels.tolist() == [5, 6]


# ---------------------------------------------------------------- colour / noisy dSprites
SPRITES = torch.arange(0, data.DSPRITES_COUNT, 2039)  # 362 rows over the whole grid


def test_color_dsprites_keep_the_sprite_mask_and_colour_it():
    base = data.dsprites(SPRITES)
    c = data.color_dsprites(SPRITES)
    assert c.images.shape == (len(SPRITES), 3, 64, 64) and c.images.dtype == torch.uint8
    assert torch.equal(c.factors, base.factors) and torch.equal(c.factor_values, base.factor_values)
    assert c.factor_names == data.DSPRITES_FACTORS and c.factor_sizes == data.DSPRITES_SIZES
    assert torch.equal(c.images.amax(1, keepdim=True) > 0, base.images == 1)
    colors = c.row_extras["colors"]
    assert colors.shape == (len(SPRITES), 3) and 0.5 <= float(colors.min()) and float(colors.max()) < 1.0
    expected = torch.round(255 * colors).to(torch.uint8)[:, :, None, None] * base.images
    assert torch.equal(c.images, expected)
    assert colors.std(0).min() > 0.1  # colours really vary, per channel
    assert torch.equal(c.subset([3, 1]).row_extras["colors"], colors[[3, 1]])
    ds = data.as_dataset(c, label="shape")
    assert ds.input_shape == (3, 64, 64) and ds.name == "color_dsprites" and ds.num_classes == 3


def test_noisy_dsprites_keep_a_white_sprite_on_noise():
    base = data.dsprites(SPRITES)
    n = data.noisy_dsprites(SPRITES)
    assert n.images.shape == (len(SPRITES), 3, 64, 64) and torch.equal(n.factors, base.factors)
    mask = (base.images == 1).expand(-1, 3, -1, -1)
    assert bool((n.images[mask] == 255).all())
    background = n.images[~mask].double()
    assert background.mean().item() == pytest.approx(127.5, abs=1.0)
    assert background.std().item() == pytest.approx(math.sqrt((256**2 - 1) / 12), rel=0.02)  # uniform on 0..255
    counts = torch.bincount(n.images[~mask].long(), minlength=256).double()
    assert counts.min() > 0.8 * counts.mean() and counts.max() < 1.2 * counts.mean()
    assert (n.images[:, 0] != n.images[:, 1]).any()  # independent channels, not grey noise


@pytest.mark.parametrize("make", [data.color_dsprites, data.noisy_dsprites])
def test_dsprites_variants_are_deterministic_by_index(make):
    big = make(SPRITES)
    pick = torch.tensor([5, 0, 300, 17])
    sub = make(SPRITES[pick])
    assert torch.equal(sub.images, big.images[pick])
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(make(SPRITES[:64]).images, big.images[:64])
    finally:
        torch.set_num_threads(before)
    other = make(SPRITES[:64], seed=1)  # another stream: other colours / noise, the same sprites
    assert not torch.equal(other.images, big.images[:64]) and torch.equal(other.factors, big.factors[:64])
    assert make(SPRITES[:3], images=False).images is None
    assert data.load(make.__name__, indices=[0]).images.shape == (1, 3, 64, 64)


# ---------------------------------------------------------------- Cars3D (.mat folder)
def _write_cars(folder, n_cars=3, size=16):
    scipy_io = pytest.importorskip("scipy.io")
    rng = np.random.default_rng(0)
    cars = []
    for k in range(n_cars):
        im = rng.integers(0, 256, (size, size, 3, 24, 4), dtype=np.uint8)  # [H, W, RGB, azimuth, elevation]
        scipy_io.savemat(os.path.join(folder, f"car_{k + 1:03d}_mesh.mat"), {"im": im})
        cars.append(im)
    (folder / "list.txt").write_text("not a .mat file\n")
    return cars


def test_cars3d_loader_round_trips_the_mat_files(tmp_path):
    cars = _write_cars(tmp_path)
    d = data.load_cars3d(tmp_path, image_size=None)
    assert len(d) == 3 * 96 and d.images.shape == (288, 3, 16, 16) and d.factor_sizes == (3, 4, 24)
    assert d.extras["files"] == ("car_001_mesh.mat", "car_002_mesh.mat", "car_003_mesh.mat")
    for row in (0, 1, 24, 95, 96 + 30, 287):
        obj, elevation, azimuth = d.factors[row].tolist()
        assert (obj, elevation, azimuth) == (row // 96, row % 96 // 24, row % 24)
        np.testing.assert_array_equal(d.images[row].numpy(), cars[obj][:, :, :, azimuth, elevation].transpose(2, 0, 1))
    small = data.load_cars3d(tmp_path, image_size=8, indices=[100, 5])
    for i, row in enumerate((100, 5)):
        im = cars[row // 96][:, :, :, row % 24, row % 96 // 24].transpose(2, 0, 1).astype(float)
        blocks = im.reshape(3, 8, 2, 8, 2).mean((2, 4))
        assert np.abs(small.images[i].numpy() - blocks).max() <= 0.5
    factors_only = data.load_cars3d(tmp_path, images=False)
    assert factors_only.images is None and torch.equal(factors_only.factors, d.factors)
    ds = data.as_dataset(d, label="object")
    assert ds.num_classes == 3 and ds.input_shape == (3, 16, 16) and ds.name == "cars3d"


def test_cars3d_loader_rejects_bad_files(tmp_path, monkeypatch):
    scipy_io = pytest.importorskip("scipy.io")
    err = _named(ValueError, "path", lambda: data.load_cars3d(tmp_path))
    assert "no .mat files" in str(err)
    scipy_io.savemat(os.path.join(tmp_path, "car.mat"), {"im": np.zeros((4, 4, 3, 24, 3), np.uint8)})
    _named(ValueError, "path", lambda: data.load_cars3d(tmp_path))
    (tmp_path / "car.mat").write_bytes(b"junk")
    _named(ValueError, "path", lambda: data.load_cars3d(tmp_path))
    _named(ValueError, "path", lambda: data.load_cars3d(tmp_path / "missing"))
    _named(ValueError, "indices", lambda: data.load_cars3d(tmp_path, indices=[96]))
    monkeypatch.setitem(sys.modules, "scipy.io", None)  # as if scipy were not installed
    with pytest.raises(ImportError, match="install scipy"):
        data.load_cars3d(tmp_path)


# ---------------------------------------------------------------- SmallNORB (binary matrix files)
def _norb_bytes(array, magic):
    """A NORB binary matrix written by hand: int32 magic, int32 ndim, max(ndim, 3) int32 dims."""
    dims = list(array.shape) + [1] * (3 - array.ndim)
    return struct.pack(f"<ii{len(dims)}i", magic, array.ndim, *dims) + array.astype(array.dtype.newbyteorder("<")).tobytes()


def _write_norb(folder, split="training", n=12, compress=False):
    rng = np.random.default_rng(1)
    dat = rng.integers(0, 256, (n, 2, 96, 96), dtype=np.uint8)
    cat = rng.integers(0, 5, n).astype(np.int32)
    info = np.stack([rng.integers(0, 10, n), rng.integers(0, 9, n), 2 * rng.integers(0, 18, n),
                     rng.integers(0, 6, n)], 1).astype(np.int32)
    prefix = f"smallnorb-5x46789x9x18x6x2x96x96-{split}" if split == "training" else f"smallnorb-5x01235x9x18x6x2x96x96-{split}"
    for kind, array, magic in (("dat", dat, 0x1E3D4C55), ("cat", cat, 0x1E3D4C54), ("info", info, 0x1E3D4C54)):
        raw = _norb_bytes(array, magic)
        if compress:
            (folder / f"{prefix}-{kind}.mat.gz").write_bytes(gzip.compress(raw))
        else:
            (folder / f"{prefix}-{kind}.mat").write_bytes(raw)
    return dat, cat, info


def test_smallnorb_loader_round_trips_the_binary_files(tmp_path):
    dat, cat, info = _write_norb(tmp_path)
    header = (tmp_path / "smallnorb-5x46789x9x18x6x2x96x96-training-cat.mat").read_bytes()[:20]
    assert header[:4] == bytes.fromhex("544c3d1e") and struct.unpack("<4i", header[4:])[:2] == (1, 12)
    both = data.load_smallnorb(tmp_path, image_size=None, camera=None)
    assert both.images.shape == (12, 2, 96, 96) and torch.equal(both.images, torch.from_numpy(dat))
    d = data.load_smallnorb(tmp_path, image_size=None)  # camera 0
    assert d.images.shape == (12, 1, 96, 96) and torch.equal(d.images, both.images[:, :1])
    expected = np.stack([cat, info[:, 0], info[:, 1], info[:, 2] // 2, info[:, 3]], 1)
    np.testing.assert_array_equal(d.factors.numpy(), expected)
    np.testing.assert_allclose(d.factor_values[:, 2].numpy(), 30 + 5 * info[:, 1])  # degrees
    np.testing.assert_allclose(d.factor_values[:, 3].numpy(), 10 * info[:, 2])
    assert d.factor_names == data.SMALLNORB_FACTORS and d.extras["split"] == "training"
    np.testing.assert_array_equal(data.read_norb_matrix(tmp_path / "smallnorb-5x46789x9x18x6x2x96x96-training-info.mat"),
                                  info)
    assert data.load_smallnorb(tmp_path, indices=[3, 0]).images.shape == (2, 1, 64, 64)  # the default size
    halved = data.load_smallnorb(tmp_path, indices=[3, 0], image_size=48, camera=None)  # 2 × 2 block means
    blocks = dat[[3, 0]].astype(float).reshape(2, 2, 48, 2, 48, 2).mean((3, 5))
    assert np.abs(halved.images.numpy() - blocks).max() <= 0.5
    ds = data.as_dataset(d, label="category")
    assert ds.input_shape == (1, 96, 96) and torch.equal(ds.images[:, 0], both.images[:, 0]) and ds.num_classes == 5
    right = data.load_smallnorb(tmp_path, image_size=None, camera=1)
    assert right.images[:, 0].equal(both.images[:, 1]) and both.input_shape == (2, 96, 96)
    factors_only = data.load_smallnorb(tmp_path, images=False)
    assert factors_only.images is None and torch.equal(factors_only.factors, d.factors)


def test_smallnorb_loader_reads_gzip_and_the_testing_split(tmp_path):
    dat, cat, _ = _write_norb(tmp_path, split="testing", n=5, compress=True)
    d = data.load_smallnorb(tmp_path, "testing", image_size=None, camera=None)
    assert torch.equal(d.images, torch.from_numpy(dat)) and d.factors[:, 0].tolist() == cat.tolist()
    _named(ValueError, "path", lambda: data.load_smallnorb(tmp_path))  # no training files here


def test_smallnorb_loader_rejects_bad_files(tmp_path):
    _write_norb(tmp_path, n=4)
    cat = tmp_path / "smallnorb-5x46789x9x18x6x2x96x96-training-cat.mat"
    good = cat.read_bytes()
    cat.write_bytes(b"\x00\x00\x00\x00" + good[4:])
    assert "magic" in str(_named(ValueError, "path", lambda: data.load_smallnorb(tmp_path)))
    cat.write_bytes(good[:-4])
    assert "data bytes" in str(_named(ValueError, "path", lambda: data.load_smallnorb(tmp_path)))
    cat.write_bytes(_norb_bytes(np.array([0, 1, 7, 2], np.int32), 0x1E3D4C54))  # category 7
    _named(ValueError, "path", lambda: data.load_smallnorb(tmp_path))
    cat.write_bytes(good)
    _named(ValueError, "split", lambda: data.load_smallnorb(tmp_path, "train"))
    _named(ValueError, "camera", lambda: data.load_smallnorb(tmp_path, camera=2))
    _named(TypeError, "camera", lambda: data.load_smallnorb(tmp_path, camera="left"))


# ---------------------------------------------------------------- CelebA (images + attribute list)
ATTRIBUTES = ("5_o_Clock_Shadow", "Male", "Smiling")


def _write_celeba(folder, ext="png", n=5, h=24, w=20):
    from PIL import Image

    images = folder / "img_align_celeba"
    images.mkdir()
    rng = np.random.default_rng(2)
    pixels, values, lines = [], rng.choice([-1, 1], (n, len(ATTRIBUTES))), [str(n), " ".join(ATTRIBUTES)]
    for i in range(n):
        name = f"{i + 1:06d}.{ext}"
        rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if ext == "jpg":  # smooth gradients, which JPEG keeps within a few levels
            ramp = np.linspace(0, 1, h)[:, None, None] * rng.uniform(60, 190, 3) + np.linspace(0, 1, w)[None, :, None] * 60
            rgb = np.round(ramp + rng.uniform(0, 5, 3)).astype(np.uint8)
        if ext == "jpg":
            Image.fromarray(rgb).save(images / name, quality=95, subsampling=0)
        else:
            Image.fromarray(rgb).save(images / name)
        pixels.append(rgb)
        lines.append(name + "".join(f" {v:2d}" for v in values[i]))  # the public file pads with spaces
    (folder / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    return images, np.stack(pixels), values


def test_celeba_loader_round_trips_images_and_attributes(tmp_path):
    pytest.importorskip("PIL")
    images, pixels, values = _write_celeba(tmp_path)
    d = data.load_celeba(images, crop=None, image_size=None)  # the list is found in the parent folder
    assert d.images.shape == (5, 3, 24, 20) and torch.equal(d.images, torch.from_numpy(pixels.transpose(0, 3, 1, 2)))
    assert d.factor_names == ATTRIBUTES and d.factor_sizes == (2, 2, 2)
    np.testing.assert_array_equal(d.factor_values.numpy(), values)
    np.testing.assert_array_equal(d.factors.numpy(), (values > 0).astype(np.int64))
    assert d.row_extras["filenames"] == tuple(f"{i:06d}.png" for i in range(1, 6))
    small = data.load_celeba(images, tmp_path / "list_attr_celeba.txt", indices=[4, 1], crop=16, image_size=8)
    for i, row in enumerate((4, 1)):
        crop = pixels[row, 4:20, 2:18].astype(float).transpose(2, 0, 1)  # centre 16×16 of 24×20
        assert np.abs(small.images[i].numpy() - crop.reshape(3, 8, 2, 8, 2).mean((2, 4))).max() <= 0.5
    assert small.row_extras["filenames"] == ("000005.png", "000002.png")
    ds = data.as_dataset(d, label="Smiling")
    assert ds.num_classes == 2 and torch.equal(ds.labels, torch.from_numpy((values[:, 2] > 0).astype(np.int64)))
    assert data.load_celeba(images, images=False).images is None


def test_celeba_loader_reads_jpegs(tmp_path):
    pytest.importorskip("PIL")
    images, pixels, _ = _write_celeba(tmp_path, ext="jpg", h=32, w=24)
    d = data.load_celeba(images, crop=None, image_size=None)
    assert d.images.shape == (5, 3, 32, 24)
    assert np.abs(d.images.numpy().astype(float) - pixels.transpose(0, 3, 1, 2)).mean() < 2  # lossy, but close


def test_celeba_loader_rejects_bad_files(tmp_path):
    pytest.importorskip("PIL")
    images, _, _ = _write_celeba(tmp_path)
    attr = tmp_path / "list_attr_celeba.txt"
    text = attr.read_text()
    attr.write_text(text.replace("5\n", "6\n", 1))
    assert "announces 6" in str(_named(ValueError, "attr_file", lambda: data.load_celeba(images)))
    attr.write_text(text.replace(" 1", " 2", 1))
    _named(ValueError, "attr_file", lambda: data.load_celeba(images))
    attr.write_text(text)
    os.remove(images / "000003.png")
    _named(ValueError, "image_dir", lambda: data.load_celeba(images, crop=None))
    _named(ValueError, "crop", lambda: data.load_celeba(images, indices=[0], crop=30))
    os.remove(attr)
    _named(ValueError, "attr_file", lambda: data.load_celeba(images))


# ---------------------------------------------------------------- bad arguments
def _named(exc, arg, call):
    with pytest.raises(exc, match=f"argument '{arg}'") as info:
        call()
    assert info.value.argument == arg
    assert isinstance(info.value, (vaetransfer.ArgumentError, vaetransfer.ArgumentTypeError))
    return info.value


@pytest.mark.parametrize(
    "call, exc, arg",
    [
        (lambda: data.solids([data.SOLIDS_COUNT]), ValueError, "indices"),
        (lambda: data.solids([-1]), ValueError, "indices"),
        (lambda: data.solids(3), TypeError, "indices"),
        (lambda: data.solids([0], shading="phong"), ValueError, "shading"),
        (lambda: data.solids([0], shading=None), TypeError, "shading"),
        (lambda: data.solids([0], images="yes"), TypeError, "images"),
        (lambda: data.render_solids(_values(shape=6)), ValueError, "factor_values"),
        (lambda: data.render_solids(_values(shape=1.5)), ValueError, "factor_values"),
        (lambda: data.render_solids(_values(scale=0.0)), ValueError, "factor_values"),
        (lambda: data.render_solids(_values(scale=1.5)), ValueError, "factor_values"),
        (lambda: data.render_solids(_values(x=1.2)), ValueError, "factor_values"),
        (lambda: data.render_solids(_values(azimuth=math.nan)), ValueError, "factor_values"),
        (lambda: data.render_solids(torch.zeros(2, 6, dtype=torch.float64)), ValueError, "factor_values"),
        (lambda: data.render_solids(torch.zeros(2, 7, dtype=torch.long)), TypeError, "factor_values"),
        (lambda: data.render_solids(_values(), shading="smooth"), ValueError, "shading"),
        (lambda: data.color_dsprites([data.DSPRITES_COUNT]), ValueError, "indices"),
        (lambda: data.color_dsprites([0], seed=-1), ValueError, "seed"),
        (lambda: data.noisy_dsprites([0], seed=1.5), TypeError, "seed"),
        (lambda: data.noisy_dsprites([-3]), ValueError, "indices"),
        (lambda: data.as_dataset(data.solids([0]), label="hue"), ValueError, "label"),
        (lambda: data.solids([0], images=False).float_images(), ValueError, "images"),
        (lambda: data.load_cars3d(3), TypeError, "path"),
        (lambda: data.load_cars3d(".", image_size=0), ValueError, "image_size"),
        (lambda: data.load_smallnorb(".", split=1), TypeError, "split"),
        (lambda: data.load_celeba(".", attr_file=5), TypeError, "attr_file"),
        (lambda: data.load_celeba(".", crop=2.5), TypeError, "crop"),
        (lambda: data.read_norb_matrix("no-such-file.mat"), ValueError, "path"),
    ],
)
def test_bad_arguments_raise_named_errors(call, exc, arg):
    _named(exc, arg, call)


# ---------------------------------------------------------------- MNIST / Fashion-MNIST (IDX)
def _write_idx(path, array, code):
    """The IDX format, written here from its definition: 0, 0, type code, ndim, big-endian dims, data."""
    body = np.ascontiguousarray(array).astype(array.dtype.newbyteorder(">")).tobytes()
    raw = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape) + body
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(raw)


@pytest.fixture
def mnist_folder(tmp_path):
    g = np.random.default_rng(0)
    images = {"train": g.integers(0, 256, (12, 28, 28), dtype=np.uint8), "t10k": g.integers(0, 256, (5, 28, 28), dtype=np.uint8)}
    labels = {"train": g.integers(0, 10, 12).astype(np.uint8), "t10k": np.arange(5, dtype=np.uint8)}
    _write_idx(tmp_path / "train-images-idx3-ubyte.gz", images["train"], 0x08)   # gzipped
    _write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels["train"], 0x08)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte", images["t10k"], 0x08)       # plain
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels["t10k"], 0x08)
    return tmp_path, images, labels


def test_mnist_loader_reads_gzipped_and_plain_idx(mnist_folder):
    folder, images, labels = mnist_folder
    train = data.load_mnist(folder)
    assert train.images.shape == (12, 1, 28, 28) and train.images.dtype == torch.uint8
    assert train.extras["split"] == "train"
    assert np.array_equal(train.images[:, 0].numpy(), images["train"])
    assert np.array_equal(train.factors[:, 0].numpy(), labels["train"])
    test = data.load_mnist(folder, "test", name="fashion_mnist")
    assert np.array_equal(test.images[:, 0].numpy(), images["t10k"]) and test.name == "fashion_mnist"
    ds = data.as_dataset(test, label="label")
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10 and ds.labels.tolist() == [0, 1, 2, 3, 4]
    assert ds.scale == pytest.approx(1 / 255) and float(ds.float_images().max()) <= 1.0
    some = data.load_mnist(folder, indices=[3, 0])
    assert np.array_equal(some.images[:, 0].numpy(), images["train"][[3, 0]])
    assert data.load_mnist(folder, images=False).images is None
    # other element types of the format, big-endian
    arr = np.arange(6, dtype=np.int16).reshape(2, 3) - 3
    _write_idx(folder / "x.idx", arr, 0x0B)
    assert np.array_equal(data.read_idx(folder / "x.idx"), arr)
    f64 = np.linspace(-1, 1, 4)
    _write_idx(folder / "y.idx", f64, 0x0E)
    assert np.array_equal(data.read_idx(folder / "y.idx"), f64)


def test_mnist_loader_names_bad_files(mnist_folder, tmp_path):
    folder, images, _ = mnist_folder
    (folder / "junk").write_bytes(b"\x01\x02\x03\x04\x05")
    for call, arg in [(lambda: data.read_idx(folder / "junk"), "path"),
                      (lambda: data.read_idx(folder / "missing"), "path"),
                      (lambda: data.load_mnist(folder, "validation"), "split"),
                      (lambda: data.load_mnist(tmp_path / "nowhere"), "path")]:
        with pytest.raises(ValueError, match=f"argument '{arg}'"):
            call()
    # truncated data and labels that do not match the images
    raw = (folder / "t10k-images-idx3-ubyte").read_bytes()
    (folder / "t10k-images-idx3-ubyte").write_bytes(raw[:-10])
    with pytest.raises(ValueError, match="argument 'path'.*expected 3920 data bytes"):
        data.load_mnist(folder, "test")
    _write_idx(folder / "t10k-images-idx3-ubyte", images["t10k"][:4], 0x08)
    with pytest.raises(ValueError, match="argument 'path'.*matching the labels"):
        data.load_mnist(folder, "test")
