"""Uncertainty of similarity values: bootstrap / jackknife intervals, permutation nulls, minibatch CKA.

Oracles: a population linear CKA known in closed form (coverage), NumPy definitions of CKA,
Procrustes and the unbiased HSIC written here (Song et al. 2012), brute-force leave-one-out and
resampled recomputation, and the generic path (the engine re-run on resampled rows).
"""
from collections import OrderedDict
from statistics import NormalDist

import numpy as np
import pytest
import torch

import vaetransfer
from vaetransfer import similarity as sim


def np_cka(x, y):
    x = x - x.mean(0)
    y = y - y.mean(0)
    return np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))


def np_procrustes(x, y):
    x = x - x.mean(0)
    y = y - y.mean(0)
    return np.linalg.svd((y / np.linalg.norm(y)).T @ (x / np.linalg.norm(x)), compute_uv=False).sum()


def np_hsic1(x, y):
    """Song et al. (2012) Eq. 5: the unbiased HSIC of linear kernels."""
    n = x.shape[0]
    k, l = x @ x.T, y @ y.T
    np.fill_diagonal(k, 0.0)
    np.fill_diagonal(l, 0.0)
    one = np.ones(n)
    return (np.trace(k @ l) + (one @ k @ one) * (one @ l @ one) / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * one @ k @ l @ one) / (n * (n - 3))


def np_bca(theta, reps, jack, ci):
    """Efron & Tibshirani (1993) Eqs. 14.9-14.15, entry by entry, with NumPy/statistics only."""
    nd = NormalDist()
    low, high = np.empty_like(theta), np.empty_like(theta)
    for idx in np.ndindex(theta.shape):
        t, r, j = theta[idx], reps[(slice(None),) + idx], jack[(slice(None),) + idx]
        R = len(r)
        frac = (np.sum(r < t - 1e-12 * max(1, abs(t))) + 0.5 * np.sum(np.abs(r - t) <= 1e-12 * max(1, abs(t)))) / R
        z0 = nd.inv_cdf(min(max(frac, 0.5 / R), 1 - 0.5 / R))
        d = j.mean() - j
        a = (d ** 3).sum() / (6 * ((d ** 2).sum()) ** 1.5) if (d ** 2).sum() > 0 else 0.0
        lo_hi = []
        for alpha in ((1 - ci) / 2, (1 + ci) / 2):
            za = nd.inv_cdf(alpha)
            lo_hi.append(np.quantile(r, nd.cdf(z0 + (z0 + za) / (1 - a * (z0 + za)))))
        low[idx], high[idx] = lo_hi
    return low, high


def np_minibatch_cka(groups):
    """Nguyen et al. (2021): means over batches of HSIC₁, then the CKA ratio."""
    xy = np.mean([np_hsic1(x, y) for x, y in groups])
    xx = np.mean([np_hsic1(x, x) for x, _ in groups])
    yy = np.mean([np_hsic1(y, y) for _, y in groups])
    return xy / np.sqrt(xx * yy)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # Hundreds of small replicate products: on a shared 2-core machine, intra-op threads only
    # contend (several times slower); one thread keeps this file fast.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def gauss(n, p, g):
    return torch.randn(n, p, generator=g, dtype=torch.float64)


@pytest.fixture(scope="module")
def layers():
    g = torch.Generator().manual_seed(0)
    x = gauss(40, 5, g)
    a = OrderedDict(a1=x, a2=gauss(40, 30, g) @ gauss(30, 60, g), a3=x @ gauss(5, 3, g))
    b = OrderedDict(b1=x + 0.5 * gauss(40, 5, g), b2=gauss(40, 50, g), a1=x)  # a1: the same object on both sides
    return a, b


