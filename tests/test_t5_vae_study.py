"""Study 5 (t5_vae): the smoke preset end to end (the T5 pretrained as its first stage), the two-phase
recipe's configuration (freezing, Eq. 6 annealing, cyclical annealing reaching 1), the variants'
settings, resume, a diagnostic sweep beside the study, the findings' rules, and the config's checks."""
import json
import math

import pytest

from vaetransfer import studies, sweep
from vaetransfer.studies import pipeline, t5_pretrain
from vaetransfer.studies import t5_vae as study
from vaetransfer.schedules import make_schedule
from vaetransfer.text import T5Config, T5VAEConfig
from vaetransfer.train import load_run


@pytest.fixture(scope="module")
def smoke(study_smoke):
    """`vaetransfer run t5_vae --preset smoke`, once per test session (tests/conftest.py)."""
    return study_smoke("t5_vae")


def test_smoke_runs_every_variant_and_seed_and_reports_them(smoke):
    out, r = smoke
    c = study.PRESETS["smoke"]
    a = r["analysis"]
    assert studies.get("t5_vae") is study
    assert r["runs"][study.FINETUNE] == {**r["runs"][study.FINETUNE], "runs": len(c.variants) * len(c.seeds),
                                         "done": len(c.variants) * len(c.seeds)}
    assert r["runs"][study.PRETRAIN]["done"] == 1  # t5_pretrain's science at its smoke preset, the first stage
    assert (out / a["t5_folder"] / "config.json").is_file() and a["pretrain"]["pretrained"] < a["pretrain"]["untrained"]
    assert set(a["summary"]) == set(c.variants)
    for variant, row in a["summary"].items():
        assert row["runs"] == len(c.seeds)
        assert row["settings"] == study.settings(variant)
        for key in ("ppl_iw", "ppl_elbo", "kl", "neg_elbo", "mi", "mi_minibatch", "active_units", "latent_use"):
            assert row[key]["n"] == len(c.seeds) and math.isfinite(row[key]["mean"]), (variant, key)
        assert math.isclose(row["neg_elbo"]["mean"], row["reconstruction"]["mean"] + row["kl"]["mean"], rel_tol=1e-3)
        assert -0.05 <= row["mi"]["mean"] <= row["mi_cap"] + 1e-9  # near collapse: 0 plus Monte-Carlo noise
        assert math.isclose(row["mi_cap"], math.log(c.n_test))
        assert 0 <= row["active_units"]["mean"] <= c.latent_dim
        for attribute in study.ATTRIBUTES:
            assert 0 <= row[f"probe_{attribute}"]["mean"] <= 1 and 0 < row[f"probe_{attribute}_chance"] <= 1
    findings = {f["name"]: f for f in r["findings"]}
    assert list(findings) == [f.name for f in study.FINDINGS]
    for name in ("collapse_without_warmup", "two_phase_keeps_kl_and_units", "ppl_vs_mi_au_tradeoff"):
        assert isinstance(findings[name]["reproduced"], bool), name
    # MI far below its cap at smoke: it decides, and 2 seeds give it a standard error.
    assert isinstance(findings["max_pooling_more_informative"]["reproduced"], bool)
    for path in r["figures"]:
        assert (out / path).stat().st_size > 1000
    assert set(a["examples"]) == set(c.variants) and a["examples_variant"] == "two-phase"
    ex = a["examples"]["two-phase"]
    assert {"reconstructions", "interpolation", "prior_samples"} <= set(ex)
    assert len(ex["interpolation"]["decoded"]) == c.interpolation_points
    text = (out / "index.md").read_text()
    for heading in ("## Recipe and units", "## Results", "## Findings", "## Decoded", "## Figures"):
        assert heading in text


def test_each_run_trains_its_variant(smoke):
    """Phase 1 freezes the decoder and W_proj (not the shared embedding by default) and ends where
    β starts rising; no-warmup has no phase 1 (that phase 1 leaves the decoder and W_proj
    bit-identical is tested in test_t5_vae_objective)."""
    out, _ = smoke
    c = study.PRESETS["smoke"]
    seen = set()
    for d in (out / "sweeps" / study.FINETUNE / "runs").iterdir():
        m = json.loads((d / pipeline.MEASURED_FILE).read_text())
        run = load_run(d / "train")
        cfg = run.config
        s = m["settings"]
        seen.add(tuple(sorted(s.items())))
        assert cfg.objective.name == "t5-vae"
        assert cfg.objective.params["deletion"] == s["deletion"] and cfg.objective.params["free_bits"] == s["free_bits"]
        assert cfg.model.pooling == s["pooling"] and cfg.model.injection == s["injection"]
        assert cfg.optimizer.name == "adamw" and cfg.optimizer.lr == 1e-3 and cfg.optimizer.eps == 1e-3
        beta = run.history["beta"]
        if s["warmup"]:
            (phase,) = cfg.phases
            assert phase.freeze == ("decoder", "memory_projection")
            p1 = phase.steps
            assert float(beta[:p1].abs().max()) == 0.0 and float(beta[p1:].max()) > 0
            assert cfg.schedules["beta"].params["delay"] == p1  # β leaves 0 exactly where phase 1 ends
        else:
            assert cfg.phases == () and float(beta[0]) == 0.0 and float(beta.max()) > 0
    assert len(seen) == len(c.variants)


