"""The sampled and unsupervised disentanglement metrics (vaetransfer.metrics.sampled, .unsupervised):
the exact factor sampler, codes of a VAE, BetaVAE, FactorVAE, UDR and the Gaussian correlations —
each against the plain NumPy/scikit-learn reference of tests/reference_disentanglement_sampled.py
(same seeds, same numbers), closed forms, and the cases whose answer is known."""
import numpy as np
import pytest
import scipy.linalg
import torch

import reference_disentanglement_sampled as ref
from vaetransfer import data, metrics, nn
from vaetransfer._C import ArgumentError, ArgumentTypeError
from vaetransfer.metrics import (FactorSampler, beta_vae_score, codes, disentanglement, factor_vae_score,
                                 gaussian_total_correlation, gaussian_wasserstein_correlation, udr)

SIZES = (4, 1, 5, 3, 6)  # one factor of a single class: never fixed, never predicted
SMALL = dict(batch_size=16, num_train=300, num_eval=150)


def grid_rows(factors, sizes=SIZES):
    return np.ravel_multi_index(tuple(np.asarray(factors).T), sizes)


class TableEncoder:
    """Codes of a bare grid looked up per row (float32 values, so both sides see the same numbers):
    ``encode(images)`` for the package, where a bare grid's images are its factor classes, and
    ``representation(factors)`` for the reference."""

    def __init__(self, table, sizes=SIZES):
        self.table, self.sizes = np.asarray(table, np.float32).astype(np.float64), sizes

    def __call__(self, images):
        return torch.from_numpy(self.table[grid_rows(images.round().long().numpy(), self.sizes)])

    def representation(self, factors):
        return self.table[grid_rows(factors, self.sizes)]


def all_factors(sizes=SIZES):
    return np.stack(np.unravel_index(np.arange(int(np.prod(sizes))), sizes), axis=1)


def identity_table(sizes=SIZES, noise=0.05, seed=1):
    f = all_factors(sizes)[:, [k for k, s in enumerate(sizes) if s > 1]].astype(np.float64)
    return f + noise * np.random.default_rng(seed).standard_normal(f.shape)


# ---------------------------------------------------------------- the sampler
@pytest.mark.parametrize("name", ["dsprites", "solids"])
def test_procedural_domains_are_mixed_radix_grids(name):
    ds = data.load(name, images=False)
    assert np.array_equal(grid_rows(ds.factors.numpy(), ds.factor_sizes), np.arange(len(ds)))
    sampler = FactorSampler(name)
    assert sampler.factor_sizes == ds.factor_sizes and sampler.count == len(ds)


def test_sampler_renders_exactly_the_sampled_rows():
    sampler = FactorSampler("dsprites")
    f = sampler.sample_factors(12, np.random.default_rng(3))
    images = sampler.images(f)
    assert images.dtype == torch.float32 and images.shape == (12, 1, 64, 64)
    # an independent renderer of arbitrary factor rows
    assert torch.equal(images[:, 0], data.render_dsprites(torch.from_numpy(f)).float())
    built = data.load("dsprites", indices=torch.from_numpy(sampler.rows(f)))
    assert np.array_equal(built.factors.numpy(), f)

    solids = FactorSampler("solids")
    f = solids.sample_factors(6, 4)
    rows = data.load("solids", indices=torch.from_numpy(solids.rows(f)))
    assert np.array_equal(rows.factors.numpy(), f)
    rendered = data.render_solids(rows.factor_values)
    assert torch.equal(solids.images(f), rendered.unsqueeze(1).float() * (1.0 / 255.0))

    noisy = FactorSampler("noisy_dsprites", seed=7)  # a seeded domain: rows of the data seed's set
    f = noisy.sample_factors(3, 0)
    expect = data.noisy_dsprites(torch.from_numpy(noisy.rows(f)), seed=7).float_images()
    assert torch.equal(noisy.images(f), expect)


