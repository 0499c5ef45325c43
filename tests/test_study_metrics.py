"""The disentanglement sections of the studies (rate_distortion on held-out Tetrominoes rows,
quickstart on dSprites by exact factor sampling), at the smoke preset shared with the other study
tests (tests/conftest.py `study_smoke`): their structure in results.json and index.md, and their
values against direct calls of the metrics on the same codes."""
import dataclasses
import math

import numpy as np
import pytest
import torch

import vaetransfer
from vaetransfer import data, metrics, studies
from vaetransfer.studies import quickstart
from vaetransfer.studies import rate_distortion as rd
from vaetransfer.train import load_run
from vaetransfer.studies.kit import declarations, trained
from vaetransfer.studies.kit.scores import CODE_SCORES, SCORES

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def rd_smoke(study_smoke):
    return study_smoke("rate_distortion")


@pytest.fixture(scope="module")
def qs_smoke(study_smoke):
    return study_smoke("quickstart")


def _posterior_mean(model, x: torch.Tensor) -> np.ndarray:
    """The posterior means of ``x``, straight from the encoder (not through metrics.codes), in
    chunks of 256 as the studies encode (float32 results do not depend on how rows are batched)."""
    model.eval()
    with torch.no_grad():
        mean = torch.cat([model.encode(chunk)[0] for chunk in x.split(256)])
    return mean.double().numpy()


def _gaussian_tc(z: np.ndarray) -> float:
    """KL(N(0, Σ) ‖ N(0, diag Σ)) = ½ (Σ log Σ_ii − log det Σ), Σ the codes' covariance."""
    cov = np.cov(z, rowvar=False)
    return 0.5 * (np.log(np.diag(cov)).sum() - np.linalg.slogdet(cov)[1])


# ---------------------------------------------------------------------------------- rate_distortion
def test_rate_distortion_reports_disentanglement_per_beta(rd_smoke):
    out, r = rd_smoke
    c = rd.PRESETS["smoke"]
    d = r["analysis"]["disentanglement"]
    assert set(d) == {"rows", "representation", "metrics", "sap_variant", "scores", "splits", "table", "runs", "seconds"}
    assert (d["rows"], d["representation"], d["metrics"], d["sap_variant"]) == \
        ("test", "mean", list(c.disentanglement_metrics), c.disentanglement_sap)
    scores = [s for m in c.disentanglement_metrics for _, s in CODE_SCORES[m]]
    assert d["scores"] == scores
    betavaes = [x for x in rd.stages.train_runs(c, {}) if x["objective"] == "beta-vae"]
    assert len(d["runs"]) == len(betavaes)  # every β-VAE, no ablation
    for x in d["runs"]:
        assert x["errors"] == {} and set(x["scores"]) == set(scores), x
        assert all(isinstance(v, float) and math.isfinite(v) for v in x["scores"].values())
        assert (out / declarations.STEPS_DIR / f"disentanglement_{x['id']}.json").exists()
    for s in c.splits:
        assert d["splits"][s.label]["n"] == c.disentanglement_n
        assert set(d["splits"][s.label]["factor_names"]) <= set(data.TETROMINOES_FACTORS)
        for arch in c.architectures:
            cells = d["table"][arch][s.label]
            assert sorted(float(b) for b in cells) == sorted(c.betas)
            for b, cell in cells.items():
                assert set(cell) == set(scores)
                runs = [x for x in d["runs"] if (x["architecture"], x["split"], x["beta"]) == (arch, s.label, float(b))]
                assert cell["mig"]["n"] == len(runs) == len(c.seeds_of(s))
                assert cell["mig"]["mean"] == pytest.approx(np.mean([x["scores"]["mig"] for x in runs]), abs=1e-5)
    # bounded scores stay in [0, 1]
    for x in d["runs"]:
        for k, v in x["scores"].items():
            if k != "gaussian_total_correlation":
                assert -1e-9 <= v <= 1 + 1e-9, (k, v)
    assert "disentanglement.png" in r["figures"] and (out / "disentanglement.png").read_bytes()[:8] == PNG
    index = (out / "index.md").read_text()
    section = index.split("## Disentanglement of the β-VAEs (held-out rows)", 1)[1]
    assert "BetaVAE and FactorVAE are left out" in section and "(disentanglement.png)" in section
    for arch in c.architectures:
        for s in c.splits:
            assert f"**{arch}, {s.label}**" in section
    assert "| β | " + " | ".join(scores) + " |" in section


