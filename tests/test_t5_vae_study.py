"""Study 5 (t5_vae): the smoke preset end to end (the T5 pretrained as its first stage), the two-phase
recipe's configuration (freezing, Eq. 6 annealing, cyclical annealing reaching 1), the variants'
settings, resume, a diagnostic sweep beside the study, the findings' rules, and the config's checks."""
import dataclasses
import json
import math

import pytest

from vaetransfer import studies, sweep
from vaetransfer.studies import pipeline
from vaetransfer.studies.kit import declarations, t5_pretraining, trained
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
    # Did the models train? The LM baselines of the short corpus, the rule between them, every run's record.
    t = a["trained"]
    vae, baselines = t["t5_vae"], t["t5_vae"]["context"]
    assert baselines["unigram"] > baselines["bigram"] > 0
    assert vae["rule"]["maximum"] == pytest.approx((baselines["unigram"] + baselines["bigram"]) / 2)
    models = {**vae["models"], **t["t5_vae_long"]["models"]}
    assert set(models) == {f"{v}/seed={s}" for v in c.variants for s in c.seeds}
    assert all(m["corpus"] == "short" for m in vae["models"].values()) and set(t["t5_vae_long"]["models"])
    for m in models.values():
        assert m["finite"] and m["loss_first"] is not None and math.isfinite(m["reconstruction"])
    if trained.check_failures(t["t5"]):  # 40 smoke steps of pretraining need not beat the unigram baseline by 10 %
        for f in findings.values():
            assert f["reproduced"] is None and "pretrained T5: held-out span-corruption" in f["reason"], f
    else:
        for name in ("collapse_without_warmup", "two_phase_keeps_kl_and_units", "ppl_vs_mi_au_tradeoff",
                     "max_pooling_more_informative"):  # MI far below its cap at smoke: it decides, on 2 seeds
            assert isinstance(findings[name]["reproduced"], bool) or "did not train" in findings[name]["reason"], name
    assert findings["collapse_without_warmup"]["evidence"]["collapsed_runs"]  # the numbers beside any reason
    for name in ("collapse_without_warmup", "max_pooling_more_informative"):
        assert findings[name]["diagnosis"]["kind"] in studies.DIAGNOSIS_KINDS
    for f in findings.values():  # the figures each finding lists: drawn (no β-peak sweep at smoke: not listed)
        assert set(f["figures"]) <= set(r["figures"]), f["name"]
    assert "beta_peaks.png" not in r["figures"] + findings["collapse_without_warmup"]["figures"]
    for path in r["figures"]:
        assert (out / path).stat().st_size > 1000
    assert set(a["examples"]) == set(c.variants) and a["examples_variant"] == "two-phase"
    ex = a["examples"]["two-phase"]
    assert {"reconstructions", "interpolation", "prior_samples"} <= set(ex)
    assert len(ex["interpolation"]["decoded"]) == c.interpolation_points
    text = (out / "index.md").read_text()
    for heading in ("## Recipe and units", "## Results", "## Did the models train?", "## Findings", "## Decoded",
                    "## Figures"):
        assert heading in text


def test_each_run_trains_its_variant(smoke):
    """Phase 1 freezes the decoder and W_proj (not the shared embedding by default) and ends where
    β starts rising; no-warmup has no phase 1 (that phase 1 leaves the decoder and W_proj
    bit-identical is tested in test_t5_vae_objective)."""
    out, _ = smoke
    c = study.PRESETS["smoke"]
    seen = set()
    for d in (out / "sweeps" / study.FINETUNE / "runs").iterdir():
        m = json.loads((d / declarations.MEASURED_FILE).read_text())
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


