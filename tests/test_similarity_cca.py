"""The CCA family registered in the core: ``cca`` (mean squared canonical correlation, Kornblith et
al. 2019), ``svcca`` (Raghu et al. 2017) and ``pwcca`` (Morcos et al. 2018), through the public
heatmap API, against the plain NumPy references of ``tests/reference_similarity_cca.py``."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch

from vaetransfer import similarity as sim
from vaetransfer._C import ArgumentError

import reference_similarity_cca as ref

MEASURES = ("cca", "svcca", "pwcca")
REFERENCE = {"cca": ref.cca, "svcca": ref.svcca, "pwcca": ref.pwcca}


def heatmap(acts_a, acts_b, measure, **params) -> np.ndarray:
    t = lambda acts: OrderedDict((k, v if isinstance(v, torch.Tensor) else torch.from_numpy(v)) for k, v in acts.items())
    return sim.similarity_matrix(t(acts_a), t(acts_b), measure, progress=False, **params).values.numpy()


def pair(x, y, measure, **params) -> float:
    return float(heatmap({"x": x}, {"y": y}, measure, **params)[0, 0])


def related(seed: int, n: int, widths, latent: int = 6, noise: float = 0.7) -> OrderedDict:
    """Layers sharing a latent signal, with neurons of very different scales and private noise, so that
    canonical correlations are spread out and PWCCA's weights are far from uniform."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, latent))
    out = OrderedDict()
    for i, p in enumerate(widths):
        scales = np.exp(rng.uniform(-2.0, 2.0, p))
        out[f"l{i}"] = (z @ rng.standard_normal((latent, p)) + noise * rng.standard_normal((n, p))) * scales + 5.0
    return out


def low_rank(seed: int, n: int, p: int, rank: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, rank)) @ rng.standard_normal((rank, p))


def orthogonal(seed: int, p: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((p, p)))
    return q * np.sign(np.diag(r))


def test_registered_with_their_parameters():
    entries = {e["name"]: e for e in sim.registered()}
    defaults = {name: {p["name"]: p["default"] for p in entries[name]["params"]} for name in MEASURES}
    assert defaults == {"cca": {"max_rank_fraction": 0.1}, "pwcca": {"max_rank_fraction": 0.1},
                        "svcca": {"keep": 0.99, "dims": 0, "max_rank_fraction": 0.1}}
    assert all(entries[name]["family"] == "factor" for name in MEASURES)


@pytest.mark.parametrize("measure", MEASURES)
def test_heatmap_equals_the_numpy_reference_on_random_data(measure):
    # n = 400: the cap keeps 40 directions, so the 64-wide layer is cut and the others are not.
    a = related(0, 400, (3, 12, 30, 64))
    b = related(1, 400, (5, 20))
    b["shared"] = a["l1"][:, :7] @ np.random.default_rng(2).standard_normal((7, 9))  # partly the same signal
    got = heatmap(a, b, measure)
    want = np.array([[REFERENCE[measure](x, y) for y in b.values()] for x in a.values()])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)
    assert np.ptp(want) > 0.3  # the entries differ: a wrong pairing or orientation would show


@pytest.mark.parametrize("measure", MEASURES)
def test_rank_deficient_and_wide_layers_equal_the_reference(measure):
    n = 50
    a = OrderedDict(low=low_rank(3, n, 20, 4),                            # rank 4 of 20 columns
                    wide_low=low_rank(4, n, 80, 3),                       # p > n (Gram path), rank 3
                    wide=np.random.default_rng(5).standard_normal((n, 80)))  # p > n, full rank n − 1
    b = OrderedDict(low=low_rank(6, n, 15, 4) + a["low"][:, :15] * 0.5, narrow=related(7, n, (3,))["l0"])
    got = heatmap(a, b, measure)
    want = np.array([[REFERENCE[measure](x, y) for y in b.values()] for x in a.values()])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)
    # max_rank_fraction = 1: the rank cut alone (the wide full-rank layer then keeps n − 1 directions).
    got = heatmap(a, b, measure, max_rank_fraction=1.0)
    want = np.array([[REFERENCE[measure](x, y, max_rank_fraction=1.0) for y in b.values()] for x in a.values()])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)


