"""Study 1 (transfer): the smoke preset end to end, the retraining stages, the probes, and the
spots where the paper's public code went wrong."""

import json
import numpy as np
import pytest
import torch

import vaetransfer
from vaetransfer import cli, data, probes, similarity, studies, sweep
from vaetransfer.studies import transfer
from vaetransfer.studies.kit.stats import mean_se
from vaetransfer.train import TrainConfig, load_run, train

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def smoke(study_smoke):
    """`vaetransfer run transfer --preset smoke`, once per test session (tests/conftest.py)."""
    return study_smoke("transfer")


def test_smoke_writes_every_section_and_figure(smoke):
    out, r = smoke
    c = transfer.PRESETS["smoke"]
    a = r["analysis"]
    for section in ("models", "dynamics", "regularisation", "objectives", "classifier", "cross_domain", "retraining",
                    "probes", "disentanglement"):
        assert a[section], section
    assert [f["name"] for f in r["findings"]] == [f.name for f in transfer.FINDINGS]
    figures = r["figures"]
    assert len(figures) >= 20
    for p in figures:
        assert (out / p).read_bytes()[:8] == PNG, p
    for p in ("reconstructions_target_by_source.png", "reconstructions_source_by_target.png", "loss_curves.png",
              "retraining_loss.png", "dynamics_curve.png", "classifier.png"):
        assert p in figures, p
    index = (out / "index.md").read_text()
    assert "## Findings" in index and "## 5. Progressive decoder retraining" in index
    # Retraining: a loss per stage k = 0..6 for every side × mean/logvar × init of the first seed.
    curves = a["retraining"]["curves"]
    assert len(curves) == len(c.retrain_sides) * len(c.retrain_latent) * len(c.retrain_inits)
    assert all(len(v["loss"]) == len(a["retraining"]["decoder"]) + 1 for v in curves.values())
    assert all(np.isfinite(v["loss"]).all() for v in curves.values())
    # Probes: one accuracy per factor with more than one class, for both encoders of both domains.
    assert set(a["probes"]) == {c.source, c.target}
    assert "color" not in a["probes"]["dsprites"]["factors"]  # dSprites' colour is constant
    assert a["probes"]["solids"]["factors"] == list(data.SOLIDS_FACTORS)
    # One run per model and seed, one per distinct retraining stage.
    assert r["runs"]["models"]["runs"] == len(c.seeds) * (len(c.variants) + 2)
    assert r["runs"]["retraining"]["done"] == r["runs"]["retraining"]["runs"] > 0


def test_disentanglement_of_source_and_target_encoders_on_the_target(smoke):
    """Section 9: every metric for the target-trained and the source-trained reference encoders, on
    the target's grid; shared factors are those varying in both domains except shape (other classes);
    each stored number is what a direct call of the metric gives on the same model and draws."""
    from vaetransfer import metrics

    out, r = smoke
    c = transfer.PRESETS["smoke"]
    d = r["analysis"]["disentanglement"]
    assert d["domain"] == c.target and d["n"] == c.disentanglement_n
    assert d["shared"] == {"shape": False, "azimuth": False, "elevation": False, "light": False, "scale": True,
                           "posX": True, "posY": True}
    assert set(d["encoders"]) == {f"target/{c.reference}", f"source/{c.reference}"}
    for label, e in d["encoders"].items():
        assert set(e["per_seed"]) == {str(s) for s in c.seeds}
        assert {v["n"] for v in e["headline"].values()} <= {0, len(c.seeds)}
        for view in e["factors"].values():
            assert set(view) == set(d["shared"])
    assert "## 9. Disentanglement on solids" in (out / "index.md").read_text()
    assert "disentanglement.png" in r["figures"]
    # Recompute one encoder's MIG and discrete SAP directly.
    run = next(p for p in (out / "sweeps" / "models" / "runs").iterdir()
               if load_run(p).config.seed == c.seeds[0] and load_run(p).config.dataset == c.target)
    direct = metrics.disentanglement(load_run(run).model(), c.target, n=c.disentanglement_n, metrics=["mig", "sap"],
                                     seed=c.data_seed + 1000 + c.seeds[0], data_seed=c.data_seed)
    stored = d["encoders"][f"target/{c.reference}"]["per_seed"][str(c.seeds[0])]
    assert stored["mig"]["score"] == pytest.approx(direct["mig"]["score"], abs=1e-12)
    assert stored["sap"]["per_factor"] == pytest.approx(direct["sap"]["per_factor"], abs=1e-12)


def test_every_comparison_pairs_different_seeds_only(smoke):
    _, r = smoke
    r = r["analysis"]
    seeds = transfer.PRESETS["smoke"].seeds
    expected = len(seeds) * (len(seeds) - 1)
    matrices = [m for v in r["regularisation"].values() for m in v["matrices"].values()]
    matrices += [m for v in r["objectives"].values() for m in v["matrices"].values()]
    matrices += [m for v in r["cross_domain"].values() for m in v["matrices"].values()]
    matrices += list(r["classifier"]["matrices"].values())
    matrices += [m for v in r["dynamics"]["variants"].values() for m in v["early"].values()]
    assert matrices and all(m["n_pairs"] == expected for m in matrices)
    # the smoke preset asks for approximate Procrustes: its heatmaps and the min view carry bounds
    objectives = next(iter(r["objectives"].values()))["matrices"]
    assert set(objectives) == {"cka", "procrustes", "min"}
    assert "max_bound" not in objectives["cka"] and 0 <= objectives["procrustes"]["max_bound"] <= 1
    assert objectives["min"]["max_bound"] == objectives["procrustes"]["max_bound"]