def test_the_beta_peak_stage_scales_phase_two_and_is_analysed(smoke, tmp_path):
    """The stage beta_peaks (empty at smoke) run beside the study: the same runs as the finetune
    stage's with β ending at the peak; the analysis puts them beside the peak-1 runs, the findings
    cite them, the report and a figure show them."""
    out, r = smoke
    c = dataclasses.replace(study.PRESETS["smoke"], beta_peaks=(0.1,), beta_peak_variants=("no-warmup", "two-phase"))
    assert study.stages.beta_peak_runs(study.PRESETS["smoke"], {}) == [] and "beta_peaks" not in r["analysis"]
    rows = study.stages.beta_peak_runs(c, {})
    assert rows == [{"variant": v, "seed": s, "beta_peak": 0.1} for v in ("no-warmup", "two-phase") for s in c.seeds]
    runs = pipeline.run_beside(out, study.STUDY, "beta_peaks_test", study.STUDY.stage(study.BETA_PEAKS), c, rows,
                               execution=studies.Execution(workers=2, threads=1), progress=False)
    main = declarations.Job(study.FINETUNE, out, out, stage_runs=lambda stage: _stage_runs(out, stage)).earlier(
        study.FINETUNE)
    main_dirs = {(m.row["variant"], m.row["seed"]): m.dir for m in main}
    for run in runs:
        scaled = load_run(run.dir / "train")
        main_run = load_run(main_dirs[run.row["variant"], run.row["seed"]] / "train")
        cfg, peak, full = scaled.config, scaled.history["beta"], main_run.history["beta"]
        assert cfg.schedules["beta"].params["end"] == pytest.approx(0.1)
        assert float(peak.max()) == pytest.approx(0.1) and float(full.max()) == pytest.approx(1.0)
        assert peak.numpy() == pytest.approx(0.1 * full.numpy(), abs=1e-6)  # the same ramp, scaled
    a = study.analysis.beta_peak_analysis(c, main, runs)
    assert a["peaks"] == [0.1, 1.0] and list(a["summary"]) == ["no-warmup", "two-phase"]
    for v, by_peak in a["summary"].items():
        assert list(by_peak) == ["0.1", "1"]
        for row in by_peak.values():
            assert row["runs"] == len(c.seeds) and row["kl"]["n"] == len(c.seeds) and 0 <= row["probe_mean"] <= 1
            assert set(row) == set(study.PEAK_METRICS) | {"collapsed", "runs", "probe_mean"}
    analysis = {**r["analysis"], "beta_peaks": a}
    f = {x.name: x.judge(c, analysis) for x in study.FINDINGS}
    assert set(f["collapse_without_warmup"]["evidence"]["collapsed_by_beta_peak"]) == {"no-warmup"}
    assert f["collapse_without_warmup"]["reproduced"] == r["findings"][0]["reproduced"]  # the verdict reads finetune
    text = study.report.render_report({**r, "config": studies.config_to_dict(c), "analysis": analysis})
    assert "## β peak" in text and "| no-warmup | 0.1 |" in text
    assert (tmp_path / study.figures.figure_beta_peaks(tmp_path, a)).stat().st_size > 1000


def _stage_runs(out, stage):
    """The finished runs of a stage of the study in ``out``, as the runner gives them to a job."""
    s = sweep.open_sweep(out / "sweeps" / stage)
    return [declarations.RunResult(stage, dict(spec.params), spec.id, s.run_dir(spec.id), row["status"], row["seconds"],
                                   json.loads((s.run_dir(spec.id) / declarations.MEASURED_FILE).read_text()))
            for spec, row in zip(s.runs, s.results())]


def test_phase_two_annealing_follows_eq6_and_cyclical_reaches_one():
    c = study.Config(n_train=320, batch_size=32, phase1_epochs=2, phase2_epochs=4, anneal_epochs=3, cycles=2)
    spe = 10
    p1, p2 = 2 * spe, 4 * spe
    linear = make_schedule(study.schedule_of(c, "linear", p1, p2, spe))
    for k in (0, 1, 7, 15, 29, 30, 35):  # Eq. 6: β = (step in phase 2) / (steps per epoch · anneal epochs), at most 1
        assert linear.value(p1 + k) == pytest.approx(min(1.0, k / (spe * 3)))
    assert linear.value(p1 - 1) == 0.0
    scaled = make_schedule(study.schedule_of(c, "linear", p1, p2, spe, peak=0.25))  # the stage beta_peaks
    assert [scaled.value(p1 + k) for k in (0, 15, 35)] == pytest.approx([0.0, 0.125, 0.25])
    assert max(make_schedule(study.schedule_of(c, "cyclical", p1, p2, spe, peak=0.25)).value(p1 + k)
               for k in range(p2)) == pytest.approx(0.25)
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
    tc = study.train_config(c, study.settings("two-phase"), model, 100, 3, "init.pt", device="cpu")
    assert tc.phases[0].steps == 15 and tc.steps == 35 and tc.seed == 3 and tc.init_from == "init.pt"
    assert tc.phases[0].freeze == ("decoder", "memory_projection")
    frozen = study.train_config(study.Config(freeze_shared=True), study.settings("two-phase"), model, 100, 0, "i",
                                device="cpu")
    assert frozen.phases[0].freeze == ("decoder", "memory_projection", "shared")
    no_warm = study.train_config(c, study.settings("no-warmup"), model, 100, 0, "i", device="cpu")
    assert no_warm.phases == () and no_warm.steps == 20
    assert no_warm.objective.params["deletion"] == 0.0 and no_warm.objective.params["free_bits"] == 0.0
    long = study.train_config(c, study.settings("long"), model, 100, 0, "i", device="cpu")
    assert long.batch_size == c.long_batch_size
    # An untied T5 (v1.1) has its own output layer: part of the decoder, frozen with it.
    untied = T5VAEConfig(T5Config(vocab_size=50, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2,
                                  tie_word_embeddings=False)).model_config()
    assert study.train_config(c, study.settings("two-phase"), untied, 100, 0, "i", device="cpu").phases[0].freeze == \
        ("decoder", "memory_projection", "lm_head")


