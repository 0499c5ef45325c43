"""Kernel, neighbourhood and RSA measures of the core: cka_rbf, mutual_knn, cknna, rsa.

Oracles: the plain NumPy definitions of ``tests/reference_similarity_neighbours.py`` (written from
Kornblith et al. 2019 §3, Huh et al. 2024 §2 and App. A, Kriegeskorte et al. 2008), scipy's
Spearman correlation, the invariances each definition promises, chance levels, degenerate inputs.
"""
import os
from collections import OrderedDict

import numpy as np
import pytest
import torch

import vaetransfer
from vaetransfer import similarity as sim

import reference_similarity_neighbours as ref

MEASURES = ("cka_rbf", "mutual_knn", "cknna", "rsa")


def t64(a):
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))


def ours(x, y, measure, **params):
    return sim.similarity(t64(x) if isinstance(x, np.ndarray) else x, t64(y) if isinstance(y, np.ndarray) else y,
                          measure, **params)


def same_count(got, expected, n, k=10):
    """Mutual k-NN scores are counts over n·k pairs: equal counts, not merely close values."""
    return round(got * n * k) == round(expected * n * k) and abs(got * n * k - round(got * n * k)) < 1e-9


def reference(x, y, measure, **params):
    if measure == "cka_rbf":
        return ref.cka_rbf(x, y, **params)
    if measure == "mutual_knn":
        return ref.mutual_knn(x, y, **params)
    if measure == "cknna":
        return ref.cknna(x, y, **params)
    if "rdm" in params:
        params = {"rdm_kind": params.pop("rdm"), **params}
    return ref.rsa(x, y, **params)


def related(n, px, py, seed, rank=None):
    """X (n, px) and Y (n, py) sharing part of their structure; rank: both of that rank."""
    rng = np.random.default_rng(seed)
    if rank is None:
        x = rng.standard_normal((n, px)) * rng.uniform(0.2, 2.0, px) + rng.standard_normal(px)
    else:
        x = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, px))
    y = np.tanh(x[:, :min(px, py)] @ rng.standard_normal((min(px, py), py)) / np.sqrt(px))
    y = y + 0.3 * rng.standard_normal((n, py)) * (1 if rank is None else 0)
    return x, y


PARAMS = [("cka_rbf", {}), ("cka_rbf", {"bandwidth": 0.4}), ("mutual_knn", {}), ("mutual_knn", {"k": 5, "metric": "euclidean"}),
          ("cknna", {}), ("cknna", {"k": 7, "metric": "euclidean"}), ("rsa", {}), ("rsa", {"rdm": "euclidean"})]


# ------------------------------------------------------------------------- registry and wiring
def test_registered_with_documented_defaults():
    entries = {e["name"]: e for e in sim.registered()}
    defaults = {name: {p["name"]: p["default"] for p in entries[name]["params"]} for name in MEASURES}
    assert defaults == {"cka_rbf": {"bandwidth": 1.0}, "mutual_knn": {"k": 10, "metric": "cosine"},
                        "cknna": {"k": 10, "metric": "cosine"}, "rsa": {"rdm": "correlation"}}
    assert all(entries[m]["family"] == "factor" for m in MEASURES)


# ------------------------------------------------------------------------- against the reference
@pytest.mark.parametrize("measure,params", PARAMS)
@pytest.mark.parametrize("kind", ["random", "low_rank", "wide"])
def test_agrees_with_numpy_reference(measure, params, kind):
    shapes = {"random": (90, 12, 20, None), "low_rank": (80, 40, 25, 3), "wide": (40, 150, 60, None)}
    n, px, py, rank = shapes[kind]
    x, y = related(n, px, py, seed=len(measure) + px, rank=rank)
    expected = reference(x, y, measure, **params)
    got = ours(x, y, measure, **params)
    if measure == "mutual_knn":
        assert same_count(got, expected, n, params.get("k", 10))
    else:
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert np.isfinite(got)


def test_rsa_matches_scipy_spearman_of_pdist():
    from scipy.spatial.distance import pdist
    from scipy.stats import spearmanr

    x, y = related(70, 15, 9, seed=3)
    for kind in ("correlation", "euclidean"):
        rho = spearmanr(pdist(x, kind), pdist(y, kind)).statistic
        assert ours(x, y, "rsa", rdm=kind) == pytest.approx(rho, rel=1e-9)