def test_sampler_draws_uniformly_and_fixes_a_factor():
    sampler = FactorSampler(SIZES)
    assert sampler.varying == (0, 2, 3, 4) and sampler.count == 360
    f = sampler.sample_factors(36_000, np.random.default_rng(0))
    assert f.dtype == np.int64 and f.shape == (36_000, 5)
    for k, s in enumerate(SIZES):
        freq = np.bincount(f[:, k], minlength=s) / len(f)
        assert np.allclose(freq, 1 / s, atol=0.012)
    pairs = np.bincount(f[:, 0] * 6 + f[:, 4], minlength=24) / len(f)  # independence of two factors
    assert np.allclose(pairs, 1 / 24, atol=0.006)
    fixed = sampler.sample_fixed(50, "factor3", np.random.default_rng(1))
    assert len(np.unique(fixed[:, 3])) == 1 and len(np.unique(fixed[:, 4])) > 1
    assert np.array_equal(sampler.sample_factors(20, 5), sampler.sample_factors(20, np.random.default_rng(5)))
    assert torch.equal(sampler.images(f[:4]), torch.from_numpy(f[:4]).float())  # a bare grid: its factors


def test_sampler_of_a_dataset_holding_a_grid():
    sizes = (3, 4)
    pixels = torch.randint(0, 256, (12, 1, 4, 4), dtype=torch.uint8)
    ds = data.Dataset(pixels, factors=torch.from_numpy(all_factors(sizes)), factor_names=("a", "b"),
                      factor_sizes=sizes, scale=1 / 255)
    sampler = FactorSampler(ds)
    f = sampler.sample_factors(10, 2)
    assert torch.equal(sampler.images(f), ds.float_images(torch.from_numpy(grid_rows(f, sizes))))
    with pytest.raises(ArgumentError, match="mixed-radix"):
        FactorSampler(ds.subset(torch.arange(11, -1, -1)))
    with pytest.raises(ArgumentError, match="full factor grid"):
        FactorSampler(ds.subset(torch.arange(6)))


@pytest.mark.parametrize("source, match", [("cifar10", "reads files"), ("object_shapes", "no factor grid"),
                                           ("sklearn_digits", "no factor grid"), ("nope", "registered")])
def test_sampler_names_what_it_cannot_sample(source, match):
    with pytest.raises(ArgumentError, match=match) as info:
        FactorSampler(source)
    assert info.value.argument == "source"


def test_sampler_argument_errors():
    with pytest.raises(ArgumentTypeError):
        FactorSampler(3.5)
    sampler = FactorSampler(SIZES)
    with pytest.raises(ArgumentError) as info:
        sampler.images(np.array([[4, 0, 0, 0, 0]]))
    assert info.value.argument == "factors"
    with pytest.raises(ArgumentError) as info:
        beta_vae_score(lambda x: x, FactorSampler((5, 1)))
    assert info.value.argument == "sampler"


# ---------------------------------------------------------------- codes
def test_codes_of_a_vae():
    model = nn.build_model(nn.ModelConfig("mlp", input_shape=[1, 8, 8], latent_dim=4, depth=1, width=16), seed=3)
    x = torch.rand(10, 1, 8, 8)
    mean, logvar = model.encode(x)
    got = codes(model, x, batch_size=3)
    assert got.shape == (10, 4) and torch.allclose(got, mean.detach(), atol=1e-6)
    sampled = codes(model, x, representation="sampled", seed=5, batch_size=4)
    expect = mean + torch.exp(0.5 * logvar) * model.noise(10, seed=5)
    assert torch.allclose(sampled, expect.detach(), atol=1e-5)
    assert torch.allclose(sampled, codes(model, x, representation="sampled", seed=5, batch_size=7), atol=1e-6)
    assert not torch.allclose(sampled, codes(model, x, representation="sampled", seed=6))
    model.train()
    codes(model, x)
    assert model.training  # the mode is restored
    assert torch.equal(codes(lambda im: im.flatten(1)[:, :3], x), x.flatten(1)[:, :3])
    with pytest.raises(ArgumentError) as info:
        codes(lambda im: im, x, representation="sampled")
    assert info.value.argument == "representation"
    with pytest.raises(ArgumentError) as info:
        codes(lambda im: torch.full((10, 2), float("nan")), x)
    assert info.value.argument == "model"