def test_evaluation_batches_keep_the_logits_bounded():
    assert study.eval_batch(48, 1000, 10) == 128  # the small preset: unchanged
    b = study.eval_batch(256, 32_128, 10)  # t5-small's vocabulary, long documents
    assert 1 <= b < 128 and 12 * b * 10 * 256 * 32_128 <= study.EVAL_BYTES
    assert study.eval_batch(10**4, 10**5, 10) == 1


def test_the_examples_build_every_latent_on_the_models_device():
    """The decodings' latents (reconstructions, the interpolation, the prior samples) live where
    the model does: the interpolation weights were built on the CPU, so every fine-tune on a GPU
    failed after training (found on the first GPU run of the medium preset). A model whose
    posterior answers on the ``meta`` device stands in for a GPU (its token ids stay readable on
    the CPU): mixing a meta tensor with a CPU one raises the same error."""
    import torch
    seen = []

    class Model:
        device, pad_id, latent_dim = torch.device("cpu"), 0, 4

        def eval(self):
            return self

        def posterior(self, x, mask):
            return torch.zeros(len(x), self.latent_dim, device="meta"), None

        def generate_latent(self, z, max_new_tokens):
            seen.append(z.device)
            return torch.ones(len(z), 3, dtype=torch.long)

    class Tokenizer:
        def decode(self, ids, skip_special_tokens):
            return ["a sentence"] * len(ids)

    c = study.PRESETS["smoke"]
    out = study.stages.decoded_examples(c, Model(), Tokenizer(), torch.ones(5, 6, dtype=torch.long), seed=0)
    assert len(out["interpolation"]["decoded"]) == c.interpolation_points
    assert seen == [torch.device("meta")] * 2 + [torch.device("cpu")]  # the prior's on model.device


def _synthetic(kl, au, mi, ppl, use=1.0, probes=0.5, corpus="short"):
    row = {k: {"mean": v, "se": 0.01, "n": 2} for k, v in (("kl", kl), ("active_units", au), ("mi", mi),
                                                           ("ppl_iw", ppl), ("latent_use", use))}
    row.update({f"probe_{a}": {"mean": probes, "se": 0.0, "n": 2} for a in study.ATTRIBUTES})
    row.update(mi_cap=math.log(1000), settings={"corpus": corpus})
    return row


def _per_run(row, seeds=(0, 1), jitter=0.01, **late):
    """Each seed's run of a synthetic summary row: its metrics ∓ ``jitter`` by seed (the findings' units),
    the jitter scaled by a factor in [1, 2) that depends on the value, so differences between variants
    vary by seed as real ones do (a spread of exactly zero is decided by a sign test instead)."""
    def at(k, v):
        return None if v is None else v + jitter * (2 * k - 1) * (1 + (v * 7.31) % 1)
    kl, au = row["kl"]["mean"], row["active_units"]["mean"]
    out = []
    for k, s in enumerate(seeds):
        r = {"seed": s, "kl": at(k, kl), "active_units": at(k, au),
             "collapsed": kl < study.COLLAPSED_KL and au <= study.COLLAPSED_AU, "valid_au_mid": None,
             "valid_au_end": None, "collapsed_from": None, "mi": at(k, row["mi"]["mean"]), "mi_cap": row["mi_cap"],
             "ppl_iw": at(k, row["ppl_iw"]["mean"]), "latent_use": row["latent_use"]["mean"],
             **{f"probe_{a}": at(k, row[f"probe_{a}"]["mean"]) for a in study.ATTRIBUTES}, **late}
        out.append(r)
    return out