def test_reference_ranks_ties_like_scipy():
    from scipy.stats import rankdata

    v = np.random.default_rng(0).integers(0, 20, 500).astype(float)  # many ties
    assert np.array_equal(ref.average_ranks(v), rankdata(v))


def test_heatmap_entries_are_the_pairs():
    x, y = related(60, 10, 14, seed=5)
    z = np.random.default_rng(1).standard_normal((60, 6))
    a = OrderedDict(x=t64(x), y=t64(y))
    b = OrderedDict(z=t64(z), x=t64(x).clone(), y=t64(y))  # the same tensor object shares its fit
    for measure, params in PARAMS:
        m = sim.similarity_matrix(a, b, measure, progress=False, **params)
        for r, xa in (("x", x), ("y", y)):
            for c, xb in (("z", z), ("x", x), ("y", y)):
                if r == c:
                    assert m[r, c] == pytest.approx(1.0, abs=1e-12), (measure, r, c)
                else:
                    assert m[r, c] == pytest.approx(reference(xa, xb, measure, **params), rel=1e-9, abs=1e-12)


def test_many_models_pass_the_parameters():
    x, y = related(50, 8, 8, seed=7)
    models = [OrderedDict(l=t64(x)), OrderedDict(l=t64(y))]
    values = sim.similarity_matrices(models, models, "mutual_knn", k=3, metric="euclidean", progress=False)
    assert values.shape == (2, 2, 1, 1)
    assert same_count(float(values[0, 1, 0, 0]), ref.mutual_knn(x, y, k=3, metric="euclidean"), 50, 3)
    assert float(values[1, 0, 0, 0]) == float(values[0, 1, 0, 0])


# ----------------------------------------------------------------------------------- invariances
def _orthogonal(p, seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((p, p)))
    return q


INVARIANT = {  # measure, params -> transforms that leave it unchanged
    ("cka_rbf", ()): ("rotate", "scale", "offset"),
    ("mutual_knn", (("metric", "euclidean"),)): ("rotate", "scale", "offset"),
    ("mutual_knn", ()): ("rotate", "scale", "row_scale"),
    ("cknna", (("metric", "euclidean"),)): ("rotate", "scale", "offset"),
    ("cknna", ()): ("rotate", "scale", "row_scale"),
    ("rsa", (("rdm", "euclidean"),)): ("rotate", "scale", "offset"),
    ("rsa", ()): ("scale", "row_affine"),
}


@pytest.mark.parametrize("key", list(INVARIANT), ids=lambda k: k[0] + "".join(f"-{v}" for _, v in k[1]))
def test_invariances(key):
    measure, params = key[0], dict(key[1])
    x, y = related(70, 9, 11, seed=11)
    base = ours(x, y, measure, **params)
    rng = np.random.default_rng(2)
    transforms = {
        "rotate": lambda a: a @ _orthogonal(a.shape[1], 4),
        "scale": lambda a: 7.5 * a,
        "offset": lambda a: a + 3.0 * rng.standard_normal(a.shape[1]),
        "row_scale": lambda a: a * rng.uniform(0.5, 3.0, (a.shape[0], 1)),
        "row_affine": lambda a: a * rng.uniform(0.5, 3.0, (a.shape[0], 1)) + rng.standard_normal((a.shape[0], 1)),
    }
    for name in INVARIANT[key]:
        moved = ours(transforms[name](x), y, measure, **params)
        if measure == "mutual_knn":
            assert moved == base, name
        else:
            assert moved == pytest.approx(base, rel=1e-8, abs=1e-12), name


def test_correlation_rdm_is_not_rotation_invariant_and_cosine_not_offset_invariant():
    # What the definitions do not promise really changes: these guard the geometry each one uses.
    x, y = related(70, 9, 11, seed=11)
    q = _orthogonal(9, 4)
    assert ours(x @ q, y, "rsa") != pytest.approx(ours(x, y, "rsa"), rel=1e-6)
    shifted = x + 5.0 * np.random.default_rng(0).standard_normal(9)
    assert ours(shifted, y, "mutual_knn") != ours(x, y, "mutual_knn")
    assert ours(shifted, y, "mutual_knn", metric="euclidean") == ours(x, y, "mutual_knn", metric="euclidean")


