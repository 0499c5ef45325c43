"""Study 1 (transfer): the smoke preset end to end, the retraining stages, the probes, and the
spots where the paper's public code went wrong."""

import dataclasses
import json
import math
import zlib
import numpy as np
import pytest
import torch

import vaetransfer
from vaetransfer import cli, data, probes, similarity, studies, sweep
from vaetransfer.studies import transfer
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
    assert abs(float(h_tc["latent_penalty"][0] - h_tc["kl"][0])) > 1e-4  # (β − 1)·TC is there


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
_SEEDS = (0, 1, 2)


def _config():
    """The smoke config with three seeds: the pairs' jackknife needs three."""
    return dataclasses.replace(transfer.PRESETS["smoke"], seeds=_SEEDS, retrain_seeds=3)


_CALLS = {"n": 0}   # _pairs calls since the last _analysis(): deterministic draws per test


def _pairs(**values) -> dict:
    """Per-pair summaries over the seeds (a ≠ b), each value ± a small spread by pair and value (so that
    differences between values vary by pair too, as real ones do; a spread of exactly zero would be
    decided by a sign test)."""
    call = _CALLS["n"]   # every call its own draws: equal values in two places are not equal per pair
    _CALLS["n"] += 1

    def jitter(a, b, k, v):   # seed effects (what the leave-one-seed-out jackknife sees), scaled per value
        u = (0.0, 1.0, 3.0)
        return 0.002 * (u[a % 3] + 2 * u[b % 3]) * (1 + zlib.crc32(f"{k}={v}#{call}".encode()) % 97 / 97)
    return {f"{a}/{b}": {k: v + jitter(a, b, k, v) for k, v in values.items()}
            for a in _SEEDS for b in _SEEDS if a != b}


def _analysis() -> dict:
    """A synthetic analysis of the smoke config (three seeds) in which every finding holds."""
    _CALLS["n"] = 0
    trained = {f"{label}/seed={s}": {"label": label, "seed": s, "loss_first": 2.0, "loss_last": 1.0}
               for label in ("source/beta1", "source/beta16", "source/dip1", "target/beta1") for s in _SEEDS}
    curves = {f"latent/{latent}/{init}/seed={s}": {"side": "latent", "latent": latent, "init": init, "seed": s,
                                                   "loss": [v + s + 0.1 * ((s + 2 * i) % 3)
                                                            for i, v in enumerate(loss)]}
              for (latent, init), loss in {("frozen", "finetune"): [300.0, 200.0, 100.0],
                                           ("retrained", "finetune"): [299.0, 201.0, 101.0]}.items() for s in _SEEDS}
    def per_seed(acc):   # each accuracy's own seed-to-seed pattern
        f = 1 + (acc * 7.31) % 1
        return {str(s): {"shape": acc + 0.01 * s * f, "scale": acc - 0.004 * s * f} for s in _SEEDS}
    probe = lambda own, other, rnd: {"own": {"per_seed": per_seed(own)}, "other": {"per_seed": per_seed(other)},  # noqa: E731
                                     "random": {"per_seed": per_seed(rnd)}}
    # the trained checks (kit.trained.check), one per domain, holding the models' loss records
    checks = {side: {"rule": None, "context": {},
                     "models": {k: dict(m) for k, m in trained.items() if m["label"].startswith(f"{side}/")}}
              for side in ("source", "target")}
    cd = lambda enc, dec: {"matrices": {"cka": {"encoder_mean": enc, "decoder_mean": dec,  # noqa: E731
                                                "pairs": _pairs(encoder_mean=enc, decoder_mean=dec)}},
                           "posterior_mean": {"encoder_mean": enc, "decoder_mean": dec,
                                              "pairs": _pairs(encoder_mean=enc, decoder_mean=dec)}}
    return {"models": trained, "trained": checks,
            "dynamics": {"variants": {"beta1": {"curve": [
                {"step": 0, "encoder_diagonal": 0.5, "decoder_diagonal": 0.4,
                 "pairs": _pairs(encoder_diagonal_mean=0.5, decoder_diagonal_mean=0.4)},
                {"step": 2, "encoder_diagonal": 0.9, "decoder_diagonal": 0.2,
                 "pairs": _pairs(encoder_diagonal_mean=0.9, decoder_diagonal_mean=0.2)}]}}},
            "regularisation": {"beta1_vs_beta16": {
                "a": "beta1", "b": "beta16", "sampled_row_a": 0.6, "sampled_col_b": 0.4,
                "matrices": {"cka": {"pairs": _pairs(sampled_row=0.6, sampled_col=0.4)}},
                "posterior_mean": {"pairs": _pairs(sampled_row=0.7, sampled_col=0.5)},
                "kl": {"beta1": 20.0, "beta16": 3.0}, "active_units": {"beta1": 10, "beta16": 2}}},
            "objectives": {"beta1_vs_dip1": {"a": "beta1", "b": "dip1", "matrices": {"cka": {
                "encoder_mean": 0.8, "decoder_mean": 0.5, "pairs": _pairs(trunk_diagonal_mean=0.95)}}}},
            "cross_domain": {"as_is": cd(0.8, 0.3), "latent_retrained": cd(0.8, 0.4), "same_domain": cd(0.8, 0.7)},
            "retraining": {"curves": curves},
            "probes": {"solids": probe(0.50, 0.49, 0.30), "dsprites": probe(0.41, 0.43, 0.2)}}


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


