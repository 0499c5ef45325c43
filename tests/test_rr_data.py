"""The data of the RR study ("Reviving Autoencoder Pretraining", App. A.4, B.1, C.1):
the peak images, the 12-bit task of Shwartz-Ziv & Tishby and the texture-shape transfer domain
(and that sharing object_shapes' shape code left object_shapes' images unchanged)."""
import hashlib
import itertools

import numpy as np
import pytest
import torch

import vaetransfer as vt
from vaetransfer import _C, data


# ---------------------------------------------------------------------------------- peak images
def test_peak_images_shapes_ranges_labels_and_patterns():
    p = data.peak_images()
    patterns = p.extras["patterns"]
    assert p.images.shape == (110, 1, 28, 28) and p.images.dtype == torch.float32
    assert patterns.shape == (2, 1, 28, 28) and patterns.dtype == torch.float32
    assert p.labels.dtype == torch.int64 and torch.equal(p.labels, torch.arange(110) % 2)
    assert torch.equal(torch.bincount(p.labels), torch.tensor([55, 55]))
    assert float(p.images.min()) >= 0.0 and float(p.images.max()) <= 1.0
    # The peaks: height 1 at pixel (7, 7) and at its mirror image (20, 20); class 1 is class 0 flipped.
    top_left, bottom_right = patterns[0, 0], patterns[1, 0]
    assert top_left[7, 7] == 1.0 and bottom_right[20, 20] == 1.0
    assert int(top_left.argmax()) == 7 * 28 + 7 and int(bottom_right.argmax()) == 20 * 28 + 20
    assert torch.equal(bottom_right, top_left.flip(0, 1))
    assert float(top_left[7, 7 + 3]) == pytest.approx(np.exp(-9 / (2 * 2.8 ** 2)), rel=1e-6)  # σ = size/10
    # Each image is its class's peak plus non-negative scribbles of intensity at most 0.6.
    own = patterns[p.labels]
    extra = p.images - own
    assert float(extra.min()) >= -1e-6 and float(extra.max()) <= 0.6 + 1e-6
    drawn = (extra > 0.05).flatten(1).sum(1)
    assert int(drawn.min()) >= 5  # every image has scribbles
    assert not torch.equal(extra[0], extra[2])  # different per image


def test_peak_images_are_deterministic_by_seed_and_row():
    a = data.peak_images(20, seed=3)
    assert torch.equal(a.images, data.peak_images(20, seed=3).images)
    assert torch.equal(a.images, data.peak_images(110, seed=3).images[:20])  # a row does not depend on count
    assert not torch.equal(a.images, data.peak_images(20, seed=4).images)
    big = data.peak_images(4, size=32)
    assert big.images.shape == (4, 1, 32, 32) and big.extras["patterns"][0, 0, 8, 8] == 1.0
    assert big.extras["patterns"][1, 0, 23, 23] == 1.0


def test_peak_class_means_resemble_their_own_pattern():
    p = data.peak_images()
    flat = p.extras["patterns"].flatten(1)
    for c in (0, 1):
        mean = p.images[p.labels == c].mean(0).flatten()
        corr = [float(torch.corrcoef(torch.stack([mean, flat[k]]))[0, 1]) for k in (0, 1)]
        assert corr[c] > 0.8 and corr[c] > corr[1 - c] + 0.5, (c, corr)


def test_peak_split_is_the_papers_balanced_100_10_split():
    train, test = data.peak_split()
    assert train.tolist() == list(range(100)) and test.tolist() == list(range(100, 110))
    labels = data.peak_images(110).labels
    assert torch.equal(torch.bincount(labels[train]), torch.tensor([50, 50]))
    assert torch.equal(torch.bincount(labels[test]), torch.tensor([5, 5]))
    ds = data.peak_images(10)
    assert ds.num_classes == 2 and ds.input_shape == (1, 28, 28) and ds.scale == 1.0 and ds.name == "peaks"
    assert torch.equal(ds.subset([1, 0]).extras["patterns"], ds.extras["patterns"])  # the task's, not a row's


