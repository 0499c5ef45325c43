"""The one decision procedure every finding goes through (vaetransfer.studies.kit.decision): its
calibration on null data (≤ 5 % of ≥ 1,000 draws decided either way), the power it reports (met or
exceeded), symmetric decisions inside and outside the noise on both sides, several parts, parts left
out, and the jackknife for units that share seeds against the closed form."""
import math

import numpy as np
import pytest
from scipy.stats import binomtest

from vaetransfer import ArgumentError
from vaetransfer.studies.kit.declarations import Finding, Verdict, undecided
from vaetransfer.studies.kit.decision import Effect, Part, decide, decide_part, estimate, se_from_interval

DRAWS = 1000


def _effect(parts, size=1.0, margin=0.0):
    return Effect("test statistic", "seed", parts, size=size, size_source="test", margin=margin)


def _seeds(rng, n, delta, sd=1.0):
    return Part.of_seeds({s: delta + sd * rng.standard_normal() for s in range(n)})


def _pairs(rng, n, delta, sd=1.0):
    # Pair (i, j) of models from seeds i != j: each seed's luck enters every pair it is in.
    a, b = rng.standard_normal(n) * sd, rng.standard_normal(n) * sd
    return Part.of_pairs({(i, j): delta + a[i] + b[j] + 0.5 * sd * rng.standard_normal()
                          for i in range(n) for j in range(n) if i != j})


def _rates(make, draws=DRAWS):
    counts = dict.fromkeys(("reproduced", "contradicted", "absent", "undecided"), 0)
    powers = []
    for _ in range(draws):
        d = decide(make())
        counts[d["verdict"]] += 1
        powers.append(d["power"] or 0.0)
    return counts, float(np.mean(powers))


@pytest.mark.parametrize("kind,n,parts", [("seeds", 3, 1), ("seeds", 5, 1), ("seeds", 5, 3), ("pairs", 3, 1),
                                          ("pairs", 5, 2)])
def test_null_effects_are_decided_either_way_in_at_most_5_percent_of_draws(kind, n, parts):
    rng = np.random.default_rng(100 + n + parts)
    part = _seeds if kind == "seeds" else _pairs
    counts, _ = _rates(lambda: _effect({f"p{k}": part(rng, n, 0.0) for k in range(parts)}))
    decided = counts["reproduced"] + counts["contradicted"]
    # One-sided binomial test of "rate <= 5 %": a calibrated procedure passes it but in 1 % of seeds;
    # one deciding in 8 % of draws fails it (tested below with a deliberately miscalibrated level).
    assert binomtest(decided, DRAWS, 0.05, alternative="greater").pvalue > 0.01, counts
    assert binomtest(counts["reproduced"], DRAWS, 0.025, alternative="greater").pvalue > 0.01, counts


def test_the_null_calibration_test_can_fail():
    rng = np.random.default_rng(7)
    decided = 0
    for _ in range(DRAWS):  # a 90 % interval decides a null effect in ~10 % of draws
        d = decide_part(_seeds(rng, 5, 0.0), size=1.0, level=0.90)
        decided += d["verdict"] in ("reproduced", "contradicted")
    assert binomtest(decided, DRAWS, 0.05, alternative="greater").pvalue < 0.01


@pytest.mark.parametrize("kind,n,parts", [("seeds", 3, 1), ("seeds", 5, 1), ("seeds", 8, 1), ("seeds", 5, 2),
                                          ("pairs", 4, 1), ("pairs", 5, 1)])
def test_a_true_effect_of_the_stated_size_is_reproduced_at_least_as_often_as_the_reported_power(kind, n, parts):
    rng = np.random.default_rng(200 + n + parts)
    part = _seeds if kind == "seeds" else _pairs
    counts, mean_power = _rates(lambda: _effect({f"p{k}": part(rng, n, 1.0) for k in range(parts)}))
    rate = counts["reproduced"] / DRAWS
    # The power shown is a lower bound (at the 80 % upper bound of the spread): met within Monte-Carlo error.
    assert rate >= mean_power - 3 * math.sqrt(mean_power * (1 - mean_power) / DRAWS), (rate, mean_power)
    assert mean_power > 0.02  # and not vacuous


def test_power_at_the_true_spread_is_the_exact_non_central_t_probability():
    from scipy.stats import nct, t
    rng = np.random.default_rng(3)
    n, hits = 6, 0
    for _ in range(DRAWS):
        hits += decide_part(_seeds(rng, n, 1.0), size=1.0)["verdict"] == "reproduced"
    exact = nct.sf(t.ppf(0.975, n - 1), n - 1, 1.0 / (1 / math.sqrt(n)))
    assert abs(hits / DRAWS - exact) < 3 * math.sqrt(exact * (1 - exact) / DRAWS)