def _all_pairs(path, **values):
    return _set(path, _pairs(**values))


_RETRAINED = "latent/retrained/finetune/seed={}"
_CD = ["cross_domain", "{}", "matrices", "cka", "pairs"]
FINDING_CASES = {
    "encoder_before_decoder": [
        ("reproduced", lambda a: None),
        # the first snapshot's encoder-minus-decoder gap is no more than at step 0: contradicted
        ("contradicted", _all_pairs(["dynamics", "variants", "beta1", "curve", 1, "pairs"],
                                    encoder_diagonal_mean=0.5, decoder_diagonal_mean=0.6)),
        ("undecided", _set(["dynamics", "variants"], {})),
        ("undecided", lambda a: _untrain(a, "source/beta1"))],
    "collapse_at_sampled": [
        ("reproduced", lambda a: None),
        ("contradicted", _all_pairs(["regularisation", "beta1_vs_beta16", "matrices", "cka", "pairs"],
                                    sampled_row=0.4, sampled_col=0.7)),
        # the sample's line is darker, the posterior mean's not: the claim fails on the control
        ("absent", _all_pairs(["regularisation", "beta1_vs_beta16", "posterior_mean", "pairs"],
                              sampled_row=0.5, sampled_col=0.5)),
        ("undecided", _set(["regularisation"], {})),
        ("undecided", lambda a: _untrain(a, "source/beta16"))],
    "encoders_alike_across_objectives": [
        ("reproduced", lambda a: None),
        ("contradicted", _all_pairs(["objectives", "beta1_vs_dip1", "matrices", "cka", "pairs"],
                                    trunk_diagonal_mean=0.6)),
        ("undecided", _set(["objectives"], {})),
        ("undecided", lambda a: _untrain(a, "source/dip1"))],
    "encoders_generic_decoders_specific": [
        ("reproduced", lambda a: None),
        # after retraining mean/logvar the decoders are as alike as same-domain ones: not specific
        ("absent", _all_pairs([k.format("latent_retrained") for k in _CD], encoder_mean=0.8, decoder_mean=0.7)),
        # the source encoders far below the same-domain ones: not generic
        ("contradicted", _all_pairs([k.format("as_is") for k in _CD], encoder_mean=0.5, decoder_mean=0.3)),
        ("undecided", lambda a: _untrain(a, "target/beta1"))],
    "more_layers_better": [
        ("reproduced", lambda a: None),
        ("contradicted", lambda a: [_set(["retraining", "curves", _RETRAINED.format(s), "loss"],
                                         [200.0 + s, 250.0, 300.0 - s])(a) for s in _SEEDS]),
        ("undecided", lambda a: _untrain(a, "source/beta1"))],
    "latent_retraining_matters_little": [
        ("reproduced", lambda a: None),
        ("contradicted", lambda a: [_set(["retraining", "curves", _RETRAINED.format(s), "loss"],
                                         [299.0, 100.0 + s, 40.0])(a) for s in _SEEDS]),
        ("undecided", lambda a: [a["retraining"]["curves"].pop(_RETRAINED.format(s)) for s in _SEEDS]),
        ("undecided", lambda a: _untrain(a, "source/beta1"))],
    "probes_source_close_to_target": [
        ("reproduced", lambda a: None),
        ("contradicted", _set(["probes", "solids", "other", "per_seed"],
                              {str(s): {"shape": 0.30, "scale": 0.30 + 0.01 * s} for s in _SEEDS})),
        ("undecided", lambda a: _untrain(a, "target/beta1"))],
}


