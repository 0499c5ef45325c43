"""Supervised disentanglement metrics (vaetransfer.metrics): closed forms, the NumPy/scikit-learn reference
of tests/reference_disentanglement.py, degenerate inputs, named errors, determinism."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import mutual_info_score

import vaetransfer
from vaetransfer import _C, metrics
from vaetransfer.metrics import _common

import reference_disentanglement as ref


def factor_grid(sizes=(3, 4, 5), repeats=2, seed=0):
    """Every combination of the factor classes, ``repeats`` times, rows shuffled: int64 [prod * repeats, K]."""
    grid = np.stack(np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij"), axis=-1).reshape(-1, len(sizes))
    rows = np.repeat(grid, repeats, axis=0)
    return rows[np.random.default_rng(seed).permutation(len(rows))]


def identity_codes(factors, noise=1e-3, seed=1):
    return factors.astype(np.float64) + noise * np.random.default_rng(seed).standard_normal(factors.shape)


def random_problem(n=300, d=4, k=3, seed=0):
    """Codes with factors that depend on some of them (so every score is away from its bounds)."""
    rng = np.random.default_rng(seed)
    codes = rng.standard_normal((n, d))
    latent = codes[:, :k] + 0.7 * rng.standard_normal((n, k))
    factors = np.stack([np.digitize(latent[:, j], np.quantile(latent[:, j], np.linspace(0, 1, j + 3)[1:-1]))
                        for j in range(k)], axis=1)
    return codes, factors


# ---------------------------------------------------------------- the C++ kernels

def test_discretize_matches_hand_computed_histogram():
    codes = np.array([[0.0, 7.0], [1.0, 7.0], [2.0, 7.0], [3.0, 7.0], [4.0, 7.0], [10.0, 7.0]])
    # Column 0, 5 bins over [0, 10]: left edges 0, 2, 4, 6, 8; np.digitize gives 1,1,2,2,3,5.
    # Column 1 is constant: np.histogram's range [6.5, 7.5], 20 left edges 6.5 + 0.05 i, eleven of them <= 7.
    out = metrics.discretize(codes, bins=5)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out[:, 0], [0, 0, 1, 1, 2, 4])
    np.testing.assert_array_equal(metrics.discretize(codes, bins=20)[:, 1], [10] * 6)


def test_discretize_equals_numpy_digitize_minus_one_including_values_on_edges():
    rng = np.random.default_rng(3)
    on_edges = np.histogram(np.array([0.1, 0.7]), 7)[1]  # every value is an edge of its own histogram
    columns = [rng.standard_normal(500), rng.uniform(-1e-3, 1e-3, 500), np.resize(on_edges, 500),
               np.round(rng.standard_normal(500), 1)]
    codes = np.stack(columns, axis=1)
    for bins in (2, 7, 20):
        np.testing.assert_array_equal(metrics.discretize(codes, bins) + 1, ref.histogram_discretize(codes, bins))
    # tensors and float32 are accepted; the values are converted to float64 first
    t = torch.from_numpy(codes)
    np.testing.assert_array_equal(metrics.discretize(t), metrics.discretize(codes))


def test_mutual_information_and_entropy_match_sklearn_on_arbitrary_labels():
    rng = np.random.default_rng(4)
    a = np.stack([rng.integers(0, 6, 400), rng.integers(-3, 3, 400) * 10**15,  # sparse: sorted-key path
                  np.full(400, 9), rng.integers(0, 400, 400)], axis=1)
    b = np.stack([a[:, 0] // 2, rng.integers(0, 3, 400), (a[:, 3] + rng.integers(0, 2, 400)) % 50], axis=1)
    got = metrics.mutual_information_matrix(a, b)
    want = np.array([[mutual_info_score(a[:, i], b[:, j]) for j in range(3)] for i in range(4)])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert (got[2] == 0).all()  # a constant column shares nothing, exactly
    np.testing.assert_allclose(metrics.entropies(a), [mutual_info_score(c, c) for c in a.T], atol=1e-12)
    assert metrics.entropies(a)[2] == 0.0


def test_vote_counts_match_numpy():
    rng = np.random.default_rng(5)
    rows, cols = rng.integers(0, 4, 1000), rng.integers(0, 3, 1000)
    want = np.zeros((4, 3), dtype=np.int64)
    np.add.at(want, (rows, cols), 1)
    got = _C.metrics.vote_counts(torch.from_numpy(rows), torch.from_numpy(cols), 4, 3)
    np.testing.assert_array_equal(got.numpy(), want)
    empty = torch.zeros(0, dtype=torch.long)
    assert _C.metrics.vote_counts(empty, empty, 2, 2).sum() == 0
    with pytest.raises(vaetransfer.ArgumentError, match="rows"):
        _C.metrics.vote_counts(torch.tensor([4]), torch.tensor([0]), 4, 3)
    with pytest.raises(vaetransfer.ArgumentError, match="cols"):
        _C.metrics.vote_counts(torch.tensor([0, 1]), torch.tensor([0]), 4, 3)


def test_core_argument_errors():
    with pytest.raises(vaetransfer.ArgumentError, match="bins"):
        _C.metrics.discretize(torch.zeros(3, 2, dtype=torch.float64), 1)
    with pytest.raises(vaetransfer.ArgumentError, match="codes"):
        _C.metrics.discretize(torch.tensor([[0.0], [float("nan")]]), 20)
    with pytest.raises(vaetransfer.ArgumentTypeError, match="'a'"):
        _C.metrics.mutual_information(torch.zeros(3, 1), torch.zeros(3, 1, dtype=torch.long))
    with pytest.raises(vaetransfer.ArgumentError, match="'b'"):
        _C.metrics.mutual_information(torch.zeros(3, 1, dtype=torch.long), torch.zeros(4, 1, dtype=torch.long))


def test_split_train_test_takes_the_first_ceil_rows():
    codes, factors = np.arange(20.0).reshape(10, 2), np.arange(10)
    s = metrics.split_train_test(codes, factors, 0.75)  # ceil(7.5) = 8
    assert s.codes_train.shape == (8, 2) and s.factors_test.tolist() == [[8], [9]]
    with pytest.raises(vaetransfer.ArgumentError, match="train_fraction"):
        metrics.split_train_test(codes, factors, 0.99)  # ceil(9.9) = 10 leaves no test row


# ---------------------------------------------------------------- closed forms

def test_dci_from_importance_closed_forms():
    ln = math.log
    d, c, per_code, per_factor = metrics.dci_from_importance(np.eye(6))
    assert d == pytest.approx(1, abs=1e-8) and c == pytest.approx(1, abs=1e-8)
    # 5 codes, each serving two of 10 factors (equally): every code's entropy is log_10 2.
    r = np.zeros((5, 10))
    for i in range(5):
        r[i, 2 * i:2 * i + 2] = 1
    d, c, per_code, _ = metrics.dci_from_importance(r)
    assert d == pytest.approx(1 - ln(2) / ln(10), abs=1e-8) and c == pytest.approx(1, abs=1e-8)
    np.testing.assert_allclose(per_code, 1 - ln(2) / ln(10), atol=1e-8)
    # 10 codes, two for each of 5 factors: every factor's entropy over the codes is log_10 2.
    d, c, _, per_factor = metrics.dci_from_importance(r.T)
    assert c == pytest.approx(1 - ln(2) / ln(10), abs=1e-8) and d == pytest.approx(1, abs=1e-8)
    np.testing.assert_allclose(per_factor, 1 - ln(2) / ln(10), atol=1e-8)
    # uniform importances: nothing disentangled or complete
    d, c, _, _ = metrics.dci_from_importance(np.ones((4, 4)))
    assert d == pytest.approx(0, abs=1e-8) and c == pytest.approx(0, abs=1e-8)
    # scipy's entropies (the reference) agree on a random matrix
    r = np.random.default_rng(0).random((7, 3))
    want = ref.dci_scores(r)
    got = metrics.dci_from_importance(r)
    assert got[0] == pytest.approx(want[0], abs=1e-12) and got[1] == pytest.approx(want[1], abs=1e-12)
    with pytest.raises(vaetransfer.ArgumentError, match="importance"):
        metrics.dci_from_importance(-np.eye(2))


def test_modularity_from_mi_closed_forms():
    assert metrics.modularity_from_mi(np.diag([0.3, 1.0, 2.0]))[0] == pytest.approx(1)
    # a code with equal information about all K factors: delta = (K-1) m^2 / (m^2 (K-1)) = 1
    score, per_code = metrics.modularity_from_mi(np.array([[0.5, 0.5, 0.5], [1.0, 0.0, 0.0]]))
    np.testing.assert_allclose(per_code, [0.0, 1.0])
    # K = 2: 1 - b^2 / a^2
    assert metrics.modularity_from_mi(np.array([[2.0, 1.0]]))[0] == pytest.approx(1 - 1 / 4)
    # a code without information scores 0
    assert metrics.modularity_from_mi(np.array([[0.0, 0.0], [1.0, 0.0]]))[1].tolist() == [0.0, 1.0]


def test_mig_and_continuous_sap_of_identity_codes_are_one():
    f = factor_grid()
    # Exact codes: each class is one histogram bin, every other code is independent of the factor on the
    # full grid (plug-in MI exactly 0), so every gap is H(f_k).
    assert metrics.mig(identity_codes(f, noise=0.0), f).score == pytest.approx(1, abs=1e-9)
    # Noise splits the middle class of a 3-class code across a bin edge; the split carries no information
    # about other factors, only finite-sample plug-in MI.
    codes = identity_codes(f)
    assert metrics.mig(codes, f).score > 0.95
    res = metrics.sap(codes, f, variant="continuous")
    assert res.score > 0.999
    # and far from 1 when the codes mix the factors
    mixed = codes @ np.array([[1.0, 1.0, 0.0], [1.0, -1.0, 1.0], [0.0, 1.0, 1.0]])
    assert metrics.mig(mixed, f).score < 0.5
    assert metrics.sap(mixed, f, variant="continuous").score < 0.5


def test_discrete_sap_at_its_ceiling():
    # Train rows: the full factor grid 16 times; test rows: the grid 4 times (first 80% train). A code
    # that is exactly another factor makes predictions g(f_i) that are independent of f_j on the test grid,
    # so its accuracy is sum_c P(g = c) P(f_j = c) = 1/K exactly for K equiprobable classes: the second
    # best code sits at chance, and the score can reach at most 1 - 1/K. Two classes are separable by one
    # threshold, so the ceiling 1 - 1/2 is reached; with more classes a 1-D one-vs-rest linear SVM cannot
    # isolate middle classes and stays below it.
    for k, reached in ((2, True), (3, False), (4, False)):
        grid = factor_grid((k, k, k), repeats=1)
        rng = np.random.default_rng(k)
        f = np.concatenate([np.tile(grid, (16, 1))[rng.permutation(16 * len(grid))], np.tile(grid, (4, 1))])
        assert metrics.split_train_test(f.astype(float), f).factors_train.shape[0] == 16 * len(grid)
        res = metrics.sap(f.astype(np.float64), f)
        np.testing.assert_allclose(res.matrix[~np.eye(3, dtype=bool)], 1 / k, atol=1e-12)
        if reached:
            np.testing.assert_allclose(np.diag(res.matrix), 1.0)
            assert res.score == pytest.approx(1 - 1 / k, abs=1e-12)
        else:
            assert 0 < res.score < 1 - 1 / k


def test_constant_and_duplicated_codes_score_near_zero():
    f = factor_grid()
    constant = np.zeros((len(f), 3))
    assert metrics.mig(constant, f).score == 0.0
    assert metrics.sap(constant, f).score == 0.0
    assert metrics.sap(constant, f, variant="continuous").score == 0.0
    dup = np.repeat(identity_codes(f, noise=0.0), 2, axis=1)  # two identical codes per factor
    assert metrics.mig(dup, f).score == pytest.approx(0, abs=1e-12)
    assert metrics.sap(dup, f, variant="continuous").score == pytest.approx(0, abs=1e-12)
    assert metrics.sap(dup, f).score == pytest.approx(0, abs=1e-12)


def test_sap_scores_an_uninformative_code_the_same_whether_constant_or_near_constant():
    """SAP's rule has no cliff: disentanglement_lib fits the SVM on every code, so a code carrying no
    information scores what the SVM predicts without information — a constant code and noise of variance
    just above the old 1e-12 threshold alike. The old rule gave constant codes 0 and near-constant ones
    chance accuracy, so this representation scored about 0.1 (disentanglement_lib: 0.0)."""
    rng = np.random.default_rng(0)
    f = factor_grid((10, 10), repeats=10)[rng.permutation(1000)]
    near = np.zeros((len(f), 4))
    near[:, 1] = 1.1e-6 * rng.standard_normal(len(f))  # variance ≈ 1.2e-12, no information
    near[:, 3] = 5 + 2e-6 * rng.standard_normal(len(f))
    res = metrics.sap(near, f)
    assert res.score == 0.0
    np.testing.assert_array_equal(res.matrix[1], res.matrix[0])  # the same entries as a constant code
    np.testing.assert_array_equal(res.matrix[3], res.matrix[0])
    assert (res.matrix[0] > 0).all()  # the SVM's uninformative prediction: chance accuracy, not 0
    assert metrics.sap(near, f, variant="continuous").score < 0.01  # R² of noise, ~1/N


def test_sap_at_extreme_code_scales_is_finite_or_refused_within_seconds():
    """The continuous SAP is scale-free (no overflow warnings at ×1e200 or ×1e-200); the discrete SAP's
    linear SVM never sees a code it cannot finish on (liblinear did not return on a code value of 1e100):
    such codes are a named error, at once."""
    import time
    import warnings

    rng = np.random.default_rng(1)
    f = factor_grid((6, 5), repeats=20)
    codes = f + 0.3 * rng.standard_normal(f.shape)
    want = metrics.sap(codes, f, variant="continuous").score
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a in (1e-200, 1e200):
            assert metrics.sap(codes * a, f, variant="continuous").score == pytest.approx(want, abs=1e-12)
    hostile = codes.copy()
    hostile[5, 0] = 1e100
    t = time.monotonic()
    with pytest.raises(vaetransfer.ArgumentError, match="1e\\+30") as info:
        metrics.sap(hostile, f)
    assert info.value.argument == "codes" and time.monotonic() - t < 5
    hostile[5, 0] = 1e30  # at the bound: fitted, and finishes
    t = time.monotonic()
    assert np.isfinite(metrics.sap(hostile, f).score) and time.monotonic() - t < 30


@pytest.mark.parametrize("scale", [1e-200, 1e-30, 1e30, 1e200])
def test_every_code_metric_is_the_same_at_any_scale_of_the_codes(scale):
    """The code metrics are invariant to scaling the codes; their libraries were not: DCI's trees work in
    float32 (0 at ×1e-30, a ValueError at ×1e200), IRS's variances underflowed (0 at ×1e-200), the
    standardisations overflowed (warnings). Codes are now brought to a power-of-two scale first (exact)."""
    import warnings

    rng = np.random.default_rng(0)
    f = factor_grid((5, 5), repeats=8)
    codes = np.hstack([f + 0.3 * rng.standard_normal(f.shape), rng.standard_normal((len(f), 1))])
    calls = {"mig": lambda c: metrics.mig(c, f).score,
             "dci gbt": lambda c: metrics.dci(c, f).disentanglement,
             "dci lasso": lambda c: metrics.dci(c, f, regressor="lasso").informativeness_test,
             "irs": lambda c: metrics.irs(c, f).score,
             "modularity": lambda c: metrics.modularity_explicitness(c, f).modularity,
             "explicitness": lambda c: metrics.modularity_explicitness(c, f).explicitness_test,
             "sap continuous": lambda c: metrics.sap(c, f, variant="continuous").score}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for name, call in calls.items():
            assert call(codes * scale) == pytest.approx(call(codes), abs=1e-12), name
    irs = metrics.irs(codes * scale, f)
    np.testing.assert_allclose(irs.max_deviation, metrics.irs(codes, f).max_deviation * scale, rtol=1e-12)


def test_dci_of_codes_permuted_per_example_is_low_and_of_identity_codes_high():
    f = factor_grid((4, 4, 4), repeats=3)
    codes = identity_codes(f)
    good = metrics.dci(codes, f)
    assert good.disentanglement > 0.9 and good.completeness > 0.9 and good.informativeness_test > 0.95
    rng = np.random.default_rng(7)
    shuffled = np.take_along_axis(codes, rng.permuted(np.tile(np.arange(3), (len(f), 1)), axis=1), axis=1)
    bad = metrics.dci(shuffled, f)
    assert bad.disentanglement < 0.2 and bad.completeness < 0.2


def test_irs_is_high_for_codes_that_ignore_a_nuisance_factor():
    f = factor_grid((4, 5, 6), repeats=2)
    noise = 1e-3 * np.random.default_rng(2).standard_normal((len(f), 2))
    ignore = f[:, :2] + noise  # codes of factors 0 and 1, blind to factor 2
    res = metrics.irs(ignore, f)
    assert res.score > 0.99 and res.num_active_dims == 2
    leaky = ignore + 0.8 * f[:, 2:3]  # the nuisance moves both codes
    assert metrics.irs(leaky, f).score < res.score - 0.2


# ---------------------------------------------------------------- reference implementations

@pytest.mark.parametrize("seed", [0, 1])
def test_every_metric_equals_the_numpy_sklearn_reference(seed):
    codes, f = random_problem(seed=seed)
    got, (want, extra) = metrics.mig(codes, f), ref.mig(codes, f)
    assert got.score == pytest.approx(want, abs=1e-9)
    np.testing.assert_allclose(got.mutual_information, extra["mutual_information"], atol=1e-12)
    for variant in ("discrete", "continuous"):
        got, (want, extra) = metrics.sap(codes, f, variant=variant), ref.sap(codes, f, variant=variant)
        assert got.score == pytest.approx(want, abs=1e-9)
        np.testing.assert_allclose(got.matrix, extra["matrix"], atol=1e-9)
    for regressor in ("gbt", "lasso"):
        got, (want, extra) = metrics.dci(codes, f, regressor=regressor, seed=seed), \
            ref.dci(codes, f, regressor=regressor, seed=seed)
        assert got.disentanglement == pytest.approx(want, abs=1e-9)
        assert got.completeness == pytest.approx(extra["completeness"], abs=1e-9)
        assert got.informativeness_test == pytest.approx(extra["informativeness_test"], abs=1e-12)
        assert got.informativeness_train == pytest.approx(extra["informativeness_train"], abs=1e-12)
        np.testing.assert_allclose(got.importance, extra["importance"], atol=1e-12)
        assert 0 < got.disentanglement < 1 and 0 < got.informativeness_test < 1
    got, (want, extra) = metrics.modularity_explicitness(codes, f), ref.modularity_explicitness(codes, f)
    assert got.modularity == pytest.approx(want, abs=1e-9)
    assert got.explicitness_test == pytest.approx(extra["explicitness_test"], abs=1e-9)
    assert got.explicitness_train == pytest.approx(extra["explicitness_train"], abs=1e-9)
    got, (want, extra) = metrics.irs(codes, f), ref.irs(codes, f)
    assert got.score == pytest.approx(want, abs=1e-9)
    np.testing.assert_allclose(got.per_code, extra["per_code"], atol=1e-12)


def test_deterministic_by_seed():
    codes, f = random_problem(n=200, seed=3)
    a, b = metrics.dci(codes, f, seed=5), metrics.dci(torch.from_numpy(codes), torch.from_numpy(f), seed=5)
    np.testing.assert_array_equal(a.importance, b.importance)
    assert a.to_dict() == b.to_dict()
    assert metrics.sap(codes, f).to_dict() == metrics.sap(codes, f).to_dict()
    assert metrics.dci(codes, f, regressor="lasso", seed=1).to_dict() == \
        metrics.dci(codes, f, regressor="lasso", seed=1).to_dict()


# ---------------------------------------------------------------- degenerate inputs, results, errors

def test_constant_factor_is_left_out_and_reported():
    f = factor_grid((3, 4), repeats=3)
    codes = identity_codes(f)
    with_constant = np.concatenate([f, np.full((len(f), 1), 2)], axis=1)
    for name, fn in (("mig", metrics.mig), ("sap", metrics.sap), ("irs", metrics.irs),
                     ("modularity", metrics.modularity_explicitness)):
        full, plain = fn(codes, with_constant), fn(codes, f)
        assert full.constant_factors == (2,), name
        assert full.score == pytest.approx(plain.score, abs=1e-12), name
    res = metrics.mig(codes, with_constant, factor_names=["a", "b", "c"])
    assert np.isnan(res.per_factor[2])
    d = res.to_dict()
    assert d["per_factor"]["c"] is None and d["per_factor"]["a"] == pytest.approx(1, abs=1e-9)
    json.dumps(d)
    json.dumps(metrics.dci(codes, with_constant, factor_names=["a", "b", "c"]).to_dict())
    with pytest.raises(vaetransfer.ArgumentError, match="factors"):
        metrics.mig(codes, np.zeros((len(f), 2), dtype=np.int64))


def test_results_are_frozen_and_json_able():
    f = factor_grid((3, 4))
    res = metrics.modularity_explicitness(identity_codes(f), f, factor_names=("x", "y"))
    with pytest.raises(Exception):
        res.score = 0.0
    with pytest.raises(ValueError):
        res.per_factor_explicitness[0] = 0.0
    d = json.loads(json.dumps(res.to_dict()))
    assert set(d["per_factor_explicitness"]) == {"x", "y"} and d["factor_names"] == ["x", "y"]
    assert res.modularity > 0.99 and res.explicitness_test > 0.99


@pytest.mark.parametrize("call, argument", [
    (lambda c, f: metrics.mig(c[:, :1], f), "codes"),            # MIG needs two codes
    (lambda c, f: metrics.mig(c, f[:-1]), "factors"),            # N mismatch
    (lambda c, f: metrics.mig(c[:1], f[:1]), "codes"),           # one example
    (lambda c, f: metrics.mig(np.where(c > 1, np.inf, c), f), "codes"),
    (lambda c, f: metrics.mig(c, f.astype(float)), "factors"),   # factors not integer
    (lambda c, f: metrics.mig(c, f, bins=1), "bins"),
    (lambda c, f: metrics.sap(c, f, variant="both"), "variant"),
    (lambda c, f: metrics.sap(c, f, train_fraction=1.0), "train_fraction"),
    (lambda c, f: metrics.dci(c, f, regressor="forest"), "regressor"),
    (lambda c, f: metrics.dci(c, f, seed=-1), "seed"),
    (lambda c, f: metrics.irs(c, f, diff_quantile=1.5), "diff_quantile"),
    (lambda c, f: metrics.mig(c, f, factor_names=["a"]), "factor_names"),
    (lambda c, f: metrics.mig(c.astype(bool), f), "codes"),
    (lambda c, f: metrics.mig("codes", f), "codes"),
])
def test_named_errors(call, argument):
    f = factor_grid((3, 4))
    with pytest.raises((vaetransfer.ArgumentError, vaetransfer.ArgumentTypeError)) as info:
        call(identity_codes(f), f)
    assert info.value.argument == argument