# ---------------------------------------------------------------------------- identity and chance
@pytest.mark.parametrize("measure,params", PARAMS)
def test_identical_data_scores_one(measure, params):
    x, _ = related(50, 13, 5, seed=9)
    assert ours(x, x.copy(), measure, **params) == pytest.approx(1.0, abs=1e-12)


def test_mutual_knn_chance_level_and_bounds():
    rng = np.random.default_rng(0)
    n, k = 400, 10
    x, y = rng.standard_normal((n, 20)), rng.standard_normal((n, 20))
    for metric in ("cosine", "euclidean"):
        assert ours(x, y, "mutual_knn", k=k, metric=metric) == pytest.approx(k / (n - 1), abs=0.01)
    assert abs(ours(x, y, "cknna")) < 0.2
    assert abs(ours(x, y, "rsa")) < 0.05
    # cka_rbf sits near its own small positive chance level for unrelated layers, far below related ones
    related_x, related_y = related(n, 20, 20, seed=1)
    assert ours(x, y, "cka_rbf") < 0.2 < ours(related_x, related_y, "cka_rbf")


# ---------------------------------------------------------------------------------- degenerate
def test_duplicated_examples_tie_rule_is_deterministic():
    rng = np.random.default_rng(4)
    base = rng.standard_normal((30, 6))
    x = np.repeat(base, 3, axis=0)[rng.permutation(90)]  # every example three times, distance 0
    y = rng.standard_normal((90, 4))
    for metric in ("cosine", "euclidean"):
        for k in (1, 2, 4, 7):  # below, at and past the 2 exact duplicates: ties broken by lower index
            got = ours(x, y, "mutual_knn", k=k, metric=metric)
            assert same_count(got, ref.mutual_knn(x, y, k=k, metric=metric), 90, k), (metric, k)
            assert ours(x, x[:, ::-1].copy(), "mutual_knn", k=k, metric=metric) == 1.0
        assert ours(x, y, "cknna", k=4, metric=metric) == pytest.approx(ref.cknna(x, y, k=4, metric=metric),
                                                                       rel=1e-9, abs=1e-12)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = [ours(x, y, m) for m in MEASURES]
    finally:
        torch.set_num_threads(threads)
    again = [ours(x, y, m) for m in MEASURES]
    assert again[1] == single[1]  # mutual_knn: the same neighbour sets
    assert again == pytest.approx(single, rel=1e-12, abs=1e-15)
    for kind in ("correlation", "euclidean"):  # RDM ties at exactly 0 get their average rank
        assert ours(x, y, "rsa", rdm=kind) == pytest.approx(ref.rsa(x, y, kind), rel=1e-7)
    assert ours(x, y, "cka_rbf") == pytest.approx(ref.cka_rbf(x, y), rel=1e-9)


def test_mostly_duplicated_examples_have_no_rbf_bandwidth():
    x = np.zeros((10, 3))
    x[8], x[9] = [1.0, 2.0, 0.0], [0.0, 1.0, 1.0]  # 28 of 45 pairs at distance 0: median distance 0
    with pytest.raises(vaetransfer.ArgumentError, match="median"):
        ours(x, np.random.default_rng(0).standard_normal((10, 2)), "cka_rbf")


def test_constant_example_and_constant_columns():
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((40, 5)), rng.standard_normal((40, 3))
    flat = x.copy()
    flat[7] = 2.5  # the same value in every feature
    with pytest.raises(vaetransfer.ArgumentError, match="example 7") as info:
        ours(flat, y, "rsa")
    assert info.value.argument == "X"
    assert ours(flat, y, "rsa", rdm="euclidean") == pytest.approx(ref.rsa(flat, y, "euclidean"), rel=1e-9)
    # an all-zero example under cosine neighbours: unit distance to every other, finite scores
    zero = x.copy()
    zero[3] = 0.0
    for measure in ("mutual_knn", "cknna"):
        got = ours(zero, y, measure, k=4)
        assert np.isfinite(got) and got == pytest.approx(reference(zero, y, measure, k=4), rel=1e-9, abs=1e-12)
    # constant columns add nothing to Euclidean geometry
    padded = np.hstack([x, np.full((40, 3), 4.0)])
    for measure, params in (("cka_rbf", {}), ("mutual_knn", {"metric": "euclidean"}),
                            ("cknna", {"metric": "euclidean"}), ("rsa", {"rdm": "euclidean"})):
        assert ours(padded, y, measure, **params) == pytest.approx(ours(x, y, measure, **params), rel=1e-9)