# ----------------------------------------------------------------------------- intervals
@pytest.mark.parametrize("measure,p", [("cka", 1), ("cka", 3), ("cka_debiased", 3)])
def test_interval_covers_the_population_value_at_about_its_nominal_rate(measure, p):
    # X ~ N(0, I_p), Y = X + E with E ~ N(0, I_p): Σ_xy = I, Σ_yy = 2I, so the population linear
    # CKA is ‖I‖²/(‖I‖ ‖2I‖) = 1/2. 100 independent data sets are 100 layer pairs of one call
    # (the diagonal); each entry's interval comes from its own replicate values.
    g = torch.Generator().manual_seed(p)
    a, b = OrderedDict(), OrderedDict()
    for r in range(100):
        x = gauss(60, p, g)
        a[f"x{r}"], b[f"y{r}"] = x, x + gauss(60, p, g)
    for resampling, resamples in (("bootstrap", 200), ("jackknife", 60)):
        m = sim.similarity_matrix(a, b, measure, ci=0.9, resamples=resamples, resampling=resampling, seed=p)
        covered = ((m.ci_low.diagonal() <= 0.5) & (0.5 <= m.ci_high.diagonal())).double().mean().item()
        assert 0.8 <= covered <= 1.0, (resampling, covered)
        assert (m.ci_low <= m.values + 1e-12).all() and (m.values <= m.ci_high + 1e-12).all() or resampling == "bootstrap"
    # Intervals narrow as n grows (the interval is about sampling error).
    small = sim.similarity_matrix({"x": a["x0"][:30]}, {"y": b["y0"][:30]}, measure, ci=0.9, seed=0)
    x = gauss(600, p, g)
    large = sim.similarity_matrix({"x": x}, {"y": x + gauss(600, p, g)}, measure, ci=0.9, seed=0)
    assert (large.ci_high - large.ci_low).item() < 0.6 * (small.ci_high - small.ci_low).item()


@pytest.mark.parametrize("measure", ["cka", "cka_debiased"])
@pytest.mark.parametrize("cka_form", ["auto", "feature", "gram"])
def test_bootstrap_fast_path_equals_recomputation_on_resampled_rows(layers, measure, cka_form):
    a, b = layers
    fast = sim.similarity_matrix(a, b, measure, ci=0.9, resamples=12, seed=3, cka_form=cka_form,
                                 resampling="bootstrap")
    slow = sim.similarity_matrix(a, b, measure, ci=0.9, resamples=12, seed=3, fast=False, resampling="bootstrap")
    assert fast.replicates.shape == (12, 3, 3)
    torch.testing.assert_close(fast.replicates, slow.replicates, rtol=0, atol=1e-12)
    torch.testing.assert_close(fast.ci_low, slow.ci_low, rtol=0, atol=1e-12)
    assert (fast.replicates[:, 0, 2] == 1.0).all()  # a1 against itself: exactly 1 in every replicate
    # The BCa interval from these replicates and the documented 50-block jackknife (seed + 1),
    # recomputed by the NumPy transcription of Efron & Tibshirani's Eqs. 14.9-14.15.
    jack = sim.similarity_matrix(a, b, measure, ci=0.9, resamples=50, seed=4, resampling="jackknife")
    low, high = np_bca(fast.values.numpy(), fast.replicates.numpy(), jack.replicates.numpy(), 0.9)
    np.testing.assert_allclose(fast.ci_low.numpy(), low, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.ci_high.numpy(), high, rtol=0, atol=1e-12)
    # Replicates are genuine resamples: they vary, and a NumPy CKA of some resampled rows is among them.
    assert fast.replicates[:, 0, 0].std() > 1e-3
    rows = torch.randint(40, (12, 40), generator=torch.Generator().manual_seed(3))  # the documented draw
    if measure == "cka":
        x, y = a["a1"].numpy(), b["b1"].numpy()
        want = [np_cka(x[r], y[r]) for r in rows.numpy()]
        np.testing.assert_allclose(fast.replicates[:, 0, 0].numpy(), want, rtol=0, atol=1e-12)


def test_seed_fixes_the_draws(layers):
    a, b = layers
    one = sim.similarity_matrix(a, b, ci=0.95, resamples=20, seed=5)
    two = sim.similarity_matrix(a, b, ci=0.95, resamples=20, seed=5)
    other = sim.similarity_matrix(a, b, ci=0.95, resamples=20, seed=6)
    assert torch.equal(one.replicates, two.replicates)
    assert not torch.equal(one.replicates, other.replicates)
    plain = sim.similarity_matrix(a, b)
    assert plain.ci_low is None and plain.null_mean is None and plain.calibrated is None
    torch.testing.assert_close(one.values, plain.values, rtol=0, atol=0)


