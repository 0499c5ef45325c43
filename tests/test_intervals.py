"""Resampling intervals (vaetransfer.intervals) against closed forms, torch.quantile and the
textbook definitions; and the similarity heatmaps' default interval on wide layers at small n."""
from statistics import NormalDist

import numpy as np
import pytest
import torch

from vaetransfer import intervals
from vaetransfer import similarity as sim


def test_per_entry_quantiles_equal_torch_quantile():
    g = torch.Generator().manual_seed(0)
    reps = torch.randn(37, 3, 4, generator=g, dtype=torch.float64)
    q = torch.rand(3, 4, generator=g, dtype=torch.float64)
    q[0, 0], q[0, 1] = 0.0, 1.0
    got = intervals.quantiles(reps, q)
    for i in range(3):
        for j in range(4):
            torch.testing.assert_close(got[i, j], torch.quantile(reps[:, i, j], q[i, j].item()), rtol=0, atol=1e-14)


def test_acceleration_of_the_mean_is_the_sample_skewness_over_six_root_n():
    # Leave-one-out means: θ̄ − θ_(i) = (x_i − x̄)/(n − 1), so Eq. 14.15 gives
    # a = Σ(x_i − x̄)³ / (6 (Σ(x_i − x̄)²)^{3/2}) in closed form.
    x = torch.distributions.Exponential(1.0).sample((40,)).double()
    loo = (x.sum() - x) / (len(x) - 1)
    c = x - x.mean()
    want = c.pow(3).sum() / (6 * c.square().sum().pow(1.5))
    torch.testing.assert_close(intervals.acceleration(loo.unsqueeze(1))[0], want, rtol=1e-12, atol=0)
    assert intervals.acceleration(torch.ones(5, 2, dtype=torch.float64)).eq(0).all()  # constant: no NaN


def test_bca_without_bias_or_acceleration_is_the_percentile_interval():
    # Replicates symmetric about the estimate (half below, half above) and a symmetric jackknife:
    # z0 = 0, a = 0, so BCa's levels are exactly (1 ∓ ci)/2.
    base = torch.linspace(-1, 1, 201, dtype=torch.float64)
    reps = torch.stack([base, 2 * base + 3], dim=1)
    observed = torch.tensor([0.0, 3.0], dtype=torch.float64)
    jack = torch.stack([torch.linspace(-1, 1, 11, dtype=torch.float64)] * 2, dim=1)
    low, high, outside = intervals.bca_interval(observed, reps, jack, 0.9)
    plow, phigh = intervals.percentile_interval(reps, 0.9)
    torch.testing.assert_close(low, plow, rtol=0, atol=1e-12)
    torch.testing.assert_close(high, phigh, rtol=0, atol=1e-12)
    assert not outside.any()


def test_bca_moves_against_a_shifted_bootstrap_and_flags_an_estimate_beyond_every_replicate():
    g = torch.Generator().manual_seed(1)
    reps = torch.randn(400, 2, generator=g, dtype=torch.float64)
    jack = torch.randn(50, 2, generator=g, dtype=torch.float64) * 0.01
    # Entry 0: estimate at the replicates' 20th percentile -> the interval moves down from the
    # percentile interval; entry 1: below every replicate -> flagged, z0 clamped (finite bounds).
    observed = torch.stack([torch.quantile(reps[:, 0], 0.2), reps[:, 1].min() - 1.0])
    low, high, outside = intervals.bca_interval(observed, reps, jack, 0.9)
    plow, phigh = intervals.percentile_interval(reps, 0.9)
    assert low[0] < plow[0] and high[0] < phigh[0]
    assert outside.tolist() == [False, True]
    assert torch.isfinite(low).all() and torch.isfinite(high).all()


def test_jackknife_interval_is_centred_and_uses_the_block_standard_error():
    reps = torch.tensor([[1.0], [2.0], [3.0], [4.0]], dtype=torch.float64)
    low, high = intervals.jackknife_interval(torch.tensor([10.0], dtype=torch.float64), reps, 0.95)
    se = np.sqrt(3 / 4 * ((np.arange(1, 5) - 2.5) ** 2).sum())
    z = NormalDist().inv_cdf(0.975)
    np.testing.assert_allclose([low.item(), high.item()], [10 - z * se, 10 + z * se], rtol=1e-14)
    w = intervals.jackknife_weights(10, 3, 0)
    assert w.shape == (3, 10) and (w.sum(0) == 2).all() and intervals.smallest_block_kept(10, 3) == 6


def test_wide_layers_at_small_n_default_interval_holds_the_value_and_bootstrap_warns():
    # Linear CKA of two independent 300-wide layers at n = 60: a bootstrap sample's repeated rows
    # inflate every replicate above the estimate; the default (jackknife) interval is centred on it.
    g = torch.Generator().manual_seed(2)
    a = {"x": torch.randn(60, 300, generator=g, dtype=torch.float64)}
    b = {"y": torch.randn(60, 300, generator=g, dtype=torch.float64)}
    m = sim.similarity_matrix(a, b, ci=0.95)
    assert m.resampling == "jackknife" and m.ci_low.item() <= m.values.item() <= m.ci_high.item()
    with pytest.warns(RuntimeWarning, match="beyond all 200 bootstrap replicates"):
        boot = sim.similarity_matrix(a, b, ci=0.95, resampling="bootstrap")
    assert (boot.replicates > boot.values).all()