def test_rerun_reuses_every_finished_run(smoke, capsys):
    out, r = smoke
    before = {p: p.stat().st_mtime_ns for p in (out / "sweeps").rglob("history.csv")}
    assert len(before) == 1 + len(r["analysis"]["per_run"]) * len(study.PRESETS["smoke"].seeds)
    again = studies.run_study("t5_vae", out, preset="smoke", progress=False)
    after = {p: p.stat().st_mtime_ns for p in (out / "sweeps").rglob("history.csv")}
    assert before == after
    assert again["analysis"]["summary"] == r["analysis"]["summary"] and again["findings"] == r["findings"]


def test_a_diagnostic_reruns_its_variants_beside_the_study(smoke):
    """The 3x longer phase 2: the study's T5 and seeds, its own sweep, the study's findings on it."""
    out, r = smoke
    c = study.PRESETS["smoke"]
    d = study.run_diagnostic(out, "longer_phase2", execution=studies.Execution(workers=2, threads=1), progress=False)
    variants = [v for v in study.DIAGNOSTICS["longer_phase2"][0] if v in c.variants]
    assert d["changes"] == {"phase2_epochs": 3 * c.phase2_epochs} and d["config"]["variants"] == variants
    assert d["runs"] == len(variants) * len(c.seeds) and list(d["analysis"]["summary"]) == variants
    def phase2_steps(stage):  # (variant, seed) → steps of phase 2
        s = sweep.open_sweep(out / "sweeps" / stage)
        cfgs = {(r.params["variant"], r.params["seed"]): load_run(s.run_dir(r.id) / "train").config for r in s.runs}
        return {k: cfg.steps - (cfg.phases[0].steps if cfg.phases else 0) for k, cfg in cfgs.items()}

    longer, main = phase2_steps("longer_phase2"), phase2_steps(study.FINETUNE)
    assert longer and all(steps == 3 * main[k] for k, steps in longer.items())
    assert [f["name"] for f in d["findings"]] == [f.name for f in study.FINDINGS]
    assert (out / d["figures"][0]).stat().st_size > 1000
    after = json.loads((out / "results.json").read_text())  # the study's own results stand
    assert after["analysis"] == r["analysis"] and after["findings"] == r["findings"]
    with pytest.raises(ValueError, match="argument 'name'"):
        study.run_diagnostic(out, "longest")


def test_phase_two_annealing_follows_eq6_and_cyclical_reaches_one():
    c = study.Config(n_train=320, batch_size=32, phase1_epochs=2, phase2_epochs=4, anneal_epochs=3, cycles=2)
    spe = 10
    p1, p2 = 2 * spe, 4 * spe
    linear = make_schedule(study.schedule_of(c, "linear", p1, p2, spe))
    for k in (0, 1, 7, 15, 29, 30, 35):  # Eq. 6: β = (step in phase 2) / (steps per epoch · anneal epochs), at most 1
        assert linear.value(p1 + k) == pytest.approx(min(1.0, k / (spe * 3)))
    assert linear.value(p1 - 1) == 0.0
    cyc = make_schedule(study.schedule_of(c, "cyclical", p1, p2, spe))
    values = [cyc.value(p1 + k) for k in range(p2)]
    assert cyc.value(p1 - 1) == 0.0 and values[0] == 0.0
    assert max(values) == pytest.approx(1.0)  # the public code's cyclical schedule never gets there
    period = p2 // 2
    assert values[period] == 0.0 and values[period - 1] == pytest.approx(1.0)  # a new cycle starts from 0
    assert cyc.value(p1 + p2 + 5) == pytest.approx(1.0)  # after the cycles, 1