def test_rate_distortion_scores_equal_direct_metric_calls(rd_smoke):
    out, r = rd_smoke
    c = rd.PRESETS["smoke"]
    d = r["analysis"]["disentanglement"]
    x = next(x for x in d["runs"] if x["architecture"] == "mlp1" and x["split"] == c.focus_split.label
             and x["beta"] == 1.0)
    run = next(run for run in rd.STUDY.stage("train").runs(c, {}) if run["architecture"] == "mlp1"
               and run["objective"] == "beta-vae" and rd.stages.split_label(run["split"]) == x["split"] and run["beta"] == 1.0)
    # The rows: held-out test rows of the split (none trained on, none of the validation rows),
    # the test-row draw of D and R, in a random order.
    train_rows, val_rows, test_rows = rd.split_rows(run["split"], c.data_seed, c.validation_fraction)
    rows = rd.disentanglement_rows(run["split"], c)
    assert len(rows) == c.disentanglement_n == len(set(rows.tolist()))
    assert set(rows.tolist()) <= set(test_rows.tolist())
    assert not set(rows.tolist()) & (set(train_rows.tolist()) | set(val_rows.tolist()))
    assert rows.sort().values.tolist() == rd.stages.subset(test_rows, c.disentanglement_n, c.data_seed + 1).tolist()
    assert rows.tolist() != sorted(rows.tolist())  # shuffled: the metrics' 80/20 split is a random one
    # The codes: the model's posterior means of those rows; the factors: their strata.
    ds = data.tetrominoes(rows, seed=c.data_seed)
    run_dir = out / declarations.SWEEPS_DIR / "train" / "runs" / x["id"]
    assert load_run(run_dir / "train").config.objective.beta == 1.0
    z = _posterior_mean(load_run(run_dir / "train").model(), ds.float_images())
    y = ds.factors.numpy()
    keep = [k for k in range(y.shape[1]) if len(np.unique(y[:, k])) > 1]
    assert d["splits"][x["split"]]["factor_names"] == [data.TETROMINOES_FACTORS[k] for k in keep]
    y = y[:, keep]
    assert x["scores"]["mig"] == pytest.approx(metrics.mig(z, y).score, abs=1e-9)
    assert x["scores"]["sap"] == pytest.approx(metrics.sap(z, y, variant=c.disentanglement_sap).score, abs=1e-9)
    assert x["scores"]["gaussian_total_correlation"] == pytest.approx(_gaussian_tc(z), rel=1e-6, abs=1e-9)
    assert x["scores"]["gaussian_total_correlation"] == pytest.approx(metrics.gaussian_total_correlation(z), abs=1e-9)


def test_rate_distortion_recomputes_only_a_missing_disentanglement_step(rd_smoke):
    out, r = rd_smoke
    steps = out / declarations.STEPS_DIR
    files = sorted(steps.glob("disentanglement_*.json"))
    before = {p.name: p.stat().st_mtime_ns for p in files}
    files[0].unlink()
    again = studies.run_study("rate_distortion", out, preset="smoke", progress=False)
    after = {p.name: p.stat().st_mtime_ns for p in steps.glob("disentanglement_*.json")}
    assert set(after) == set(before)
    assert [n for n in before if after[n] != before[n]] == [files[0].name]  # only the missing one computed again
    assert again["analysis"]["disentanglement"]["table"] == r["analysis"]["disentanglement"]["table"]  # deterministic
    assert again["analysis"]["table"] == r["analysis"]["table"]


@pytest.mark.parametrize("sets, argument", [
    ({"disentanglement_n": 5}, "disentanglement_n"), ({"disentanglement_n": -1}, "disentanglement_n"),
    ({"disentanglement_metrics": ("mig", "beta_vae")}, "disentanglement_metrics"),
    ({"disentanglement_metrics": ("mig", "mig")}, "disentanglement_metrics"),
    ({"disentanglement_sap": "svm"}, "disentanglement_sap"),
])
def test_rate_distortion_disentanglement_config_is_checked(sets, argument):
    with pytest.raises(vaetransfer.ArgumentError) as err:
        rd.Config(**sets)
    assert err.value.argument == argument