@pytest.mark.parametrize("call, argument", [
    (lambda: data.peak_images(11), "count"),
    (lambda: data.peak_images(0), "count"),
    (lambda: data.peak_images(10, size=4), "size"),
    (lambda: data.peak_images(10, seed=-1), "seed"),
    (lambda: data.peak_split(110, 99), "train"),
    (lambda: data.peak_split(110, 110), "train"),
    (lambda: data.peak_split(111, 100), "count"),
])
def test_peak_errors_name_the_argument(call, argument):
    with pytest.raises((vt.ArgumentError, vt.ArgumentTypeError)) as e:
        call()
    assert e.value.argument == argument


# ---------------------------------------------------------------------------------- the 12-bit task
@pytest.fixture(scope="module")
def task():
    return data.twelve_bit_task()


def _rotation(axis, angle):
    axis = axis / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def _vertex_permutation(v, r):
    """pi with r v_i = v_pi(i), found numerically; asserts that r maps the vertex set to itself."""
    moved = v @ r.T
    dist = np.linalg.norm(moved[:, None] - v[None], axis=-1)
    pi = dist.argmin(1)
    assert np.allclose(dist[np.arange(12), pi], 0, atol=1e-9) and len(set(pi.tolist())) == 12
    return pi


def _permuted_rows(inputs, pi):
    """Row index of each pattern after moving the bit on vertex i to vertex pi(i)."""
    moved = np.zeros_like(inputs)
    moved[:, pi] = inputs
    return (moved.astype(np.int64) << (11 - np.arange(12))).sum(1)


def test_twelve_bit_inputs_are_every_pattern_msb_first(task):
    x = task.images
    assert x.shape == (4096, 12) and x.dtype == torch.float32
    assert torch.unique(x, dim=0).shape[0] == 4096 and set(x.unique().tolist()) == {0.0, 1.0}
    weights = 2 ** torch.arange(11, -1, -1)
    assert torch.equal((x.long() * weights).sum(1), torch.arange(4096))
    assert task.labels.shape == (4096,) and task.labels.dtype == torch.int64
    assert task.row_extras["p_y1"].dtype == torch.float64 and task.row_extras["f"].dtype == torch.float64


def test_twelve_bit_vertices_form_a_regular_icosahedron(task):
    v = task.extras["vertices"].numpy()
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    g = v @ v.T
    for i in range(12):
        near = np.isclose(g[i], 1 / np.sqrt(5))
        assert near.sum() == 5 and np.isclose(g[i], -1).sum() == 1 and np.isclose(g[i], -1 / np.sqrt(5)).sum() == 5


def test_twelve_bit_spectrum_is_the_spherical_harmonic_power_spectrum(task):
    """P_l = Σ_m |Σ_i s_i Y_lm(v_i)|², computed with SciPy's spherical harmonics."""
    from scipy.special import sph_harm_y

    v = task.extras["vertices"].numpy()
    polar, azimuth = np.arccos(np.clip(v[:, 2], -1, 1)), np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi)
    rows = [0, 1, 5, 100, 777, 2048, 3000, 4095]
    s = 2 * task.images[rows].double().numpy() - 1
    for j, l in enumerate(data.TWELVE_BIT_DEGREES):
        y = np.stack([sph_harm_y(l, m, polar, azimuth) for m in range(-l, l + 1)])  # [2l+1, 12]
        power = (np.abs(s @ y.conj().T) ** 2).sum(1)
        assert np.allclose(task.row_extras["spectrum"][rows, j].numpy(), power, atol=1e-9), l
    weights = torch.tensor(data.TWELVE_BIT_WEIGHTS, dtype=torch.float64)
    assert torch.allclose(task.row_extras["f"], task.row_extras["spectrum"] @ weights)