@pytest.mark.parametrize("measure", MEASURES)
def test_float32_activations_are_fitted_in_float64(measure):
    a = {k: v.astype(np.float32) for k, v in related(8, 300, (6, 15)).items()}
    b = {k: v.astype(np.float32) for k, v in related(9, 300, (10,)).items()}
    got = heatmap(a, b, measure)
    want = np.array([[REFERENCE[measure](x.astype(np.float64), y.astype(np.float64)) for y in b.values()]
                     for x in a.values()])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)


def test_one_dimensional_layers_have_closed_forms():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((50, 1))
    y = 0.6 * x + rng.standard_normal((50, 1))
    r = np.corrcoef(x[:, 0], y[:, 0])[0, 1]
    assert pair(x, y, "cca") == pytest.approx(r ** 2, abs=1e-12)
    assert pair(x, y, "svcca") == pytest.approx(abs(r), abs=1e-12)
    assert pair(x, y, "pwcca") == pytest.approx(abs(r), abs=1e-12)


@pytest.mark.parametrize("measure", MEASURES)
def test_identical_layers_score_one(measure):
    a = related(11, 200, (3, 10))
    copies = OrderedDict((k, v.copy()) for k, v in a.items())  # other objects: scored, not short-cut
    got = heatmap(a, copies, measure)
    np.testing.assert_allclose(np.diag(got), 1.0, atol=1e-10)
    assert got[0, 1] < 0.99


def test_invariances_of_cca():
    a = related(12, 300, (8, 12))
    x, y = a["l0"], a["l1"]
    base = pair(x, y, "cca")
    m = np.random.default_rng(13).standard_normal((8, 8)) + 3 * np.eye(8)  # invertible, not orthogonal
    n = np.random.default_rng(14).standard_normal((12, 12)) + 3 * np.eye(12)
    for xt, yt in ((x @ m, y), (x, y @ n), (x @ m - 4.0, y @ n * 0.01), (x @ orthogonal(15, 8), y),
                   (7.5 * x, y), (x + 100.0, y - 3.0)):
        assert pair(xt, yt, "cca") == pytest.approx(base, abs=1e-9)


def test_invariances_of_svcca():
    a = related(16, 300, (8, 12))
    x, y = a["l0"], a["l1"]
    base = pair(x, y, "svcca")
    for xt, yt in ((x @ orthogonal(17, 8), y), (x, y @ orthogonal(18, 12)), (7.5 * x, 0.1 * y), (x + 100.0, y - 3.0)):
        assert pair(xt, yt, "svcca") == pytest.approx(base, abs=1e-9)
    # Any invertible linear map when nothing is cut (keep = 1); not otherwise: step 1 sees the variances.
    m = np.diag(np.exp(np.linspace(-3, 3, 8))) @ (np.random.default_rng(19).standard_normal((8, 8)) + 3 * np.eye(8))
    assert pair(x @ m, y, "svcca", keep=1.0) == pytest.approx(pair(x, y, "svcca", keep=1.0), abs=1e-9)
    assert abs(pair(x @ m, y, "svcca") - base) > 1e-3


def test_invariances_of_pwcca():
    a = related(20, 300, (8, 12))
    x, y = a["l0"], a["l1"]
    base = pair(x, y, "pwcca")
    n = np.random.default_rng(21).standard_normal((12, 12)) + 3 * np.eye(12)
    perm = np.random.default_rng(22).permutation(8)
    signs = np.where(np.arange(8) % 3 == 0, -1.0, 1.0)
    for xt, yt in ((x, y @ n), (x[:, perm], y), (x * signs, y), (7.5 * x, y), (x + 100.0, y - 3.0)):
        assert pair(xt, yt, "pwcca") == pytest.approx(base, abs=1e-9)
    # The weights sum |⟨h_i, x_j⟩| over the first layer's neurons: a rotation of that layer changes them.
    assert abs(pair(x @ orthogonal(23, 8), y, "pwcca") - base) > 1e-4