# ---------------------------------------------------------------- BetaVAE
def test_beta_vae_identity_codes_equal_the_reference():
    enc = TableEncoder(identity_table())
    got = beta_vae_score(enc, FactorSampler(SIZES), seed=4, **SMALL)
    train, evaluation = ref.beta_vae(enc.representation, SIZES, seed=4, **SMALL)
    assert got.score == got.eval_accuracy == evaluation and got.train_accuracy == train
    assert got.score > 0.95 and got.factor_names == ("factor0", "factor2", "factor3", "factor4")
    again = beta_vae_score(enc, FactorSampler(SIZES), seed=4, **SMALL)
    assert again.to_dict() == got.to_dict()
    d = got.to_dict()
    assert d["score"] == got.score and isinstance(d["factor_names"], list)


def test_beta_vae_uninformative_codes_score_chance():
    constant = TableEncoder(np.zeros((360, 3)))
    got = beta_vae_score(constant, FactorSampler(SIZES), seed=0, **SMALL)
    assert got.score == ref.beta_vae(constant.representation, SIZES, seed=0, **SMALL)[1]
    assert got.score < 0.4  # 4 classes: chance 1/4
    sizes = (5, 5, 5)  # every dimension the same symmetric mixture of all factors
    mixed = all_factors(sizes).sum(1, keepdims=True).repeat(4, axis=1)
    got = beta_vae_score(TableEncoder(mixed, sizes), FactorSampler(sizes), seed=0, **SMALL)
    assert got.score < 0.5  # 3 classes: chance 1/3


# ---------------------------------------------------------------- FactorVAE
FVAE = dict(SMALL, num_variance_estimate=500)


def test_factor_vae_identity_codes_equal_the_reference():
    enc = TableEncoder(identity_table())
    got = factor_vae_score(enc, FactorSampler(SIZES), seed=2, **FVAE)
    want = ref.factor_vae(enc.representation, SIZES, seed=2, **FVAE)
    assert got.score == pytest.approx(1.0) and got.num_active_dims == 4
    assert np.array_equal(got.votes, want["votes"]) and np.array_equal(got.eval_votes, want["eval_votes"])
    assert got.train_accuracy == pytest.approx(want["train_accuracy"], abs=1e-15)
    assert got.eval_accuracy == pytest.approx(want["eval_accuracy"], abs=1e-15)
    assert got.votes.shape == (4, 4) and got.votes.sum() == SMALL["num_train"]
    assert factor_vae_score(enc, FactorSampler(SIZES), seed=2, **FVAE).to_dict() == got.to_dict()
    other = factor_vae_score(enc, FactorSampler(SIZES), seed=3, **FVAE)
    assert not np.array_equal(other.votes, got.votes)


def test_factor_vae_counts_the_dimensions_kept_after_pruning():
    table = identity_table()[:, :3]  # 3 informative dimensions
    rng = np.random.default_rng(0)
    table = np.concatenate([np.zeros((360, 1)), table, 0.01 * rng.standard_normal((360, 1)), np.ones((360, 1))], 1)
    enc = TableEncoder(table)
    got = factor_vae_score(enc, FactorSampler(SIZES), seed=0, **FVAE)
    assert got.num_active_dims == 3  # disentanglement_lib reports 6
    assert got.active_dims.tolist() == [False, True, True, True, False, False]
    assert got.votes[~got.active_dims].sum() == 0
    want = ref.factor_vae(enc.representation, SIZES, seed=0, **FVAE)
    assert got.eval_accuracy == pytest.approx(want["eval_accuracy"], abs=1e-15)
    assert got.score > 0.7  # three of four factors have a dimension of their own


def test_factor_vae_uninformative_codes():
    constant = factor_vae_score(TableEncoder(np.full((360, 3), 2.0)), FactorSampler(SIZES), **FVAE)
    assert (constant.score, constant.train_accuracy, constant.num_active_dims) == (0.0, 0.0, 0)
    assert constant.votes.shape == (3, 4) and constant.votes.sum() == 0
    sizes = (5, 5, 5)
    mixed = all_factors(sizes).sum(1, keepdims=True).repeat(4, axis=1)
    got = factor_vae_score(TableEncoder(mixed, sizes), FactorSampler(sizes), **FVAE)
    assert got.num_active_dims == 4 and got.score < 0.5  # every vote to the first dimension: ~1/3