def test_twelve_bit_f_is_invariant_under_the_icosahedral_group(task):
    v = task.extras["vertices"].numpy()
    x = task.images.numpy()
    f = task.row_extras["f"].numpy()
    adjacent = [j for j in range(12) if np.isclose(v[0] @ v[j], 1 / np.sqrt(5))]
    face = next((a, b) for a, b in itertools.combinations(adjacent, 2) if np.isclose(v[a] @ v[b], 1 / np.sqrt(5)))
    generators = [_vertex_permutation(v, _rotation(v[0], 2 * np.pi / 5)),                       # 72° about a vertex
                  _vertex_permutation(v, _rotation(v[0] + v[face[0]] + v[face[1]], 2 * np.pi / 3)),  # 120° about a face
                  _vertex_permutation(v, -np.eye(3))]                                            # the inversion
    # They generate the full symmetry group of the icosahedron (120 vertex permutations).
    group, frontier = {tuple(range(12))}, [np.arange(12)]
    while frontier:
        nxt = []
        for g in frontier:
            for h in generators:
                gh = h[g]
                if tuple(gh) not in group:
                    group.add(tuple(gh))
                    nxt.append(gh)
        frontier = nxt
    assert len(group) == 120
    for pi in generators:
        assert np.allclose(f[_permuted_rows(x, pi)], f, atol=1e-9)
    assert np.allclose(f[4095 - np.arange(4096)], f, atol=1e-9)  # flipping every bit
    # The check has teeth: swapping two bits on non-opposite vertices is no symmetry.
    swap = np.arange(12)
    swap[[0, adjacent[0]]] = swap[[adjacent[0], 0]]
    assert not np.allclose(f[_permuted_rows(x, swap)], f, atol=1e-6)


def test_twelve_bit_labels_are_balanced_with_about_0_99_bits(task):
    p = task.row_extras["p_y1"].numpy()
    assert abs(p.mean() - 0.5) < 0.02 and abs(float(task.labels.double().mean()) - 0.5) < 0.02
    assert np.allclose(p, 1 / (1 + np.exp(-task.extras["gamma"] * (task.row_extras["f"].numpy() - task.extras["theta"]))))

    def h(q):
        q = np.clip(q, 1e-300, 1 - 1e-16)
        return -(q * np.log2(q) + (1 - q) * np.log2(1 - q))

    information = h(p.mean()) - h(p).mean()
    assert abs(information - 0.99) < 0.002 and information == pytest.approx(task.extras["mutual_information_bits"], abs=1e-9)
    assert (task.labels == torch.from_numpy(p > 0.5).long()).double().mean() > 0.99  # almost deterministic
    # The patterns split 2048/2048 at the threshold.
    assert int((task.row_extras["f"] > task.extras["theta"]).sum()) == 2048
    soft = data.twelve_bit_task(gamma=1.0)
    assert soft.extras["gamma"] == 1.0 and abs(float(soft.row_extras["p_y1"].mean()) - 0.5) < 1e-6
    assert soft.extras["mutual_information_bits"] < 0.9


def test_twelve_bit_labels_are_deterministic_by_seed(task):
    again = data.twelve_bit_task(seed=0)
    assert torch.equal(again.labels, task.labels)
    assert again.extras["theta"] == task.extras["theta"] and again.extras["gamma"] == task.extras["gamma"]
    other = data.twelve_bit_task(seed=1)
    assert torch.equal(other.row_extras["p_y1"], task.row_extras["p_y1"]) and not torch.equal(other.labels, task.labels)
    assert torch.equal(data.swapped_labels(task.labels), 1 - task.labels)
    assert task.num_classes == 2 and task.input_shape == (12,) and task.name == "twelve_bit"


def test_twelve_bit_split_is_3277_819():
    train, test = data.twelve_bit_split(seed=0)
    assert train.shape == (3277,) and test.shape == (819,)
    assert torch.equal(torch.cat([train, test]).sort().values, torch.arange(4096))
    again, _ = data.twelve_bit_split(seed=0)
    other, _ = data.twelve_bit_split(seed=1)
    assert torch.equal(again, train) and not torch.equal(other, train)