def _judge(c, summary, per_run=None, seeds=(0, 1)) -> dict:
    """Every finding of the study judged on an analysis of these summaries (and their runs)."""
    per_run = per_run or {v: _per_run(row, seeds=seeds) for v, row in summary.items()}
    analysis = {"summary": summary, "per_run": per_run}
    return {f.name: f.judge(c, analysis) for f in study.FINDINGS}


def _summaries(**rows):
    base = {"two-phase": _synthetic(8.0, 32, 3.0, 29.0), "no-warmup": _synthetic(0.1, 0, 0.05, 22.0),
            "plain": _synthetic(8.5, 32, 3.1, 30.0), "mean-pool": _synthetic(10.0, 32, 3.8, 33.0),
            "klt-3": _synthetic(40.0, 32, 6.9, 270.0)}
    return {**base, **rows}


def test_findings_follow_their_rules_on_known_summaries():
    c = study.Config(latent_dim=32)
    f = _judge(c, _summaries())
    assert f["collapse_without_warmup"]["verdict"] == "reproduced"   # the warm-up keeps 8.4 nats more
    assert f["two_phase_keeps_kl_and_units"]["verdict"] == "reproduced"
    assert f["max_pooling_more_informative"]["verdict"] == "contradicted"  # mean pooling has the higher MI here
    # The tradeoff's rank correlations are the same in every synthetic seed (a spread of zero): the exact
    # sign test decides from 6 seeds for it, 7 against it (two parts: the Bonferroni level).
    assert f["ppl_vs_mi_au_tradeoff"]["verdict"] == "undecided" and "sign test" in f["ppl_vs_mi_au_tradeoff"]["reason"]
    assert _judge(c, _summaries(), seeds=range(6))["ppl_vs_mi_au_tradeoff"]["verdict"] == "reproduced"
    # The run with the warm-up collapses too: the collapse is not the missing warm-up's (absent, not reproduced).
    f = _judge(c, _summaries(plain=_synthetic(0.2, 1, 0.08, 23.0)))
    assert f["collapse_without_warmup"]["verdict"] == "contradicted"
    assert f["collapse_without_warmup"]["diagnosis"]["kind"] == "setting"
    assert "collapse too" in f["collapse_without_warmup"]["diagnosis"]["text"]
    # Half the units or fewer active: not kept.
    f = _judge(c, _summaries(**{"two-phase": _synthetic(8.0, 16, 3.0, 29.0)}))
    assert f["two_phase_keeps_kl_and_units"]["verdict"] == "absent"
    # Both MIs at the cap: the probes decide.
    f = _judge(c, _summaries(**{"two-phase": _synthetic(8.0, 32, 6.9, 29.0, probes=0.7),
                                "mean-pool": _synthetic(10.0, 32, 6.9, 33.0, probes=0.6)}))["max_pooling_more_informative"]
    assert f["evidence"]["mi_saturated"] and f["verdict"] == "reproduced"
    # Max pooling clearly more informative (MI not saturated): reproduced; the tradeoff reversed: contradicted.
    f = _judge(c, _summaries(**{"two-phase": _synthetic(8.0, 32, 4.5, 29.0), "klt-3": _synthetic(40.0, 32, 6.9, 20.0)}),
               seeds=range(7))
    assert f["max_pooling_more_informative"]["verdict"] == "reproduced"
    assert f["ppl_vs_mi_au_tradeoff"]["verdict"] == "contradicted"


def test_findings_are_undecided_when_the_run_cannot_decide():
    c = study.Config(latent_dim=32)
    # None of the variants a rule reads was run.
    only = {"klt-3": _synthetic(40.0, 32, 6.9, 270.0)}
    f = _judge(c, only)
    assert all(v["verdict"] == "undecided" for v in f.values())
    assert "no-warmup" in f["collapse_without_warmup"]["reason"]
    assert "3" in f["ppl_vs_mi_au_tradeoff"]["reason"]
    # A diverged run (non-finite KL): undecided.
    summary = _summaries()
    per_run = {v: _per_run(row) for v, row in summary.items()}
    per_run["two-phase"][0]["kl"] = None
    f = _judge(c, summary, per_run)
    assert f["two_phase_keeps_kl_and_units"]["verdict"] == "undecided" and "diverged" in \
        f["two_phase_keeps_kl_and_units"]["reason"]
    # One seed: an effect's spread is unknown, whatever its size.
    f = _judge(c, summary, {v: _per_run(row, seeds=(0,)) for v, row in summary.items()})
    assert all(v["verdict"] == "undecided" and "one unit" in v["reason"] for v in f.values())
    # Seeds that disagree: undecided, with the seeds that would decide it.
    f = _judge(c, _summaries(**{"two-phase": _synthetic(8.0, 32, 4.0, 29.0)}),
               {**{v: _per_run(row) for v, row in _summaries().items()},
                "two-phase": _per_run(_synthetic(8.0, 32, 4.0, 29.0), jitter=1.0)})
    pooling = f["max_pooling_more_informative"]
    assert pooling["verdict"] == "undecided" and pooling["effect"]["units_needed"] > 2