def test_svcca_keeps_the_directions_explaining_99_percent_of_the_variance():
    # X = U diag(s) Vᵀ with a known spectrum; Y_j = u_j, one direction each. SVCCA(X, Y_j) is 1 when
    # u_j is among X's kept directions and 0 otherwise, so the row counts X's kept directions.
    n, p = 400, 30
    rng = np.random.default_rng(24)
    g = rng.standard_normal((n, p))
    u, _ = np.linalg.qr(g - g.mean(0))  # orthonormal, centred columns
    s = 0.8 ** np.arange(p)
    x = (u * s) @ orthogonal(25, p).T
    directions = OrderedDict((f"u{j}", u[:, j:j + 1]) for j in range(p))
    k = ref.svcca_kept_dims(s, 0.99)
    assert k == 11
    assert k != 1  # a cumulative fraction compared the wrong way keeps one component
    assert k != int(np.flatnonzero(np.cumsum(s) >= 0.99 * s.sum())[0] + 1)  # variance ≠ sum of singular values
    row = heatmap({"x": x}, directions, "svcca")[0]
    np.testing.assert_allclose(row, np.r_[np.ones(k), np.zeros(p - k)], atol=1e-8)
    row = heatmap({"x": x}, directions, "svcca", keep=0.5)[0]
    assert int((row > 0.5).sum()) == ref.svcca_kept_dims(s, 0.5) == 2
    row = heatmap({"x": x}, directions, "svcca", dims=5)[0]
    np.testing.assert_allclose(row, np.r_[np.ones(5), np.zeros(p - 5)], atol=1e-8)


def test_pwcca_weights_come_from_the_canonical_variates():
    a = related(26, 300, (10, 14), latent=5, noise=1.0)
    x, y = a["l0"], a["l1"]
    alpha, rho = ref.pwcca_weights(x, y)
    got = pair(x, y, "pwcca")
    assert got == pytest.approx(float(alpha @ rho), abs=1e-10)
    # Other weightings are far off on these data: uniform (the plain mean ρ) and weights from the
    # orthonormalised CCA coefficient vectors instead of the variates.
    assert abs(got - rho.mean()) > 1e-2
    xc, s, v = ref.principal(x)
    _, zy, _ = ref._reduced(y, None, 0.1)
    zx = xc @ v
    wx = ref._inv_sqrt(zx.T @ zx)
    a_svd, _, _ = np.linalg.svd(wx @ zx.T @ zy @ ref._inv_sqrt(zy.T @ zy), full_matrices=False)
    q, _ = np.linalg.qr(v @ wx @ a_svd)  # coefficient vectors in neuron space, orthonormalised
    h = xc @ q
    w = np.abs((h / np.linalg.norm(h, axis=0)).T @ xc).sum(1)
    assert abs(got - float(w @ rho / w.sum())) > 1e-3


def test_pwcca_is_weighted_by_the_first_argument_in_every_heatmap_entry():
    a = related(27, 300, (6, 16))
    b = related(28, 300, (12, 4))
    b["l0"] = b["l0"] + a["l1"][:, :12]
    ab = heatmap(a, b, "pwcca")
    ba = heatmap(b, a, "pwcca")
    forward = np.array([[ref.pwcca(x, y) for y in b.values()] for x in a.values()])
    backward = np.array([[ref.pwcca(y, x) for y in b.values()] for x in a.values()])
    np.testing.assert_allclose(ab, forward, atol=1e-8)         # [k, l] = PWCCA(A_k, B_l)
    np.testing.assert_allclose(ba, backward.T, atol=1e-8)      # [l, k] = PWCCA(B_l, A_k)
    assert np.abs(forward - backward).max() > 1e-2             # the two orientations differ
    # A model against itself: the same fitted layers on both sides, still ordered pairs.
    both = OrderedDict(list(a.items()) + [("m", b["l0"])])
    self_map = heatmap(both, both, "pwcca")
    names = list(both)
    want = np.array([[1.0 if i == j else ref.pwcca(both[i], both[j]) for j in names] for i in names])
    np.testing.assert_allclose(self_map, want, atol=1e-8)
    assert np.abs(self_map - self_map.T).max() > 1e-2
    # One pair: sim.similarity(X, Y) weights by X.
    x = torch.from_numpy(a["l0"])
    y = torch.from_numpy(b["l0"])
    assert sim.similarity(x, y, "pwcca") == pytest.approx(forward[0, 0], abs=1e-8)