@pytest.mark.parametrize("call, argument", [
    (lambda: data.twelve_bit_task(gamma=0.0), "gamma"),
    (lambda: data.twelve_bit_task(gamma="big"), "gamma"),
    (lambda: data.twelve_bit_task(seed=-2), "seed"),
    (lambda: data.twelve_bit_split(seed=-1), "seed"),
    (lambda: data.swapped_labels(torch.tensor([0, 2])), "labels"),
])
def test_twelve_bit_errors_name_the_argument(call, argument):
    with pytest.raises((vt.ArgumentError, vt.ArgumentTypeError)) as e:
        call()
    assert e.value.argument == argument


# ---------------------------------------------------------------------------------- texture shapes
STYLES = data.TEXTURE_SHAPES_STYLES


@pytest.mark.parametrize("style", STYLES)
def test_texture_shapes_shapes_classes_and_determinism(style):
    full = data.texture_shapes(range(40), seed=5, style=style)
    masks = full.row_extras["masks"]
    assert full.images.shape == (40, 3, 32, 32) and full.images.dtype == torch.uint8
    assert masks.shape == (40, 32, 32) and masks.dtype == torch.uint8
    assert full.factors.shape == (40, 3) and full.factors.dtype == torch.int64
    assert torch.equal(full.factors[:, 0], torch.arange(40) % 10)
    assert full.extras == {"style": style, "seed": 5}
    pick = [33, 2, 17, 2, 59_999]
    part = data.texture_shapes(pick, seed=5, style=style)
    assert torch.equal(part.images[:4], full.images[pick[:4]])
    assert torch.equal(part.row_extras["masks"][:4], masks[pick[:4]])
    assert int(part.factors[4, 0]) == 9
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = data.texture_shapes(range(40), seed=5, style=style)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(single.images, full.images) and torch.equal(single.row_extras["masks"], masks)
    other = data.texture_shapes(range(40), seed=6, style=style)
    assert not torch.equal(other.images, full.images) and not torch.equal(other.row_extras["masks"], masks)
    labels_only = data.texture_shapes(range(40), seed=5, style=style, images=False)
    assert labels_only.images is None and "masks" not in labels_only.row_extras
    assert torch.equal(labels_only.factors, full.factors)
    ds = data.as_dataset(full, label="label")
    assert ds.num_classes == 10 and ds.input_shape == (3, 32, 32) and ds.scale == pytest.approx(1 / 255)


def test_texture_shapes_registry_and_count():
    assert data.TEXTURE_SHAPES_COUNT == 60_000
    for name, style in [("texture_shapes", "textured"), ("texture_shapes_filled", "filled"),
                        ("texture_shapes_edges", "edges")]:
        d = data.load(name, indices=[0, 1])
        assert d.extras["style"] == style and d.name == name == data.TEXTURE_SHAPES_NAMES[style]
    assert len(data.load("texture_shapes", images=False)) == 60_000


def test_texture_kinds_are_independent_of_the_class():
    f = data.texture_shapes(range(4000), images=False).factors
    assert (f[:, 1] != f[:, 2]).all()  # the background is another kind
    for label in range(10):
        counts = torch.bincount(f[f[:, 0] == label, 1], minlength=4)
        assert counts.min() > 60, (label, counts)  # 100 expected per (class, kind)
    assert torch.bincount(f[:, 2], minlength=4).min() > 800


def _flat_colours(img, mask):
    """(background, shape colour) float [3] of a flat-style image: its pixels outside/inside the mask."""
    outside, inside = mask == 0, mask == 255
    bg, fg = img[:, outside].double().median(1).values, img[:, inside].double().median(1).values
    # Flat colours (to 1 level: a mask of 0 or 255 is coverage rounded to 1/255).
    assert (img[:, outside] - bg[:, None]).abs().max() <= 1 and (img[:, inside] - fg[:, None]).abs().max() <= 1
    return bg, fg