def test_factor_vae_vote_ties_count_as_a_fraction():
    """One dimension, two factors: two training points that fix different factors tie, and the
    classifier is right half the time whatever the evaluation votes (disentanglement_lib's
    lowest-index rule would score the evaluation share of the first factor)."""
    sizes = (6, 6)
    enc = TableEncoder(all_factors(sizes)[:, :1] * 1.0, sizes)
    options = dict(batch_size=8, num_train=2, num_eval=9, num_variance_estimate=100)
    for seed in range(50):
        got = factor_vae_score(enc, FactorSampler(sizes), seed=seed, **options)
        if got.votes[0, 0] == got.votes[0, 1] == 1:
            break
    else:
        pytest.fail("no seed gave a tie")
    assert got.train_accuracy == 0.5 and got.score == 0.5
    assert ref.lowest_index_accuracy(got.votes, got.eval_votes) == got.eval_votes[0, 0] / 9 != 0.5
    want = ref.factor_vae(enc.representation, sizes, seed=seed, **options)
    assert want["eval_accuracy"] == got.score
    # a table with a tie in one row and a clear winner in another
    train = np.array([[3, 3, 0], [0, 1, 5]])
    evaluation = np.array([[2, 4, 1], [1, 0, 6]])
    assert ref.expected_accuracy(train, evaluation) == pytest.approx((3 + 6) / 14)


def test_sampled_metrics_argument_errors():
    enc, sampler = TableEncoder(identity_table()), FactorSampler(SIZES)
    with pytest.raises(ArgumentError) as info:
        factor_vae_score(enc, sampler, batch_size=1)
    assert info.value.argument == "batch_size"
    with pytest.raises(ArgumentTypeError) as info:
        factor_vae_score(3, sampler)
    assert info.value.argument == "encode"
    with pytest.raises(ArgumentError) as info:
        beta_vae_score(lambda x: torch.zeros(3, 2), sampler, **SMALL)
    assert info.value.argument == "encode"


# ---------------------------------------------------------------- UDR
def _latents(n=1500, d=5, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, d))


def test_udr_of_permuted_models_is_one_and_of_mixed_models_lower():
    z = _latents()
    rng = np.random.default_rng(1)
    permuted = [z] + [z[:, rng.permutation(5)] * rng.choice([-1.0, 1.0], 5) for _ in range(3)]
    got = udr(permuted)
    assert got.per_model.shape == (4,) and got.pairwise.shape == (4, 4)
    assert got.score > 0.9 and np.all(got.per_model > 0.9)
    monotone = [z, np.exp(3 * z[:, ::-1])]  # Spearman sees only ranks
    assert udr(monotone).score == pytest.approx(udr([z, z[:, ::-1]]).score, abs=1e-12)
    rotations = [z] + [z @ np.linalg.qr(rng.standard_normal((5, 5)))[0] for _ in range(3)]
    mixed = udr(rotations)
    assert mixed.score < got.score - 0.25
    for models in (permuted, rotations):
        per_model, pairwise = ref.udr(models)
        result = udr(models)
        assert np.allclose(result.pairwise, pairwise, atol=1e-10)
        assert np.allclose(result.per_model, per_model, atol=1e-10)


def test_udr_lasso_and_the_kl_filter():
    z = _latents(800)
    rng = np.random.default_rng(2)
    models = [z, z[:, [2, 0, 1, 4, 3]] * 2.0, z[:, [4, 3, 2, 1, 0]] + 1.0]
    lasso = udr(models, variant="lasso")
    per_model, pairwise = ref.udr(models, variant="lasso")
    assert np.allclose(lasso.pairwise, pairwise, atol=1e-10) and np.allclose(lasso.per_model, per_model, atol=1e-10)
    # one-to-one: each row holds one Lasso weight, shrunk from 1 to 1 - alpha
    assert lasso.score == pytest.approx(0.9, abs=0.01) and lasso.variant == "lasso"
    # a sixth, uninformative dimension of noise in each model: counted, it lowers the score;
    # filtered by its KL, it is ignored
    noisy = [np.concatenate([m, 0.3 * rng.standard_normal((800, 1))], 1) for m in models]
    kl = [np.array([1.0] * 5 + [0.001])] * 3
    filtered = udr(noisy, kl=kl)
    assert filtered.num_informative.tolist() == [5, 5, 5]
    assert filtered.score == pytest.approx(udr(models).score, abs=1e-12)
    assert udr(noisy).score < filtered.score
    per_model, pairwise = ref.udr(noisy, kl=kl)
    assert np.allclose(filtered.pairwise, pairwise, atol=1e-10)
    lasso_filtered = udr(noisy, variant="lasso", kl=kl)
    assert np.allclose(lasso_filtered.pairwise, ref.udr(noisy, variant="lasso", kl=kl)[1], atol=1e-10)