def test_rate_distortion_presets_compute_disentanglement():
    assert rd.Config().disentanglement_metrics == rd.DISENTANGLEMENT_METRICS
    assert rd.PRESETS["paper"].disentanglement_metrics == rd.DISENTANGLEMENT_METRICS
    assert rd.PRESETS["smoke"].disentanglement_n < rd.PRESETS["small"].disentanglement_n \
        <= rd.PRESETS["paper"].disentanglement_n
    assert not {"beta_vae", "factor_vae"} & set(rd.ARRAY_METRICS)


# ---------------------------------------------------------------------------------- quickstart
def test_quickstart_reports_disentanglement_per_model(qs_smoke):
    out, r = qs_smoke
    c = quickstart.PRESETS["smoke"]
    d = r["analysis"]["disentanglement"]
    assert set(d) == {"n", "metrics", "representation", "options", "scores", "models", "seconds", "factor_names"}
    assert (d["n"], d["metrics"], d["representation"]) == (c.disentanglement_n, list(c.disentanglement_metrics), "mean")
    assert d["factor_names"] == ["shape", "scale", "orientation", "posX", "posY"]  # colour has one class
    assert d["options"] == quickstart.disentanglement_options(c)
    models = [m.dir for m in quickstart.models(c) if m.pair == 0]   # the first replicate pair's models
    assert set(d["scores"]) == set(d["models"]) == set(d["seconds"]) == set(models)
    names = [s for m in c.disentanglement_metrics for _, s in SCORES[m]]
    for m in models:
        assert set(d["scores"][m]) == set(names)
        assert all(isinstance(v, float) and math.isfinite(v) for v in d["scores"][m].values())
        full = d["models"][m]
        assert set(c.disentanglement_metrics) <= set(full) and full["n"] == c.disentanglement_n
        assert full["domain"] == "dsprites" and full["seed"] == c.seed
        assert (out / declarations.STEPS_DIR / f"disentanglement_{m}.json").exists()
    index = (out / "index.md").read_text()
    section = index.split("## Disentanglement on dSprites", 1)[1]
    labels = [r["analysis"]["models"][m]["label"] for m in models]
    assert "| score | " + " | ".join(labels) + " (baseline) |" in section  # the models in the study's order
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert [line.split("`")[1] for line in rows] == names  # one row per score, in the metrics' order
    for line, n in zip(rows, names):
        assert line.split(" | ")[1:] == [f"{d['scores'][m][n]:.3f}" for m in models[:-1]] + \
            [f"{d['scores'][models[-1]][n]:.3f} |"]


def test_quickstart_scores_equal_direct_metric_calls(qs_smoke):
    out, r = qs_smoke
    c = quickstart.PRESETS["smoke"]
    d = r["analysis"]["disentanglement"]
    m = quickstart.models(c)[1]
    run_dir = next(p for p in (out / declarations.SWEEPS_DIR / "train" / "runs").iterdir()
                   if load_run(p).config.seed == m.seed and load_run(p).config.objective.beta == m.beta)
    model = load_run(run_dir).model()
    # The same examples: n factor combinations drawn uniformly from the grid with the study's seed.
    sampler = metrics.FactorSampler("dsprites")
    factors = sampler.sample_factors(c.disentanglement_n, np.random.default_rng(c.seed))
    z = _posterior_mean(model, sampler.images(factors))
    y = factors[:, list(sampler.varying)]
    assert d["scores"][m.dir]["mig"] == pytest.approx(metrics.mig(z, y).score, abs=1e-9)
    assert d["scores"][m.dir]["gaussian_total_correlation"] == pytest.approx(_gaussian_tc(z), rel=1e-5, abs=1e-8)
    again = metrics.disentanglement(model, "dsprites", n=c.disentanglement_n, metrics=["mig"], seed=c.seed)
    assert again["mig"] == d["models"][m.dir]["mig"]