def test_every_finding_has_cases():
    assert set(FINDING_CASES) == {f.name for f in transfer.FINDINGS}


@pytest.mark.parametrize("name, expected, mutate", [(name, expected, mutate) for name, cases in FINDING_CASES.items()
                                                   for expected, mutate in cases])
def test_finding_decides_by_its_rule(name, expected, mutate):
    finding = next(f for f in transfer.FINDINGS if f.name == name)
    a = _analysis()
    mutate(a)
    record = finding.judge(_config(), a)   # its evidence and effect are JSON
    assert record["verdict"] == expected, (record["reason"], record["effect"] and
                                           {k: p.get("mean") for k, p in record["effect"]["parts"].items()})
    assert record["reason"] or expected == "reproduced"


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
    finding = next(f for f in r["findings"] if f["name"] == "encoders_alike_across_objectives")
    assert finding["diagnosis"]["kind"] in studies.DIAGNOSIS_KINDS and finding["diagnosis"]["text"]
    assert finding["figures"]
    # the Annealed VAE at each setting, on the first seed, with the ramp each setting asks for
    annealed = d["annealed"]
    assert r["runs"]["annealed_settings"]["done"] == len(c.annealed_settings) and annealed["seed"] == c.seeds[0]
    assert "study" not in annealed  # the smoke variants have no Annealed VAE
    got = {k: (m["gamma"], m["c_max"], m["ramp_steps"], m["steps"]) for k, m in annealed["settings"].items()}
    assert got == {"annealed-gamma100": (100.0, 25.0, 1, 4), "annealed-gamma10": (10.0, 25.0, 1, 4),
                   "annealed-slowramp": (1000.0, 25.0, 4, 4), "annealed-delayed": (1000.0, 25.0, 1, 4),
                   "annealed-twin": (1000.0, 25.0, 1, 4)}  # smoke: 4 steps, C over 4 // 3 or all 4
    assert annealed["settings"]["annealed-delayed"]["delay_steps"] == 2   # C at 0 for half of the 4 steps
    assert annealed["settings"]["annealed-twin"]["implementation"] == "torch"
    for m in annealed["settings"].values():  # the rate splits into I(x; z) ≤ log n and the marginal KL
        assert np.isfinite([m["distortion"], m["rate"]]).all() and m["rate"] >= 0
        assert -1e-6 <= m["mutual_information"] <= m["log_n"] + 1e-6 and m["log_n"] == pytest.approx(np.log(c.eval_n), abs=1e-3)
    assert "The Annealed VAE's settings" in (out / "index.md").read_text()