def test_udr_argument_errors():
    z = _latents(50)
    for bad, argument in (([z], "codes_per_model"), ([z, z[:40]], "codes_per_model")):
        with pytest.raises(ArgumentError) as info:
            udr(bad)
        assert info.value.argument == argument
    with pytest.raises(ArgumentError) as info:
        udr([z, z], kl=[np.ones(5)])
    assert info.value.argument == "kl"
    with pytest.raises(ArgumentError) as info:
        udr([z, z], variant="pearson")
    assert info.value.argument == "variant"


# ---------------------------------------------------------------- Gaussian correlations
def _with_covariance(cov, n=400, seed=0):
    """Codes whose sample covariance (ddof=1) is exactly ``cov``."""
    w = np.random.default_rng(seed).standard_normal((n, len(cov)))
    w -= w.mean(0)
    w = w @ np.linalg.inv(np.linalg.cholesky(np.cov(w.T))).T
    return w @ np.linalg.cholesky(cov).T + 3.0


def test_gaussian_total_correlation_closed_form():
    rho = 0.6
    z = _with_covariance(np.array([[2.0, rho * np.sqrt(2 * 0.5)], [rho * np.sqrt(2 * 0.5), 0.5]]))
    assert gaussian_total_correlation(z) == pytest.approx(-0.5 * np.log(1 - rho**2), abs=1e-10)
    a = np.random.default_rng(3).standard_normal((5, 5))
    cov = a @ a.T + np.eye(5)
    z = _with_covariance(cov)
    expect = 0.5 * (np.log(np.diag(cov)).sum() - np.log(np.linalg.det(cov)))
    assert gaussian_total_correlation(z) == pytest.approx(expect, abs=1e-9)
    assert gaussian_total_correlation(z) == pytest.approx(ref.gaussian_total_correlation(z), abs=1e-9)
    assert gaussian_total_correlation(torch.from_numpy(z)) == pytest.approx(expect, abs=1e-6)
    assert gaussian_total_correlation(_with_covariance(np.diag([1.0, 4.0, 9.0]))) == pytest.approx(0, abs=1e-12)
    # a constant dimension is independent of the rest; an exact copy makes it infinite
    assert gaussian_total_correlation(np.c_[z, np.full(len(z), 0.1)]) == pytest.approx(expect, abs=1e-9)
    assert gaussian_total_correlation(np.c_[z, z[:, :1]]) > 25
    assert gaussian_total_correlation(np.ones((10, 3))) == 0.0
    # any scale of each dimension (the value is invariant to it), and an outlier at the edge of float64
    for scale in (1e-300, 1e-30, 1e30, 1e300):
        assert gaussian_total_correlation(z * np.array([scale, 1.0, 1 / scale, 1.0, scale])) == \
            pytest.approx(expect, abs=1e-7)
    spiked = z.copy()
    spiked[0, 0] = 1e308
    assert np.isfinite(gaussian_total_correlation(spiked))
    # fewer examples than varying dimensions: no covariance to estimate (not an infinite correlation)
    with pytest.raises(ArgumentError, match="needs more than 2 examples") as e:
        gaussian_total_correlation(np.array([[0.0, 1.0], [1.0, 3.0]]))
    assert e.value.argument == "codes"