def test_constant_layer_follows_the_engine_convention():
    rng = np.random.default_rng(0)
    acts = OrderedDict(c=torch.ones(20, 4, dtype=torch.float64), r=t64(rng.standard_normal((20, 4))))
    for measure in MEASURES:
        params = {"k": 3} if measure in ("mutual_knn", "cknna") else {}
        with pytest.raises(vaetransfer.ArgumentError, match="constant"):
            sim.similarity_matrix(acts, acts, measure, progress=False, **params)
        m = sim.similarity_matrix(acts, acts, measure, constant="zero", progress=False, **params)
        assert m["c", "r"] == 0.0 and m["r", "r"] == 1.0


def test_tiny_n_and_bad_parameters_are_named_errors():
    rng = np.random.default_rng(0)
    x3, y3 = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    assert ours(x3, y3, "mutual_knn", k=1) in (0.0, 1 / 3, 2 / 3, 1.0)
    with pytest.raises(vaetransfer.ArgumentError) as info:
        ours(x3, y3, "mutual_knn", k=2)  # k = n − 1: every example is everyone's neighbour
    assert info.value.argument == "k"
    x, y = rng.standard_normal((20, 3)), rng.standard_normal((20, 3))
    for measure, params, argument in (("mutual_knn", {"k": 0}, "k"), ("cknna", {"k": 19}, "k"),
                                      ("mutual_knn", {"metric": "manhattan"}, "metric"),
                                      ("cknna", {"metric": "correlation"}, "metric"),
                                      ("rsa", {"rdm": "cosine"}, "rdm"), ("cka_rbf", {"bandwidth": 0.0}, "bandwidth"),
                                      ("cka_rbf", {"bandwidth": -1.0}, "bandwidth")):
        with pytest.raises(vaetransfer.ArgumentError) as info:
            ours(x, y, measure, **params)
        assert info.value.argument == argument, (measure, params)
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        ours(x, y, "mutual_knn", k=2.5)
    assert info.value.argument == "k"
    with pytest.raises(vaetransfer.ArgumentError, match="at least 3"):
        ours(rng.standard_normal((2, 3)), rng.standard_normal((2, 3)), "rsa")
    # two examples: one distance, any two non-constant layers have the same centred RBF kernel
    assert ours(rng.standard_normal((2, 3)), rng.standard_normal((2, 5)), "cka_rbf") == pytest.approx(1.0)
    # a bandwidth so wide that every float32 kernel value rounds to 1: named, never NaN
    with pytest.raises(vaetransfer.ArgumentError) as info:
        sim.similarity(torch.randn(30, 4), torch.randn(30, 4), "cka_rbf", bandwidth=1e5)
    assert info.value.argument == "bandwidth"


def test_float32_activations():
    x, y = related(80, 16, 12, seed=21)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    for measure, params in PARAMS:
        got = sim.similarity(torch.from_numpy(x32), torch.from_numpy(y32), measure, **params)
        expected = reference(x32.astype(np.float64), y32.astype(np.float64), measure, **params)
        if measure == "mutual_knn":  # neighbours are confirmed in float64 from the stored values
            assert same_count(got, expected, 80, params.get("k", 10))
        else:
            assert got == pytest.approx(expected, abs=2e-5), (measure, params)