@pytest.mark.parametrize("measure,oracle", [("cka", np_cka), ("procrustes", np_procrustes)])
def test_jackknife_leave_one_out_against_brute_force(measure, oracle):
    g = torch.Generator().manual_seed(1)
    x = gauss(25, 4, g)
    y = x @ gauss(4, 6, g) + gauss(25, 6, g)
    m = sim.similarity_matrix({"x": x}, {"y": y}, measure, ci=0.9, resamples=25, resampling="jackknife",
                              progress=False)
    xn, yn = x.numpy(), y.numpy()
    loo = np.array([oracle(np.delete(xn, i, 0), np.delete(yn, i, 0)) for i in range(25)])
    np.testing.assert_allclose(np.sort(m.replicates[:, 0, 0].numpy()), np.sort(loo), rtol=0, atol=1e-10)
    se = np.sqrt(24 / 25 * ((loo - loo.mean()) ** 2).sum())
    z = NormalDist().inv_cdf(0.95)
    full = oracle(xn, yn)
    np.testing.assert_allclose([m.ci_low.item(), m.ci_high.item()], [full - z * se, full + z * se], atol=1e-10)
    assert m.resampling == "jackknife" and m.resamples == 25 and m.ci == 0.9


def test_delete_d_jackknife_blocks_partition_the_examples():
    g = torch.Generator().manual_seed(2)
    x = gauss(30, 3, g)
    y = x + gauss(30, 3, g)
    m = sim.similarity_matrix({"x": x}, {"y": y}, ci=0.9, resamples=7, resampling="jackknife", seed=4)
    assert m.resamples == 7
    # Brute force over every way the 7 blocks (sizes 4 or 5) could drop rows is too many; instead
    # each replicate must equal CKA of the data without some 4 or 5 rows: check via the generic path.
    slow = sim.similarity_matrix({"x": x}, {"y": y}, ci=0.9, resamples=7, resampling="jackknife", seed=4,
                                 fast=False)
    torch.testing.assert_close(m.replicates, slow.replicates, rtol=0, atol=1e-12)


def test_generic_path_with_procrustes_bootstrap(layers):
    a, b = layers
    m = sim.similarity_matrix(a, b, "procrustes", ci=0.8, resamples=6, seed=2, progress=False,
                              resampling="bootstrap")
    rows = torch.randint(40, (6, 40), generator=torch.Generator().manual_seed(2))
    x, y = a["a2"].numpy(), b["b1"].numpy()
    want = [np_procrustes(x[r], y[r]) for r in rows.numpy()]
    np.testing.assert_allclose(m.replicates[:, 1, 0].numpy(), want, rtol=0, atol=1e-9)
    assert (m.replicates[:, 0, 2] == 1.0).all()
    assert torch.isfinite(m.ci_low).all() and (m.ci_low <= m.ci_high).all()


def test_cka_avg_interval_is_that_of_the_seed_pair_average():
    g = torch.Generator().manual_seed(3)
    z = gauss(20, 3, g)
    models_a = [OrderedDict(h=z @ gauss(3, 5, g) + 0.3 * gauss(20, 5, g)) for _ in range(2)]
    models_b = [OrderedDict(h=z @ gauss(3, 4, g) + 0.3 * gauss(20, 4, g)) for _ in range(3)]
    m = sim.cka_avg(models_a, models_b, ci=0.9, resamples=20, resampling="jackknife")
    xs = [ma["h"].numpy() for ma in models_a]
    ys = [mb["h"].numpy() for mb in models_b]
    loo = [np.mean([np_cka(np.delete(x, i, 0), np.delete(y, i, 0)) for x in xs for y in ys]) for i in range(20)]
    np.testing.assert_allclose(np.sort(m.replicates[:, 0, 0].numpy()), np.sort(loo), atol=1e-12)
    # Same-seed pairs left out: the replicates average the kept pairs only.
    kept = sim.cka_avg(models_a, models_b, ci=0.9, resamples=20, resampling="jackknife", seeds_a=[0, 1],
                       seeds_b=[0, 5, 6])
    loo = [np.mean([np_cka(np.delete(xs[i_a], i, 0), np.delete(ys[i_b], i, 0))
                    for i_a, sa in enumerate([0, 1]) for i_b, sb in enumerate([0, 5, 6]) if sa != sb])
           for i in range(20)]
    np.testing.assert_allclose(np.sort(kept.replicates[:, 0, 0].numpy()), np.sort(loo), atol=1e-12)
    # similarity_matrices: per-pair intervals, (values, low, high).
    values, low, high = sim.similarity_matrices(models_a, models_b, ci=0.9, resamples=30, seed=1)
    assert low.shape == high.shape == values.shape == (2, 3, 1, 1)
    assert (low <= values + 0.2).all() and (low < high).all()