def test_gaussian_wasserstein_correlation_closed_form():
    a, b, c = 2.0, 0.5, 0.6
    z = _with_covariance(np.array([[a, c], [c, b]]))
    # 2x2: tr sqrt(M) = sqrt(tr M + 2 sqrt(det M)), M = D^1/2 Σ D^1/2
    expect = 2 * (a + b) - 2 * np.sqrt(a * a + b * b + 2 * np.sqrt(a * b * (a * b - c * c)))
    assert gaussian_wasserstein_correlation(z) == pytest.approx(expect, abs=1e-10)
    assert gaussian_wasserstein_correlation(z, normalized=True) == pytest.approx(expect / (a + b), abs=1e-10)
    g = np.random.default_rng(4).standard_normal((6, 6))
    z = _with_covariance(g @ g.T + 0.1 * np.eye(6))
    cov = np.cov(z.T)
    direct = 2 * np.trace(cov) - 2 * np.trace(scipy.linalg.sqrtm(np.sqrt(np.diag(cov))[:, None] * cov
                                                                 * np.sqrt(np.diag(cov))[None, :])).real
    assert gaussian_wasserstein_correlation(z) == pytest.approx(direct, abs=1e-8)
    assert gaussian_wasserstein_correlation(z) == pytest.approx(ref.gaussian_wasserstein_correlation(z), abs=1e-8)
    assert gaussian_wasserstein_correlation(_with_covariance(np.diag([1.0, 3.0]))) == pytest.approx(0, abs=1e-10)
    assert gaussian_wasserstein_correlation(np.ones((5, 2)), normalized=True) == 0.0


# ---------------------------------------------------------------- the one call
def test_disentanglement_of_identity_codes_on_a_grid():
    enc = TableEncoder(identity_table())
    sampler = FactorSampler(SIZES)
    options = {"beta_vae": SMALL, "factor_vae": FVAE}
    out = disentanglement(enc, sampler, n=600, seed=1, options=options)
    assert set(metrics.sampled.ALL_METRICS) <= set(out)
    assert out["n"] == 600 and out["representation"] == "mean" and out["domain"] == "grid"
    assert out["factor_names"] == ["factor0", "factor2", "factor3", "factor4"]
    assert out["factor_vae"]["score"] == pytest.approx(1.0) and out["beta_vae"]["score"] > 0.95
    assert out["factor_vae"]["score"] == factor_vae_score(enc, sampler, seed=1, **FVAE).score
    assert out["mig"]["score"] > 0.5 and out["gaussian_total_correlation"]["score"] < 0.05
    # the array metrics see exactly the drawn factors' codes
    f = sampler.sample_factors(600, np.random.default_rng(1))
    z = enc(torch.from_numpy(f).float())
    assert out["gaussian_total_correlation"]["score"] == pytest.approx(gaussian_total_correlation(z), abs=1e-12)
    assert out["mig"] == metrics.mig(z, f[:, list(sampler.varying)],
                                     factor_names=out["factor_names"]).to_dict()
    again = disentanglement(enc, sampler, n=600, seed=1, options=options)
    assert again == out
    with pytest.raises(ArgumentError) as info:
        disentanglement(enc, sampler, metrics=["mig"], options={"mig": {"nope": 1}})
    assert info.value.argument == "options"
    with pytest.raises(ArgumentError) as info:
        disentanglement(enc, sampler, metrics=["beta"])
    assert info.value.argument == "metrics"


def test_disentanglement_of_a_vae_on_dsprites():
    model = nn.build_model(nn.ModelConfig("conv", latent_dim=6), seed=0)
    cheap = dict(batch_size=8, num_train=40, num_eval=20)
    out = disentanglement(model, "dsprites", n=300, representation="sampled", seed=0,
                          metrics=["beta_vae", "factor_vae", "mig", "gaussian_wasserstein_correlation"],
                          options={"beta_vae": cheap, "factor_vae": dict(cheap, num_variance_estimate=200)})
    assert out["factor_names"] == ["shape", "scale", "orientation", "posX", "posY"]
    assert 0 <= out["beta_vae"]["score"] <= 1 and 0 <= out["factor_vae"]["score"] <= 1
    assert len(out["mig"]["per_factor"]) == 5 and out["gaussian_wasserstein_correlation"]["score"] >= 0