def _diagnostics_analysis(**changes):
    a = _analysis()
    a["objectives"] = {"beta1_vs_tc6": {"a": "beta1", "b": "tc6", "matrices": {"cka": {
        "encoder_mean": 0.7, "decoder_mean": 0.94, "pairs": _pairs(trunk_diagonal_mean=0.95)}}}}
    for s in _SEEDS:
        a["trained"]["source"]["models"][f"source/tc6/seed={s}"] = {"label": "source/tc6", "seed": s,
                                                                     "loss_first": 2.0, "loss_last": 1.0}
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
_TRUNK = "objectives.beta1_vs_tc6.matrices.cka.pairs"


def _judged(name, a):
    finding = next(f for f in transfer.FINDINGS if f.name == name)
    return finding.judge(_config(), a)


@pytest.mark.parametrize("changes, kind, text", [
    ({}, "reproduced", "from the core models' initial weights) with a NumPy CKA agree"),
    # the cross-check's own test tells the twins from the core: said so, whatever the ordering
    ({_CORE + "distinguishable": True}, "open", "differ from the core by more than the seed pairs' spread"),
    ({_TRUNK: _pairs(trunk_diagonal_mean=0.6),
      "diagnostics.objectives_over_training.beta1_vs_tc6.still_moving": True}, "scale", "beta1_vs_tc6: "),
    ({_TRUNK: _pairs(trunk_diagonal_mean=0.6)}, "open", "Contradicted at beta1_vs_tc6 ("),
    # twins from torch's own draws apart from the core: named as the initial draws' effect
    ({_TORCH + "distinguishable": True, _TORCH + "gap": -0.12}, "reproduced",
     "twins from torch's own initialisation (the same distribution, other draws) do differ from the core"),
])
def test_the_objectives_diagnosis_follows_its_rules(changes, kind, text):
    d = _judged("encoders_alike_across_objectives", _diagnostics_analysis(**changes))["diagnosis"]
    assert d["kind"] == kind and text in d["text"], d["text"]


def test_a_cross_check_that_finds_the_twins_distinguishable_is_never_reported_as_agreeing():
    from vaetransfer.studies.transfer.diagnostics import _crosscheck_clause
    cross = _diagnostics_analysis(**{_CORE + "distinguishable": True})["diagnostics"]["crosscheck"]
    text = _crosscheck_clause(cross)
    assert "agree (" not in text and "differs from the core's (+0.240 ± 0.040) by more than the seed pairs' spread" in text
    assert "agree (" in _crosscheck_clause(_diagnostics_analysis()["diagnostics"]["crosscheck"])
    d = _judged("encoders_alike_across_objectives", _diagnostics_analysis(**{_CORE + "distinguishable": True}))
    assert "agree (" not in d["diagnosis"]["text"] and "disagree" in d["diagnosis"]["text"]


def _annealed(distortion_study, distortions):
    setting = lambda gamma, ramp, dist: {"gamma": gamma, "c_max": 25.0, "ramp_steps": ramp, "steps": 4000,  # noqa: E731
                                         "distortion": dist, "rate": 25.0, "marginal_kl": 25.0 - (dist < 200) * 20,
                                         "mutual_information": 0.01 + (dist < 200) * 20, "log_n": 7.6}
    return {"seed": 0, "study": {"label": "annealed", **setting(1000.0, 1333, distortion_study)},
            "settings": {"annealed-gamma100": setting(100.0, 1333, distortions[0]),
                         "annealed-slowramp": setting(1000.0, 4000, distortions[1])}}


def _with_untrained_annealed(a):
    """The Annealed VAE pair beside beta1_vs_tc6, every annealed model untrained (held-out distortion)."""
    a["trained"]["source"]["rule"] = {"key": "distortion", "maximum": 212.2, "what": "held-out distortion"}
    for m in a["trained"]["source"]["models"].values():
        m["distortion"] = 100.0
    for s in _SEEDS:
        a["trained"]["source"]["models"][f"source/annealed/seed={s}"] = {
            "label": "source/annealed", "seed": s, "loss_first": 2.0, "loss_last": 1.0, "distortion": 381.0}
    a["objectives"]["beta1_vs_annealed"] = {"a": "beta1", "b": "annealed", "matrices": {"cka": {
        "encoder_mean": 0.9, "decoder_mean": 0.01, "pairs": _pairs(trunk_diagonal_mean=0.3)}}}
    return a