@pytest.mark.parametrize("sets, argument", [
    ({"disentanglement_n": 10}, "disentanglement_n"), ({"disentanglement_points": 1}, "disentanglement_points"),
    ({"disentanglement_metrics": ("mig", "udr")}, "disentanglement_metrics"),
])
def test_quickstart_disentanglement_config_is_checked(sets, argument):
    with pytest.raises(vaetransfer.ArgumentError) as err:
        quickstart.Config(**sets)
    assert err.value.argument == argument


# ---------------------------------------------------------------------------------- quickstart: did the models train?
def test_quickstart_checks_that_its_models_trained(qs_smoke):
    """The trained-model check of the smoke run against direct computations: the held-out rows, the
    input-ignoring baseline, one model's distortion (z = posterior mean), the rule and the findings."""
    out, r = qs_smoke
    c = quickstart.PRESETS["smoke"]
    t = r["analysis"]["trained"][quickstart.TRAINED_CHECK]
    dirs = [m.dir for m in quickstart.models(c)]
    distortion = {d: m["distortion"] for d, m in t["models"].items()}
    refs = [p.a.dir for p in quickstart.pairs(c)]   # each pair's β = 1 model
    assert set(distortion) == set(dirs) and t["context"]["reference"] == refs
    assert t["context"]["held_out"] is True and t["context"]["n"] == quickstart.TRAINED_N
    rows, _ = quickstart.held_out_rows(c)
    train_rows = quickstart.train_rows(c)
    assert not set(rows.tolist()) & set(train_rows.tolist())
    x = data.dsprites(rows).float_images()
    baseline = t["context"]["baseline"]
    assert baseline == pytest.approx(trained.input_ignoring_distortion(data.dsprites(train_rows).float_images(), x),
                                     abs=1e-3)
    m = quickstart.models(c)[1]
    run_dir = next(p for p in (out / declarations.SWEEPS_DIR / "train" / "runs").iterdir()
                   if load_run(p).config.seed == m.seed and load_run(p).config.objective.beta == m.beta)
    model = load_run(run_dir).model()
    with torch.no_grad():
        logits = model.decode(model.encode(x)[0])
    direct = torch.nn.functional.binary_cross_entropy_with_logits(logits.double(), x.double(), reduction="none")
    assert distortion[m.dir] == pytest.approx(float(direct.flatten(1).sum(1).mean()), rel=1e-4)
    ref = sum(distortion[d] for d in refs) / len(refs)
    if ref < baseline:
        assert t["rule"]["maximum"] == pytest.approx((baseline + ref) / 2, abs=1e-3)
    else:  # 20 steps may not beat the input-ignoring baseline: then no model can be judged
        assert "reference" in t["rule"]["error"]
    assert all(row["finite"] is True and row["window"] == trained.loss_window(c.steps)
               for row in r["analysis"]["models"].values())
    for f in r["findings"]:
        assert "halfway from the input-ignoring baseline" in f["rule"], f["name"]
        assert f["figures"] and set(f["figures"]) <= set(r["figures"]), f["name"]
        assert f["diagnosis"]["kind"] in declarations.DIAGNOSIS_KINDS, f["name"]
        if f["verdict"] == "undecided" and "did not train" in f["reason"]:
            assert f["diagnosis"]["kind"] == "setting", f["name"]
    assert "**Did the models train?**" in (out / "index.md").read_text()


def _history(first: float, last: float, bad: bool = False) -> dict:
    loss = np.linspace(first, last, 100)
    if bad:
        loss[50] = float("nan")
    return trained.loss_summary(loss)