def test_texture_shapes_share_the_pose_across_styles():
    rows = range(200, 400)
    styled = {s: data.texture_shapes(rows, seed=2, style=s) for s in STYLES}
    masks = styled["filled"].row_extras["masks"]
    for s in STYLES:
        assert torch.equal(styled[s].row_extras["masks"], masks)
        assert torch.equal(styled[s].factors, styled["filled"].factors)
    assert (masks == 255).flatten(1).sum(1).min() > 20 and (masks == 0).flatten(1).sum(1).min() > 300
    m = masks.double() / 255
    pool = torch.nn.functional.max_pool2d
    # Within 2 px of both a pixel the shape touches and one it does not cover: the boundary band.
    band = (pool((masks > 0).double().unsqueeze(1), 5, 1, 2) > 0) & (pool((masks < 255).double().unsqueeze(1), 5, 1, 2) > 0)
    band = band.squeeze(1)
    for i in range(len(rows)):
        filled, edges = styled["filled"].images[i], styled["edges"].images[i]
        bg, fg = _flat_colours(filled, masks[i])
        # filled: the silhouette blended with its coverage.
        expected = bg[:, None, None] + m[i] * (fg - bg)[:, None, None]
        assert (filled.double() - expected).abs().max() <= 1.5
        # edges: the same colours; ink only near the silhouette's boundary, and on it.
        d = fg - bg
        ink = ((edges.double() - bg[:, None, None]) * d[:, None, None]).sum(0) / (d @ d)
        assert float(ink.min()) > -0.02 and float(ink.max()) > 0.9
        assert float(ink[~band[i]].abs().max()) < 0.02, i
        partial = (m[i] > 0.25) & (m[i] < 0.75)
        assert float(ink[partial].min()) > 0.25, i
    # textured: the shape's texture differs from the background inside the same silhouette.
    tex = styled["textured"].images.double() / 255
    inside, outside = (masks == 255).unsqueeze(1), (masks == 0).unsqueeze(1)
    mean_in = (tex * inside).sum((2, 3)) / inside.sum((2, 3))
    mean_out = (tex * outside).sum((2, 3)) / outside.sum((2, 3))
    assert ((mean_in - mean_out).norm(dim=1) > 0.1).double().mean() > 0.9
    std_in = torch.stack([tex[i][:, inside[i, 0]].std(1).mean() for i in range(len(rows))])
    assert (std_in > 0.02).double().mean() > 0.8  # textured, not flat


def test_texture_shapes_style_errors():
    with pytest.raises(vt.ArgumentError) as e:
        data.texture_shapes([0], style="cartoon")
    assert e.value.argument == "style"
    with pytest.raises(vt.ArgumentTypeError) as e:
        data.texture_shapes([0], style=1)
    assert e.value.argument == "style"
    with pytest.raises(vt.ArgumentError, match="style"):
        _C.data.texture_shapes(torch.tensor([0]), 0, "cartoon", True)
    with pytest.raises(vt.ArgumentError, match="indices"):
        data.texture_shapes([60_000])
    with pytest.raises(vt.ArgumentError, match="seed"):
        data.texture_shapes([0], seed=-1)


# Recorded with the object_shapes of commit 534b405, before its shape code moved to
# shape_classes.cpp for texture_shapes: sha256 of the images' then the factors' bytes.
OBJECT_SHAPES_HASHES = [
    (0, range(0, 200), "86bdd2d00edd39ea2342343d0b834746705f91541edd55d8e0367aae9a051a86"),
    (7, [5, 59999, 12345, 31, 40000], "9f0661ed0ce4e7c1a041d0ad00525b8a7fda37e0f581ba2a157a588a3a590529"),
    (3, range(0, 60000, 30), "838e2e3a11ca585c59d869379d0bd4c0eaae37ddbdd29c363131fe95ebe693cc"),
]


@pytest.mark.parametrize("seed, rows, digest", OBJECT_SHAPES_HASHES)
def test_object_shapes_are_unchanged_by_the_shared_shape_code(seed, rows, digest):
    d = data.object_shapes(rows, seed=seed)
    got = hashlib.sha256(d.images.numpy().tobytes() + d.factors.numpy().tobytes()).hexdigest()
    assert got == digest