def test_the_medium_preset_chains_to_t5_pretrains_and_sweeps_the_beta_peak():
    """medium: t5_pretrain's medium T5 as its first stage, small's recipe with a 3x phase 2, the
    short-corpus variants the findings read, 3 seeds, and the β-peak sweep of the variants the
    collapse and pooling findings read: its runs per stage, counted without running any."""
    c = studies.make_config("t5_vae", "medium")
    small = study.PRESETS["small"]
    assert c == study.PRESETS["medium"]
    assert studies.config_to_dict(study.Config()) == studies.config_to_dict(small) and small.beta_peaks == ()
    assert c.pretrain_preset == "medium" and "medium" in t5_pretraining.PRESETS and c.t5_folder is None
    assert (c.phase1_epochs, c.phase2_epochs, c.anneal_epochs) == (small.phase1_epochs, 3 * small.phase2_epochs,
                                                                   small.anneal_epochs)
    assert c.seeds == (0, 1, 2) and c.beta_peaks == (0.06, 0.25)   # 3 seeds: a t interval over 2 has 1 df
    assert set(c.variants) == set(study.VARIANTS) - {"long", "long-denoise-0", "cyclical", "prefix"}
    assert all(study.settings(v)["corpus"] == "short" for v in c.variants)
    assert c.beta_peak_variants == ("two-phase", "no-warmup", "plain", "mean-pool")
    assert set(c.beta_peak_variants) <= set(c.variants)  # each peak beside the finetune stage's peak-1 runs
    counts = {s.name: len(s.runs(c, {})) for s in study.STUDY.stages}
    assert counts == {study.PRETRAIN: 1, study.FINETUNE: 8 * 3, study.BETA_PEAKS: 2 * 4 * 3}
    assert study.stages.pretrain_runs(c, {}) == [{"preset": "medium"}]
    # The other presets have no beta_peaks runs: their runs are what they were.
    for name in ("smoke", "small", "paper"):
        p = study.PRESETS[name]
        assert {s.name: len(s.runs(p, {})) for s in study.STUDY.stages} == \
            {study.PRETRAIN: 1, study.FINETUNE: len(p.variants) * len(p.seeds), study.BETA_PEAKS: 0}
    assert study.stages.finetune_runs(small, {})[0] == {"variant": "two-phase", "seed": 0}


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
    (["beta_peaks=[0.1, 1]"], "beta_peaks"),  # 1 is the finetune stage's own runs
    (["beta_peaks=[0.1, 0.1]"], "beta_peaks"),
    (["beta_peaks=[0]"], "beta_peaks"),
    (["beta_peak_variants=[\"plain\", \"median-pool\"]"], "beta_peak_variants"),
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


# ---------------------------------------------------------------------------------- did the models train? diagnoses
def _records(variants, peaks=("1",), seeds=(0, 1), reconstruction=35.0, **training):
    """The ``trained`` section's model records: every run trained (reconstruction well below the
    bigram baseline, training reconstruction 60 → 35) unless ``training`` says otherwise."""
    out = {}
    for p in peaks:
        for v in variants:
            for s in seeds:
                label = f"{v}/seed={s}" if p == "1" else f"{v}/β={p}/seed={s}"
                out[label] = {"variant": v, "seed": s, "beta_peak": p, "corpus": "short",
                              "reconstruction": reconstruction, "loss_first": 60.0, "loss_last": 35.0,
                              "finite": True, **training}
    return out


def _t5_check(pretrained=2.0, unigram=3.746):
    """The pretrained T5's trained check (trained by default: 10 % below the unigram baseline)."""
    training = {"loss_first": 5.7, "loss_last": 3.1, "finite": True}
    return t5_pretraining.trained_check({"held_out_cross_entropy": {"pretrained": pretrained, "unigram": unigram}},
                                        training)