# ----------------------------------------------------------------------------- permutation null
def test_permutation_null_calibrates_width_inflation_of_linear_cka():
    g = torch.Generator().manual_seed(4)
    raw, calibrated = {}, {}
    for p in (8, 512):
        x, y = gauss(64, p, g), gauss(64, p, g)  # independent: population CKA 0
        m = sim.similarity_matrix({"x": x}, {"y": y}, null="permutation", permutations=50, seed=p)
        raw[p], calibrated[p] = m.values.item(), m.calibrated.item()
        assert m.null.shape == (50, 1, 1) and m.permutations == 50
        assert m.null_quantile.item() > 0.05  # no evidence of dependence
    assert raw[512] > raw[8] + 0.3  # raw linear CKA of unrelated wide layers is large...
    assert abs(calibrated[8]) < 0.05 and abs(calibrated[512]) < 0.05  # ...the calibrated value is not


def test_permutation_p_value_small_for_dependent_data_and_fast_path_matches_generic(layers):
    a, b = layers
    fast = sim.similarity_matrix(a, b, "cka", null="permutation", permutations=19, seed=7)
    slow = sim.similarity_matrix(a, b, "cka", null="permutation", permutations=19, seed=7, fast=False)
    torch.testing.assert_close(fast.null, slow.null, rtol=0, atol=1e-12)
    assert fast.null_quantile[0, 0].item() == pytest.approx(1 / 20)  # a1 vs b1: no permutation reaches it
    assert fast.null_quantile[0, 2].item() == pytest.approx(1 / 20)  # a1 vs its own permuted rows
    assert fast.null[:, 0, 2].max() < 0.9  # the shared layer is compared with its permuted copy, not 1
    # A NumPy check of one permutation: the documented draws (torch.randperm from the seed).
    perm = torch.randperm(40, generator=torch.Generator().manual_seed(7)).numpy()
    np.testing.assert_allclose(fast.null[0, 1, 0].item(), np_cka(a["a2"].numpy(), b["b1"].numpy()[perm]), atol=1e-12)
    torch.testing.assert_close(fast.calibrated, fast.values - fast.null.mean(dim=0))
    torch.testing.assert_close(fast.null_std, fast.null.std(dim=0))
    deb = sim.similarity_matrix(a, b, "cka_debiased", null="permutation", permutations=9, seed=1)
    deb_slow = sim.similarity_matrix(a, b, "cka_debiased", null="permutation", permutations=9, seed=1, fast=False)
    torch.testing.assert_close(deb.null, deb_slow.null, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- minibatch CKA
def _batches(x, y, sizes):
    out, i = [], 0
    for s in sizes:
        out.append(({"x": x[i:i + s]}, {"y": y[i:i + s]}))
        i += s
    return out


def test_minibatch_cka_one_batch_is_debiased_cka_and_many_batches_follow_nguyen():
    g = torch.Generator().manual_seed(5)
    x = gauss(120, 6, g)
    y = x @ gauss(6, 9, g) + gauss(120, 9, g)
    one = sim.minibatch_cka([{"x": x}], [{"y": y}])
    assert one.values.item() == pytest.approx(sim.cka(x, y, debiased=True), abs=1e-12)
    acc = sim.MinibatchCKA(["x"], ["y"])
    for ba, bb in _batches(x, y, [30, 30, 20, 40]):
        acc.update(ba, bb)
    want = np_minibatch_cka([(x[i:j].numpy(), y[i:j].numpy()) for i, j in ((0, 30), (30, 60), (60, 80), (80, 120))])
    assert acc.result().values.item() == pytest.approx(want, abs=1e-12)
    assert acc.batches == 4 and acc.examples == 120


def test_minibatch_cka_batches_of_one_to_three_are_carried_over():
    g = torch.Generator().manual_seed(6)
    x = gauss(23, 3, g)
    y = x + gauss(23, 4, g)[:, :3]
    sizes = [1, 2, 3, 5, 1, 1, 1, 1, 6, 2]  # groups: [1,2,3]=6, [5], [1,1,1,1]=4, [6] + remainder [2]
    acc = sim.MinibatchCKA(["x"], ["y"])
    for ba, bb in _batches(x, y, sizes):
        acc.update(ba, bb)
    bounds = [(0, 6), (6, 11), (11, 15), (15, 23)]
    want = np_minibatch_cka([(x[i:j].numpy(), y[i:j].numpy()) for i, j in bounds])
    assert acc.result().values.item() == pytest.approx(want, abs=1e-12)
    assert acc.batches == 4
    for size in (1, 2, 3):  # every batch of the same small size
        acc = sim.MinibatchCKA(["x"], ["y"])
        for ba, bb in _batches(x, y, [size] * (23 // size)):
            acc.update(ba, bb)
        assert np.isfinite(acc.result().values.item())
    tiny = sim.MinibatchCKA(["x"], ["y"])
    tiny.update({"x": x[:3]}, {"y": y[:3]})
    with pytest.raises(vaetransfer.ArgumentError, match="batches"):
        tiny.result()


def test_minibatch_cka_is_near_full_debiased_cka_and_shapes():
    g = torch.Generator().manual_seed(7)
    n = 2000
    x = gauss(n, 8, g)
    a = OrderedDict(x=x, w=gauss(n, 200, g))
    b = OrderedDict(y=x @ gauss(8, 12, g) + 2.0 * gauss(n, 12, g), x=x)
    acc = sim.MinibatchCKA(list(a), list(b))
    for i in range(0, n, 100):
        acc.update({k: v[i:i + 100] for k, v in a.items()}, {k: v[i:i + 100] for k, v in b.items()})
    m = acc.result()
    full = sim.similarity_matrix(a, b, "cka_debiased")
    assert m.values.shape == (2, 2) and m.rows == ["x", "w"] and m.cols == ["y", "x"] and m.n == n
    assert abs(m.values[0, 0] - full.values[0, 0]) < 0.03
    assert abs(m.values[1, 0]) < 0.03 and abs(m.values[0, 1] - 1.0) < 1e-9


def test_minibatch_cka_errors():
    acc = sim.MinibatchCKA(["x"], ["y"])
    with pytest.raises(vaetransfer.ArgumentError, match="acts_b"):
        acc.update({"x": torch.randn(5, 2)}, {"z": torch.randn(5, 2)})
    with pytest.raises(vaetransfer.ArgumentError, match="examples"):
        acc.update({"x": torch.randn(5, 2)}, {"y": torch.randn(4, 2)})
    acc.update({"x": torch.randn(5, 2)}, {"y": torch.randn(5, 2)})
    with pytest.raises(vaetransfer.ArgumentError, match="features"):
        acc.update({"x": torch.randn(5, 3)}, {"y": torch.randn(5, 2)})
    bad = torch.randn(5, 2)
    bad[0, 0] = float("nan")
    with pytest.raises(vaetransfer.ArgumentError):
        acc.update({"x": bad}, {"y": torch.randn(5, 2)})
    const = sim.MinibatchCKA(["x"], ["y"])
    const.update({"x": torch.ones(6, 2)}, {"y": torch.randn(6, 2)})
    with pytest.raises(vaetransfer.ArgumentError, match="constant"):
        const.result()
    assert const.result(constant="zero").values.item() == 0.0
    with pytest.raises(vaetransfer.ArgumentError, match="batches_a"):
        sim.minibatch_cka([{"x": torch.randn(5, 2)}], [{"y": torch.randn(5, 2)}] * 2)


# ----------------------------------------------------------------------------- named errors
@pytest.mark.parametrize("kwargs,arg", [
    (dict(ci=0.0), "ci"), (dict(ci=1.0), "ci"), (dict(ci=1.5), "ci"), (dict(ci=-0.1), "ci"),
    (dict(ci=0.9, resamples=1), "resamples"), (dict(ci=0.9, resampling="bca"), "resampling"),
    (dict(null="gaussian"), "null"), (dict(null="permutation", permutations=1), "permutations"),
    (dict(ci=0.9, seed=-1), "seed"),
])
def test_named_errors(layers, kwargs, arg):
    a, b = layers
    with pytest.raises(vaetransfer.ArgumentError, match=arg):
        sim.similarity_matrix(a, b, **kwargs)


def test_type_errors_and_too_small_jackknife(layers):
    a, b = layers
    with pytest.raises(vaetransfer.ArgumentTypeError, match="ci"):
        sim.similarity_matrix(a, b, ci=True)
    with pytest.raises(vaetransfer.ArgumentTypeError, match="fast"):
        sim.similarity_matrix(a, b, ci=0.9, fast="yes")
    x = torch.randn(5, 2, dtype=torch.float64)
    with pytest.raises(vaetransfer.ArgumentError, match="resamples"):  # 2 blocks of 5 leave 2 < 4 examples
        sim.similarity_matrix({"x": x}, {"y": x + 1}, "cka_debiased", ci=0.9, resamples=2, resampling="jackknife")
    with pytest.raises(vaetransfer.ArgumentError, match="constant"):
        sim.similarity_matrix({"x": x}, {"y": torch.ones(5, 2, dtype=torch.float64)}, ci=0.9)
    zero = sim.similarity_matrix({"x": x}, {"y": torch.ones(5, 2, dtype=torch.float64)}, ci=0.9, constant="zero",
                                 null="permutation", permutations=3)
    assert zero.ci_low.item() == zero.ci_high.item() == zero.null_mean.item() == 0.0


@pytest.mark.parametrize("resampling", ["jackknife", "bootstrap"])
def test_interval_of_a_summary_uses_the_same_rows_and_matches_brute_force(layers, resampling):
    a, b = layers
    m = sim.similarity_matrix(a, b, ci=0.9, resamples=40, resampling=resampling, seed=7)
    low, high = m.interval_of(lambda t: t)
    torch.testing.assert_close(low, m.ci_low, rtol=0, atol=1e-12)
    torch.testing.assert_close(high, m.ci_high, rtol=0, atol=1e-12)
    # The mean of two entries: its replicates are the mean of theirs (same rows), so the interval
    # is the textbook one on the mean's replicates.
    pick = lambda t: (t[..., 0, 0] + t[..., 1, 1]) / 2  # noqa: E731
    low, high = m.interval_of(pick)
    theta, reps = pick(m.values).numpy(), pick(m.replicates).numpy()
    if resampling == "jackknife":
        G = len(reps)
        se = np.sqrt((G - 1) / G * ((reps - reps.mean()) ** 2).sum())
        z = NormalDist().inv_cdf(0.95)
        np.testing.assert_allclose([low.item(), high.item()], [theta - z * se, theta + z * se], atol=1e-12)
    else:
        want = np_bca(np.array(theta), reps, pick(m.acceleration_replicates).numpy(), 0.9)
        np.testing.assert_allclose([low.item(), high.item()], [want[0].item(), want[1].item()], atol=1e-12)
    # Quadrant intervals: the quadrant means' own intervals, each around its mean.
    q, qi = m.quadrants(), m.quadrant_intervals()
    assert set(q) == set(qi)
    for k, v in q.items():
        assert (v is None) == (qi[k] is None)
    with pytest.raises(vaetransfer.ArgumentError, match="ci"):
        sim.similarity_matrix(a, b).interval_of(lambda t: t)