def test_cka_heatmaps_and_curves_carry_intervals_of_the_seed_pair_mean(smoke):
    """Every CKA heatmap, its quadrant means and every dynamics-curve point carry the configured
    interval (jackknife: centred on the value); the curve's encoder mean's interval is the one
    cka_avg's replicates give on the same snapshot activations."""
    out, r = smoke
    c = transfer.PRESETS["smoke"]
    a = r["analysis"]
    matrices = [v["matrices"]["cka"] for v in a["objectives"].values()]
    matrices += [v["matrices"]["cka"] for v in a["cross_domain"].values()]
    for m in matrices:
        assert m["resampling"] == c.ci_resampling and m["ci"] == c.ci
        values, low, high = (np.array(m[k]) for k in ("values", "ci_low", "ci_high"))
        assert (low <= values + 1e-4).all() and (values <= high + 1e-4).all() and (high > low).any()
        assert m["encoder_mean_ci"][0] <= m["encoder_mean"] <= m["encoder_mean_ci"][1]
    assert "ci_low" not in next(iter(a["objectives"].values()))["matrices"]["procrustes"]  # generic path: none
    label, dyn = next(iter(a["dynamics"]["variants"].items()))
    point = dyn["curve"][0]
    x = transfer.stages.held_out(c, c.source, c.similarity_n, "similarity_n")
    srun = _model_runs(out)
    snap = [transfer.heatmaps.model_activations(srun[(f"source/{label}", s)], x, "cpu", point["step"]) for s in c.seeds]
    final = [transfer.heatmaps.model_activations(srun[(f"source/{label}", s)], x, "cpu") for s in c.seeds]
    m = similarity.cka_avg(snap, final, seeds_a=list(c.seeds), seeds_b=list(c.seeds), ci=c.ci,
                           resamples=c.ci_resamples, resampling=c.ci_resampling, seed=c.ci_seed)
    enc = [m.rows.index(n) for n in similarity.encoder_layers(m.rows)]
    low, high = m.interval_of(lambda t: t[..., enc, enc].mean(dim=-1))
    assert point["encoder_diagonal_ci"] == pytest.approx([float(low), float(high)], abs=6e-5)
    for n, (lo, hi) in point["diagonal_ci"].items():
        assert lo <= point["diagonal"][n] + 1e-4 <= hi + 2e-4
    assert "[" in (out / "index.md").read_text().split("## 2.")[0]  # the report prints the intervals