@pytest.mark.parametrize("measure", MEASURES)
def test_independent_layers_with_more_features_than_examples_do_not_score_one(measure):
    n = 60
    rng = np.random.default_rng(29)
    a = OrderedDict(square=rng.standard_normal((n, n)), wide=rng.standard_normal((n, 100)))
    b = OrderedDict(wide=rng.standard_normal((n, 150)))
    got = heatmap(a, b, measure)
    assert (got < 0.5).all(), got
    np.testing.assert_allclose(got[:, 0], [REFERENCE[measure](x, b["wide"]) for x in a.values()], atol=1e-8)
    # Without the cap (the plain definition) every such pair has the same column space: CCA and PWCCA
    # score 1, SVCCA nearly so (it drops the directions beyond 99 % of the variance).
    uncapped = heatmap(a, b, measure, max_rank_fraction=1.0)
    assert (uncapped > 0.9).all()
    if measure != "svcca":
        np.testing.assert_allclose(uncapped, 1.0, atol=1e-8)


@pytest.mark.parametrize("measure", MEASURES)
def test_constant_columns_change_nothing(measure):
    a = related(30, 200, (6, 9))
    x, y = a["l0"], a["l1"]
    padded = np.concatenate([x[:, :3], np.full((200, 2), 3.5), x[:, 3:], np.zeros((200, 1))], axis=1)
    assert pair(padded, y, measure) == pytest.approx(pair(x, y, measure), abs=1e-10)
    assert pair(y, padded, measure) == pytest.approx(pair(y, x, measure), abs=1e-10)
    if measure == "cca":  # a duplicated (dependent) column leaves the column space as it is
        dup = np.concatenate([x, 2.0 * x[:, :1]], axis=1)
        assert pair(dup, y, measure) == pytest.approx(pair(x, y, measure), abs=1e-10)


@pytest.mark.parametrize("measure", MEASURES)
def test_tiny_n(measure):
    rng = np.random.default_rng(31)
    with pytest.raises(ArgumentError, match="at least 3 examples"):
        pair(rng.standard_normal((2, 3)), rng.standard_normal((2, 4)), measure)
    a = OrderedDict(a=rng.standard_normal((3, 3)), b=rng.standard_normal((3, 1)))
    c = rng.standard_normal((3, 5))
    got = heatmap(a, {"c": c}, measure)[:, 0]
    assert np.isfinite(got).all() and (got >= 0).all() and (got <= 1).all()
    np.testing.assert_allclose(got, [REFERENCE[measure](x, c) for x in a.values()], atol=1e-8)


@pytest.mark.parametrize("measure", MEASURES)
def test_constant_layer(measure):
    a = related(32, 100, (4, 7))
    a["dead"] = np.full((100, 5), 2.0)
    b = related(33, 100, (6,))
    with pytest.raises(ArgumentError, match="constant"):
        heatmap(a, b, measure)
    t = lambda acts: OrderedDict((k, torch.from_numpy(v)) for k, v in acts.items())
    got = sim.similarity_matrix(t(a), t(b), measure, constant="zero", progress=False).values.numpy()
    assert got[2, 0] == 0.0
    np.testing.assert_allclose(got[:2, 0], [REFERENCE[measure](a["l0"], b["l0"]),
                                            REFERENCE[measure](a["l1"], b["l0"])], atol=1e-8)


@pytest.mark.parametrize("measure, params, name", [
    ("cca", {"max_rank_fraction": 0.0}, "max_rank_fraction"),
    ("pwcca", {"max_rank_fraction": 1.5}, "max_rank_fraction"),
    ("svcca", {"keep": 0.0}, "keep"),
    ("svcca", {"keep": 1.01}, "keep"),
    ("svcca", {"dims": -1}, "dims"),
    ("cca", {"keep": 0.9}, "keep"),  # not a parameter of cca
])
def test_bad_parameters_are_named(measure, params, name):
    a = related(34, 50, (3,))
    with pytest.raises(ArgumentError, match=name):
        heatmap(a, a, measure, **params)


@pytest.mark.parametrize("measure", MEASURES)
def test_deterministic(measure):
    a, b = related(35, 150, (5, 40)), related(36, 150, (8,))
    assert np.array_equal(heatmap(a, b, measure), heatmap(a, b, measure))