def test_an_untrained_annealed_vae_is_left_out_named_with_the_setting_it_depends_on():
    a = _with_untrained_annealed(_diagnostics_analysis())
    a["diagnostics"]["annealed"] = _annealed(381.0, [60.0, 379.0])
    r = _judged("encoders_alike_across_objectives", a)
    # the pair that trained is decided; the untrained Annealed VAE's pair is left out, named — not hiding it
    assert r["verdict"] == "reproduced" and set(r["effect"]["left_out"]) == {"beta1_vs_annealed"}
    assert "source/annealed/seed=0: held-out distortion 381 > 212" in r["effect"]["left_out"]["beta1_vs_annealed"]
    d = r["diagnosis"]
    assert d["kind"] == "reproduced" and "Left out (did not train): beta1_vs_annealed" in d["text"]
    assert "trains at γ 100, C → 25 over 1333 of 4000 steps, not at the study's" in d["text"]
    assert ("γ 1000, C → 25 over 4000 of 4000 steps: distortion 379.0, rate 25.0 nats of which I(x; z) 0.01 "
            "(does not train)") in d["text"] and "nearly all marginal KL" in d["text"]
    a["diagnostics"]["annealed"] = _annealed(381.0, [300.0, 379.0])  # nothing trains: said so
    assert "No setting tried trains at this length" in _judged("encoders_alike_across_objectives", a)["diagnosis"]["text"]
    # only the Annealed VAE's pair, untrained: nothing decided, a setting
    del a["objectives"]["beta1_vs_tc6"]
    r = _judged("encoders_alike_across_objectives", a)
    assert r["verdict"] == "undecided" and r["diagnosis"]["kind"] == "setting"


def test_the_dynamics_diagnosis_sets_the_first_snapshot_against_step_0():
    a = _analysis()
    r = _judged("encoder_before_decoder", a)
    assert r["verdict"] == "reproduced" and r["diagnosis"]["kind"] == "reproduced"
    assert r["effect"]["parts"]["beta1"]["mean"] == pytest.approx(0.6, abs=0.01)   # 0.7 at step 2 less 0.1 at step 0
    # the raw gap as large at step 0 as later: architecture, not learning — decided against, said with both gaps
    _all_pairs(["dynamics", "variants", "beta1", "curve", 0, "pairs"],
               encoder_diagonal_mean=0.9, decoder_diagonal_mean=0.2)(a)
    a["dynamics"]["variants"]["beta1"]["curve"][0].update(encoder_diagonal=0.9, decoder_diagonal=0.2)
    r = _judged("encoder_before_decoder", a)
    assert r["verdict"] == "absent" and "+0.700 at the first snapshot, +0.700 at step 0" in r["diagnosis"]["text"]


def _cross_domain_analysis(same_decoder=0.7, retrained_decoder=0.4):
    a = _analysis()
    for key, dec in (("same_domain", same_decoder), ("latent_retrained", retrained_decoder)):
        for where in (a["cross_domain"][key]["matrices"]["cka"], a["cross_domain"][key]["posterior_mean"]):
            where.update(decoder_mean=dec, pairs=_pairs(encoder_mean=0.8, decoder_mean=dec))
    a["diagnostics"] = {"decoder_to_input_target": {"target/beta1": {"decoder_mean": 0.9},
                                                    "source/beta1": {"decoder_mean": 0.88}}}
    return a


