"""Similarity engine: CKA, Procrustes, all-pairs matrices, activations, sanity study, plots.

Oracles: Kornblith et al.'s published demo values, float64 NumPy definitions written here from
the formulas (Eq. 2, Eq. 5/7, U-centred HSIC), closed-form invariances, brute-force averages.
"""
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest
import torch

import vaetransfer
from vaetransfer import similarity as sim
from vaetransfer import plots


# ----------------------------------------------------------------------------- NumPy oracles
def np_cka(x, y):
    x = x - x.mean(0)
    y = y - y.mean(0)
    return np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))


def np_ucentre(k):
    n = k.shape[0]
    k = k.copy()
    np.fill_diagonal(k, 0.0)
    r = k.sum(1) / (n - 2)
    t = k.sum() / ((n - 1) * (n - 2))
    u = k - r[:, None] - r[None, :] + t
    np.fill_diagonal(u, 0.0)
    return u


def np_cka_debiased(x, y):
    kx, ky = np_ucentre(x @ x.T), np_ucentre(y @ y.T)
    return (kx * ky).sum() / np.sqrt((kx * kx).sum() * (ky * ky).sum())


def np_procrustes(x, y):
    x = x - x.mean(0)
    y = y - y.mean(0)
    x = x / np.linalg.norm(x)
    y = y / np.linalg.norm(y)
    return np.linalg.svd(y.T @ x, compute_uv=False).sum()


def t64(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def kornblith_demo():
    np.random.seed(1337)
    x = np.random.randn(100, 10)
    y = np.random.randn(100, 10) + x
    return x, y


# ----------------------------------------------------------------------------- single pairs
def test_published_oracle():
    x, y = kornblith_demo()
    assert sim.cka(t64(x), t64(y)) == pytest.approx(0.55761, abs=5e-6)
    assert sim.cka(t64(x), t64(y), debiased=True) == pytest.approx(0.51346, abs=5e-6)
    # float32 storage stays within float32 accuracy of the same value
    assert sim.cka(t64(x).float(), t64(y).float()) == pytest.approx(0.5576133, abs=2e-6)


@pytest.mark.parametrize("n,px,py", [(40, 600, 500), (300, 8, 12), (60, 60, 7)])
def test_agrees_with_float64_numpy(n, px, py):
    rng = np.random.default_rng(n + px)
    x = rng.standard_normal((n, px)) * rng.uniform(0.1, 3, px) + rng.standard_normal(px)
    y = x[:, :min(px, py)] @ rng.standard_normal((min(px, py), py)) + 2.0 * rng.standard_normal((n, py))
    for form in ("auto", "feature", "gram"):
        assert sim.cka(t64(x), t64(y), cka_form=form) == pytest.approx(np_cka(x, y), rel=1e-10)
        assert sim.cka(t64(x), t64(y), debiased=True, cka_form=form) == pytest.approx(np_cka_debiased(x, y), rel=1e-9)
    assert sim.procrustes(t64(x), t64(y)) == pytest.approx(np_procrustes(x, y), rel=1e-9)
    assert sim.procrustes(t64(y), t64(x)) == pytest.approx(np_procrustes(x, y), rel=1e-9)


def test_feature_and_gram_forms_agree_float32():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 300, generator=g)
    y = x[:, :50] @ torch.randn(50, 40, generator=g) + torch.randn(200, 40, generator=g)
    a, b = sim.cka(x, y, cka_form="feature"), sim.cka(x, y, cka_form="gram")
    assert a == pytest.approx(b, rel=1e-5)
    assert a == pytest.approx(np_cka(x.double().numpy(), y.double().numpy()), rel=1e-5)


def test_invariances():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((80, 20))
    q, _ = np.linalg.qr(rng.standard_normal((20, 20)))
    y = 3.7 * x @ q
    assert sim.cka(t64(x), t64(y)) == pytest.approx(1.0, abs=1e-12)
    assert sim.procrustes(t64(x), t64(y + rng.standard_normal(20))) == pytest.approx(1.0, abs=1e-12)
    # Q with more columns (isometric embedding into a wider space) keeps both at 1.
    q2, _ = np.linalg.qr(rng.standard_normal((30, 20)))
    assert sim.cka(t64(x), t64(0.5 * x @ q2.T)) == pytest.approx(1.0, abs=1e-12)
    # A general invertible, non-orthogonal map changes both.
    a = rng.standard_normal((20, 20)) @ np.diag(np.logspace(0, 2, 20))
    assert np.linalg.matrix_rank(a) == 20
    assert sim.cka(t64(x), t64(x @ a)) < 0.95
    assert sim.procrustes(t64(x), t64(x @ a)) < 0.95


def test_procrustes_distance_forms():
    x, y = kornblith_demo()
    nu = np_procrustes(x, y)
    expect = {"nu": nu, "2-2nu": 2 - 2 * nu, "1-nu": 1 - nu, "arccos": np.arccos(nu), "sqrt(2-2nu)": np.sqrt(2 - 2 * nu)}
    for form, value in expect.items():
        assert sim.procrustes(t64(x), t64(y), form=form) == pytest.approx(value, rel=1e-10)
    # Eq. 4 on normalised inputs: ‖Ẋ‖² + ‖Ẏ‖² − 2‖ẎᵀẊ‖_* = 2 − 2ν = min_Q ‖Ẋ − ẎQ‖_F² (brute force).
    xc, yc = x - x.mean(0), y - y.mean(0)
    xd, yd = xc / np.linalg.norm(xc), yc / np.linalg.norm(yc)
    u, _, vt = np.linalg.svd(yd.T @ xd)
    assert np.linalg.norm(xd - yd @ (u @ vt)) ** 2 == pytest.approx(sim.procrustes(t64(x), t64(y), form="2-2nu"), rel=1e-9)


