"""Estimators against independent oracles: float64 brute force (explicit loops / torch.distributions),
closed forms, and algebraic identities."""
import math

import pytest
import torch

import vaetransfer as vt
from vaetransfer import estimators as est

LOG2PI = math.log(2 * math.pi)


def normal_logpdf(z, mean, logvar):
    return torch.distributions.Normal(mean, (0.5 * logvar).exp()).log_prob(z)


def brute_log_density(z, mean, logvar):
    """[N, M, D] by explicit loops over i, k (torch.distributions per pair)."""
    n, m = z.shape[0], mean.shape[0]
    out = torch.empty(n, m, z.shape[1], dtype=torch.float64)
    for i in range(n):
        for k in range(m):
            out[i, k] = normal_logpdf(z[i].double(), mean[k].double(), logvar[k].double())
    return out


def posteriors(n, d, seed=0, scale=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    mean = scale * torch.randn(n, d, generator=g, dtype=dtype)
    logvar = 0.5 * torch.randn(n, d, generator=g, dtype=dtype) - 1.0
    return mean, logvar


# ----------------------------------------------------------------------------- log-density matrices

def test_log_density_matrix_matches_brute_force():
    mean, logvar = posteriors(7, 4, seed=1)
    z = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ref = brute_log_density(z, mean, logvar)
    got = est.gaussian_log_density_matrix(z, mean, logvar)
    assert got.shape == (5, 7)
    torch.testing.assert_close(got, ref.sum(2), rtol=0, atol=1e-10)
    torch.testing.assert_close(est.gaussian_log_density_per_dim(z, mean, logvar), ref, rtol=0, atol=1e-12)
    # variances instead of log-variances
    torch.testing.assert_close(est.gaussian_log_density_matrix(z, mean, var=logvar.exp()), ref.sum(2), rtol=0, atol=1e-10)


def test_float32_accuracy_far_from_origin_and_float64_option():
    # posteriors far from the origin: the shift by the mean of `mean` keeps the expanded square accurate
    mean, logvar = posteriors(64, 10, seed=3)
    mean = mean + 50.0
    z = mean[:32] + 0.3 * torch.randn(32, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    ref = brute_log_density(z, mean, logvar).sum(2)
    got32 = est.gaussian_log_density_matrix(z.float(), mean.float(), logvar.float())
    assert got32.dtype == torch.float32
    assert (got32.double() - ref).abs().max() < 2e-3 * ref.abs().max()
    got64 = est.gaussian_log_density_matrix(z.float(), mean.float(), logvar.float(), accumulate_float64=True)
    assert got64.dtype == torch.float64
    assert (got64 - ref).abs().max() < 1e-3  # only the float32 rounding of the inputs remains


@pytest.mark.parametrize("per_dimension", [False, True])
def test_streaming_logsumexp_matches_dense_with_tiny_tiles(per_dimension):
    mean, logvar = posteriors(37, 3, seed=5)
    z = torch.randn(23, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    log_w = torch.randn(37, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    dense = brute_log_density(z, mean, logvar)
    if per_dimension:
        ref = torch.logsumexp(dense + log_w[None, :, None], 1)
    else:
        ref = torch.logsumexp(dense.sum(2) + log_w, 1)
    for opts in [est.DensityOptions(row_chunk=4, col_chunk=5), est.DensityOptions()]:
        got = est.logsumexp_log_density(z, mean, logvar, log_weights=log_w, per_dimension=per_dimension, options=opts)
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-10)
    got32 = est.logsumexp_log_density(z.float(), mean.float(), logvar.float(), log_weights=log_w.float(),
                                      per_dimension=per_dimension,
                                      options=est.DensityOptions(row_chunk=4, col_chunk=5, accumulate_float64=True))
    assert got32.dtype == torch.float64
    torch.testing.assert_close(got32, ref, rtol=0, atol=1e-4)


@pytest.mark.parametrize("per_dimension", [False, True])
def test_fused_float32_kernel_matches_float64_oracle(per_dimension):
    # sizes that are not multiples of the kernel's 4-row / 64-row / 16-lane / 512-column tiles
    g = torch.Generator().manual_seed(30)
    mean = torch.randn(1037, 5, generator=g, dtype=torch.float64)
    logvar = 0.5 * torch.randn(1037, 5, generator=g, dtype=torch.float64) - 1.0
    z = torch.randn(70, 5, generator=g, dtype=torch.float64)
    log_w = torch.full((1037,), -math.log(1037), dtype=torch.float64)
    dense = (normal_logpdf(z[:, None], mean[None], logvar[None]))  # [70, 1037, 5] oracle
    ref = torch.logsumexp(dense + log_w[None, :, None], 1) if per_dimension else torch.logsumexp(dense.sum(2) + log_w, 1)
    for fused in (True, False):
        got = est.logsumexp_log_density(z.float(), mean.float(), logvar.float(), log_weights=log_w.float(),
                                        per_dimension=per_dimension, options=est.DensityOptions(fused_kernels=fused))
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), ref, rtol=0, atol=2e-4)


# ----------------------------------------------------------------------------- total correlation

def brute_tc(z, mean, logvar, log_w):
    lq = brute_log_density(z, mean, logvar)
    b = z.shape[0]
    log_qz = torch.stack([torch.logsumexp(torch.stack([lq[i, k].sum() + log_w[i, k] for k in range(b)]), 0)
                          for i in range(b)])
    log_qzj = torch.stack([torch.stack([torch.logsumexp(torch.stack([lq[i, k, j] + log_w[i, k] for k in range(b)]), 0)
                                        for j in range(z.shape[1])]) for i in range(b)])
    return (log_qz - log_qzj.sum(1)).mean(), log_qz, log_qzj.sum(1)


def explicit_weights(b, n, sampling):
    w = torch.empty(b, b, dtype=torch.float64)
    for i in range(b):
        for k in range(b):
            if sampling == "mws":
                w[i, k] = 1.0 / (n * b)
            elif k == i:
                w[i, k] = 1.0 / n
            elif k == (i + 1) % b:
                w[i, k] = (n - (b - 1)) / (n * (b - 1))
            else:
                w[i, k] = 1.0 / (b - 1)
    return w.log()


@pytest.mark.parametrize("sampling", ["mws", "mss"])
def test_minibatch_tc_matches_brute_force_and_gradients(sampling):
    b, d, n = 6, 3, 40
    mean, logvar = posteriors(b, d, seed=8)
    mean.requires_grad_(True)
    logvar.requires_grad_(True)
    z = (mean + (0.5 * logvar).exp() * torch.randn(b, d, dtype=torch.float64,
                                                   generator=torch.Generator().manual_seed(9))).detach()
    z.requires_grad_(True)
    w = explicit_weights(b, n, sampling)
    torch.testing.assert_close(est.tc_log_weights(b, n, sampling), w, rtol=0, atol=1e-14)
    ref, ref_qz, ref_prod = brute_tc(z, mean, logvar, w)
    got = est.minibatch_total_correlation(z, mean, logvar, dataset_size=n, sampling=sampling)
    torch.testing.assert_close(got.tc, ref, rtol=0, atol=1e-11)
    torch.testing.assert_close(got.log_qz, ref_qz, rtol=0, atol=1e-11)
    torch.testing.assert_close(got.log_prod_qzj, ref_prod, rtol=0, atol=1e-11)
    g = torch.autograd.grad(got.tc, [z, mean, logvar])
    g_ref = torch.autograd.grad(ref, [z, mean, logvar])
    for a, r in zip(g, g_ref):
        torch.testing.assert_close(a, r, rtol=0, atol=1e-10)


def test_mss_weight_rows_sum_to_one_and_diagonal_is_one_over_n():
    w = est.tc_log_weights(64, 10_000, "mss").exp()
    torch.testing.assert_close(w.sum(1), torch.ones(64, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(w.diagonal(), torch.full((64,), 1e-4, dtype=torch.float64), rtol=0, atol=1e-15)
    # exactly one stratified entry per row and per column (not a whole column, the public-code bug)
    strat = (10_000 - 63) / (10_000 * 63)
    hits = (w - strat).abs() < 1e-15
    assert hits.sum(1).eq(1).all() and hits.sum(0).eq(1).all()


@pytest.mark.parametrize("sampling", ["mws", "mss"])
def test_streaming_tc_path_equals_dense_path(sampling):
    # B*B*D above the dense limit without autograd -> tiled streaming path (MSS weights built per tile)
    b, d, n = 700, 9, 5000
    mean, logvar = posteriors(b, d, seed=10, dtype=torch.float32)
    z = est.sample_gaussian(mean, logvar, samples=1, seed=3)[0]
    with torch.no_grad():
        streamed = est.minibatch_total_correlation(z, mean, logvar, dataset_size=n, sampling=sampling)
    dense = est.minibatch_total_correlation(z, mean.clone().requires_grad_(True), logvar, dataset_size=n,
                                            sampling=sampling)
    torch.testing.assert_close(streamed.log_qz, dense.log_qz.detach(), rtol=0, atol=2e-4)
    torch.testing.assert_close(streamed.log_prod_qzj, dense.log_prod_qzj.detach(), rtol=0, atol=5e-4)


def test_whole_data_decomposition_matches_brute_force_and_identity():
    n, d = 9, 3
    mean, logvar = posteriors(n, d, seed=11)
    res = est.whole_data_kl_decomposition(mean, logvar, samples=3, seed=5)
    z = est.sample_gaussian(mean, logvar, samples=3, seed=5).reshape(-1, d)
    owner = torch.arange(n).repeat(3)
    lq = brute_log_density(z, mean, logvar)
    log_qz = torch.logsumexp(lq.sum(2), 1) - math.log(n)
    log_qzj = torch.logsumexp(lq, 1) - math.log(n)
    log_cond = normal_logpdf(z, mean[owner], logvar[owner]).sum(1)
    log_pzj = normal_logpdf(z, torch.zeros_like(z), torch.zeros_like(z))
    assert res.estimator == "whole-dataset" and res.num_queries == 27
    assert res.mutual_information == pytest.approx((log_cond - log_qz).mean().item(), abs=1e-10)
    assert res.total_correlation == pytest.approx((log_qz - log_qzj.sum(1)).mean().item(), abs=1e-10)
    assert res.dimensionwise_kl == pytest.approx((log_qzj - log_pzj).sum(1).mean().item(), abs=1e-10)
    assert res.marginal_kl == pytest.approx(res.total_correlation + res.dimensionwise_kl, abs=1e-10)
    assert res.rate == pytest.approx(res.mutual_information + res.marginal_kl, abs=1e-10)
    kl = torch.distributions.kl_divergence(torch.distributions.Normal(mean, (0.5 * logvar).exp()),
                                           torch.distributions.Normal(0.0, 1.0)).sum(1).mean().item()
    assert res.rate_analytic == pytest.approx(kl, abs=1e-12)


def test_tc_closed_forms_product_grid_and_correlated_pair():
    # Means on a full Cartesian grid with equal variances: q(z) is exactly a product -> TC = 0 pointwise.
    pts = torch.linspace(-3, 3, 6, dtype=torch.float64)
    grid = torch.cartesian_prod(pts, pts, pts)
    logvar = torch.full_like(grid, math.log(0.25))
    res = est.whole_data_kl_decomposition(grid, logvar, samples=2, seed=0)
    assert abs(res.total_correlation) < 1e-9
    # A perfectly correlated, well-separated pair (z2 = z1): TC -> log N.
    n = 200
    a = torch.arange(n, dtype=torch.float64) * 10.0
    mean = torch.stack([a, a], 1)
    res = est.whole_data_kl_decomposition(mean, torch.full_like(mean, -4.0), samples=1, seed=0)
    assert res.total_correlation == pytest.approx(math.log(n), abs=1e-6)


def test_minibatch_tc_close_to_whole_data_within_bias():
    # Correlated latents with overlapping posteriors, N = 4000 encodings, batches of 256.
    g = torch.Generator().manual_seed(12)
    n, d, b = 4000, 3, 256
    base = torch.randn(n, 1, generator=g, dtype=torch.float64)
    mean = torch.cat([base, 0.8 * base + 0.6 * torch.randn(n, 1, generator=g, dtype=torch.float64),
                      torch.randn(n, 1, generator=g, dtype=torch.float64)], 1)
    logvar = torch.full((n, d), math.log(0.1), dtype=torch.float64)
    exact = est.whole_data_kl_decomposition(mean, logvar, samples=1, seed=1).total_correlation
    z = est.sample_gaussian(mean, logvar, samples=1, seed=2)[0]
    mss, mws = [], []
    for t in range(8):
        idx = torch.randperm(n, generator=g)[:b]
        mss.append(est.minibatch_total_correlation(z[idx], mean[idx], logvar[idx], dataset_size=n, sampling="mss").tc)
        mws.append(est.minibatch_total_correlation(z[idx], mean[idx], logvar[idx], dataset_size=n, sampling="mws").tc)
    mss, mws = torch.stack(mss).mean().item(), torch.stack(mws).mean().item()
    assert exact > 0.2  # a real dependence between z1 and z2
    # MSS is unbiased for q(z); its log has a Jensen bias (downwards, mostly in the peaked joint) that
    # shrinks with B: here about -0.05 at B = 256 with a batch-to-batch spread of 0.07.
    assert abs(mss - exact) < 0.15
    big = []
    for t in range(3):
        idx = torch.randperm(n, generator=g)[:1024]
        big.append(est.minibatch_total_correlation(z[idx], mean[idx], logvar[idx], dataset_size=n, sampling="mss").tc)
    assert abs(torch.stack(big).mean().item() - exact) < 0.08
    # MWS (Eq. 12, log(N B) constants): each of the 1 + D log-terms is low by between log B
    # (separated posteriors) and log N (identical posteriors); the joint being at least as separated as
    # each marginal, TC is high by (D-1) log B .. D log N - log B.
    offset = mws - exact
    assert (d - 1) * math.log(b) - 0.2 < offset < d * math.log(n) - math.log(b) + 0.2


def test_minibatch_tc_separated_posteriors_bias_is_known():
    # Posteriors separated in the joint and in every marginal (each dimension a permutation of a grid
    # with spacing 10, std 0.05): exact log q(z_i) = log q(z_i|x_i) - log N and likewise per dimension,
    # so TC = (D-1) log N; MSS recovers it, MWS is exactly (D-1) log B higher.
    n, d, b = 1000, 4, 50
    g = torch.Generator().manual_seed(13)
    mean = torch.stack([10.0 * torch.randperm(n, generator=g).double() for _ in range(d)], 1)
    logvar = torch.full((n, d), math.log(0.0025), dtype=torch.float64)
    exact = est.whole_data_kl_decomposition(mean, logvar, samples=1, seed=0).total_correlation
    assert exact == pytest.approx((d - 1) * math.log(n), abs=1e-6)
    z = est.sample_gaussian(mean, logvar, samples=1, seed=0)[0]
    mss = est.minibatch_total_correlation(z[:b], mean[:b], logvar[:b], dataset_size=n, sampling="mss").tc.item()
    mws = est.minibatch_total_correlation(z[:b], mean[:b], logvar[:b], dataset_size=n, sampling="mws").tc.item()
    assert mss == pytest.approx(exact, abs=1e-6)
    assert mws - exact == pytest.approx((d - 1) * math.log(b), abs=1e-6)


def test_independent_latents_give_small_tc():
    g = torch.Generator().manual_seed(14)
    mean = 0.5 * torch.randn(3000, 4, generator=g, dtype=torch.float64)
    logvar = torch.zeros(3000, 4, dtype=torch.float64)
    res = est.whole_data_kl_decomposition(mean, logvar, samples=1, seed=0)
    assert abs(res.total_correlation) < 0.02
    mss = est.minibatch_total_correlation(est.sample_gaussian(mean, logvar, seed=1)[0][:512], mean[:512], logvar[:512],
                                          dataset_size=3000, sampling="mss").tc.item()
    assert abs(mss) < 0.05


# ----------------------------------------------------------------------------- rate, MI, active units

def test_identical_standard_normal_posteriors_give_zero_mi_and_marginal_kl():
    mean = torch.zeros(600, 5, dtype=torch.float64)
    logvar = torch.zeros_like(mean)
    for kind in ["whole-dataset", "minibatch"]:
        r = est.rate_decomposition(mean, logvar, estimator=kind, batch_size=128, seed=3)
        assert abs(r.mutual_information) < 1e-10 and abs(r.marginal_kl) < 1e-10
        assert r.rate_analytic == 0.0
    d = est.whole_data_kl_decomposition(mean, logvar, seed=1)
    assert abs(d.mutual_information) < 1e-10 and abs(d.marginal_kl) < 1e-10 and abs(d.total_correlation) < 1e-10
    mi = est.mutual_information(mean, logvar, samples=4, seed=0)
    assert abs(mi.value) < 0.1  # closed-form entropy vs Monte Carlo log q(z): MC error only


def test_well_separated_posteriors_saturate_at_log_n():
    n = 300
    g = torch.Generator().manual_seed(15)
    mean = 30 * torch.randn(n, 4, generator=g, dtype=torch.float64)
    logvar = torch.full_like(mean, -4.0)
    whole = est.rate_decomposition(mean, logvar, estimator="whole-dataset")
    mc = est.rate_decomposition(mean, logvar, estimator="minibatch", batch_size=64, seed=1)
    for r in (whole, mc):
        assert r.mutual_information == pytest.approx(math.log(n), abs=1e-6)
        assert r.mutual_information <= r.log_n + 1e-9
    assert whole.estimator == "whole-dataset" and mc.estimator == "minibatch-monte-carlo(B=64)"
    hj = est.mutual_information(mean, logvar, seed=2)
    assert hj.estimator == "whole-dataset" and hj.cap == pytest.approx(math.log(n))
    assert hj.value == pytest.approx(math.log(n), abs=0.3)  # MC entropy term of 4 dims
    hj_b = est.mutual_information(mean, logvar, batch_size=50, seed=2)
    assert hj_b.estimator == "minibatch(B=50)" and hj_b.value == pytest.approx(math.log(50), abs=0.3)


def test_rate_decomposition_matches_brute_force():
    n, d = 12, 3
    mean, logvar = posteriors(n, d, seed=16)
    r = est.rate_decomposition(mean, logvar, estimator="whole-dataset", samples=2, seed=4)
    z = est.sample_gaussian(mean, logvar, samples=2, seed=4).reshape(-1, d)
    owner = torch.arange(n).repeat(2)
    lq = brute_log_density(z, mean, logvar).sum(2)
    log_qz = torch.logsumexp(lq, 1) - math.log(n)
    log_cond = lq[torch.arange(2 * n), owner]
    log_pz = normal_logpdf(z, torch.zeros_like(z), torch.zeros_like(z)).sum(1)
    assert r.mutual_information == pytest.approx((log_cond - log_qz).mean().item(), abs=1e-10)
    assert r.marginal_kl == pytest.approx((log_qz - log_pz).mean().item(), abs=1e-10)
    # minibatch MC with B = N and no permutation effect: weights 1/N (diag), (N-1)/(N(B-1)) = 1/N -> same q(z)
    rb = est.rate_decomposition(mean, logvar, estimator="minibatch", batch_size=n, samples=2, seed=4)
    assert rb.mutual_information == pytest.approx(r.mutual_information, abs=1e-10)
    assert rb.marginal_kl == pytest.approx(r.marginal_kl, abs=1e-10)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_whole_dataset_rate_is_the_kl_decomposition(dtype):
    # one whole-data path: the rate decomposition's I_q and marginal KL are those of the KL decomposition
    mean, logvar = posteriors(40, 3, seed=31, dtype=dtype)
    opts = est.DensityOptions(accumulate_float64=True)
    r = est.rate_decomposition(mean, logvar, estimator="whole-dataset", samples=3, seed=6, options=opts)
    k = est.whole_data_kl_decomposition(mean, logvar, samples=3, seed=6, options=opts)
    assert (r.mutual_information, r.marginal_kl) == (k.mutual_information, k.marginal_kl)
    assert r.rate_analytic == k.rate_analytic and r.rate == pytest.approx(k.rate, abs=1e-12)


def test_minibatch_rate_estimator_brute_force_weights():
    n, d, b = 10, 2, 4
    mean, logvar = posteriors(n, d, seed=17)
    r = est.rate_decomposition(mean, logvar, estimator="minibatch", batch_size=b, seed=0)
    # an independent, permutation-free check: average over all batches of the explicit stratified q(z)
    # can't know the permutation, so check the bound and the identity instead
    assert r.mutual_information <= math.log(n) + 1e-12
    assert r.rate == pytest.approx(r.mutual_information + r.marginal_kl, abs=1e-12)
    assert r.batch_size == b and r.num_encodings == n


def test_minibatch_rate_terms_use_the_authors_own_term_weight():
    # The weights of Bozkurt et al.'s probtorch code: 1/N for the example's own component,
    # (N-1)/(N(B-1)) for each other member of the batch (not the β-TC-style 1/(N·B)).
    n_total, b, d = 1000, 6, 3
    mean, logvar = posteriors(b, d, seed=40)
    offset = torch.randn(b, d, dtype=torch.float64, generator=torch.Generator().manual_seed(41)) * (0.5 * logvar).exp()
    z = mean + offset
    lq = brute_log_density(z, mean, logvar).sum(2)
    w = torch.full((b, b), (n_total - 1) / (n_total * (b - 1)), dtype=torch.float64)
    w.fill_diagonal_(1.0 / n_total)
    log_qz = torch.logsumexp(lq + w.log(), 1)
    log_pz = normal_logpdf(z, torch.zeros_like(z), torch.zeros_like(z)).sum(1)
    t = est.minibatch_rate_terms(mean, logvar, offset=offset, dataset_size=n_total)
    assert t.mutual_information.item() == pytest.approx((lq.diagonal() - log_qz).mean().item(), abs=1e-10)
    assert t.marginal_kl.item() == pytest.approx((log_qz - log_pz).mean().item(), abs=1e-10)
    via_z = est.minibatch_rate_terms(mean, logvar, z=z, dataset_size=n_total)
    assert via_z.mutual_information.item() == pytest.approx(t.mutual_information.item(), abs=1e-9)
    # The spot of the constants: separated posteriors saturate at log N (the training-set size),
    # never at log(N·B) or log B.
    far = 50.0 * torch.randn(b, d, dtype=torch.float64, generator=torch.Generator().manual_seed(42))
    sat = est.minibatch_rate_terms(far, torch.full_like(far, -6.0), offset=torch.zeros_like(far), dataset_size=n_total)
    assert sat.mutual_information.item() == pytest.approx(math.log(n_total), abs=1e-9)


def test_minibatch_rate_terms_are_differentiable():
    b, d = 5, 2
    mean, logvar = posteriors(b, d, seed=43)
    eps = torch.randn(b, d, dtype=torch.float64, generator=torch.Generator().manual_seed(44))

    def terms(m, lv):
        t = est.minibatch_rate_terms(m, lv, offset=(0.5 * lv).exp() * eps, dataset_size=50)
        return t.mutual_information, t.marginal_kl

    assert torch.autograd.gradcheck(terms, (mean.clone().requires_grad_(), logvar.clone().requires_grad_()))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_densities_at_offsets_match_brute_force(dtype):
    mean, logvar = posteriors(9, 3, seed=45, dtype=dtype)
    qmean, qlv = posteriors(7, 3, seed=46, dtype=dtype)
    offset = torch.randn(7, 3, generator=torch.Generator().manual_seed(47), dtype=dtype) * (0.5 * qlv).exp()
    ref = brute_log_density((qmean + offset).double(), mean.double(), logvar.double()).sum(2)
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    dense = est.gaussian_log_density_matrix_at_offsets(qmean, offset, mean, logvar)
    assert torch.allclose(dense.double(), ref, atol=tol, rtol=0)
    w = torch.randn(9, dtype=dtype, generator=torch.Generator().manual_seed(48))
    lse = est.logsumexp_log_density_at_offsets(qmean, offset, mean, logvar, log_weights=w)
    assert torch.allclose(lse.double(), torch.logsumexp(ref + w.double(), 1), atol=tol, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("logvar_value", [-20.0, -60.0, -90.0])
def test_narrow_posteriors_saturate_exactly_at_log_n(dtype, logvar_value):
    # β ≪ 1 gives posteriors far narrower than the rounding of their means: the expanded square
    # (and z itself) cannot resolve them, the offset form must. I_q = log N for distinct means,
    # and the rate decomposes exactly: MI + marginal KL = the Monte Carlo rate ≈ the closed form.
    n, d = 400, 10
    mean = torch.randn(n, d, generator=torch.Generator().manual_seed(49), dtype=dtype)
    logvar = torch.full_like(mean, logvar_value)
    tol = 1e-9 if dtype == torch.float64 else 1e-3  # float32: the rounding of log-densities of ~ -5·logvar
    for estimator in ("whole-dataset", "minibatch"):
        r = est.rate_decomposition(mean, logvar, estimator=estimator, batch_size=64, seed=3)
        assert r.mutual_information == pytest.approx(math.log(n), abs=tol)
        assert r.rate == pytest.approx(r.rate_analytic, rel=0.01)
        assert r.marginal_kl == pytest.approx(r.rate - math.log(n), abs=1e-3 * abs(r.rate))
    k = est.whole_data_kl_decomposition(mean, logvar, seed=3)
    assert k.mutual_information == pytest.approx(math.log(n), abs=tol)
    # The per-dimension terms need the precision exp(-logvar), which float32 cannot hold below
    # ≈ -88.7: they are computed in float64 there, never returned as NaN.
    assert math.isfinite(k.total_correlation) and math.isfinite(k.dimensionwise_kl)


def test_nearest_neighbours_match_brute_force():
    g = torch.Generator().manual_seed(50)
    q = torch.randn(123, 7, 5, generator=g, dtype=torch.float64)
    r = torch.randn(345, 7, 5, generator=g, dtype=torch.float64)
    d = torch.cdist(q.flatten(1), r.flatten(1))
    for k in (0, 3, 20, 35, 500):
        nn = est.nearest_neighbours(q, r, projection_dim=k, query_chunk=17, basis_rows=50)
        assert torch.equal(nn.index, d.argmin(1)), k
        assert torch.allclose(nn.distance, d.min(1).values, atol=1e-12, rtol=0)
        assert nn.distance.dtype == torch.float64 and nn.index.dtype == torch.int64
    # float32 and uint8 inputs: distances of the inputs' values, summed exactly in float64
    qi = torch.randint(0, 256, (64, 40), generator=g, dtype=torch.uint8)
    ri = torch.randint(0, 256, (200, 40), generator=g, dtype=torch.uint8)
    di = torch.cdist(qi.double(), ri.double())
    for x, y in ((qi, ri), (qi.float(), ri.float())):
        nn = est.nearest_neighbours(x, y, projection_dim=8)
        assert torch.allclose(nn.distance, di.min(1).values, atol=1e-9, rtol=0)
        assert torch.allclose(di.gather(1, nn.index[:, None])[:, 0], di.min(1).values, atol=1e-9, rtol=0)


def test_nearest_neighbours_of_images_compare_few_pairs_exactly():
    split = vt.data.tetrominoes_split("cv", 0.02)
    train = vt.data.tetrominoes(split.train[:2000]).images
    test = vt.data.tetrominoes(split.test[:300]).images
    seen = []
    nn = est.nearest_neighbours(test, train, progress=lambda done, total: seen.append((done, total)))
    d = torch.cdist(test.flatten(1).double(), train.flatten(1).double())
    assert torch.allclose(nn.distance, d.min(1).values, atol=1e-9, rtol=0)
    assert torch.equal(nn.index, d.argmin(1))
    assert nn.pairs_compared < 0.05 * 300 * 2000  # the projection bound rules out most pairs
    assert seen and seen[-1] == (300, 300) and all(a <= b for (a, _), (b, _) in zip(seen, seen[1:]))


def test_nearest_neighbours_bad_input_names_the_argument():
    q, r = torch.zeros(3, 4), torch.zeros(5, 4)
    for call, exc, arg in [
            (lambda: est.nearest_neighbours(q, torch.zeros(5, 3)), ValueError, "reference"),
            (lambda: est.nearest_neighbours(q, torch.zeros(0, 4)), ValueError, "reference"),
            (lambda: est.nearest_neighbours(q, r, projection_dim=-1), ValueError, "projection_dim"),
            (lambda: est.nearest_neighbours(q, r, query_chunk=0), ValueError, "query_chunk"),
            (lambda: est.nearest_neighbours(q.bool(), r), TypeError, "queries"),
            (lambda: est.nearest_neighbours(q, r.clone().fill_(math.nan)), ValueError, "reference"),
            (lambda: est.nearest_neighbours(q, r, progress="yes"), TypeError, "progress")]:
        with pytest.raises(exc, match=f"argument '{arg}'"):
            call()


def test_hoffman_johnson_mi_matches_brute_force():
    n, d = 15, 2
    mean, logvar = posteriors(n, d, seed=18)
    mi = est.mutual_information(mean, logvar, samples=2, seed=7)
    z = est.sample_gaussian(mean, logvar, samples=2, seed=7).reshape(-1, d)
    lq = brute_log_density(z, mean, logvar).sum(2)
    ent = torch.distributions.Normal(mean, (0.5 * logvar).exp()).entropy().sum(1).mean()
    ref = (-ent - (torch.logsumexp(lq, 1) - math.log(n)).mean()).item()
    assert mi.value == pytest.approx(ref, abs=1e-10)
    mb = est.mutual_information(mean, logvar, batch_size=5, samples=1, seed=7)
    z1 = est.sample_gaussian(mean, logvar, samples=1, seed=7)[0]
    parts = []
    for s in range(0, n, 5):
        lq_b = brute_log_density(z1[s:s + 5], mean[s:s + 5], logvar[s:s + 5]).sum(2)
        parts.append(torch.logsumexp(lq_b, 1) - math.log(5))
    ref_b = (-ent - torch.cat(parts).mean()).item()
    assert mb.value == pytest.approx(ref_b, abs=1e-10) and mb.cap == pytest.approx(math.log(5))


def test_active_units():
    g = torch.Generator().manual_seed(19)
    mean = torch.cat([torch.randn(500, 3, generator=g), 0.01 * torch.randn(500, 2, generator=g)], 1)
    au = est.active_units(mean)
    assert au.count == 3 and au.active.tolist() == [True, True, True, False, False]
    torch.testing.assert_close(au.variance, mean.double().var(0))
    assert est.active_units(mean, threshold=1e-6).count == 5


# ----------------------------------------------------------------------------- importance-weighted log p(x)

def linear_gaussian(seed=20, d=3, p=5, sigma=0.5):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(p, d, generator=g, dtype=torch.float64)
    bias = torch.randn(p, generator=g, dtype=torch.float64)
    return w, bias, sigma


def exact_linear_gaussian(b=4, d=3, p=6, sigma=0.5):
    """x = W z + bias + N(0, sigma^2 I): log p(x) = log N(x; bias, W W^T + sigma^2 I) in closed form, and the
    exact posterior, diagonal because W has orthogonal columns (so every importance weight equals p(x))."""
    q, _ = torch.linalg.qr(torch.randn(p, d, dtype=torch.float64, generator=torch.Generator().manual_seed(21)))
    w = q * torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    bias = torch.randn(p, dtype=torch.float64, generator=torch.Generator().manual_seed(22))
    x = torch.randn(b, p, dtype=torch.float64, generator=torch.Generator().manual_seed(23)) * 2
    cov = w @ w.T + sigma**2 * torch.eye(p, dtype=torch.float64)
    exact = torch.distributions.MultivariateNormal(bias, cov).log_prob(x)
    post_cov = torch.linalg.inv(torch.eye(d, dtype=torch.float64) + w.T @ w / sigma**2)
    mean = (post_cov @ w.T @ (x - bias).T / sigma**2).T
    logvar = post_cov.diagonal().log().expand(b, d).clone()
    return w, bias, sigma, x, exact, mean, logvar


def test_iw_log_px_exact_for_linear_gaussian_with_exact_posterior():
    w, bias, sigma, x, exact, mean, logvar = exact_linear_gaussian()

    def log_lik(z):  # z: [B*C, D], example-major
        c = z.shape[0] // 4
        xs = x.repeat_interleave(c, 0)
        return torch.distributions.Normal(z @ w.T + bias, sigma).log_prob(xs).sum(1)

    r = est.importance_weighted_log_likelihood(None, mean, logvar, decoder=log_lik, likelihood="custom",
                                               num_samples=7, samples_per_chunk=3)
    torch.testing.assert_close(r.log_px, exact, rtol=0, atol=1e-9)
    torch.testing.assert_close(r.elbo, exact, rtol=0, atol=1e-9)


def test_iw_gaussian_likelihood_matches_closed_form_log_px():
    # The decoder returns the mean W z + bias; the estimator applies N(x; mean, sigma^2 I) itself.
    w, bias, sigma, x, exact, mean, logvar = exact_linear_gaussian()
    decoder = lambda z: z @ w.T + bias
    r = est.importance_weighted_log_likelihood(x, mean, logvar, decoder=decoder, likelihood="gaussian",
                                               gaussian_std=sigma, num_samples=7, samples_per_chunk=3, seed=4)
    torch.testing.assert_close(r.log_px, exact, rtol=0, atol=1e-9)
    torch.testing.assert_close(r.elbo, exact, rtol=0, atol=1e-9)

    def log_lik(z):  # the same Gaussian log-density, returned by a "custom" decoder: same draws, same numbers
        return torch.distributions.Normal(decoder(z), sigma).log_prob(x.repeat_interleave(len(z) // 4, 0)).sum(1)
    custom = est.importance_weighted_log_likelihood(None, mean, logvar, decoder=log_lik, likelihood="custom",
                                                    num_samples=7, samples_per_chunk=3, seed=4)
    torch.testing.assert_close(r.log_px, custom.log_px, rtol=0, atol=1e-12)


def test_iw_likelihood_names_come_from_the_core():
    mean, logvar = posteriors(4, 3, seed=29)
    with pytest.raises(vt.ArgumentError, match="'bernoulli', 'gaussian', 'categorical', 'custom'") as e:
        est.importance_weighted_log_likelihood(torch.rand(4, 6), mean, logvar, decoder=lambda z: z,
                                               likelihood="poisson")
    assert _arg(e) == "likelihood"
    with pytest.raises(vt.ArgumentTypeError) as e:
        est.importance_weighted_log_likelihood(torch.rand(4, 6), mean, logvar, decoder=lambda z: z, likelihood=None)
    assert _arg(e) == "likelihood"
    with pytest.raises(vt.ArgumentError) as e:
        est.importance_weighted_log_likelihood(torch.rand(4, 3), mean, logvar, decoder=lambda z: z,
                                               likelihood="gaussian", gaussian_std=0.0)
    assert _arg(e) == "gaussian_std"
    with pytest.raises(vt.ArgumentError) as e:
        est.importance_weighted_log_likelihood(torch.rand(4, 3), mean, logvar, decoder=lambda z: z,
                                               likelihood="gaussian", mask=torch.ones(4, 3))
    assert _arg(e) == "mask"


def test_iw_log_px_bounds_and_monotone_in_k_for_approximate_posterior():
    d, p, sigma, b = 3, 5, 0.5, 64
    w, bias, _ = linear_gaussian(d=d, p=p, sigma=sigma)
    x = torch.randn(b, p, dtype=torch.float64, generator=torch.Generator().manual_seed(24))
    cov = w @ w.T + sigma**2 * torch.eye(p, dtype=torch.float64)
    exact = torch.distributions.MultivariateNormal(bias, cov).log_prob(x).mean().item()
    post_cov = torch.linalg.inv(torch.eye(d, dtype=torch.float64) + w.T @ w / sigma**2)
    mean = (post_cov @ w.T @ (x - bias).T / sigma**2).T
    logvar = (1.5 * post_cov.diagonal()).log().expand(b, d).clone()  # a diagonal, over-dispersed q

    def log_lik(z):
        xs = x.repeat_interleave(z.shape[0] // b, 0)
        return torch.distributions.Normal(z @ w.T + bias, sigma).log_prob(xs).sum(1)

    # analytic ELBO of this q
    qd = torch.distributions.Normal(mean, (0.5 * logvar).exp())
    kl = torch.distributions.kl_divergence(qd, torch.distributions.Normal(0.0, 1.0)).sum(1)
    resid = x - mean @ w.T - bias
    recon = -0.5 * p * math.log(2 * math.pi * sigma**2) - 0.5 * ((resid**2).sum(1) + (logvar.exp() @ (w**2).T).sum(1)) / sigma**2
    elbo = (recon - kl).mean().item()
    assert elbo < exact - 1.0  # q is far from the posterior
    means = {}
    for k in [1, 10, 100, 1000]:
        vals = []
        for seed in range(4):
            r = est.importance_weighted_log_likelihood(None, mean, logvar, decoder=log_lik, likelihood="custom",
                                                       num_samples=k, samples_per_chunk=100, seed=seed)
            assert (r.log_px >= r.elbo - 1e-12).all()  # log-mean-exp >= mean, sample by sample
            vals.append(r.log_px.mean().item())
            if k == 1000:
                assert r.elbo.mean().item() == pytest.approx(elbo, abs=0.1)
        means[k] = sum(vals) / len(vals)
    assert means[1] == pytest.approx(elbo, abs=1.0)
    assert means[10] > elbo + 1.0
    assert means[10] <= means[100] + 0.01 <= means[1000] + 0.02
    assert means[1000] == pytest.approx(exact, abs=0.03)


def test_iw_bernoulli_and_categorical_match_brute_force():
    torch.manual_seed(0)
    b, d, h, wd = 3, 2, 4, 4
    dec = torch.nn.Linear(d, h * wd).double()
    x = (torch.rand(b, h, wd, dtype=torch.float64) > 0.5).double()
    mean, logvar = posteriors(b, d, seed=25)
    decoder = lambda z: dec(z).reshape(-1, h, wd)
    r = est.importance_weighted_log_likelihood(x, mean, logvar, decoder=decoder, num_samples=12, samples_per_chunk=5,
                                               seed=3)
    # brute force with the same draws: K samples of eps in chunks [B, C, D] from the seeded CPU generator
    gen = torch.Generator().manual_seed(3)
    logw = []
    for c in [5, 5, 2]:
        eps = torch.randn(b, c, d, generator=gen, dtype=torch.float64)
        z = mean[:, None] + (0.5 * logvar).exp()[:, None] * eps
        with torch.no_grad():
            logits = dec(z).reshape(b, c, h, wd)
        ll = torch.distributions.Bernoulli(logits=logits).log_prob(x[:, None]).sum((2, 3))
        lp = normal_logpdf(z, torch.zeros_like(z), torch.zeros_like(z)).sum(2)
        lq = normal_logpdf(z, mean[:, None], logvar[:, None]).sum(2)
        logw.append(ll + lp - lq)
    logw = torch.cat(logw, 1)
    torch.testing.assert_close(r.log_px, torch.logsumexp(logw, 1) - math.log(12), rtol=0, atol=1e-10)
    torch.testing.assert_close(r.elbo, logw.mean(1), rtol=0, atol=1e-10)

    # categorical tokens with a padding mask
    t, v = 5, 7
    emb = torch.nn.Linear(d, t * v).double()
    tokens = torch.randint(0, v, (b, t))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    r = est.importance_weighted_log_likelihood(tokens, mean, logvar, decoder=lambda z: emb(z).reshape(-1, t, v),
                                               likelihood="categorical", mask=mask, num_samples=4,
                                               samples_per_chunk=4, seed=9)
    gen = torch.Generator().manual_seed(9)
    eps = torch.randn(b, 4, d, generator=gen, dtype=torch.float64)
    z = mean[:, None] + (0.5 * logvar).exp()[:, None] * eps
    with torch.no_grad():
        logits = emb(z).reshape(b, 4, t, v)
    ll = (torch.distributions.Categorical(logits=logits).log_prob(tokens[:, None]) * mask[:, None]).sum(2)
    lw = ll + normal_logpdf(z, torch.zeros_like(z), torch.zeros_like(z)).sum(2) - normal_logpdf(
        z, mean[:, None], logvar[:, None]).sum(2)
    torch.testing.assert_close(r.log_px, torch.logsumexp(lw, 1) - math.log(4), rtol=0, atol=1e-10)


def test_iw_seeds_and_generators_are_reproducible():
    mean, logvar = posteriors(3, 2, seed=26)
    f = lambda z: -(z**2).sum(1)
    a = est.importance_weighted_log_likelihood(None, mean, logvar, decoder=f, likelihood="custom", num_samples=20,
                                               seed=1).log_px
    b = est.importance_weighted_log_likelihood(None, mean, logvar, decoder=f, likelihood="custom", num_samples=20,
                                               seed=1).log_px
    c = est.importance_weighted_log_likelihood(None, mean, logvar, decoder=f, likelihood="custom", num_samples=20,
                                               seed=2).log_px
    assert torch.equal(a, b) and not torch.equal(a, c)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    r1 = est.rate_decomposition(mean, logvar, generator=g1)
    r2 = est.rate_decomposition(mean, logvar, generator=g2)
    assert r1 == r2


# ----------------------------------------------------------------------------- binned MI

def test_binned_mi_brute_force_and_bounds():
    g = torch.Generator().manual_seed(27)
    n = 400
    acts = torch.randn(n, 3, generator=g)
    labels = (acts[:, 0] + 0.5 * torch.randn(n, generator=g) > 0).long()
    res = est.binned_mutual_information(acts, labels, num_bins=4)
    # brute force: per-neuron bins by explicit comparison, symbols as tuples, entropies by counting
    lo, hi = acts.min(0).values, acts.max(0).values
    sym = []
    for row in acts:
        sym.append(tuple(min(int((row[j] - lo[j]) / ((hi[j] - lo[j]) / 4)), 3) for j in range(3)))

    def h(items):
        from collections import Counter
        cnt = Counter(items)
        return -sum(c / n * math.log2(c / n) for c in cnt.values())

    ht, hy = h(sym), h(labels.tolist())
    hty = h(list(zip(sym, labels.tolist())))
    assert res.h_t == pytest.approx(ht, abs=1e-12) and res.i_xt == pytest.approx(ht, abs=1e-12)
    assert res.i_ty == pytest.approx(ht + hy - hty, abs=1e-12)
    assert 0 <= res.i_ty <= res.h_y + 1e-12 and res.i_xt <= math.log2(n) + 1e-12
    assert res.num_symbols == len(set(sym))


def test_binned_mi_extremes():
    n = 256
    labels = torch.arange(n) % 2
    # a layer that copies the label: I(T;Y) = H(Y) = 1 bit; constant layer: 0 bits
    copy = est.binned_mutual_information(labels.float()[:, None], labels, num_bins=30)
    assert copy.i_ty == pytest.approx(1.0) and copy.h_t == pytest.approx(1.0)
    const = est.binned_mutual_information(torch.ones(n, 4), labels)
    assert const.i_ty == 0 and const.i_xt == 0
    # every example in its own bin: I(X;T) = log2 N
    unique = est.binned_mutual_information(torch.arange(n, dtype=torch.float32)[:, None], labels, num_bins=n)
    assert unique.i_xt == pytest.approx(math.log2(n)) and unique.i_ty == pytest.approx(1.0)
    assert est.bin_activations(torch.tensor([[0.0], [0.5], [1.0]]), 2).flatten().tolist() == [0, 1, 1]


# ----------------------------------------------------------------------------- result records

def test_results_are_read_only_records_with_one_field_list():
    mean, logvar = posteriors(6, 2, seed=32)
    r = est.rate_decomposition(mean, logvar, estimator="whole-dataset")
    assert isinstance(r, est.RateDecomposition)
    assert list(r.to_dict()) == list(est.RateDecomposition._fields)
    assert r.to_dict()["mutual_information"] == r.mutual_information and r.estimator == "whole-dataset"
    assert r == est.rate_decomposition(mean, logvar, estimator="whole-dataset")
    assert r != est.rate_decomposition(mean, logvar, estimator="whole-dataset", seed=1)
    assert repr(r).startswith("RateDecomposition(rate=")
    with pytest.raises(AttributeError):
        r.rate = 0.0
    # results index and unpack in field order (the core returned tuples for these)
    tc = est.minibatch_total_correlation(mean, mean, logvar, dataset_size=10, sampling="mss")
    assert est.TotalCorrelation._fields == ("tc", "log_qz", "log_prod_qzj", "estimator")
    value, log_qz, _, name = tc
    assert torch.equal(tc[0], value) and torch.equal(tc[-3], log_qz) and name == "minibatch-stratified"
    with pytest.raises(IndexError):
        tc[4]
    au = est.active_units(mean)
    assert len(au) == 4 and au.count == au[0]
    # options: defaults from the core's default-constructed struct, overridable by keyword
    default = est.DensityOptions()
    assert est.DensityOptions(**default.to_dict()) == default
    assert est.DensityOptions(row_chunk=3).to_dict() == {**default.to_dict(), "row_chunk": 3}


# ----------------------------------------------------------------------------- bad input

def _arg(excinfo):
    return excinfo.value.argument


def test_bad_input_raises_named_errors():
    mean, logvar = posteriors(4, 3, seed=28)
    z = mean.clone()
    with pytest.raises(ValueError) as e:
        est.minibatch_total_correlation(z[:, :2], mean, logvar, dataset_size=10)
    assert _arg(e) == "z"
    with pytest.raises(ValueError) as e:
        est.minibatch_total_correlation(z, mean, logvar[:3], dataset_size=10)
    assert _arg(e) == "logvar"
    with pytest.raises(ValueError) as e:
        est.minibatch_total_correlation(z, mean, logvar, dataset_size=3)
    assert _arg(e) == "dataset_size"
    with pytest.raises(ValueError) as e:
        est.minibatch_total_correlation(z[:1], mean[:1], logvar[:1], dataset_size=3, sampling="mss")
    assert _arg(e) == "z"
    with pytest.raises(ValueError) as e:
        est.minibatch_total_correlation(z, mean, logvar, dataset_size=10, sampling="xyz")
    assert _arg(e) == "sampling"
    bad = mean.clone()
    bad[1, 1] = float("nan")
    with pytest.raises(ValueError) as e:
        est.minibatch_total_correlation(z, bad, logvar, dataset_size=10)
    assert _arg(e) == "mean"
    with pytest.raises(ValueError) as e:
        est.logsumexp_log_density(bad, mean, logvar)
    assert _arg(e) == "z"
    var = logvar.exp()
    var[0, 0] = -1.0
    with pytest.raises(ValueError) as e:
        est.gaussian_log_density_matrix(z, mean, var=var)
    assert _arg(e) == "var"
    with pytest.raises(ValueError) as e:
        est.rate_decomposition(mean, var=var)
    assert _arg(e) == "var"
    with pytest.raises(ValueError) as e:
        est.rate_decomposition(bad, logvar)
    assert _arg(e) == "mean"
    with pytest.raises(ValueError) as e:
        est.mutual_information(mean, logvar * float("nan"))
    assert _arg(e) == "logvar"
    with pytest.raises(TypeError) as e:
        est.gaussian_log_density_matrix(z.long(), mean, logvar)
    assert _arg(e) == "z"
    with pytest.raises(ValueError) as e:
        est.logsumexp_log_density(z, mean, logvar, log_weights=torch.zeros(5, dtype=torch.float64))
    assert _arg(e) == "log_weights"
    with pytest.raises(ValueError) as e:
        est.rate_decomposition(mean, logvar, estimator="exact")
    assert _arg(e) == "estimator"
    with pytest.raises(ValueError) as e:
        est.active_units(mean[:1])
    assert _arg(e) == "mean"
    with pytest.raises(ValueError) as e:
        est.importance_weighted_log_likelihood(torch.rand(4, 6), mean, logvar, decoder=lambda z: torch.zeros(3, 6))
    assert _arg(e) == "decoder"
    with pytest.raises(ValueError) as e:
        est.importance_weighted_log_likelihood(torch.rand(4, 6) * 3, mean, logvar, decoder=lambda z: z)
    assert _arg(e) == "x"
    with pytest.raises(TypeError) as e:
        est.importance_weighted_log_likelihood(None, mean, logvar, decoder=lambda z: 1.0, likelihood="custom")
    assert _arg(e) == "decoder"
    with pytest.raises(ValueError) as e:
        est.importance_weighted_log_likelihood(None, mean, logvar, decoder=lambda z: z[:, 0] * float("nan"),
                                               likelihood="custom")
    assert _arg(e) == "decoder"
    with pytest.raises(ValueError) as e:
        est.binned_mutual_information(torch.randn(5, 2), torch.zeros(4, dtype=torch.long))
    assert _arg(e) == "labels"
    with pytest.raises(ValueError) as e:
        est.binned_mutual_information(torch.randn(5, 2), torch.zeros(5, dtype=torch.long), num_bins=0)
    assert _arg(e) == "num_bins"
    assert issubclass(vt.ArgumentError, ValueError)


def test_estimators_say_what_their_dtype_cannot_hold():
    """Rates and variances grow with the squared means: past the evaluation dtype's range they were
    returned as inf; now a named error says so (and suggests float64 for float32 means). Within range
    they are finite at any scale (float64 means of 1e150: a rate of about 1e300)."""
    g = torch.Generator().manual_seed(1)
    mean = torch.randn(100, 3, generator=g, dtype=torch.float64)
    logvar = torch.full((100, 3), -1.0, dtype=torch.float64)
    assert math.isfinite(vt.estimators.rate_decomposition(mean * 1e150, logvar, seed=0).rate)
    assert vt.estimators.active_units(mean * 1e150).count == 3
    for call, words in ((lambda: vt.estimators.rate_decomposition(mean * 1e200, logvar, seed=0), "Double"),
                        (lambda: vt.estimators.rate_decomposition((mean * 1e20).float(), logvar.float(), seed=0),
                         "pass float64 means"),
                        (lambda: vt.estimators.active_units(mean * 1e200), "beyond float64")):
        with pytest.raises(vt.ArgumentError, match=words) as info:
            call()
        assert info.value.argument == "mean"