def _trained(models, t5=None):
    return study.analysis.trained_checks(models, {"unigram": 63.8, "bigram": 43.5, "tokens": 12.4}, t5 or _t5_check())


def _study_analysis(no_warmup=(0.1, 0), mi_max=3.0, mi_mean=3.8, no_warmup_late=None, sweep=None, models=None,
                    t5=None, plain_kl=8.5):
    """A synthetic analysis of the variants the findings read, with its ``trained`` section."""
    kl, au = no_warmup
    summary = {"two-phase": _synthetic(8.0, 32, mi_max, 29.0), "no-warmup": _synthetic(kl, au, 0.05, 22.0),
               "plain": _synthetic(plain_kl, 32, 3.1, 23.0), "mean-pool": _synthetic(10.0, 32, mi_mean, 33.0),
               "klt-3": _synthetic(40.0, 32, 6.9, 270.0)}
    per_run = {v: _per_run(row, **(no_warmup_late or {} if v == "no-warmup" else {})) for v, row in summary.items()}
    a = {"summary": summary, "per_run": per_run,
         "trained": _trained(_records(summary) if models is None else models, t5)}
    if sweep:
        a["beta_peaks"] = {"peaks": sorted(float(p) for p in {"1", *next(iter(sweep.values()))}), "summary": sweep}
    return a


def _peak_row(kl=8.0, au=32, mi=3.0, se=0.01, probe=0.5, collapsed=0, runs=2):
    m = lambda v, e=0.01: {"mean": v, "se": e, "n": runs}  # noqa: E731
    return {"ppl_iw": m(30.0), "kl": m(kl), "mi": m(mi, se), "active_units": m(au), "latent_use": m(1.0),
            "collapsed": collapsed, "runs": runs, "probe_mean": probe}


def test_lm_baselines_score_the_sentences_as_the_reconstruction_does():
    """Nats per test sentence over the real tokens (eos included, padding not): the unigram with add-one
    counts, the bigram with add-0.1 counts given the previous token (the sentence start first)."""
    import torch

    train = torch.tensor([[3, 4, 1, 0], [3, 5, 1, 0]])  # 3 4 eos / 3 5 eos (eos 1, pad 0)
    test = torch.tensor([[3, 4, 1, 0, 0]])
    b = study.lm_baselines(train, test, vocab_size=6, pad_id=0)
    counts = [1, 3, 1, 3, 2, 2]  # 1 + count of each id in the training sentences' real tokens
    uni = -sum(math.log(counts[t] / sum(counts)) for t in (3, 4, 1))
    # start→3, 3→4, 4→eos; each row's counts + 0.1 for each of the 6 ids
    big = -(math.log(2.1 / 2.6) + math.log(1.1 / 2.6) + math.log(1.1 / 1.6))
    assert b["unigram"] == pytest.approx(uni, abs=1e-4) and b["bigram"] == pytest.approx(big, abs=1e-4)
    assert b["tokens"] == 3


def test_late_curve_reads_phase_two_of_the_validation_curves():
    run = {"metrics": {"phase1_steps": 100, "steps": 500},
           "curves": {"step": [100, 200, 300, 400, 500], "kl": [9.0, 3.0, 0.5, 0.4, 0.3], "au": [30, 8, 4, 1, 0]}}
    late = study.late_curve(run)
    assert late == {"valid_au_mid": 4, "valid_au_end": 0, "collapsed_from": 0.75}  # from step 400 of 100..500
    run["curves"]["au"][-1] = 2  # not collapsed at the end
    assert study.late_curve(run)["collapsed_from"] is None
    assert study.late_curve({"metrics": {"phase1_steps": 0, "steps": 10}, "curves": {}})["valid_au_end"] is None


def test_training_summary_reads_the_reconstruction_and_flags_a_non_finite_loss():
    import torch

    h = {"reconstruction": torch.linspace(60, 30, 100, dtype=torch.float64), "loss": torch.ones(100)}
    s = study.training_summary(h)
    assert s["finite"] and s["loss_first"] > 58 and s["loss_last"] < 32
    h["loss"][50] = float("nan")  # the total loss diverged once: not finite, whatever the reconstruction
    assert study.training_summary(h)["finite"] is False
    assert study.training_summary({}) is None