def test_min_measure_and_factor():
    x, y = kornblith_demo()
    m = sim.similarity(t64(x), t64(y), "min")
    assert m == pytest.approx(min(np_cka(x, y), np_procrustes(x, y)), rel=1e-10)
    # p > n: the per-layer factor reproduces ẊẊᵀ (one eigendecomposition per layer).
    z = torch.randn(30, 200, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    f = sim.LayerFit(z)
    zc = z - z.mean(0)
    zc = zc / zc.norm()
    fac = f.procrustes_factor()
    assert fac.shape[1] <= 29  # centred rank ≤ n − 1
    assert torch.allclose(fac @ fac.T, zc @ zc.T, atol=1e-12)


# ----------------------------------------------------------------------------- all pairs
def make_model_acts(seed, n=60, widths=(5, 40, 120, 3), base=None, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    h = base if base is not None else torch.randn(n, 16, generator=g, dtype=dtype)
    acts = OrderedDict(input=h)
    for i, w in enumerate(widths):
        h = torch.relu(h @ torch.randn(h.shape[1], w, generator=g, dtype=dtype) + 0.1)
        acts[f"enc{i + 1}" if i < 2 else f"dec{i - 1}"] = h
    return acts


def test_matrix_properties_and_pairs():
    base = torch.randn(60, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(117))
    a = make_model_acts(1, base=base)
    b = make_model_acts(2, base=base)
    for measure in ("cka", "procrustes", "min"):
        self_m = sim.similarity_matrix(a, a, measure).values
        assert torch.equal(torch.diagonal(self_m), torch.ones(len(a), dtype=torch.float64))
        assert torch.allclose(self_m, self_m.T, atol=1e-12)
        ab = sim.similarity_matrix(a, b, measure)
        ba = sim.similarity_matrix(b, a, measure)
        assert torch.allclose(ab.values, ba.values.T, atol=1e-12)
        assert ab.values.min() >= 0 and ab.values.max() <= 1
        assert ab.rows == list(a) and ab.cols == list(b)
        for k, (na, xa) in enumerate(a.items()):
            for l, (nb, xb) in enumerate(b.items()):
                ref = {"cka": np_cka, "procrustes": np_procrustes,
                       "min": lambda u, v: min(np_cka(u, v), np_procrustes(u, v))}[measure](xa.numpy(), xb.numpy())
                # Procrustes via per-layer Gram eigendecompositions: near-null directions of a
                # rank-deficient layer enter through √λ, so the documented accuracy is ~1e-8 absolute.
                tol = 1e-12 if measure == "cka" else 1e-8
                assert ab[na, nb] == pytest.approx(ref, rel=1e-9, abs=tol)
    # the input layer is literally shared: one fit, exactly 1
    assert sim.similarity_matrix(a, b)["input", "input"] == 1.0


def test_streaming_block_size_does_not_change_values():
    a = make_model_acts(3, n=90, widths=(200, 150), dtype=torch.float32)
    b = make_model_acts(4, n=90, widths=(300, 10), dtype=torch.float32)
    big = sim.similarity_matrix(a, b, memory_bytes=1 << 30, cka_form="gram").values
    tiny = sim.similarity_matrix(a, b, memory_bytes=4096, cka_form="gram").values
    feat = sim.similarity_matrix(a, b, cka_form="feature").values
    assert torch.allclose(big, tiny, atol=2e-6)
    assert torch.allclose(big, feat, atol=2e-5)
    deb = sim.similarity_matrix(a, b, "cka_debiased").values
    assert deb[1, 2] == pytest.approx(np_cka_debiased(a["enc1"].double().numpy(), b["enc2"].double().numpy()), abs=1e-5)


def test_streamed_gram_float32_accuracy_across_panels_and_groups():
    # n spans several 512-row panels and 128-row diagonal blocks; a small memory budget forces
    # several row groups. Float32 storage must stay within float32-level error of float64.
    g = torch.Generator().manual_seed(7)
    n = 1300
    xs = [torch.relu(torch.randn(n, p, generator=g)) + 0.1 for p in (1500, 700, 1100)]
    acts = OrderedDict((f"l{i}", x) for i, x in enumerate(xs))
    truth = np.array([[np_cka(x.double().numpy(), y.double().numpy()) for y in xs] for x in xs])
    for memory in (1 << 30, 12 << 20):
        got = sim.similarity_matrix(acts, acts, cka_form="gram", memory_bytes=memory).values.numpy()
        np.testing.assert_allclose(got, truth, atol=2e-6)


def test_procrustes_progress_reports_and_aborts():
    a = make_model_acts(5)
    b = make_model_acts(6, base=a["input"])
    cache = {}  # the shared input tensor is fitted once: 9 distinct layers
    fa, fb = sim.fit_layers(a, cache=cache), sim.fit_layers(b, cache=cache)
    seen = []
    _S = vaetransfer._C.similarity
    values = _S.similarity_matrices([fa], [fb], "procrustes", progress=lambda d, t: seen.append((d, t)))
    names_a = ["in"] + [f"a{i}" for i in range(4)]
    names_b = ["in"] + [f"b{i}" for i in range(4)]
    pairs = {frozenset((u, v)) for u in names_a for v in names_b if u != v}
    assert seen[-1] == (9 + len(pairs), 9 + len(pairs))  # one step per layer factor, then per pair
    assert [d for d, _ in seen] == list(range(1, len(seen) + 1))
    assert torch.equal(values[0, 0], sim.similarity_matrix(a, b, "procrustes", progress=True).values)

    class Stop(Exception):
        pass

    def stop(done, total):
        if done == 3:
            raise Stop("user abort")

    with pytest.raises(Stop, match="user abort"):
        _S.similarity_matrices([sim.fit_layers(a)], [sim.fit_layers(b)], "procrustes", progress=stop)


def test_cka_avg_is_mean_over_seed_pairs():
    base = torch.randn(50, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    ma = [make_model_acts(s, n=50, base=base) for s in range(3)]
    mb = [make_model_acts(10 + s, n=50, base=base) for s in range(2)]
    avg = sim.cka_avg(ma, mb)
    brute = torch.stack([sim.similarity_matrix(x, y).values for x in ma for y in mb]).mean(0)
    assert avg.n_pairs == 6
    assert torch.allclose(avg.values, brute, atol=1e-12)
    p = sim.cka_avg(ma, mb, "procrustes")
    brute_p = torch.stack([sim.similarity_matrix(x, y, "procrustes").values for x in ma for y in mb]).mean(0)
    assert torch.allclose(p.values, brute_p, atol=1e-12)


def test_low_precision_storage():
    a = make_model_acts(5, n=80, dtype=torch.float32)
    b = make_model_acts(6, n=80, dtype=torch.float32)
    ref = sim.similarity_matrix(a, b).values
    for dt in (torch.float16, torch.bfloat16):
        low = sim.similarity_matrix({k: v.to(dt) for k, v in a.items()}, {k: v.to(dt) for k, v in b.items()}).values
        assert torch.allclose(low, ref, atol=2e-2)


# ----------------------------------------------------------------------------- bad input
def test_bad_input_named_errors():
    x = torch.randn(20, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    with pytest.raises(vaetransfer.ArgumentError) as e:
        sim.cka(x, torch.randn(21, 5, dtype=torch.float64))
    assert e.value.argument == "y"
    with pytest.raises(vaetransfer.ArgumentError) as e:
        sim.similarity_matrix({"a": x}, {"b": torch.randn(19, 3)})
    assert e.value.argument == "acts_b['b']"
    with pytest.raises(vaetransfer.ArgumentError) as e:
        sim.cka(torch.randn(1, 5), torch.randn(1, 5))
    assert e.value.argument == "x"
    bad = x.clone()
    bad[3, 2] = float("nan")
    with pytest.raises(vaetransfer.ArgumentError) as e:
        sim.procrustes(x, bad)
    assert e.value.argument == "y"
    const = torch.full((20, 4), 3.25)
    for measure in ("cka", "cka_debiased", "procrustes"):
        with pytest.raises(vaetransfer.ArgumentError) as e:
            sim.similarity_matrix({"a": x}, {"c": const}, measure)
        assert e.value.argument == "acts_b['c']"
        m = sim.similarity_matrix({"a": x}, {"c": const, "x": x}, measure, constant="zero").values
        assert m[0, 0] == 0.0 and m[0, 1] == 1.0 and not torch.isnan(m).any()
    with pytest.raises(vaetransfer.ArgumentError) as e:
        sim.similarity_matrix({"a": x}, {"a": x}, "nope")
    assert e.value.argument == "measure"
    with pytest.raises(vaetransfer.ArgumentError) as e:
        sim.procrustes(x, x, form="2-nu")
    assert e.value.argument == "form"
    with pytest.raises(vaetransfer.ArgumentError) as e:
        sim.cka(x[:3], x[:3] * 2, debiased=True)
    with pytest.raises(vaetransfer.ArgumentTypeError) as e:
        sim.cka(torch.ones(5, 2, dtype=torch.int64), x[:5])
    assert e.value.argument == "x"


# ----------------------------------------------------------------------------- activations
class Tiny(torch.nn.Module):
    def __init__(self, fail=False):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 3, 3, padding=1)
        self.fc = torch.nn.Linear(3 * 8 * 8, 7)
        self.fail = fail

    def forward(self, x):
        h = torch.relu(self.conv(x))
        if self.fail:
            raise RuntimeError("boom")
        return self.fc(h.flatten(1))


def test_activations_by_hooks_chunked_and_removed():
    torch.manual_seed(0)
    m = Tiny()
    x = torch.rand(37, 1, 8, 8)
    acts = sim.activations(m, x, ["input", "conv", "fc"], batch_size=10)
    assert list(acts) == ["input", "conv", "fc"]
    assert acts["conv"].shape == (37, 192) and acts["fc"].shape == (37, 7)
    with torch.no_grad():
        assert torch.allclose(acts["conv"], m.conv(x).flatten(1), atol=1e-6)
        assert torch.allclose(acts["fc"], m(x), atol=1e-6)
    assert all(len(mod._forward_hooks) == 0 for mod in m.modules())
    half = sim.activations(m, x, ["fc"], dtype=torch.bfloat16)
    assert half["fc"].dtype == torch.bfloat16
    bad = Tiny(fail=True)
    with pytest.raises(RuntimeError):
        sim.activations(bad, x, ["conv"], batch_size=8)
    assert all(len(mod._forward_hooks) == 0 for mod in bad.modules())
    with pytest.raises(vaetransfer.ArgumentError) as e:
        sim.activations(m, x, ["nope"])
    assert e.value.argument == "layers"


def test_activations_protocol_and_reference_vae():
    from vaetransfer.export import ReferenceVAE

    torch.manual_seed(1)
    vae = ReferenceVAE("conv")
    x = torch.rand(12, 1, 64, 64)
    eps = torch.randn(12, 10)
    acts = sim.activations(vae, x, batch_size=5, eps=eps)
    names = ["input", "enc1", "enc2", "enc3", "enc4", "enc5", "mean", "logvar", "sampled",
             "dec1", "dec2", "dec3", "dec4", "dec5", "dec6"]
    assert list(acts) == names
    with torch.no_grad():
        full = vae.activations(x, eps)
    for k in names:
        assert torch.allclose(acts[k], full[k], atol=1e-5), k
    assert acts["enc1"].shape == (12, 32 * 32 * 32)
    sub = sim.activations(vae, x, ["mean", "dec6"], eps=eps)
    assert list(sub) == ["mean", "dec6"]

    class WithLayers:
        def activations(self, x, layers=None):
            out = OrderedDict(a=x * 2, b=x.sum(1, keepdim=True))
            return out if layers is None else OrderedDict((k, out[k]) for k in layers)

    got = sim.activations(WithLayers(), torch.arange(12.0).reshape(6, 2), ["b"], batch_size=4)
    assert torch.equal(got["b"], torch.tensor([[1.0], [5.0], [9.0], [13.0], [17.0], [21.0]]))


# ----------------------------------------------------------------------------- sanity study, plots
def test_sanity_study_fig1():
    study = sim.sanity_study(ns=(60, 4000), seed=0)
    assert study.names == ["B", "C", "D"]
    for measure in (study.cka, study.procrustes):
        assert measure[0, -1] == pytest.approx(0.8, abs=0.04)
        assert measure[1, -1] == pytest.approx(0.5, abs=0.04)
    # D shares nothing: CKA drops towards 0, Procrustes overestimates at small n.
    assert study.cka[2, -1] < 0.05
    assert study.procrustes[2, 0] > study.cka[2, 0] + 0.2
    fig = plots.sanity_study_figure(study)
    assert len(fig.axes) == 3


def test_heatmap_plot():
    base = torch.randn(40, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    ma = [make_model_acts(s, n=40, base=base, widths=(5, 9, 7, 3)) for s in range(2)]
    for acts in ma:
        acts["sampled"] = acts.pop("enc2")
        acts.move_to_end("sampled", last=False)
    names = list(ma[0])
    avg = sim.cka_avg(ma, ma)
    ax = plots.similarity_heatmap(avg)
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    assert [t.get_text() for t in ax.get_yticklabels()] == names
    assert ax.images[0].get_clim() == (0.0, 1.0)
    assert "averaged over 4 seed pairs" in ax.get_title()
    assert len(ax.lines) == 2  # encoder/decoder separators, after "sampled"
    assert ax.lines[0].get_ydata()[0] == pytest.approx(names.index("sampled") + 0.5)


def test_cka_avg_with_seeds_leaves_same_seed_pairs_out():
    gen = torch.Generator().manual_seed(4)
    models = [{"a": torch.randn(40, 6, generator=gen), "b": torch.randn(40, 3, generator=gen)} for _ in range(4)]
    all_pairs = sim.cka_avg(models[:2], models[2:])
    cross = sim.cka_avg(models[:2], models[2:], seeds_a=[0, 1], seeds_b=[0, 1])
    assert cross.n_pairs == 2 and all_pairs.n_pairs == 4
    torch.testing.assert_close(cross.values, (all_pairs.per_pair[0, 1] + all_pairs.per_pair[1, 0]) / 2)
    with pytest.raises(vaetransfer.ArgumentError) as info:
        sim.cka_avg(models[:1], models[2:3], seeds_a=[3], seeds_b=[3])
    assert info.value.argument == "seeds_b"
    with pytest.raises(vaetransfer.ArgumentError) as info:
        sim.cka_avg(models[:2], models[2:], seeds_a=[0], seeds_b=[0, 1])
    assert info.value.argument == "seeds_a"


def test_quadrants_average_the_encoder_and_decoder_blocks():
    vae = ["input", "enc1", "mean", "logvar", "sampled", "dec1", "dec2"]
    clf = ["input", "enc1", "enc2", "logits"]
    values = torch.arange(len(vae) * len(vae), dtype=torch.float64).reshape(len(vae), len(vae))
    q = sim.SimilarityMatrix(values, vae, vae, "cka").quadrants()
    enc, dec = [1, 2, 3], [5, 6]
    assert q["encoder_mean"] == pytest.approx(float(values[enc][:, enc].mean()))
    assert q["decoder_mean"] == pytest.approx(float(values[dec][:, dec].mean()))
    assert q["encoder_diagonal_mean"] == pytest.approx(float(values.diagonal()[enc].mean()))
    assert sim.encoder_layers(clf) == ["enc1", "enc2"] and sim.decoder_layers(clf) == []
    q = sim.SimilarityMatrix(values[:, :4], vae, clf, "cka").quadrants()
    assert q["decoder_mean"] is None
    assert q["encoder_mean"] == pytest.approx(float(values[enc][:, [1, 2]].mean()))
    assert q["encoder_diagonal_mean"] == pytest.approx(float(values[1, 1]))


# ----------------------------------------------------------------------------- approximate Procrustes
def spectral_layer(n, p, decay, seed, left=None, dtype=torch.float32):
    """(n, p) activations with singular values i^-decay; `left` shares left singular vectors."""
    g = torch.Generator().manual_seed(seed)
    r = min(n, p)
    u = left if left is not None else torch.linalg.qr(torch.randn(n, r, generator=g, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(p, r, generator=g, dtype=torch.float64))[0]
    s = torch.arange(1, r + 1, dtype=torch.float64) ** (-decay)
    return ((u[:, :r] * s) @ v.T + 0.3).to(dtype)  # + a constant: centring must remove it


def approx_pair_acts(n=300):
    g = torch.Generator().manual_seed(3)
    shared = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0]
    a = OrderedDict(small=spectral_layer(n, 20, 0.5, 1), wide=spectral_layer(n, 1500, 1.0, 2, shared),
                    mid=spectral_layer(n, 200, 0.7, 4))
    b = OrderedDict(small=spectral_layer(n, 30, 0.5, 5), wide=spectral_layer(n, 900, 1.3, 6, shared[:, torch.randperm(n, generator=g)]),
                    mid=spectral_layer(n, 250, 0.3, 7, shared))
    return a, b


def test_truncated_factor_keeps_the_leading_spectrum():
    x = spectral_layer(300, 1500, 1.0, 2, dtype=torch.float64)
    fit = sim.LayerFit(x)
    xd = (x - x.mean(0)).numpy()
    xd /= np.linalg.norm(xd)
    energy = np.linalg.svd(xd, compute_uv=False) ** 2
    for k in (10, 40, 120):
        factor, discarded, exact = fit.truncated_factor(k, power_iterations=2)
        assert factor.shape == (300, k) and not exact
        # the reported discarded energy is exactly what the kept factor leaves out ...
        assert discarded == pytest.approx(1.0 - float(factor.pow(2).sum()), abs=1e-12)
        # ... never less than the optimal (Eckart–Young) tail, and within 10 % of it with two power
        # iterations on this slowly decaying (σ_i ∝ 1/i) spectrum
        best = energy[k:].sum()
        assert best - 1e-12 <= discarded <= best * 1.10 + 1e-12
        # F̃ F̃ᵀ is the projection of Ẋ Ẋᵀ onto the kept subspace: eigenvalues = leading σ²
        got = np.sort(np.linalg.eigvalsh(factor.T @ factor))[::-1]
        np.testing.assert_allclose(got[:k // 4], energy[:k // 4], rtol=1e-3)
    # a layer whose rank fits is kept exactly
    small = sim.LayerFit(spectral_layer(300, 20, 0.5, 1, dtype=torch.float64))
    f, d, exact = small.truncated_factor(20)
    assert exact and d == 0.0 and torch.equal(f, small.procrustes_factor())
    # deterministic by seed; another seed draws another test matrix
    f1 = sim.LayerFit(x).truncated_factor(40, 0, 7)[0]
    assert torch.equal(f1, sim.LayerFit(x).truncated_factor(40, 0, 7)[0])
    assert not torch.equal(f1, sim.LayerFit(x).truncated_factor(40, 0, 8)[0])


def test_approximate_procrustes_within_its_bound():
    a, b = approx_pair_acts()
    exact = sim.similarity_matrix(a, b, "procrustes", progress=False)
    truth = np.array([[np_procrustes(x.double().numpy(), y.double().numpy()) for y in b.values()] for x in a.values()])
    np.testing.assert_allclose(exact.values.numpy(), truth, atol=1e-8)
    assert exact.bound is None
    last_err, last_bound = None, None
    for k in (8, 32, 128, 299):
        approx = sim.similarity_matrix(a, b, "procrustes", progress=False, procrustes_rank=k)
        err = (approx.values - exact.values).abs()
        assert (err <= approx.bound + 1e-9).all(), (k, err, approx.bound)
        assert ((approx.values >= 0) & (approx.values <= 1)).all()
        if last_err is not None:  # more rank: a tighter bound and a smaller error
            assert approx.bound.max() < last_bound and err.max() < last_err
        last_err, last_bound = err.max(), approx.bound.max()
        # pairs of layers that both fit the rank are exact, with a zero bound
        fits = [x.shape[1] <= k for x in a.values()], [y.shape[1] <= k for y in b.values()]
        for i, fa in enumerate(fits[0]):
            for j, fb in enumerate(fits[1]):
                if fa and fb:
                    assert approx.bound[i, j] == 0.0 and err[i, j] < 1e-10
    assert last_err < 1e-8 and last_bound == 0.0  # rank n - 1: every layer exact


def test_approximate_procrustes_bound_formula_and_min():
    a, b = approx_pair_acts()
    k = 16
    approx = sim.similarity_matrix(a, b, "procrustes", progress=False, procrustes_rank=k)
    t = lambda x: sim.LayerFit(x).truncated_factor(k)[1]
    tx, ty = t(a["wide"]), t(b["mid"])
    expected = min(np.sqrt(tx) + np.sqrt(ty * (1 - tx)), np.sqrt(ty) + np.sqrt(tx * (1 - ty)))
    assert approx["wide", "mid"] == pytest.approx(
        sim.similarity_matrix(OrderedDict(w=a["wide"]), OrderedDict(m=b["mid"]), "procrustes", progress=False,
                              procrustes_rank=k).values.item(), abs=1e-12)
    assert approx.bound[1, 2].item() == pytest.approx(min(expected, max(approx.values[1, 2].item(), 1 - approx.values[1, 2].item())), rel=1e-12)
    # min(CKA, ν̃) carries the same bound; the exact min lies within it
    m = sim.similarity_matrix(a, b, "min", progress=False, procrustes_rank=k)
    exact_min = sim.similarity_matrix(a, b, "min", progress=False).values
    assert torch.equal(m.bound, approx.bound)
    assert ((m.values - exact_min).abs() <= m.bound + 1e-9).all()
    # averaged heatmaps average the bounds of the pairs they average
    avg = sim.cka_avg([a, b], [b, a], "procrustes", seeds_a=[0, 1], seeds_b=[1, 0], procrustes_rank=k, progress=False)
    pairs, bounds = sim.similarity_matrices([a, b], [b, a], "procrustes", procrustes_rank=k, progress=False,
                                            return_bound=True)
    assert torch.allclose(avg.bound, (bounds[0, 0] + bounds[1, 1]) / 2)
    assert sim.cka_avg([a], [b], "cka", procrustes_rank=k).bound is None


def test_approximate_procrustes_arguments():
    a, b = approx_pair_acts(n=40)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(vaetransfer.ArgumentError, match="procrustes_rank"):
            sim.similarity_matrix(a, b, "procrustes", procrustes_rank=bad)
    with pytest.raises(vaetransfer.ArgumentError, match="power_iterations"):
        sim.similarity_matrix(a, b, "procrustes", procrustes_rank=4, power_iterations=-1)
    with pytest.raises(vaetransfer.ArgumentError, match="rank") as info:  # the core checks its measure's parameters
        vaetransfer._C.similarity.similarity_matrices([sim.fit_layers(a)], [sim.fit_layers(b)], "procrustes",
                                                      {"rank": -2})
    assert info.value.argument == "rank"


# ---------------------------------------------------------------------------------- measures as a registry
MEASURE_EXTENSION = r'''
#include <torch/extension.h>

#include "vaetransfer/similarity/measure.h"

namespace vs = vaetransfer::similarity;

// The biased HSIC ⟨K, L⟩ / (n − 1)², scaled: a measure of one class and one registration. Not
// invariant to the layers' scales, so it takes ⟨K, L⟩ back from the engine's scaled layers.
class ScaledHSIC : public vs::Measure {
 public:
  explicit ScaledHSIC(const vaetransfer::Params& p) : vs::Measure(p), scale_(p.number("scale")) {}
  bool needs_gram() const override { return true; }
  vs::Score score(const vs::PairData& pair) const override {
    const double m = static_cast<double>(pair.n - 1);
    const double sx = pair.x.scale(), sy = pair.y.scale();
    return {scale_ * pair.kl / (sx * sx * sy * sy) / (m * m)};
  }
  double identical() const override { return -1.0; }

 private:
  double scale_;
};

bool registered = vs::register_measure(
    {"test_hsic", "gram", "biased HSIC times scale (a test's measure)",
     {{"scale", vaetransfer::ParamType::Float, 1.0, "factor"}},
     [](const vaetransfer::Params& p) -> std::unique_ptr<vs::Measure> { return std::make_unique<ScaledHSIC>(p); }});

bool is_registered() { return registered; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("is_registered", &is_registered); }
'''


def test_a_measure_registered_from_cpp_is_usable_by_name(tmp_path):
    """A measure compiled outside the core (one class, one registration) reaches the engine and the
    Python API by name, with its declared parameters, without any Python change."""
    from pathlib import Path

    from torch.utils import cpp_extension

    core = Path(vaetransfer._C.__file__)
    csrc = Path(__file__).resolve().parents[1] / "csrc"
    ext = cpp_extension.load_inline("vt_test_measure", cpp_sources=[MEASURE_EXTENSION], functions=None,
                                    extra_include_paths=[str(csrc)], extra_cflags=["-std=c++20", "-O0"],
                                    extra_ldflags=[str(core)], build_directory=str(tmp_path), verbose=False)
    assert ext.is_registered()
    entry = next(e for e in sim.registered() if e["name"] == "test_hsic")
    assert entry["family"] == "gram" and [p["name"] for p in entry["params"]] == ["scale"]
    torch.manual_seed(0)
    x, y = torch.randn(30, 5, dtype=torch.float64), torch.randn(30, 7, dtype=torch.float64)
    y[:, :5] += x
    xc, yc = x - x.mean(0), y - y.mean(0)
    expected = float(((xc @ xc.T) * (yc @ yc.T)).sum()) / 29 ** 2
    m = sim.similarity_matrix({"x": x, "y": y}, {"y": y.clone(), "x": x.clone()}, "test_hsic", progress=False)
    assert m.measure == "test_hsic"
    assert m["x", "x"] == pytest.approx(float(((xc @ xc.T) ** 2).sum()) / 29 ** 2, rel=1e-10)
    assert m["x", "y"] == pytest.approx(expected, rel=1e-10)
    assert sim.similarity(x, y, "test_hsic", scale=2.0) == pytest.approx(2 * expected, rel=1e-10)
    assert sim.similarity_matrix({"x": x}, {"x": x}, "test_hsic", progress=False)["x", "x"] == -1.0  # identical()
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        sim.similarity(x, y, "test_hsic", scale="big")
    assert info.value.argument == "scale"


def test_measures_come_from_the_core_registry():
    names = [e["name"] for e in sim.registered()]
    assert {"cka", "cka_debiased", "procrustes", "min"} <= set(names)
    assert set(sim.MEASURES) <= set(names)
    with pytest.raises(vaetransfer.ArgumentError, match="cka") as info:
        sim.similarity(torch.randn(8, 3), torch.randn(8, 3), "nope")
    assert info.value.argument == "measure"


# ------------------------------------------------------------------- exact at any activation scale
def _scale_layers(n=96):
    """Three layers of float64 activations: two related (a shared 10-d code), one unrelated and
    wider than n (so the Gram form streams it)."""
    g = torch.Generator().manual_seed(7)
    z = torch.randn(n, 10, generator=g, dtype=torch.float64)
    return OrderedDict(
        a=z @ torch.randn(10, 30, generator=g, dtype=torch.float64) + 0.5 * torch.randn(n, 30, generator=g, dtype=torch.float64),
        b=torch.randn(n, 160, generator=g, dtype=torch.float64),
        c=z[:, :5] @ torch.randn(5, 50, generator=g, dtype=torch.float64) + torch.randn(n, 50, generator=g, dtype=torch.float64))


SCALES = [1e-30, 1e-20, 1e-12, 1e-6, 1e6, 1e9, 1e20, 1e30]


@pytest.mark.parametrize("measure", sim.MEASURES)
def test_every_measure_is_the_same_at_any_float32_scale(measure):
    """Every measure is invariant to scaling a layer; float32 activations scaled by 1e-30…1e30 (each
    side by its own factor) score what float64 activations at scale 1 score. The old linear CKA gave
    NaN at ×1e9 and 1.0 for unrelated layers at ×1e-12 (float32 Gram sums overflowing/underflowing)."""
    acts = _scale_layers()
    clone = OrderedDict((k, v.clone()) for k, v in acts.items())  # other objects: no identical() shortcut
    ref = sim.similarity_matrix(acts, clone, measure, progress=False).values
    tol = 2e-3 if measure in ("rsa", "mutual_knn", "cknna") else 2e-4  # float32 rounding (ranks: ties)
    for a in SCALES:
        for b in (1.0, 1.0 / a):
            xa = OrderedDict((k, (v * a).float()) for k, v in acts.items())
            xb = OrderedDict((k, (v * b).float()) for k, v in acts.items())
            got = sim.similarity_matrix(xa, xb, measure, progress=False).values
            assert torch.isfinite(got).all(), (measure, a, b, got)
            assert torch.allclose(got, ref, atol=tol, rtol=0), (measure, a, b, (got - ref).abs().max())


@pytest.mark.parametrize("path", [dict(cka_form="feature"), dict(cka_form="gram"),
                                  dict(ci=0.9, resamples=12), dict(ci=0.9, resamples=12, resampling="bootstrap"),
                                  dict(null="permutation", permutations=12),
                                  dict(measure="procrustes", procrustes_rank=8)],
                         ids=["feature", "gram", "jackknife", "bootstrap", "permutation", "approx-procrustes"])
def test_every_cka_and_interval_path_is_the_same_at_any_float32_scale(path):
    """Values, interval ends, null statistics and error bounds are those of the same activations at
    scale 1 (both in float32: the paths' own rounding aside, scaling by a power of two is exact)."""
    import warnings

    acts = _scale_layers()
    one = OrderedDict((k, v.float()) for k, v in acts.items())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # BCa at 12 resamples: not what is tested
        ref = sim.similarity_matrix(one, OrderedDict((k, v.clone()) for k, v in one.items()), progress=False, **path)
        for a in SCALES:
            got = sim.similarity_matrix(OrderedDict((k, (v * a).float()) for k, v in acts.items()), one,
                                        progress=False, **path)
            for field in ("values", "ci_low", "ci_high", "null_mean", "null_std", "bound"):
                r, x = getattr(ref, field), getattr(got, field)
                if r is None:
                    assert x is None
                    continue
                assert torch.isfinite(x).all(), (path, a, field)
                assert torch.allclose(x, r, atol=1e-5, rtol=0), (path, a, field, (x - r).abs().max())


def test_cka_of_unrelated_layers_at_small_and_large_scale():
    """The issue's probes: unrelated float32 layers (true CKA 0.16 here) scored 1.0 at ×1e-12, and a
    4,000-wide layer gave NaN at ×1e8; both are now their float64 value."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(200, 40, generator=g, dtype=torch.float64)
    y = torch.randn(200, 4000, generator=g, dtype=torch.float64)
    true = np_cka(x.numpy(), y.numpy())
    for a in (1e-12, 1e8, 1e9):
        for form in ("feature", "gram"):
            got = sim.similarity_matrix({"x": (x * a).float()}, {"y": (y * a).float()}, cka_form=form,
                                        progress=False).values.item()
            assert got == pytest.approx(true, abs=1e-5), (a, form)


def test_minibatch_cka_is_the_same_at_any_float32_scale():
    acts = _scale_layers()
    names = list(acts)

    def run(a):
        mb = sim.MinibatchCKA(names, names)
        for i in range(0, 96, 32):
            mb.update({k: (v[i:i + 32] * a).float() for k, v in acts.items()},
                      {k: v[i:i + 32].float() for k, v in acts.items()})
        return mb.result().values

    ref = run(1.0)
    for a in SCALES:
        got = run(a)
        assert torch.isfinite(got).all() and torch.allclose(got, ref, atol=1e-6, rtol=0), (a, got - ref)


def test_layer_fit_scale_is_an_exact_power_of_two():
    x = torch.randn(50, 20, dtype=torch.float64) * 3e-25
    f = sim.LayerFit(x)
    m, e = np.frexp(f.scale)
    assert m == 0.5  # a power of two
    rms = (f.trace / (50 * 20)) ** 0.5
    assert 0.5 <= rms < 2.0
    assert f.trace == pytest.approx(float(((x - x.mean(0)) * f.scale).pow(2).sum()), rel=1e-12)


# ------------------------------------------------------------------------- layers matched by name
def test_layers_are_matched_by_name_not_position():
    """A model whose layers come in another order is re-matched by name (the old engine paired
    layers by position, silently comparing the wrong ones); a different set of names is a named error."""
    acts = _scale_layers()
    other = OrderedDict((k, v + 0.3 * torch.randn_like(v)) for k, v in acts.items())
    shuffled = OrderedDict((k, other[k]) for k in ("c", "a", "b"))
    want = sim.similarity_matrices([acts], [other], progress=False)
    got = sim.similarity_matrices([acts], [shuffled], progress=False)
    assert torch.allclose(got, want, atol=1e-12)
    assert got[0, 0].diagonal().min() > 0.5  # each layer against its noisy self, not another layer
    # within a side: model 1 in another order is re-matched to model 0's
    both = sim.similarity_matrices([acts, OrderedDict(reversed(list(acts.items())))], [other], progress=False)
    assert torch.allclose(both[1], both[0], atol=1e-12)
    avg = sim.cka_avg([acts, OrderedDict(reversed(list(acts.items())))], [other, shuffled])
    assert avg.rows == list(acts) and avg.cols == list(acts)
    assert torch.allclose(avg.values, want[0, 0], atol=1e-12)
    m = sim.similarity_matrix(acts, shuffled)
    assert m.cols == list(acts) and torch.allclose(m.values, want[0, 0], atol=1e-12)
    assert m["a", "a"] == pytest.approx(want[0, 0, 0, 0].item(), abs=1e-12)
    # other names on one side's second model: named, with what is missing and what is unexpected
    renamed = OrderedDict((("a", acts["a"]), ("b2", acts["b"]), ("c", acts["c"])))
    for call in (lambda: sim.similarity_matrices([acts, renamed], [other], progress=False),
                 lambda: sim.cka_avg([acts], [other, renamed])):
        with pytest.raises(vaetransfer.ArgumentError, match=r"missing \['b'\], unexpected \['b2'\]") as info:
            call()
        assert info.value.argument in ("models_a[1]", "models_b[1]")
    # different architectures on the two sides stay as given (no diagonal to match)
    cross = sim.similarity_matrix(acts, renamed)
    assert cross.cols == ["a", "b2", "c"]


def test_reordered_activations_keep_their_parts():
    from vaetransfer.activations import Activations

    acts = _scale_layers()
    a = Activations(acts.items(), parts={"a": "encoder", "b": "latent", "c": "decoder"})
    b = Activations(((k, acts[k].clone()) for k in ("c", "b", "a")), parts={"a": "encoder", "b": "latent", "c": "decoder"})
    m = sim.similarity_matrix(a, b)
    assert m.cols == ["a", "b", "c"] and m.col_parts == ["encoder", "latent", "decoder"]


def test_layers_of_subnormal_float32_values_are_scored_not_overflowed():
    """A float32 layer whose values are all below 2^-127 needs a scale float32 cannot hold: the
    centring then works in float64 (it gave inf/NaN). Subnormals keep ~6 digits here."""
    acts = _scale_layers()
    ref = sim.similarity_matrix(acts, OrderedDict((k, v.clone()) for k, v in acts.items()), progress=False).values
    tiny = OrderedDict((k, (v * 2e-40).float()) for k, v in acts.items())
    assert (tiny["a"].abs().max() < 2.0**-127).item()
    for measure, tol in (("cka", 1e-4), ("procrustes", 1e-4), ("cka_rbf", 1e-3)):
        want = sim.similarity_matrix(acts, OrderedDict((k, v.clone()) for k, v in acts.items()), measure,
                                     progress=False).values
        got = sim.similarity_matrix(tiny, OrderedDict((k, v.float()) for k, v in acts.items()), measure,
                                    progress=False).values
        assert torch.isfinite(got).all() and torch.allclose(got, want, atol=tol, rtol=0), (measure, got - want)
    assert torch.isfinite(ref).all()
    mb = sim.MinibatchCKA(list(tiny), list(tiny))
    for i in range(0, 96, 32):
        mb.update({k: v[i:i + 32] for k, v in tiny.items()}, {k: v[i:i + 32] for k, v in tiny.items()})
    assert torch.isfinite(mb.result().values).all()


# ------------------------------------------------------------------------------ heatmap and quadrants
def test_heatmap_colour_range_title_and_intervals():
    """Values 0.88–1.0 rendered as one colour on the fixed [0, 1] scale: 'auto' and (low, high) ranges;
    the title names the measure, n and the seed pairs; intervals can be shown per cell."""
    acts = _scale_layers()
    m = sim.similarity_matrix(acts, OrderedDict((k, v + 0.01 * torch.randn_like(v)) for k, v in acts.items()),
                              ci=0.9, resamples=10)
    ax = plots.similarity_heatmap(m, vrange="auto")
    lo, hi = ax.images[0].get_clim()
    assert lo == pytest.approx(m.values.min().item()) and hi == pytest.approx(m.values.max().item())
    assert ax.get_title() == f"CKA, n = {m.n}"
    assert plots.similarity_heatmap(m).images[0].get_clim() == (0.0, 1.0)
    assert plots.similarity_heatmap(m, vrange=(0.5, 0.9)).images[0].get_clim() == (0.5, 0.9)
    ax = plots.similarity_heatmap(m, intervals=True)
    half = (m.ci_high - m.ci_low)[0, 0].item() / 2
    assert f"±{half:.2f}" in ax.texts[0].get_text() and "90% intervals" in ax.get_title()
    for bad in ("wide", (1.0, 0.5), (0.1,)):
        with pytest.raises(vaetransfer.ArgumentError) as info:
            plots.similarity_heatmap(m, vrange=bad)
        assert info.value.argument == "vrange"
    with pytest.raises(vaetransfer.ArgumentError, match="ci=0.95") as info:
        plots.similarity_heatmap(sim.similarity_matrix(acts, acts), intervals=True)
    assert info.value.argument == "intervals"
    matplotlib.pyplot.close("all")


def test_quadrants_say_why_they_cannot_split_a_model():
    """quadrants() returned None silently for a model without a decoder; it says why on request."""
    acts = OrderedDict((k, v) for k, v in _scale_layers().items())
    m = sim.SimilarityMatrix(torch.rand(3, 3), ["fc1", "fc2", "logits"], ["fc1", "fc2", "logits"], "cka",
                             row_parts=["encoder", "encoder", "head"], col_parts=["encoder", "encoder", "head"])
    q = m.quadrants()
    assert q["decoder_mean"] is None and q["encoder_mean"] is not None
    why = m.quadrant_reasons()
    assert why["encoder_mean"] is None and "model A's layers have no decoder part" in why["decoder_mean"]
    with pytest.raises(vaetransfer.ArgumentError, match="decoder_mean: model A's layers have no decoder") as info:
        m.quadrants(strict=True)
    assert info.value.argument == "matrix"
    assert sim.similarity_matrix(acts, acts).quadrant_reasons()["encoder_mean"] is not None  # names 'a', 'b', 'c'


def test_loss_curves_take_runs_and_datasets_take_arrays(tmp_path):
    """loss_curves wanted {label: history}, not a Run; Dataset refused NumPy arrays that train accepts."""
    x = np.random.default_rng(0).standard_normal((24, 4)).astype(np.float32)
    y = np.arange(24) % 2
    ds = vaetransfer.data.Dataset(x, labels=y, num_classes=2)
    assert isinstance(ds.images, torch.Tensor) and ds.labels.dtype == torch.int64
    cfg = vaetransfer.TrainConfig(model=vaetransfer.ModelConfig("mlp-classifier", input_shape=[4], hidden=[5],
                                                                num_classes=2),
                                  objective=vaetransfer.TaskConfig("classification"), steps=6, batch_size=4)
    run = vaetransfer.train(cfg, ds, tmp_path / "r", progress=False)
    for arg in (run, {"r": run}, {"r": run.history}):
        fig = plots.loss_curves(arg, columns=["loss"], smooth=2)
        assert fig.axes[0].get_legend_handles_labels()[1] == ["r"]
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        vaetransfer.data.Dataset(np.array([object()] * 2))
    assert info.value.argument == "images"
    matplotlib.pyplot.close("all")