def _qs_analysis(*, distortion=(100.0, 200.0, 210.0), losses=((3000.0, 100.0),) * 3, diverged=(), kl=(5.0, 1.0, 1.5),
                 enc=(0.9, 0.5), base=(0.95, 0.5), baseline=500.0, config=None, jitter=0.001, pair_change=None) -> dict:
    """A synthetic quickstart analysis over Config()'s 3 replicate pairs: in every pair the β = 1 model,
    the β = 8 model of the other seed and the same-seed baseline get ``distortion``, ``losses`` and ``kl``
    (in that order), its quadrants ``enc`` / ``base`` (encoder, decoder) ± ``jitter`` by pair;
    ``pair_change``: ``{pair index: {field: value}}`` overrides for one pair; ``diverged``: model dirs."""
    c = config or quickstart.Config()
    models, pairs, dist = {}, {}, {}
    for p in quickstart.pairs(dataclasses.replace(c, same_seed_baseline=True)):
        v = {"distortion": distortion, "losses": losses, "kl": kl, "enc": enc, "base": base,
             **(pair_change or {}).get(p.k, {})}
        for m, dd, loss, k in zip((p.a, p.b, p.base), v["distortion"], v["losses"], v["kl"]):
            models[m.dir] = {"label": m.label, "beta": m.beta, "seed": m.seed, "baseline": m.baseline,
                             "steps": c.steps, **_history(*loss, bad=m.dir in diverged), "kl_last": k}
            dist[m.dir] = dd
        shift = jitter * (p.k - 1)
        pairs[p.b.dir] = {"cka": {"encoder_mean": v["enc"][0] + shift, "decoder_mean": v["enc"][1],
                                  "encoder_diagonal_mean": v["enc"][0]}}
        pairs[p.base.dir] = {"cka": {"encoder_mean": v["base"][0] + 2 * shift, "decoder_mean": v["base"][1],
                                     "encoder_diagonal_mean": v["base"][0]}}
    check = quickstart.trained_check(c, models, {"n": quickstart.TRAINED_N, "held_out": True, "baseline": baseline,
                                                 "distortion": dist})
    return {"models": models, "trained": check, "similarity": {"pairs": pairs}}


def _qs_judge(analysis: dict, config=None) -> dict:
    c = config or quickstart.Config()
    return {f.name: f.judge(c, analysis) for f in quickstart.FINDINGS}


def test_quickstart_findings_on_trained_models_are_decided():
    a = _qs_analysis()
    t = a["trained"][quickstart.TRAINED_CHECK]
    assert t["rule"]["maximum"] == 300.0 and t["context"]["reference"] == ["beta_1_seed_0", "beta_1_seed_2",
                                                                             "beta_1_seed_4"]
    records = _qs_judge(a)
    assert {k: f["verdict"] for k, f in records.items()} == {"encoder_alike_decoder_less": "reproduced",
                                                             "same_seed_inflates_similarity": "reproduced",
                                                             "higher_beta_lower_kl": "passed"}
    assert {k: f["diagnosis"]["kind"] for k, f in records.items()} == dict.fromkeys(records, "reproduced")
    part = records["encoder_alike_decoder_less"]["effect"]["parts"]["dSprites"]
    assert part["mean"] == pytest.approx(0.4) and part["n"] == 3 and part["ci_low"] > 0.39
    assert "gap 0.4 [" in records["encoder_alike_decoder_less"]["diagnosis"]["text"]
    assert records["same_seed_inflates_similarity"]["effect"]["parts"]["dSprites"]["mean"] == pytest.approx(0.05)
    for f in quickstart.FINDINGS:
        assert "did not train" in f.rule and "halfway from the input-ignoring baseline" in f.rule, f.name
        assert "1 % below" in f.rule and f.figures and f.diagnose is not None, f.name


@pytest.mark.parametrize("change, why", [
    # pair 1's β = 8 model recovers less than half of the β = 1 models' gain on the baseline
    ({"pair_change": {1: {"distortion": (100.0, 350.0, 210.0)}}},
     "beta_8_seed_3: held-out distortion 350 > 300 (halfway from the input-ignoring baseline 500 to the β = 1 models' "
     "mean (beta_1_seed_0, beta_1_seed_2, beta_1_seed_4) 100)"),
    # pair 1's β = 1 model's loss did not fall by 1 % (100 → 99.5)
    ({"pair_change": {1: {"losses": ((100.0, 99.5), (3000.0, 100.0), (3000.0, 100.0))}}},
     "beta_1_seed_2: training loss did not fall by 1%"),
    # a NaN loss on the way: diverged, even though the loss fell
    ({"diverged": ("beta_8_seed_3",)}, "beta_8_seed_3: diverged (non-finite training loss)"),
])
def test_quickstart_a_pair_whose_model_did_not_train_is_left_out_and_named(change, why):
    records = _qs_judge(_qs_analysis(**change))
    for name in ("encoder_alike_decoder_less", "same_seed_inflates_similarity"):
        f = records[name]
        part = f["effect"]["parts"]["dSprites"]
        assert list(part["dropped"]) == ["2/3"] and why in part["dropped"]["2/3"], part["dropped"]
        assert part["n"] == 2 and f["verdict"] == "reproduced" and why in f["reason"], f["reason"]
    assert records["higher_beta_lower_kl"]["verdict"] == "passed"
    assert list(records["higher_beta_lower_kl"]["evidence"]["left_out"]) == ["1"]