# ---------------------------------------------------------------- your own sampler: a renderer, a labelled pool
def _render_classes(factors):
    """A renderer whose "images" are the factor classes scaled into [0, 1] (a user's simulator)."""
    return torch.from_numpy(factors.astype(np.float32) / np.maximum(np.asarray(SIZES, np.float32) - 1, 1))


class ScaledTable(TableEncoder):
    """The same table looked up from the scaled classes a renderer gives."""

    def __call__(self, images):
        classes = (images.numpy() * np.maximum(np.asarray(SIZES, np.float32) - 1, 1)).round().astype(np.int64)
        return torch.from_numpy(self.table[grid_rows(classes, self.sizes)])


def test_a_renderer_gives_the_scores_of_the_same_grid():
    """A renderer draws exactly the factor combinations a bare grid draws (same seed): the scores of the
    same codes are equal, and identity-like codes score near 1 (the closed-form case)."""
    table = identity_table()
    mine = FactorSampler(_render_classes, factor_sizes=SIZES, factor_names=["a", "b", "c", "d", "e"])
    assert mine.varying == (0, 2, 3, 4) and mine.name == "_render_classes"
    for fn, opts in ((beta_vae_score, SMALL), (factor_vae_score, FVAE)):
        got = fn(ScaledTable(table), mine, seed=5, **opts)
        want = fn(TableEncoder(table), FactorSampler(SIZES), seed=5, **opts)
        assert got.score == want.score > 0.9
    out = disentanglement(ScaledTable(table), mine, n=300, metrics=["mig", "beta_vae"], seed=1,
                          options={"beta_vae": SMALL}, progress=True)
    assert out["domain"] == "_render_classes" and out["factor_names"] == ["a", "c", "d", "e"]
    assert out["mig"]["score"] > 0.5


def test_a_renderer_is_checked():
    with pytest.raises(ArgumentError) as e:
        FactorSampler(_render_classes)
    assert e.value.argument == "factor_sizes"
    bad = FactorSampler(lambda f: torch.full((len(f), 3), 2.0), factor_sizes=(3, 4))
    with pytest.raises(ArgumentError, match=r"\[0, 1\]"):
        bad.images(bad.sample_factors(4, 0))
    wrong = FactorSampler(lambda f: np.zeros(3, np.float32), factor_sizes=(3, 4))
    with pytest.raises(ArgumentError, match="float images"):
        wrong.images(wrong.sample_factors(4, 0))
    with pytest.raises(ArgumentError) as e:
        FactorSampler("dsprites", factor_sizes=(3,))
    assert e.value.argument == "factor_sizes"


def test_a_pool_of_labelled_examples_draws_rows_by_class():
    """Examples with factor classes that do not fill a grid: drawn as rows; a fixed factor's batches share
    its class; codes equal to the true factors score 1 with BetaVAE and FactorVAE."""
    rng = np.random.default_rng(0)
    sizes = (4, 5, 3)
    factors = np.stack([rng.integers(0, s, 150) for s in sizes], 1)   # 150 of the 60 combinations' draws
    images = torch.from_numpy(factors.astype(np.float32) / 4).reshape(150, 1, 3)
    ds = data.Dataset(images, factors=torch.from_numpy(factors), factor_sizes=sizes, factor_names=("x", "y", "z"),
                      scale=1.0, name="mine")
    pool = FactorSampler(ds, pool=True)
    assert pool.count == 150 and "pool" in repr(pool)
    fixed = pool.sample_fixed(32, "y", 3)
    assert (fixed[:, 1] == fixed[0, 1]).all() and {tuple(r) for r in fixed} <= {tuple(r) for r in factors}
    assert torch.equal(pool.images(factors[:5]), images[:5].float())
    truth = lambda x: x.reshape(len(x), 3) * 4  # noqa: E731  (the codes are the factors)
    assert beta_vae_score(truth, pool, seed=0, **SMALL).score == pytest.approx(1.0)
    assert factor_vae_score(truth, pool, seed=0, **dict(FVAE, num_variance_estimate=150)).score == pytest.approx(1.0)
    with pytest.raises(ArgumentError) as e:
        FactorSampler(SIZES, pool=True)
    assert e.value.argument == "pool"