def test_a_second_run_reuses_every_run_and_step(smoke, tmp_path):
    out, r = smoke
    before = {p: p.stat().st_mtime_ns for p in out.glob("sweeps/*/runs/*/snapshots/*")}
    steps = {p: p.stat().st_mtime_ns for p in (out / "steps").glob("*.json")}
    assert cli.main(["run", "transfer", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    assert before and {p: p.stat().st_mtime_ns for p in out.glob("sweeps/*/runs/*/snapshots/*")} == before
    assert {p: p.stat().st_mtime_ns for p in (out / "steps").glob("*.json")} == steps


def test_each_step_is_keyed_by_the_runs_it_reads(smoke):
    # The sections read the models and the retraining runs only: more cross-check or Annealed VAE
    # runs (the diagnostics' own) must recompute the diagnostics, not hours of similarity (medium).
    out, r = smoke
    keys = {p.stem: json.loads(p.read_text())["key"] for p in (out / "steps").glob("*.json")}
    assert set(keys) >= {"trained", "dynamics", "objectives", "retraining", "diagnostics"}
    for name, key in keys.items():
        runs = {k for k in key if k not in ("ci", "version")}
        assert runs == ({"models", "retraining", "crosscheck", "annealed_settings"} if name == "diagnostics"
                        else {"models", "retraining"}), name


# ---------------------------------------------------------------------------------- public-code faults
def _model_runs(out):
    s = sweep.open_sweep(out / "sweeps" / "models")
    return {(r.params["model"], r.params["seed"]): load_run(s.run_dir(r.id)) for r in s.runs}


def test_the_tc_variant_trains_a_tc_penalty_not_a_plain_beta_vae(smoke):
    """The public code's β-TC-VAE config trained a plain β-VAE. Same seed, same first batch and
    noise: the reconstruction and KL of step 1 agree, the regulariser adds (β − 1)·TC."""
    out, _ = smoke
    runs = _model_runs(out)
    tc, plain = runs[("source/tc6", 0)], runs[("source/beta1", 0)]
    assert tc.config.objective.name == "beta-tc-vae" and tc.config.objective.params["beta"] == 6.0
    h_tc, h_plain = tc.history, plain.history
    assert h_tc["reconstruction"][0] == pytest.approx(float(h_plain["reconstruction"][0]), rel=1e-6)
    assert h_tc["kl"][0] == pytest.approx(float(h_plain["kl"][0]), rel=1e-6)
    assert abs(float(h_tc["regularizer"][0] - h_tc["kl"][0])) > 1e-4  # (β − 1)·TC is there


def test_every_model_runs_exactly_its_steps(smoke):
    """The public code ran ~270k of 300k steps (an epoch counted over the whole set while iterating
    its 90 % split)."""
    out, _ = smoke
    steps = transfer.PRESETS["smoke"].steps
    for run in _model_runs(out).values():
        assert run.step == steps
        assert run.history["step"][-1] == steps and len(run.history["step"]) == steps


def test_logvar_activations_are_log_variances(smoke):
    """The public code turned log-variance into variance when extracting activations."""
    out, _ = smoke
    model = _model_runs(out)[("source/beta1", 0)].model()
    x = data.dsprites(torch.arange(0, 737_280, 91_000)).float_images()
    acts = similarity.activations(model, x)
    _, logvar = model.encode(x)
    torch.testing.assert_close(acts["logvar"], logvar.reshape(len(x), -1), rtol=0, atol=0)


def test_held_out_rows_are_distinct_unseen_and_can_include_the_last_row():
    """The public code's sampler never put the last example in the test split, and its similarity
    inputs were 10,000 draws with repeats, deduplicated."""
    c = transfer.PRESETS["smoke"]
    spec = transfer.stages.data_spec(c, "dsprites")
    train_rows, held = spec.rows()
    assert len(held) == round(c.test_fraction * c.n) and len(train_rows) + len(held) == c.n
    assert torch.unique(held).numel() == len(held)
    assert not set(held.tolist()) & set(train_rows.tolist())
    held_set = spec.held_out(32, argument="similarity_n")
    assert len(held_set) == 32 and torch.equal(held_set.factors, data.dsprites(held[:32]).factors)
    assert torch.equal(transfer.stages.held_out(c, "dsprites", 32, "similarity_n"), held_set.float_images())
    # Over split seeds, the last row of a 10-row set is held out as often as any other row.
    hits = [int(9 in data.split_indices(10, 0.3, seed=s)[1].tolist()) for s in range(200)]
    assert 0.2 < sum(hits) / len(hits) < 0.4


def test_dataspec_rows_are_the_rows_build_returns():
    spec = sweep.DataSpec(name="solids", n=300, subset_seed=3, test_fraction=0.2, split_seed=5)
    train_rows, held = spec.rows()
    train_ds, test_ds = spec.build()
    full = data.solids(torch.cat([train_rows, held]))
    assert torch.equal(train_ds.images, data.solids(train_rows).images)
    assert torch.equal(test_ds.images, data.solids(held).images)
    assert len(full) == 300


# ---------------------------------------------------------------------------------- retraining stages
@pytest.fixture(scope="module")
def source_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("source")
    cfg = TrainConfig(steps=3, batch_size=8, seed=0)
    return train(cfg, data.dsprites(torch.arange(0, 737_280, 4096)), out / "src", progress=False)


def _stage_run(source_run, tmp_path, stage, lr=1e-3):
    decoder = transfer.stages.decoder_layers()
    cfg = TrainConfig(steps=2, batch_size=8, seed=1, init_from=str(source_run.out_dir),
                      freeze=tuple(stage.freeze(decoder)), reinit=tuple(stage.reinit(decoder)))
    cfg.optimizer.lr = lr
    run = train(cfg, data.solids(torch.arange(0, 294_912, 4096)), tmp_path / stage.name.replace("/", "_"),
                progress=False)
    return decoder, run.model().state_dict(), source_run.model().state_dict()


@pytest.mark.parametrize("side, latent", [("latent", "frozen"), ("output", "retrained")])
def test_a_stage_trains_exactly_its_unfrozen_layers(source_run, tmp_path, side, latent):
    stage = transfer.RetrainStage(side, latent, "finetune", 2, 0)
    decoder, after, before = _stage_run(source_run, tmp_path, stage)
    unfrozen = stage.unfrozen(decoder)
    assert unfrozen == (["dec1", "dec2"] if side == "latent" else decoder[-2:])
    trained = set(unfrozen) | ({"mean", "logvar"} if latent == "retrained" else set())
    for name, value in before.items():
        layer = name.split(".")[0]
        if layer in trained:
            assert not torch.equal(after[name], value), f"{name} should have been trained"
        else:
            assert torch.equal(after[name], value), f"{name} should be bit-identical"


def test_reinit_starts_unfrozen_layers_afresh_and_finetune_keeps_them(source_run, tmp_path):
    lr = 1e-4
    stages = {init: transfer.RetrainStage("latent", "frozen", init, 1, 0) for init in ("finetune", "reinit")}
    moved = {}
    for init, stage in stages.items():
        decoder, after, before = _stage_run(source_run, tmp_path, stage, lr=lr)
        names = [n for n in before if n.startswith("dec1.")]
        moved[init] = max(float((after[n] - before[n]).abs().max()) for n in names)
        frozen = [n for n in before if n.startswith("dec2.")]
        assert all(torch.equal(after[n], before[n]) for n in frozen)
    assert moved["finetune"] <= 2 * 2 * lr * 1.01  # Adam moves each weight by at most ≈ lr per step
    assert moved["reinit"] > 100 * lr


def test_stage_zero_with_everything_frozen_trains_nothing_and_duplicates_are_one_run():
    decoder = transfer.stages.decoder_layers()
    assert transfer.stages.stage_key(transfer.RetrainStage("latent", "frozen", "finetune", 0, 0), decoder) is None
    full = [transfer.stages.stage_key(transfer.RetrainStage(side, "frozen", "finetune", len(decoder), 0), decoder)
            for side in transfer.SIDES]
    assert full[0] == full[1]
    zero = {transfer.stages.stage_key(transfer.RetrainStage(side, "retrained", init, 0, 0), decoder)
            for side in transfer.SIDES for init in transfer.INITS}
    assert len(zero) == 1


# ---------------------------------------------------------------------------------- probes
def test_probe_reads_factors_that_are_linear_in_the_features():
    gen = torch.Generator().manual_seed(0)
    classes = torch.stack([torch.randint(0, k, (600,), generator=gen) for k in (3, 6, 10)], 1)
    # Each factor scaled and shifted into one feature, next to two noise features.
    x = torch.cat([classes.double() * torch.tensor([2.0, -0.5, 3.0]) + 1.0, torch.randn(600, 2, generator=gen,
                                                                                      dtype=torch.float64)], 1)
    for f in range(3):
        assert probes.gbt_probe(x, classes[:, f], iterations=20) > 0.97


def test_probe_on_shuffled_labels_is_at_chance():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(800, 4, generator=gen)
    classes = torch.randint(0, 4, (800,), generator=gen)
    acc = probes.gbt_probe(x, classes, iterations=30, seed=2)
    assert 0.1 < acc < 0.4  # chance 0.25; a held-out set of 160 examples


@pytest.mark.parametrize("kwargs, argument", [
    (dict(features=torch.zeros(10)), "features"),
    (dict(labels=torch.zeros(20, dtype=torch.int64)), "labels"),
    (dict(labels=torch.zeros(10)), "labels"),
    (dict(test_fraction=1.5), "test_fraction"),
    (dict(iterations=0), "iterations"),
    (dict(model="forest"), "model"),
    (dict(features=torch.full((10, 2), float("nan"))), "features"),
])
def test_probe_rejects_bad_input_by_name(kwargs, argument):
    args = dict(features=torch.randn(10, 2), labels=torch.arange(10) % 2)
    args.update(kwargs)
    with pytest.raises((vaetransfer.ArgumentError, vaetransfer.ArgumentTypeError)) as info:
        probes.gbt_probe(args.pop("features"), args.pop("labels"), **args)
    assert info.value.argument == argument


# ---------------------------------------------------------------------------------- config
@pytest.mark.parametrize("sets, argument", [
    (["seeds=[0]"], "seeds"),
    (["seeds=[1, 1]"], "seeds"),
    (["reference=nope"], "reference"),
    (['regularisation=[["beta1", "nope"]]'], "regularisation"),
    (['dynamics=["nope"]'], "dynamics"),
    (['retrain_sides=["middle"]'], "retrain_sides"),
    (['measures=["procrustes"]'], "measures"),
    (["target=dsprites"], "target"),
    (["target=mnist"], "target"),
    (["probe_model=forest"], "probe_model"),
    (["retrain_seeds=5"], "retrain_seeds"),
    (["procrustes_rank=0"], "procrustes_rank"),
    (['disentanglement_metrics=["nope"]'], "disentanglement_metrics"),
    (['disentanglement_variants=["nope"]'], "disentanglement_variants"),
    (["disentanglement_dci=forest"], "disentanglement_dci"),
    (["disentanglement_n=3"], "disentanglement_n"),
    (["ci=1"], "ci"), (["ci_resamples=1"], "ci_resamples"), (["ci_resampling=percentile"], "ci_resampling"),
    (["ci_seed=-1"], "ci_seed"),
])
def test_bad_config_names_the_field(sets, argument):
    with pytest.raises((vaetransfer.ArgumentError, vaetransfer.ArgumentTypeError)) as info:
        studies.make_config("transfer", "smoke", sets=sets)
    assert info.value.argument == argument


def test_domains_of_different_shapes_and_too_few_held_out_rows_are_refused_before_training(tmp_path):
    cfg = studies.make_config("transfer", "smoke", sets=["target=color_dsprites"])
    with pytest.raises(vaetransfer.ArgumentError) as info:
        studies.run_study("transfer", tmp_path / "a", config=cfg, progress=False)
    assert info.value.argument == "target"
    cfg = studies.make_config("transfer", "smoke", sets=["probe_n=1000"])
    with pytest.raises(vaetransfer.ArgumentError) as info:
        studies.run_study("transfer", tmp_path / "b", config=cfg, progress=False)
    assert info.value.argument == "probe_n"
    assert not (tmp_path / "b" / "sweeps").exists()


# ---------------------------------------------------------------------------------- findings
def _analysis() -> dict:
    """A synthetic analysis of the smoke config in which every finding holds."""
    trained = {f"{label}/seed={s}": {"label": label, "seed": s, "loss_first": 2.0, "loss_last": 1.0}
               for label in ("source/beta1", "source/beta16", "source/dip1", "target/beta1") for s in (0, 1)}
    cka = lambda enc, dec: {"matrices": {"cka": {"encoder_mean": enc, "decoder_mean": dec}}}  # noqa: E731
    curves = {f"latent/{latent}/{init}/seed=0": {"side": "latent", "latent": latent, "init": init, "seed": 0,
                                                 "loss": loss}
              for (latent, init), loss in {("frozen", "finetune"): [10.0, 8.0, 6.0],
                                           ("retrained", "finetune"): [9.0, 8.0, 6.1]}.items()}
    probe = lambda own, other: {"own": {"average": mean_se(own)},  # noqa: E731
                                "other": {"average": mean_se(other)}}
    # the trained checks (kit.trained.check), one per domain, holding the models' loss records
    checks = {side: {"rule": None, "context": {},
                     "models": {k: dict(m) for k, m in trained.items() if m["label"].startswith(f"{side}/")}}
              for side in ("source", "target")}
    return {"models": trained, "trained": checks,
            "dynamics": {"variants": {"beta1": {"curve": [{"step": 2, "encoder_diagonal": 0.9,
                                                           "decoder_diagonal": 0.1}]}}},
            "regularisation": {"beta1_vs_beta16": {"a": "beta1", "b": "beta16", "sampled_row_a": 0.6,
                                                   "sampled_col_b": 0.4, "kl": {"beta1": 20.0, "beta16": 3.0},
                                                   "active_units": {"beta1": 10, "beta16": 2}}},
            "objectives": {"beta1_vs_dip1": {"a": "beta1", "b": "dip1", **cka(0.8, 0.5)}},
            "cross_domain": {"as_is": cka(0.8, 0.3), "latent_retrained": cka(0.8, 0.4), "same_domain": cka(0.8, 0.7)},
            "retraining": {"curves": curves},
            "probes": {"solids": probe([0.50, 0.52], [0.48, 0.49]), "dsprites": probe([0.41, 0.42], [0.43, 0.44])}}


def _untrain(a, label):
    for check in a["trained"].values():
        for m in check["models"].values():
            if m["label"] == label:
                m["loss_last"] = m["loss_first"]


def _set(path, value):
    def mutate(a):
        *keys, last = path
        node = a
        for k in keys:
            node = node[k]
        node[last] = value
    return mutate


_RETRAINED = "latent/retrained/finetune/seed=0"
FINDING_CASES = {
    "encoder_before_decoder": [
        (True, lambda a: None),
        (False, _set(["dynamics", "variants", "beta1", "curve", 0, "decoder_diagonal"], 0.95)),
        (None, _set(["dynamics", "variants"], {})),
        (None, lambda a: _untrain(a, "source/beta1"))],
    "collapse_at_sampled": [
        (True, lambda a: None),
        (False, _set(["regularisation", "beta1_vs_beta16", "sampled_col_b"], 0.7)),
        (None, _set(["regularisation"], {})),
        (None, lambda a: _untrain(a, "source/beta16"))],
    "encoders_alike_decoders_less": [
        (True, lambda a: None),
        (False, _set(["objectives", "beta1_vs_dip1", "matrices", "cka", "decoder_mean"], 0.9)),
        (None, _set(["objectives"], {})),
        (None, lambda a: _untrain(a, "source/dip1"))],
    "encoders_generic_decoders_specific": [
        (True, lambda a: None),
        (False, _set(["cross_domain", "as_is", "matrices", "cka", "decoder_mean"], 0.75)),  # gap not larger
        (False, _set(["cross_domain", "latent_retrained", "matrices", "cka", "decoder_mean"], 0.7)),
        (None, lambda a: _untrain(a, "target/beta1"))],
    "more_layers_better": [
        (True, lambda a: None),
        (False, _set(["retraining", "curves", _RETRAINED, "loss"], [9.0, 12.0, 9.5])),
        (None, lambda a: _untrain(a, "source/beta1"))],
    "latent_retraining_matters_little": [
        (True, lambda a: None),
        (False, _set(["retraining", "curves", _RETRAINED, "loss"], [9.0, 5.0, 3.0])),
        (None, lambda a: a["retraining"]["curves"].pop(_RETRAINED)),  # only one of frozen / retrained
        (None, lambda a: _untrain(a, "source/beta1"))],
    "probes_source_close_to_target": [
        (True, lambda a: None),
        (False, _set(["probes", "solids", "other", "average"], mean_se([0.40, 0.42]))),
        (None, _set(["probes", "solids", "other", "average"], mean_se([0.49]))),
        (None, lambda a: _untrain(a, "target/beta1"))],
}


def test_every_finding_has_cases():
    assert set(FINDING_CASES) == {f.name for f in transfer.FINDINGS}


@pytest.mark.parametrize("name, expected, mutate", [(name, expected, mutate) for name, cases in FINDING_CASES.items()
                                                   for expected, mutate in cases])
def test_finding_decides_by_its_rule(name, expected, mutate):
    finding = next(f for f in transfer.FINDINGS if f.name == name)
    a = _analysis()
    mutate(a)
    verdict = finding.decide(transfer.PRESETS["smoke"], a)
    assert verdict.reproduced is expected, verdict
    assert (verdict.reason is None) == (expected is not None)
    finding.judge(transfer.PRESETS["smoke"], a)  # its evidence is JSON


def test_config_is_the_small_preset_and_execution_is_not_science():
    assert studies.config_to_dict(transfer.Config()) == studies.config_to_dict(transfer.PRESETS["small"])
    for name in ("executor", "workers", "threads", "address"):
        assert not hasattr(transfer.Config(), name)


# ---------------------------------------------------------------------------------- diagnostics
def test_numpy_cka_is_independent_and_equals_the_engine():
    from vaetransfer.studies.transfer.crosscheck import numpy_cka

    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 8, generator=g, dtype=torch.float64)
    for y in (x @ torch.randn(8, 5, generator=g, dtype=torch.float64) + 0.5 * torch.randn(50, 5, generator=g,
                                                                                          dtype=torch.float64),
              torch.randn(50, 300, generator=g, dtype=torch.float64)):  # feature and Gram branches
        assert numpy_cka(x.numpy(), y.numpy()) == pytest.approx(similarity.similarity(x, y, "cka"), rel=1e-10)
    assert numpy_cka(x.numpy(), (3 * x @ torch.linalg.qr(torch.randn(8, 8, generator=g,
                                                                     dtype=torch.float64))[0]).numpy()) \
        == pytest.approx(1.0, abs=1e-12)  # invariant to rotation and scale


def test_smoke_runs_the_diagnostics(smoke):
    from vaetransfer.studies.transfer import crosscheck

    out, r = smoke
    c = transfer.PRESETS["smoke"]
    d = r["analysis"]["diagnostics"]
    cross = d["crosscheck"]
    starts = transfer.TWIN_STARTS
    assert cross["pair"] == ["beta1", "tc6"] and r["runs"]["crosscheck"]["done"] == 4 * len(starts)
    assert set(cross["models"]) == {f"{v}/init={i}/seed={s}" for v in ("beta1", "tc6") for i in starts for s in c.seeds[:2]}
    assert all(np.isfinite([m["loss_first"], m["loss_last"]]).all() for m in cross["models"].values())
    core = r["analysis"]["objectives"]["beta1_vs_tc6"]["matrices"]["cka"]
    assert cross["core"] == {"encoder_mean": core["encoder_mean"], "decoder_mean": core["decoder_mean"]}
    assert set(cross["twins"]) == set(starts) and cross["decisive"] == "core"
    assert all(isinstance(t["same_ordering"], bool) and isinstance(t["distinguishable"], bool)
               for t in cross["twins"].values())
    # the NumPy CKA on the core's own models of the same seed pairs equals the engine's heatmap means
    assert cross["seeds"] == list(c.seeds) and cross["core_numpy"]["pairs"] == 2
    for k in ("encoder_mean", "decoder_mean"):
        assert cross["core_numpy"][k] == pytest.approx(core[k], abs=2e-3)
    # each start's numbers are the NumPy CKA of its saved twins on the same held-out rows
    x = transfer.stages.held_out(c, c.source, c.similarity_n, "similarity_n")
    s_ = sweep.open_sweep(out / "sweeps" / "crosscheck")
    run_dirs = {(r_.params["variant"], r_.params["seed"], r_.params["init"]): s_.run_dir(r_.id) for r_ in s_.runs}
    s0, s1 = c.seeds[:2]
    for init in starts:
        acts = {k: crosscheck.reference_activations(crosscheck.reference_model(v), x, k[1]) for k, v in run_dirs.items() if k[2] == init}
        pairs = [crosscheck.numpy_quadrants(acts[("beta1", a, init)], acts[("tc6", b, init)]) for a, b in ((s0, s1), (s1, s0))]
        assert cross["twins"][init]["decoder_mean"] == pytest.approx(np.mean([p["decoder_mean"] for p in pairs]),
                                                                     abs=1e-4)
    # decoder-to-input CKA of every variant's first seed, and the objective pairs over training
    assert set(d["decoder_to_input"]) == {v.label for v in c.variants}
    assert all(0 <= v["decoder_mean"] <= 1 for v in d["decoder_to_input"].values())
    for a_, b_ in c.objectives:
        curve = d["objectives_over_training"][f"{a_}_vs_{b_}"]["curve"]
        assert [p["step"] for p in curve] == [2, 4]  # smoke: 2 snapshots of 4 steps
    finding = next(f for f in r["findings"] if f["name"] == "encoders_alike_decoders_less")
    assert finding["diagnosis"]["kind"] in studies.DIAGNOSIS_KINDS and finding["diagnosis"]["text"]
    assert finding["figures"]
    # the Annealed VAE at each setting, on the first seed, with the ramp each setting asks for
    annealed = d["annealed"]
    assert r["runs"]["annealed_settings"]["done"] == len(c.annealed_settings) and annealed["seed"] == c.seeds[0]
    assert "study" not in annealed  # the smoke variants have no Annealed VAE
    got = {k: (m["gamma"], m["c_max"], m["ramp_steps"], m["steps"]) for k, m in annealed["settings"].items()}
    assert got == {"annealed-gamma100": (100.0, 25.0, 1, 4), "annealed-gamma10": (10.0, 25.0, 1, 4),
                   "annealed-slowramp": (1000.0, 25.0, 4, 4)}  # smoke: 4 steps, C over 4 // 3 or all 4
    for m in annealed["settings"].values():  # the rate splits into I(x; z) ≤ log n and the marginal KL
        assert np.isfinite([m["distortion"], m["rate"]]).all() and m["rate"] >= 0
        assert -1e-6 <= m["mutual_information"] <= m["log_n"] + 1e-6 and m["log_n"] == pytest.approx(np.log(c.eval_n), abs=1e-3)
    assert "The Annealed VAE's settings" in (out / "index.md").read_text()


def _diagnostics_analysis(**changes):
    a = _analysis()
    a["objectives"] = {"beta1_vs_tc6": {"a": "beta1", "b": "tc6",
                                        "matrices": {"cka": {"encoder_mean": 0.7, "decoder_mean": 0.94}}}}
    a["diagnostics"] = {"crosscheck": {"pair": ["beta1", "tc6"], "seeds": [0, 1, 2], "decisive": "core",
                                       "twins": {"core": {"encoder_mean": 0.65, "decoder_mean": 0.9, "gap": 0.25,
                                                          "gap_se": 0.05, "pairs": 6, "same_ordering": True,
                                                          "distinguishable": False},
                                                 "torch": {"encoder_mean": 0.66, "decoder_mean": 0.88, "gap": 0.22,
                                                           "gap_se": 0.05, "pairs": 6, "same_ordering": True,
                                                           "distinguishable": False}},
                                       "core": {"encoder_mean": 0.7, "decoder_mean": 0.94},
                                       "core_numpy": {"encoder_mean": 0.7, "decoder_mean": 0.94, "gap": 0.24,
                                                      "gap_se": 0.04, "pairs": 6}},
                        "objectives_over_training": {"beta1_vs_tc6": {"decoder_change": 0.01, "encoder_change": 0.02,
                                                                      "from_step": 2000, "still_moving": False}},
                        "decoder_to_input": {"beta1": {"encoder_mean": 0.4, "decoder_mean": 0.85},
                                             "tc6": {"encoder_mean": 0.4, "decoder_mean": 0.83}}}
    for path, value in changes.items():
        _set(path.split("."), value)(a)
    return a


_CORE = "diagnostics.crosscheck.twins.core."
_TORCH = "diagnostics.crosscheck.twins.torch."


@pytest.mark.parametrize("changes, untrained, kind", [
    ({}, None, "data"),
    ({_CORE + "same_ordering": False, _CORE + "distinguishable": True}, None, "open"),
    ({_CORE + "same_ordering": False, _CORE + "distinguishable": None}, None, "open"),
    # the twins from the core's weights order it the other way, but within the seed pairs' spread:
    # the other rules decide
    ({_CORE + "same_ordering": False}, None, "data"),
    # twins from torch's own draws apart from the core, those from the core's weights not: not our
    # implementation (the training loops agree), said as the initial draws' effect
    ({_TORCH + "same_ordering": False, _TORCH + "distinguishable": True, _TORCH + "gap": -0.12}, None, "data"),
    # without the "core" start, the first start decides
    ({"diagnostics.crosscheck.decisive": "torch", _TORCH + "same_ordering": False, _TORCH + "distinguishable": True},
     None, "open"),
    ({}, "did not train — source/tc6/seed=0: held-out distortion 390 > 223", "setting"),
    ({"objectives.beta1_vs_tc6.matrices.cka.decoder_mean": 0.5}, None, "reproduced"),
    ({"diagnostics.objectives_over_training.beta1_vs_tc6.still_moving": True,
      "diagnostics.objectives_over_training.beta1_vs_tc6.decoder_change": -0.12}, None, "scale"),
    ({"diagnostics.decoder_to_input.beta1.decoder_mean": 0.3}, None, "open"),
])
def test_the_objectives_diagnosis_follows_its_rules(changes, untrained, kind):
    from vaetransfer.studies.transfer import diagnostics as td

    d = td.diagnose_objectives(transfer.PRESETS["smoke"], _diagnostics_analysis(**changes), {"beta1_vs_tc6": untrained})
    assert d.kind == kind
    if kind == "data" and not changes:
        assert "0.84" in d.text and "from the core models' initial weights) with a NumPy CKA agree" in d.text
        assert "other draws" not in d.text
    if kind == "data" and _CORE + "same_ordering" in changes:
        assert "cannot tell the two implementations apart" in d.text and "+0.250 ± 0.050 over 6 seed pairs" in d.text
    if kind == "data" and _TORCH + "gap" in changes:
        assert "agree" in d.text and ("twins from torch's own initialisation (the same distribution, other draws) do "
                                      "differ from the core (gap -0.120 ± 0.050 over 6 seed pairs)") in d.text
    if kind == "open" and "diagnostics.crosscheck.decisive" in changes:
        assert d.text.startswith("The plain-PyTorch twins (from torch's own initialisation)")
    assert td.diagnose_objectives(transfer.PRESETS["smoke"], _analysis(), {}) is None  # no diagnostics section


def test_crosscheck_twins_start_from_the_core_models_initial_weights_or_their_own():
    """The "core" start is the twin of the model the core's training of that variant and seed builds;
    the "torch" start is not (same distribution, other draws); rows name the start; bad ones refused."""
    from vaetransfer.nn import build_model
    from vaetransfer.studies.transfer import crosscheck

    c = transfer.PRESETS["smoke"]
    assert set(crosscheck.TWIN_START_WORDS) == set(transfer.TWIN_STARTS) == set(c.crosscheck_inits)
    rows = crosscheck.crosscheck_runs(c, {})
    assert len(rows) == len(c.seeds) * 2 * len(c.crosscheck_inits) and {r["init"] for r in rows} == {"core", "torch"}
    row = {"variant": "tc6", "seed": c.seeds[1], "init": "core"}
    twin = crosscheck.twin_start(c, row, "cpu")
    objective = transfer.stages.objective_config(c, transfer.config.variant_named(c, "tc6"))
    config = transfer.stages.train_config(c, objective, c.steps, c.seeds[1], c.steps, "cpu")
    core = build_model(config.model, seed=config.seed).state_dict()
    assert config.seed == c.seeds[1] and set(twin.state_dict()) == set(core)
    assert all(torch.equal(twin.state_dict()[k], v) for k, v in core.items())
    assert crosscheck.twin_start(c, {**row, "init": "torch"}, "cpu") is None
    for bad in ('["core", "core"]', '[]', '["xavier"]'):
        with pytest.raises(vaetransfer.ArgumentError) as info:
            studies.make_config("transfer", "smoke", sets=[f"crosscheck_inits={bad}"])
        assert info.value.argument == "crosscheck_inits"


def _annealed(distortion_study, distortions):
    setting = lambda gamma, ramp, dist: {"gamma": gamma, "c_max": 25.0, "ramp_steps": ramp, "steps": 4000,  # noqa: E731
                                         "distortion": dist, "rate": 25.0, "marginal_kl": 25.0 - (dist < 200) * 20,
                                         "mutual_information": 0.01 + (dist < 200) * 20, "log_n": 7.6}
    return {"seed": 0, "study": {"label": "annealed", **setting(1000.0, 1333, distortion_study)},
            "settings": {"annealed-gamma100": setting(100.0, 1333, distortions[0]),
                         "annealed-slowramp": setting(1000.0, 4000, distortions[1])}}


def test_the_annealed_settings_name_the_setting_an_untrained_annealed_vae_depends_on():
    from vaetransfer.studies.transfer import diagnostics as td

    c = transfer.PRESETS["smoke"]
    why = "did not train — source/annealed/seed=0: held-out distortion 381 > 212"
    a = _diagnostics_analysis(**{"trained": {"source": {"rule": {"maximum": 212.2}}}})
    a["diagnostics"]["annealed"] = _annealed(381.0, [60.0, 379.0])
    d = td.diagnose_objectives(c, a, {"beta1_vs_tc6": why})
    assert d.kind == "setting" and d.text.startswith(f"Undecidable at these settings: {why}.")
    assert "trains at γ 100, C → 25 over 1333 of 4000 steps, not at the study's" in d.text
    assert ("γ 1000, C → 25 over 4000 of 4000 steps: distortion 379.0, rate 25.0 nats of which I(x; z) 0.01 "
            "(does not train)") in d.text and "nearly all marginal KL" in d.text
    assert {k: m["trained"] for k, m in d.evidence["annealed"]["settings"].items()} == \
        {"study": False, "annealed-gamma100": True, "annealed-slowramp": False}
    a["diagnostics"]["annealed"] = _annealed(381.0, [300.0, 379.0])  # nothing trains: said so
    assert "No setting tried trains at this length" in td.diagnose_objectives(c, a, {"beta1_vs_tc6": why}).text
    a["trained"]["source"]["rule"] = {"error": "the reference did not train"}  # no threshold: no clause
    assert td.diagnose_objectives(c, a, {"beta1_vs_tc6": why}).text == f"Undecidable at these settings: {why}."


def test_the_objectives_diagnosis_judges_the_pairs_that_trained_and_sets_the_others_apart():
    from vaetransfer.studies.transfer import diagnostics as td

    c = transfer.PRESETS["smoke"]
    why = "did not train — source/annealed/seed=0: held-out distortion 381 > 212"
    a = _diagnostics_analysis(**{"trained": {"source": {"rule": {"maximum": 212.2}}}})
    # an untrained Annealed VAE whose decoder is far from the pixels must not hide the trained pairs' verdict
    a["objectives"]["beta1_vs_annealed"] = {"a": "beta1", "b": "annealed",
                                            "matrices": {"cka": {"encoder_mean": 0.9, "decoder_mean": 0.01}}}
    a["diagnostics"]["decoder_to_input"]["annealed"] = {"encoder_mean": 0.1, "decoder_mean": 0.0}
    a["diagnostics"]["annealed"] = _annealed(381.0, [60.0, 379.0])
    d = td.diagnose_objectives(c, a, {"beta1_vs_tc6": None, "beta1_vs_annealed": why})
    assert d.kind == "data" and d.text.startswith("On the pairs whose models trained (beta1_vs_tc6): every model's")
    assert f"beta1_vs_annealed: Undecidable at these settings: {why}." in d.text and "γ 100" in d.text
    assert d.evidence["untrained_pairs"] == ["beta1_vs_annealed"] and "0.84" in d.text  # beta1 and tc6 only
    a["objectives"]["beta1_vs_tc6"]["matrices"]["cka"]["decoder_mean"] = 0.5  # the trained pair reproduces
    assert td.diagnose_objectives(c, a, {"beta1_vs_tc6": None, "beta1_vs_annealed": why}).kind == "reproduced"


def test_annealed_settings_ramp_over_their_share_of_the_steps_and_bad_ones_are_named():
    c = transfer.PRESETS["medium"]
    ramps = {v.label: transfer.stages.objective_config(c, v).params["iteration_threshold"]
             for v in c.variants + c.annealed_settings if v.objective == "annealed-vae"}
    assert ramps == {"annealed": 666, "annealed-gamma100": 666, "annealed-gamma10": 666, "annealed-slowramp": 2000}
    assert "ramp_fraction" not in transfer.stages.objective_config(c, c.annealed_settings[2]).params
    assert [r["variant"] for r in transfer.stages.annealed_runs(c, {})] == [v.label for v in c.annealed_settings]
    assert transfer.stages.annealed_runs(transfer.PRESETS["small"], {}) == []  # only with the diagnostics
    for bad in ('[{"label": "x", "objective": "beta-vae"}]', '[{"label": "beta1", "objective": "annealed-vae"}]',
                '[{"label": "x", "objective": "annealed-vae", "params": {"ramp_fraction": 0}}]'):
        with pytest.raises(vaetransfer.ArgumentError) as info:
            studies.make_config("transfer", "smoke", sets=[f"annealed_settings={bad}"])
        assert info.value.argument == "annealed_settings"


def test_late_change_measures_the_last_half():
    from vaetransfer.studies.transfer.diagnostics import late_change

    curve = [{"step": s, "encoder_mean": 0.5, "decoder_mean": 0.9 - 0.01 * s} for s in (1, 2, 4, 6, 8)]
    change = late_change(curve)
    assert change["from_step"] == 4 and change["decoder_change"] == pytest.approx(-0.04)
    assert change["still_moving"] is False and late_change(curve[:1])["still_moving"] is None


def _cross_domain_analysis(as_is_decoder=0.3, half_width=0.01):
    a = _analysis()
    for k, m in a["cross_domain"].items():
        q = m["matrices"]["cka"]
        q["encoder_mean_ci"] = [q["encoder_mean"] - half_width, q["encoder_mean"] + half_width]
        q["decoder_mean_ci"] = [q["decoder_mean"] - half_width, q["decoder_mean"] + half_width]
    a["cross_domain"]["as_is"]["matrices"]["cka"]["decoder_mean"] = as_is_decoder
    a["diagnostics"] = {"decoder_to_input_target": {"target/beta1": {"decoder_mean": 0.9},
                                                    "source/beta1": {"decoder_mean": 0.88}}}
    return a


def test_the_cross_domain_and_collapse_diagnoses_follow_their_rules():
    from vaetransfer.studies.transfer import diagnostics as td

    c = transfer.PRESETS["smoke"]
    assert td.diagnose_cross_domain(c, _cross_domain_analysis(), None).kind == "reproduced"  # effect 0.4 ≫ 0.02
    small_effect = td.diagnose_cross_domain(c, _cross_domain_analysis(as_is_decoder=0.69), None)
    assert small_effect.kind == "open" and "inside the held-out examples' noise" in small_effect.text
    a = _cross_domain_analysis(as_is_decoder=0.95)
    for m in a["cross_domain"].values():
        m["matrices"]["cka"]["decoder_mean"] = max(m["matrices"]["cka"]["decoder_mean"], 0.92)
    assert td.diagnose_cross_domain(c, a, None).kind == "data"
    a["diagnostics"]["decoder_to_input_target"]["target/beta1"]["decoder_mean"] = 0.2
    assert td.diagnose_cross_domain(c, a, None).kind == "open"
    assert td.diagnose_cross_domain(c, _cross_domain_analysis(), "did not train — x").kind == "setting"
    # not reproduced, decoders not pixel-like: do the source models already reconstruct the target?
    a = _cross_domain_analysis(as_is_decoder=0.95)
    a["trained"] = {"target": {"context": {"baseline": 300.0}}}
    a["retraining"]["target_model_loss"] = 100.0  # k = 0, mean/logvar frozen: the source model as it is
    assert td.source_draws_target(a)["source_as_is"] == pytest.approx(10.0)  # _analysis's frozen curve starts at 10
    for k0, kind in ((150.0, "data"), (250.0, "open")):  # recovers 75 % / 25 % of the target models' gain
        a["retraining"]["curves"]["latent/frozen/finetune/seed=0"]["loss"][0] = k0
        d = td.diagnose_cross_domain(c, a, None)
        assert d.kind == kind and td.source_draws_target(a)["recovered"] == pytest.approx((300 - k0) / 200)
        assert ("75% of the target models' gain" in d.text) == (kind == "data")
    del a["retraining"]["target_model_loss"]  # results without the section's numbers: no such rule
    assert td.source_draws_target(a) is None and td.diagnose_cross_domain(c, a, None).kind == "open"
    # collapse: margin 0.2 reproduces; a margin below the tolerance is weak; equal active units are named
    assert td.diagnose_collapse(c, _analysis(), None).kind == "reproduced"
    a = _analysis()
    a["regularisation"]["beta1_vs_beta16"].update(sampled_col_b=0.58, active_units={"beta1": 10, "beta16": 10})
    d = td.diagnose_collapse(c, a, None)
    assert d.kind == "open" and "+0.020" in d.text and "keeps as many active latent units" in d.text
    finding = next(f for f in transfer.FINDINGS if f.name == "collapse_at_sampled")
    _untrain(a, "source/beta16")
    assert finding.diagnose(c, a).kind == "setting"