def test_a_model_that_did_not_train_is_left_out_of_the_findings_resting_on_it():
    c = study.Config(latent_dim=32)
    a = _study_analysis()
    rule = a["trained"]["t5_vae"]["rule"]
    assert rule["maximum"] == pytest.approx((63.8 + 43.5) / 2) and "bigram" in rule["basis"]
    f = {x.name: x.judge(c, a) for x in study.FINDINGS}
    assert all(not v["reason"] or "left out" not in v["reason"] for v in f.values())  # every model trained
    # A no-warmup VAE no better than halfway from the unigram to the bigram LM: its seed left out, named.
    models = _records(a["summary"])
    models["no-warmup/seed=1"]["reconstruction"] = 58.0
    f = {x.name: x.judge(c, _study_analysis(models=models)) for x in study.FINDINGS}
    bad = f["collapse_without_warmup"]
    part = bad["effect"]["parts"]["the warm-up keeps at least 1 nat more"]
    assert list(part["dropped"]) == ["seed=1"] and "held-out reconstruction" in part["dropped"]["seed=1"]
    assert "no-warmup/seed=1" in bad["reason"]
    assert f["two_phase_keeps_kl_and_units"]["verdict"] == "reproduced"
    # The pretrained T5 did not train: every seed of every finding.
    t5 = _t5_check(pretrained=3.954)
    assert trained.check_failures(t5)[0].startswith("pretrained T5: held-out span-corruption cross-entropy")
    f = {x.name: x.judge(c, _study_analysis(t5=t5)) for x in study.FINDINGS}
    assert all(v["verdict"] == "undecided" and "pretrained T5" in v["reason"] for v in f.values())
    # Results that predate a check: a record without a training summary is checked on its reconstruction only;
    # an analysis without the section, not at all.
    models = {k: {key: v for key, v in m.items() if key not in ("loss_first", "loss_last", "finite")}
              for k, m in _records(a["summary"]).items()}
    assert study.FINDINGS[0].judge(c, _study_analysis(models=models))["verdict"] == "reproduced"
    old = _study_analysis()
    del old["trained"]
    assert study.FINDINGS[0].judge(c, old)["verdict"] == "reproduced"
    # The β-peak runs are checked only where a rule reads them.
    models = _records(a["summary"]) | _records(("no-warmup",), peaks=("0.06",), reconstruction=70.0)
    assert study.FINDINGS[0].judge(c, _study_analysis(models=models))["verdict"] == "reproduced"
    assert "no-warmup/β=0.06/seed=0" in study.analysis.untrained(_study_analysis(models=models), ("no-warmup",),
                                                                  ("0.06",))


COLLAPSED = dict(collapsed=2)
NOT = dict(collapsed=0)


@pytest.mark.parametrize("case, kind, words", [
    ("reproduced", "reproduced", ["2/2", "epoch 1.6–1.8 of phase 2 (of 2)", "plain", "the warm-up keeps"]),
    ("plain_collapses", "setting", ["collapse too", "not with the missing warm-up"]),
    ("at_a_lower_peak", "setting", ["β peak 0.25"]),
    ("kept", "open", ["stays in use", "β peak 0.06"]),
    ("untrained", "setting", ["Undecidable", "pretrained T5"]),
    ("not_run", None, []),
])
def test_the_collapse_diagnosis_follows_its_rules(case, kind, words):
    c = study.Config(latent_dim=32, phase2_epochs=2.0)
    sweep = {"no-warmup": {"0.06": _peak_row(kl=6.0, au=20), "0.25": _peak_row(kl=0.3, au=2), "1": _peak_row()},
             "plain": {"0.06": _peak_row(kl=9.0, au=30), "0.25": _peak_row(kl=1.0, au=3), "1": _peak_row()}}
    kwargs = {"sweep": sweep}
    if case == "reproduced":
        a = _study_analysis(**kwargs)
        a["per_run"]["no-warmup"] = [{**r, "collapsed_from": f} for r, f in zip(a["per_run"]["no-warmup"], (0.8, 0.9))]
    elif case == "plain_collapses":
        a = _study_analysis(plain_kl=0.2, **kwargs)
    elif case == "at_a_lower_peak":
        sweep["no-warmup"]["0.25"] = _peak_row(kl=0.3, au=0, **COLLAPSED)
        a = _study_analysis(no_warmup=(5.0, 20), **kwargs)
    elif case == "kept":
        a = _study_analysis(no_warmup=(5.0, 20), **kwargs)
    elif case == "untrained":   # the pretrained T5: every seed left out, nothing to decide
        a = _study_analysis(t5=_t5_check(pretrained=3.954), **kwargs)
    else:
        a = _study_analysis(**kwargs)
        del a["summary"]["no-warmup"]
    finding = next(f for f in study.FINDINGS if f.name == "collapse_without_warmup")
    record = finding.judge(c, a) if kind is not None else None
    d = study.findings._diagnose_collapse(c, a, record) if record else None
    if kind is None:
        assert d is None
        return
    assert d.kind == kind, d.text
    for w in words:
        assert w in d.text, (w, d.text)
    assert record["diagnosis"]["kind"] == kind  # the finding carries it