def test_train_config_builds_the_two_phases():
    model = T5VAEConfig(T5Config(vocab_size=50, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2)).model_config()
    c = study.Config(n_train=100, batch_size=10, phase1_epochs=1.5, phase2_epochs=2, anneal_epochs=1)
    tc = study.train_config(c, study.settings("two-phase"), model, 100, 3, "init.pt")
    assert tc.phases[0].steps == 15 and tc.steps == 35 and tc.seed == 3 and tc.init_from == "init.pt"
    assert tc.phases[0].freeze == ("decoder", "memory_projection")
    frozen = study.train_config(study.Config(freeze_shared=True), study.settings("two-phase"), model, 100, 0, "i")
    assert frozen.phases[0].freeze == ("decoder", "memory_projection", "shared")
    no_warm = study.train_config(c, study.settings("no-warmup"), model, 100, 0, "i")
    assert no_warm.phases == () and no_warm.steps == 20
    assert no_warm.objective.params["deletion"] == 0.0 and no_warm.objective.params["free_bits"] == 0.0
    long = study.train_config(c, study.settings("long"), model, 100, 0, "i")
    assert long.batch_size == c.long_batch_size
    # An untied T5 (v1.1) has its own output layer: part of the decoder, frozen with it.
    untied = T5VAEConfig(T5Config(vocab_size=50, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2,
                                  tie_word_embeddings=False)).model_config()
    assert study.train_config(c, study.settings("two-phase"), untied, 100, 0, "i").phases[0].freeze == \
        ("decoder", "memory_projection", "lm_head")


def test_evaluation_batches_keep_the_logits_bounded():
    assert study.eval_batch(48, 1000, 10) == 128  # the small preset: unchanged
    b = study.eval_batch(256, 32_128, 10)  # t5-small's vocabulary, long documents
    assert 1 <= b < 128 and 12 * b * 10 * 256 * 32_128 <= study.EVAL_BYTES
    assert study.eval_batch(10**4, 10**5, 10) == 1


def _synthetic(kl, au, mi, ppl, use=1.0, probes=0.5, corpus="short"):
    row = {k: {"mean": v, "se": 0.01, "n": 2} for k, v in (("kl", kl), ("active_units", au), ("mi", mi),
                                                           ("ppl_iw", ppl), ("latent_use", use))}
    row.update({f"probe_{a}": {"mean": probes, "se": 0.0, "n": 2} for a in study.ATTRIBUTES})
    row.update(mi_cap=math.log(1000), settings={"corpus": corpus})
    return row


def _judge(c, summary, per_run) -> dict:
    """Every finding of the study judged on an analysis of these summaries and runs."""
    analysis = {"summary": summary, "per_run": per_run}
    return {f.name: f.judge(c, analysis) for f in study.FINDINGS}


def test_findings_follow_their_rules_on_known_summaries():
    c = study.Config(latent_dim=32)
    summary = {"two-phase": _synthetic(8.0, 32, 3.0, 29.0), "no-warmup": _synthetic(0.1, 0, 0.05, 22.0),
               "plain": _synthetic(0.2, 1, 0.08, 23.0), "mean-pool": _synthetic(10.0, 32, 3.8, 33.0),
               "klt-3": _synthetic(40.0, 32, 6.9, 270.0)}
    runs = lambda kl, au: [{"seed": s, "kl": kl, "active_units": au,  # noqa: E731
                            "collapsed": kl < study.COLLAPSED_KL and au <= study.COLLAPSED_AU} for s in (0, 1)]
    results = {"two-phase": runs(8.0, 32), "no-warmup": runs(0.1, 0), "plain": runs(0.2, 1),
               "mean-pool": runs(10.0, 32), "klt-3": runs(40.0, 32)}
    f = _judge(c, summary, results)
    assert f["collapse_without_warmup"]["reproduced"] and f["two_phase_keeps_kl_and_units"]["reproduced"]
    assert f["ppl_vs_mi_au_tradeoff"]["reproduced"] and f["ppl_vs_mi_au_tradeoff"]["evidence"]["rho_ppl_mi"] == 1.0
    assert f["max_pooling_more_informative"]["reproduced"] is False  # mean pooling has the higher MI here
    # Two active units left: not the collapse the rule asks for; half the units or fewer: not kept.
    results["no-warmup"] = runs(0.1, 2)
    results["two-phase"] = runs(8.0, 16)
    f = _judge(c, summary, results)
    assert f["collapse_without_warmup"]["reproduced"] is False
    assert f["two_phase_keeps_kl_and_units"]["reproduced"] is False
    # Both MIs at the cap: the probes decide.
    summary["two-phase"] = _synthetic(8.0, 32, 6.9, 29.0, probes=0.7)
    summary["mean-pool"] = _synthetic(10.0, 32, 6.9, 33.0, probes=0.6)
    f = _judge(c, summary, results)["max_pooling_more_informative"]
    assert f["evidence"]["mi_saturated"] and f["reproduced"]
    # Max pooling clearly more informative (MI not saturated): reproduced; the tradeoff reversed: not.
    summary["two-phase"] = _synthetic(8.0, 32, 4.5, 29.0)
    summary["mean-pool"] = _synthetic(10.0, 32, 3.8, 33.0)
    summary["klt-3"] = _synthetic(40.0, 32, 6.9, 20.0)
    f = _judge(c, summary, results)
    assert f["max_pooling_more_informative"]["reproduced"] is True
    assert f["ppl_vs_mi_au_tradeoff"]["reproduced"] is False