@pytest.mark.parametrize("sign", [1, -1])
def test_decisions_are_symmetric_inside_and_outside_the_noise(sign):
    tight = {0: 0.50, 1: 0.52, 2: 0.48, 3: 0.51}
    noisy = {0: 0.5, 1: -0.4, 2: 0.9, 3: -0.3}
    out = decide_part(Part.of_seeds({k: sign * v for k, v in tight.items()}), size=0.3)
    assert out["verdict"] == ("reproduced" if sign > 0 else "contradicted")
    out = decide_part(Part.of_seeds({k: sign * v for k, v in noisy.items()}), size=0.3)
    assert out["verdict"] == "undecided" and out["units_needed"] > 4 and "underpowered" in out["reason"]
    near_zero = decide_part(Part.of_seeds({k: sign * v for k, v in {0: 0.01, 1: -0.01, 2: 0.0, 3: 0.005}.items()}),
                            size=0.3)
    assert near_zero["verdict"] == "absent"  # excludes the stated size, not zero: same either side


def test_margin_separates_a_small_effect_from_a_reproduced_one():
    part = Part.of_seeds({0: 0.030, 1: 0.031, 2: 0.029})
    assert decide_part(part, size=0.2, margin=0.0)["verdict"] == "reproduced"
    assert decide_part(part, size=0.2, margin=0.05)["verdict"] == "absent"


def test_interval_and_se_of_independent_units_follow_the_t_formula():
    from scipy.stats import t
    vals = [0.3, 0.5, 0.4, 0.6]
    out = decide_part(Part.of_seeds(dict(enumerate(vals))), size=1.0)
    se = np.std(vals, ddof=1) / 2
    assert out["se"] == pytest.approx(se)
    assert out["ci_low"] == pytest.approx(np.mean(vals) - t.ppf(0.975, 3) * se)


def test_example_level_error_is_summed_over_units_then_added_to_the_spread_in_quadrature():
    # Units that used the same inputs share their example noise: the mean's example error is the
    # units' mean, not their root-sum-square over n (which would shrink it as if independent).
    part = Part.of_seeds({0: 0.3, 1: 0.5, 2: 0.4}, example_se={0: 0.03, 1: 0.04, 2: 0.0})
    est = estimate(part)
    assert est["se_examples"] == pytest.approx((0.03 + 0.04) / 3)
    assert est["se"] == pytest.approx(math.hypot(est["se_units"], est["se_examples"]))
    assert se_from_interval(0.1, 0.3) == pytest.approx(0.1 / 1.959964, rel=1e-5)


def test_jackknife_of_disjoint_units_is_a_conservative_version_of_the_plain_standard_error():
    vals = {(0, 1): 0.2, (2, 3): 0.5, (4, 5): 0.3}
    jk = estimate(Part.of_pairs(vals))
    plain = np.std(list(vals.values()), ddof=1) / math.sqrt(3)
    # Units that share no seed are independent: the plain formula, not the jackknife.
    assert jk["method"] == "independent units" and jk["se"] == pytest.approx(plain)


def test_jackknife_leaves_every_unit_with_the_seed_out():
    vals = {(0, 1): 1.0, (0, 2): 2.0, (1, 2): 4.0}
    est = estimate(Part.of_pairs(vals))
    loo = [4.0, 2.0, 1.0]  # without seed 0: only (1, 2); without 1: (0, 2); without 2: (0, 1)
    m = np.mean(loo)
    assert est["method"] == "leave-one-seed-out jackknife" and est["df"] == 2
    assert est["se"] == pytest.approx(math.sqrt(2 / 3 * sum((x - m) ** 2 for x in loo)))


def test_too_few_units_are_undecided_with_what_would_decide():
    one = decide_part(Part.of_seeds({0: 5.0}), size=1.0)
    assert one["verdict"] == "undecided" and one["units_needed"] == 2 and "one unit" in one["reason"]
    two_seeds = decide_part(Part.of_pairs({(0, 1): 1.0, (1, 0): 1.1}), size=1.0)
    assert two_seeds["verdict"] == "undecided" and two_seeds["units_needed"] == 3


def test_several_parts_every_part_must_reproduce_one_contradiction_decides():
    good = Part.of_seeds({0: 1.0, 1: 1.1, 2: 0.9})
    bad = Part.of_seeds({0: -1.0, 1: -1.1, 2: -0.9})
    noisy = Part.of_seeds({0: 1.0, 1: -1.0, 2: 0.5})
    assert decide(_effect({"a": good, "b": good}))["verdict"] == "reproduced"
    d = decide(_effect({"a": good, "b": bad}))
    assert d["verdict"] == "contradicted" and "b" in d["reason"]
    d = decide(_effect({"a": good, "b": noisy}))
    assert d["verdict"] == "undecided" and d["reason"].startswith("b:")