def test_the_cross_domain_diagnosis_follows_its_rules():
    assert _judged("encoders_generic_decoders_specific", _cross_domain_analysis())["diagnosis"]["kind"] == "reproduced"
    # decoders not specific, every decoder quadrant ≥ 0.9 and pixel-like: a property of the images
    a = _cross_domain_analysis(same_decoder=0.93, retrained_decoder=0.93)
    a["cross_domain"]["as_is"]["matrices"]["cka"]["decoder_mean"] = 0.92
    d = _judged("encoders_generic_decoders_specific", a)["diagnosis"]
    assert d["kind"] == "data" and d["text"].startswith("Absent at decoders specific (mean/logvar retrained)")
    a["diagnostics"]["decoder_to_input_target"]["target/beta1"]["decoder_mean"] = 0.2
    assert _judged("encoders_generic_decoders_specific", a)["diagnosis"]["kind"] == "open"
    # not pixel-like, but the source models as they are reconstruct the target: the domains share what is drawn
    a["trained"]["target"]["context"] = {"baseline": 300.0}
    a["retraining"]["target_model_loss"] = 100.0
    for k0, kind in ((150.0, "data"), (250.0, "open")):   # recovers 75 % / 25 % of the target models' gain
        for s in _SEEDS:
            a["retraining"]["curves"][f"latent/frozen/finetune/seed={s}"]["loss"][0] = k0
        d = _judged("encoders_generic_decoders_specific", a)["diagnosis"]
        assert d["kind"] == kind and ("75% of the target models' gain" in d["text"]) == (kind == "data")
    _untrain(a, "target/beta1")
    assert _judged("encoders_generic_decoders_specific", a)["diagnosis"]["kind"] == "setting"


def test_the_collapse_diagnosis_tells_the_posterior_noise_from_a_collapsed_representation():
    a = _analysis()
    assert _judged("collapse_at_sampled", a)["diagnosis"]["kind"] == "reproduced"
    # darker with the sample, not with the posterior mean, every unit active: the noise, not a collapse
    _all_pairs(["regularisation", "beta1_vs_beta16", "posterior_mean", "pairs"], sampled_row=0.5, sampled_col=0.5)(a)
    a["regularisation"]["beta1_vs_beta16"]["active_units"] = {"beta1": 10, "beta16": 10}
    r = _judged("collapse_at_sampled", a)
    assert r["verdict"] == "absent" and r["diagnosis"]["kind"] == "setting"
    assert "the posterior noise of the strong models" in r["diagnosis"]["text"]
    # darker with neither: open, naming the parts and the active units
    _all_pairs(["regularisation", "beta1_vs_beta16", "matrices", "cka", "pairs"], sampled_row=0.4, sampled_col=0.7)(a)
    d = _judged("collapse_at_sampled", a)["diagnosis"]
    assert d["kind"] == "open" and "beta1_vs_beta16 (sample)" in d["text"] and "keeps as many active" in d["text"]
    _untrain(a, "source/beta16")
    assert _judged("collapse_at_sampled", a)["diagnosis"]["kind"] == "setting"


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


def test_annealed_settings_ramp_over_their_share_of_the_steps_and_bad_ones_are_named():
    c = transfer.PRESETS["medium"]
    ramps = {v.label: transfer.stages.objective_config(c, v).params["iteration_threshold"]
             for v in c.variants + c.annealed_settings if v.objective == "annealed-vae"}
    assert ramps == {"annealed": 666, "annealed-gamma100": 666, "annealed-gamma10": 666, "annealed-slowramp": 2000,
                     "annealed-delayed": 666, "annealed-twin": 666}
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