def test_quickstart_nothing_decided_when_the_references_did_not_train():
    # the β = 1 models no better than the input-ignoring baseline: no model can be judged
    records = _qs_judge(_qs_analysis(distortion=(600.0, 200.0, 210.0)))
    for name, f in records.items():
        assert f["verdict"] == "undecided" and "no model can be judged" in f["reason"], name
        assert f["diagnosis"]["kind"] == "setting" and "steps=1500" in f["diagnosis"]["text"], name


def test_quickstart_results_without_the_check_are_decided_on_their_losses():
    """Results written before the check: no ``trained`` section, no ``finite`` in the measurements."""
    a = _qs_analysis(distortion=(100.0, 400.0, 400.0))
    del a["trained"]
    for m in a["models"].values():
        del m["finite"]
    assert all(f["reproduced"] is True for f in _qs_judge(a).values())
    a["models"]["beta_8_seed_1"]["loss_last"] = a["models"]["beta_8_seed_1"]["loss_first"]
    records = _qs_judge(a)
    assert list(records["encoder_alike_decoder_less"]["effect"]["parts"]["dSprites"]["dropped"]) == ["0/1"]
    assert quickstart.trained_report(a) == []


def test_quickstart_report_shows_the_check():
    text = "\n".join(quickstart.trained_report(_qs_analysis(pair_change={1: {"distortion": (100.0, 350.0, 210.0)}})))
    assert "at most 300.0 (halfway from the input-ignoring baseline 500" in text
    assert "| `beta_1_seed_0` | 100.000 | yes |" in text
    assert "| `beta_8_seed_3` | 350.000 | beta_8_seed_3: held-out distortion 350 > 300" in text


@pytest.mark.parametrize("change, config, kind, text", [
    # the cross-seed pairs do not order the quadrants, every same-seed baseline does: shared initial weights
    ({"enc": (0.4, 0.5)}, {}, "setting", "the encoders' likeness comes with shared initial weights"),
    # neither pair orders them
    ({"enc": (0.4, 0.5), "base": (0.45, 0.5)}, {}, "open", "the same-seed baselines do not separate the causes"),
    # no baseline at all
    ({"enc": (0.4, 0.5)}, {"same_seed_baseline": False}, "open", "the same-seed baselines do not separate"),
])
def test_quickstart_encoder_alike_diagnoses(change, config, kind, text):
    c = dataclasses.replace(quickstart.Config(), **config)
    f = next(f for f in quickstart.FINDINGS if f.name == "encoder_alike_decoder_less")
    record = f.judge(c, _qs_analysis(config=c, **change))
    assert record["verdict"] == "contradicted"
    assert record["diagnosis"]["kind"] == kind and text in record["diagnosis"]["text"], record["diagnosis"]["text"]
    assert record["diagnosis"]["evidence"]["gap"].startswith("-0.1 [")


@pytest.mark.parametrize("finding, change, config, expected, kind, text", [
    ("same_seed_inflates_similarity", {"base": (0.8, 0.5)}, {}, "contradicted", "open", "-0.1 ["),
    ("same_seed_inflates_similarity", {}, {"same_seed_baseline": False}, "undecided", "setting",
     "same_seed_baseline=false"),
    ("higher_beta_lower_kl", {"kl": (1.0, 5.0, 0.5)}, {}, "failed", "open", "points at the training"),
    ("higher_beta_lower_kl", {}, {"betas": (4.0, 4.0)}, "undecided", "setting", "both models have β = 4"),
])
def test_quickstart_other_diagnoses(finding, change, config, expected, kind, text):
    c = dataclasses.replace(quickstart.Config(), **config)
    f = next(f for f in quickstart.FINDINGS if f.name == finding)
    record = f.judge(c, _qs_analysis(config=c, **change))
    assert record["verdict"] == expected
    assert record["diagnosis"]["kind"] == kind and text in record["diagnosis"]["text"], record["diagnosis"]["text"]