def test_parts_left_out_are_named_and_the_rest_decided():
    good = Part.of_seeds({0: 1.0, 1: 1.1, 2: 0.9})
    bad = Part.of_seeds({0: -1.0, 1: -1.1, 2: -0.9})
    d = decide(_effect({"beta": good, "annealed": Part.left_out("annealed (seed 1) did not train")}))
    assert d["verdict"] == "reproduced" and d["left_out"] == {"annealed": "annealed (seed 1) did not train"}
    assert "annealed" in d["reason"]
    d = decide(_effect({"beta": bad, "annealed": Part.left_out("did not train")}))
    assert d["verdict"] == "contradicted"
    d = decide(_effect({"annealed": Part.left_out("did not train")}))
    assert d["verdict"] == "undecided" and "did not train" in d["reason"]


def test_bad_input_is_named():
    with pytest.raises(ArgumentError, match="values"):
        Part.of_seeds({0: float("nan")})
    with pytest.raises(ArgumentError, match="size"):
        _effect({"a": Part.of_seeds({0: 1.0, 1: 2.0})}, size=0.1, margin=0.2)
    with pytest.raises(ArgumentError, match="parts"):
        _effect({})


def _finding(kind, out):
    return Finding("x", "claim", "source", "rule", lambda c, a: out, kind=kind)


def test_findings_return_effects_and_sanity_checks_verdicts():
    effect = _effect({"a": Part.of_seeds({0: 1.0, 1: 1.1, 2: 0.9})})
    rec = _finding("finding", effect).judge(None, {})
    assert rec["verdict"] == "reproduced" and rec["reproduced"] is True and rec["kind"] == "finding"
    assert rec["effect"]["parts"]["a"]["n"] == 3
    rec = _finding("sanity", Verdict(False, {"kl": 1.0})).judge(None, {})
    assert rec["verdict"] == "failed" and rec["reproduced"] is False and rec["effect"] is None
    rec = _finding("finding", undecided("not run")).judge(None, {})
    assert rec["verdict"] == "undecided" and rec["reason"] == "not run"
    with pytest.raises(TypeError, match="decide"):   # a finding may not decide itself
        _finding("finding", Verdict(True)).judge(None, {})
    with pytest.raises(TypeError, match="decide"):
        _finding("sanity", effect).judge(None, {})


def test_units_left_out_are_named_and_a_part_of_only_dropped_units_is_left_out():
    part = Part.of_seeds({0: 1.0, 1: 1.1, 2: 0.9}, dropped={3: "did not train"})
    d = decide(_effect({"a": part}))
    assert d["verdict"] == "reproduced" and "seed=3: did not train" in d["reason"]
    assert d["parts"]["a"]["dropped"] == {"seed=3": "did not train"} and d["parts"]["a"]["n"] == 3
    gone = Part.of_seeds({}, dropped={0: "diverged"})
    assert gone.reason == "every unit left out: seed=0: diverged"
    assert decide(_effect({"a": gone}))["verdict"] == "undecided"


def test_a_spread_of_zero_is_not_certainty_an_exact_sign_test_decides():
    from vaetransfer.studies.kit.decision import sign_test_units
    assert sign_test_units() == 6            # 2 · 0.5⁶ = 0.031 < 0.05 ≤ 2 · 0.5⁵
    few = decide_part(Part.of_seeds({s: 1.0 for s in range(3)}), size=0.5)
    assert few["verdict"] == "undecided" and few["units_needed"] == 6 and "sign test" in few["reason"]
    many = decide_part(Part.of_seeds({s: 1.0 for s in range(6)}), size=0.5)
    assert many["verdict"] == "reproduced" and many["test"] == "exact sign test"
    # against the paper at the Bonferroni level of 3 parts (98.3 %): 2 · 0.5ⁿ < 0.0167 needs 7 units
    against = {s: -1.0 for s in range(6)}
    assert decide_part(Part.of_seeds(against), size=0.5, against_level=1 - 0.05 / 3)["verdict"] == "undecided"
    against[6] = -1.0
    assert decide_part(Part.of_seeds(against), size=0.5, against_level=1 - 0.05 / 3)["verdict"] == "contradicted"
    # a zero effect with no spread decides nothing either way
    assert decide_part(Part.of_seeds({s: 0.0 for s in range(8)}), size=0.5)["verdict"] == "undecided"


def test_units_needed_is_the_fewest_that_decide_towards_any_boundary_at_its_own_level():
    from scipy.stats import t
    vals = [-0.4, 0.9, 0.25]                 # mean 0.25: interval holds both 0 and the size 1
    sd = np.std(vals, ddof=1)
    against = 1 - 0.05 / 3                   # decisions against at the Bonferroni level of 3 parts
    out = decide_part(Part.of_seeds(dict(enumerate(vals))), size=1.0, against_level=against)
    assert out["verdict"] == "undecided"

    def first(distance, level):              # brute force: the first k whose half-width is below
        return next(k for k in range(4, 10_000)
                    if t.ppf(1 - (1 - level) / 2, k - 1) * sd / math.sqrt(k) < distance)
    expected = min(first(0.25, 0.95), first(1.0 - 0.25, against))
    assert out["units_needed"] == expected
    # sized at the 95 % level instead, the absent boundary would need fewer: the level matters
    assert first(0.75, 0.95) < first(0.75, against)