def test_findings_are_undecided_when_the_run_cannot_decide():
    c = study.Config(latent_dim=32)
    # None of the variants a rule reads was run.
    only = {"klt-3": _synthetic(40.0, 32, 6.9, 270.0)}
    f = _judge(c, only, {"klt-3": [{"kl": 40.0, "active_units": 32, "collapsed": False}] * 2})
    assert all(v["reproduced"] is None for v in f.values())
    assert "no-warmup not in" in f["collapse_without_warmup"]["reason"]
    assert "3" in f["ppl_vs_mi_au_tradeoff"]["reason"]
    # A diverged run (non-finite KL): undecided.
    summary = {"two-phase": _synthetic(8.0, 32, 3.0, 29.0), "no-warmup": _synthetic(0.1, 0, 0.05, 22.0)}
    results = {"two-phase": [{"seed": 0, "kl": None, "active_units": 32, "collapsed": False}],
               "no-warmup": [{"seed": 0, "kl": None, "active_units": 0, "collapsed": False}]}
    f = _judge(c, summary, results)
    kept = f["two_phase_keeps_kl_and_units"]
    assert kept["reproduced"] is None and "diverged" in kept["reason"]
    assert f["collapse_without_warmup"]["reproduced"] is None
    # Max vs mean pooling by MI needs a standard error: one seed cannot decide (saturated MI can).
    one_seed = lambda mi, probes=0.5: {**_synthetic(8.0, 32, mi, 29.0, probes=probes),  # noqa: E731
                                       "mi": {"mean": mi, "se": 0.0, "n": 1}}
    runs1 = [{"seed": 0, "kl": 8.0, "active_units": 32, "collapsed": False}]
    f = _judge(c, {"two-phase": one_seed(4.5), "mean-pool": one_seed(3.8)}, {"two-phase": runs1, "mean-pool": runs1})
    pooling = f["max_pooling_more_informative"]
    assert pooling["reproduced"] is None and "seeds" in pooling["reason"]
    f = _judge(c, {"two-phase": one_seed(6.9, 0.7), "mean-pool": one_seed(6.9, 0.6)},
               {"two-phase": runs1, "mean-pool": runs1})
    assert f["max_pooling_more_informative"]["reproduced"] is True
    # A ppl-sorted set of short-corpus variants with a diverged MI: undecided.
    three = {"a": _synthetic(1.0, 1, 1.0, 20.0), "b": _synthetic(2.0, 2, None, 25.0),
             "c": _synthetic(3.0, 3, 3.0, 30.0)}
    f = _judge(c, three, {v: runs1 for v in three})
    assert f["ppl_vs_mi_au_tradeoff"]["reproduced"] is None and "diverged" in f["ppl_vs_mi_au_tradeoff"]["reason"]


def test_variants_change_only_what_they_name():
    for name, changes in study.VARIANTS.items():
        s = study.settings(name)
        assert {k for k in s if s[k] != study.BASE[k]} == set(changes), name
    assert study.settings("plain")["warmup"] and not study.settings("no-warmup")["warmup"]
    # no-warmup and plain differ in the warm-up alone
    a, b = study.settings("no-warmup"), study.settings("plain")
    assert {k for k in a if a[k] != b[k]} == {"warmup"}


@pytest.mark.parametrize("sets, argument", [
    (["variants=[\"two-phase\", \"median-pool\"]"], "variants"),
    (["seeds=[]"], "seeds"),
    (["cycle_ratio=0"], "cycle_ratio"),
    (["phase1_epochs=0"], "phase1_epochs"),
    (["executor=slurm"], "executor"),  # execution settings are no config field: an unknown key
    (["pretrain_preset=huge"], "pretrain_preset"),
    (["iw_samples=-1"], "iw_samples"),
])
def test_config_checks_name_the_field(sets, argument):
    with pytest.raises(ValueError, match=f"argument '{argument}'"):
        studies.make_config("t5_vae", "smoke", sets=sets)


def test_a_t5_folder_that_is_not_one_is_refused(tmp_path):
    folder = tmp_path / "t5"
    folder.mkdir()
    run = lambda out: studies.run_study("t5_vae", tmp_path / out, preset="smoke",  # noqa: E731
                                        sets=[f"t5_folder={folder}"], progress=False)
    with pytest.raises(ValueError, match="argument 't5_folder'.*config.json"):
        run("a")
    (folder / "config.json").write_text("{}")  # a model without its tokenizer: refused before any run
    with pytest.raises(ValueError, match="argument 't5_folder'.*tokenizer"):
        run("b")
    assert not (tmp_path / "b" / "sweeps").exists()