def test_the_collapse_diagnosis_skips_a_beta_peak_whose_runs_did_not_train():
    c = study.Config(latent_dim=32)
    sweep = {"no-warmup": {"0.25": _peak_row(kl=0.3, au=0, **COLLAPSED), "1": _peak_row()}}
    models = _records(("two-phase", "no-warmup", "plain", "mean-pool", "klt-3")) | \
        _records(("no-warmup",), peaks=("0.25",), reconstruction=70.0)
    a = _study_analysis(no_warmup=(5.0, 20), sweep=sweep, models=models)
    d = study.findings._diagnose_collapse(c, a, next(f for f in study.FINDINGS
                                                     if f.name == "collapse_without_warmup").judge(c, a))
    assert d.kind == "open" and "0.25" in d.evidence["beta_peaks_not_read"]  # not "setting" on untrained runs


@pytest.mark.parametrize("case, kind, words", [
    ("reproduced", "reproduced", ["β peak 1: MI 4.500"]),
    ("at_a_lower_peak", "setting", ["only at β peak 0.06"]),
    ("reversed_everywhere", "open", ["at every β peak compared", "Not a defect", "the sweep rules out the β peak"]),
    ("reversed_no_sweep", "open", ["no β-peak sweep in this preset"]),
    ("untrained", "setting", ["Undecidable", "mean-pool/seed=1"]),
    ("not_run", None, []),
])
def test_the_pooling_diagnosis_follows_its_rules(case, kind, words):
    c = study.Config(latent_dim=32)
    sweep = {"two-phase": {"0.06": _peak_row(mi=5.0, probe=0.6), "0.25": _peak_row(mi=3.5), "1": _peak_row()},
             "mean-pool": {"0.06": _peak_row(mi=5.5, probe=0.7), "0.25": _peak_row(mi=4.0), "1": _peak_row()}}
    if case == "reproduced":
        a = _study_analysis(mi_max=4.5, mi_mean=3.8, sweep=sweep)
    elif case == "at_a_lower_peak":
        sweep["two-phase"]["0.06"] = _peak_row(mi=6.7, probe=0.8)  # saturated (cap log 1000 = 6.9): probes decide
        sweep["mean-pool"]["0.06"] = _peak_row(mi=6.6, probe=0.7)
        a = _study_analysis(sweep=sweep)
    elif case == "reversed_everywhere":
        a = _study_analysis(sweep=sweep)
    elif case == "reversed_no_sweep":
        a = _study_analysis()
    elif case == "untrained":
        models = _records(("two-phase", "no-warmup", "plain", "mean-pool", "klt-3"))
        models["mean-pool/seed=1"]["reconstruction"] = 60.0
        a = _study_analysis(models=models, sweep=sweep)
    else:
        a = _study_analysis(sweep=sweep)
        del a["summary"]["mean-pool"]
    pooling = next(f for f in study.FINDINGS if f.name == "max_pooling_more_informative")
    d = study.findings._diagnose_pooling(c, a, pooling.judge(c, a)) if kind is not None else None
    if kind is None:
        assert d is None
        return
    assert d.kind == kind, d.text
    for w in words:
        assert w in d.text, (w, d.text)
    if case == "reversed_everywhere":
        assert {p: v["more_informative"] for p, v in d.evidence["by_beta_peak"].items()} == \
            {"1": "mean", "0.06": "mean", "0.25": "mean"}


def test_each_finding_names_figures_the_study_draws():
    drawn = {"curves.png", "tradeoff.png", "probes.png", "beta_peaks.png"}
    for f in study.FINDINGS:
        assert f.figures and set(f.figures) <= drawn, f.name
    assert {f.name for f in study.FINDINGS if f.diagnose} == {"collapse_without_warmup", "max_pooling_more_informative"}