def test_the_annealed_protocol_settings_delay_the_capacity_and_the_twin_follows_it():
    """Issue 51's Annealed VAE experiment: a setting holding C at 0 for a share of the steps trains with the
    core's linear schedule delayed (not an objective parameter), and the plain-PyTorch twin's capacity is
    the same function of the step."""
    from vaetransfer.studies.transfer import stages as st, twin_training as tt
    c = transfer.PRESETS["medium"]
    delayed = next(v for v in c.annealed_settings if v.label == "annealed-delayed")
    twin = next(v for v in c.annealed_settings if v.label == "annealed-twin")
    assert st.annealed_protocol(c, delayed) == {"gamma": 1000.0, "c_max": 25.0, "ramp_steps": 666, "delay_steps": 1000}
    assert st.annealed_protocol(c, twin) == {"gamma": 1000.0, "c_max": 25.0, "ramp_steps": 666, "delay_steps": 0}
    assert "delay_fraction" not in st.objective_config(c, delayed).params
    sched = st.variant_schedules(c, delayed)["capacity"]
    assert (sched.name, sched.params["delay"], sched.params["steps"], sched.params["end"]) == ("linear", 1000, 666, 25.0)
    assert st.variant_schedules(c, twin) == {} and st.variant_schedules(c, transfer.config.variant_named(c, "annealed")) == {}
    assert [tt.annealed_capacity(s, 25.0, 666, 1000) for s in (0, 999, 1000, 1333, 1666, 5000)] == \
        [0.0, 0.0, 0.0, pytest.approx(12.5, abs=0.02), 25.0, 25.0]
    for bad in ('[{"label": "x", "objective": "annealed-vae", "params": {"delay_fraction": 1.0}}]',
                '[{"label": "x", "objective": "annealed-vae", "params": {"implementation": "jax"}}]'):
        with pytest.raises(vaetransfer.ArgumentError) as info:
            studies.make_config("transfer", "smoke", sets=[f"annealed_settings={bad}"])
        assert info.value.argument == "annealed_settings"


def test_the_twin_trains_the_annealed_objective_and_its_loss_is_the_formula():
    from vaetransfer.export import ReferenceVAE
    from vaetransfer.studies.transfer import twin_training as tt
    torch.manual_seed(0)
    x = (torch.rand(8, 1, 64, 64) > 0.5).float()
    model = ReferenceVAE("conv")
    mean, logvar, z, logits = model(x)
    kl = (0.5 * (mean ** 2 + logvar.exp() - logvar - 1)).sum(1).mean()
    recon = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="none").flatten(1).sum(1).mean()
    assert tt.annealed_vae_loss(x, logits, mean, logvar, 10.0, 3.0).item() == pytest.approx(
        (recon + 10.0 * (kl - 3.0).abs()).item(), rel=1e-6)
    losses = tt.train_python(model, x, 3, 4, objective="annealed-vae",
                             annealed={"gamma": 10.0, "c_max": 5.0, "ramp_steps": 2, "delay_steps": 1})
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    with pytest.raises(ValueError, match="annealed"):
        tt.train_python(model, x, 1, 4, objective="annealed-vae")


def test_the_annealed_adoption_rule():
    from vaetransfer.studies.transfer.diagnostics import annealed_adoption, annealed_trains
    ok = {"distortion": 100.0, "mutual_information": 10.0, "rate": 25.0}
    spent = {"distortion": 100.0, "mutual_information": 0.01, "rate": 25.0}   # capacity met by marginal KL alone
    bad = {"distortion": 390.0, "mutual_information": 0.01, "rate": 25.0}
    assert annealed_trains(ok, 200.0) and not annealed_trains(spent, 200.0) and not annealed_trains(bad, 200.0)
    judged = {"study": {**bad, "trained": False}, "annealed-twin": {**bad, "implementation": "torch", "trained": False},
              "annealed-gamma10": {**ok, "trained": True}, "annealed-delayed": {**ok, "trained": True}}
    assert annealed_adoption(judged) == {"study_trains": False, "twin_trains": False, "adopt": "annealed-delayed"}
    judged["study"]["trained"] = True    # the study's own protocol trains: nothing to adopt
    assert annealed_adoption(judged)["adopt"] is None