# ------------------------------------------------------------------ kernel measures within memory_bytes
@pytest.mark.parametrize("measure", ["cka_rbf", "mutual_knn", "cknna", "rsa"])
def test_values_do_not_depend_on_memory_bytes(measure):
    """Row blocks of any size give the same scores (the blocks' rounding aside). RBF CKA holds every
    layer's packed kernel when they fit in three quarters of memory_bytes (here 4 layers × 44,850
    float32 = 0.7 MB: held at 1 MiB and above) and streams them below: both forms, and a budget that
    leaves one-row blocks, give the same heatmap."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 12)).astype(np.float32)
    acts = OrderedDict(a=torch.from_numpy(x), b=torch.from_numpy(np.tanh(x @ rng.standard_normal((12, 20))).astype(np.float32)))
    params = {"k": 5} if measure in ("mutual_knn", "cknna") else {}
    budgets = {"rsa": [4 << 20], "cka_rbf": [16 << 10, 256 << 10, 1 << 20]}.get(measure, [16 << 10, 1 << 20])
    values = [sim.similarity_matrix(acts, OrderedDict((k, v.clone()) for k, v in acts.items()), measure, progress=False,
                                    memory_bytes=budget, **params).values for budget in budgets + [1 << 30]]
    for small in values[:-1]:
        assert torch.allclose(small, values[-1], atol=1e-6, rtol=0)


@pytest.mark.parametrize("measure", ["cka_rbf", "rsa"])
@pytest.mark.parametrize("budget", ["small", "default"])
def test_triangle_blocks_agree_with_the_reference(measure, budget):
    """At n = 700 the packed distances come in three triangular row blocks (each block against the rows
    from its own on) and the streamed RBF kernel (64 KiB) in many: both against the NumPy definition."""
    budget = {"small": (8 << 20) if measure == "rsa" else (64 << 10), "default": 1 << 30}[budget]
    x, y = related(700, 30, 24, seed=11)
    got = sim.similarity_matrix({"x": t64(x)}, {"y": t64(y)}, measure, progress=False, memory_bytes=budget).values.item()
    assert got == pytest.approx(reference(x, y, measure), abs=1e-9)


_PEAK = """
import resource, torch
from vaetransfer import similarity as s
g = torch.Generator().manual_seed(0)
x = torch.randn({n}, 48, generator=g)
y = torch.tanh(x @ torch.randn(48, 32, generator=g))
s.similarity_matrix({{'a': x}}, {{'b': y}}, {measure!r}, progress=False, memory_bytes={budget})
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _peak_bytes(measure: str, n: int, budget: int) -> int:
    """Peak resident bytes of a child computing one pair, less those of a child that only imports."""
    import subprocess
    import sys

    def run(code):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, OMP_NUM_THREADS="1"))
        assert out.returncode == 0, out.stderr[-2000:]
        return int(out.stdout.split()[-1])

    base = run("import resource, torch\nfrom vaetransfer import similarity as s\n"
               "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)")
    return run(_PEAK.format(n=n, measure=measure, budget=budget)) - base


@pytest.mark.parametrize("measure", ["cka_rbf", "mutual_knn", "cknna"])
def test_kernel_and_neighbour_measures_stream_within_memory_bytes(measure):
    """At n = 4,000 one n × n float32 matrix is 61 MiB; the old fits held three to five of them (343–439 MB
    at n = 5,000 against a documented 50 MB). Row blocks now keep a pair within memory_bytes (16 MiB here)
    and a fixed allowance for the libraries' own buffers."""
    peak = _peak_bytes(measure, 4000, 16 << 20)
    assert peak < (16 << 20) + (48 << 20), peak / 2**20


def test_rsa_is_bounded_by_memory_bytes_before_it_fits():
    """RSA's ranks cannot be streamed (Spearman needs each layer's n(n−1)/2 ranks): a budget that cannot
    hold them is a named error before any fit, and a budget that can is kept."""
    rng = np.random.default_rng(0)
    acts = OrderedDict(a=torch.from_numpy(rng.standard_normal((2000, 8)).astype(np.float32)))
    other = OrderedDict(b=torch.from_numpy(rng.standard_normal((2000, 8)).astype(np.float32)))
    with pytest.raises(vaetransfer.ArgumentError, match="RSA keeps each layer's ranks") as info:
        sim.similarity_matrix(acts, other, "rsa", progress=False, memory_bytes=16 << 20)
    assert info.value.argument == "memory_bytes"
    assert np.isfinite(sim.similarity_matrix(acts, other, "rsa", progress=False, memory_bytes=64 << 20).values.item())
    peak = _peak_bytes("rsa", 2000, 64 << 20)
    assert peak < (64 << 20) + (48 << 20), peak / 2**20
