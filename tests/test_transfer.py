"""Study 1 (transfer): the smoke preset end to end, the retraining stages, the probes, and the
spots where the paper's public code went wrong."""
import json

import numpy as np
import pytest
import torch

import vaetransfer
from vaetransfer import cli, data, experiments, probes, similarity, sweep
from vaetransfer.experiments import transfer
from vaetransfer.train import TrainConfig, load_run, train

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """`vaetransfer run transfer --preset smoke`, once for the module."""
    out = tmp_path_factory.mktemp("transfer") / "smoke"
    assert cli.main(["run", "transfer", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    return out, json.loads((out / "results.json").read_text())


def test_smoke_writes_every_section_and_figure(smoke):
    out, r = smoke
    c = transfer.PRESETS["smoke"]
    for section in ("dynamics", "regularisation", "objectives", "classifier", "cross_domain", "retraining",
                    "reconstructions", "probes", "loss_curves", "findings"):
        assert r[section], section
    figures = [p for s in r.values() if isinstance(s, dict) for p in s.get("figures", [])]
    for group in ("regularisation", "objectives", "cross_domain"):
        figures += [p for v in r[group].values() for p in v["figures"]]
    figures += [p for v in r["dynamics"]["variants"].values() for p in v["figures"]]
    assert len(figures) >= 20
    for p in figures:
        assert (out / p).read_bytes()[:8] == PNG, p
    assert "## Findings" in (out / "index.md").read_text()
    # Retraining: a loss per stage k = 0..6 for every side × mean/logvar × init of the first seed.
    curves = r["retraining"]["curves"]
    assert len(curves) == len(c.retrain_sides) * len(c.retrain_latent) * len(c.retrain_inits)
    assert all(len(v["loss"]) == len(r["retraining"]["decoder"]) + 1 for v in curves.values())
    assert all(np.isfinite(v["loss"]).all() for v in curves.values())
    # Probes: one accuracy per factor with more than one class, for both encoders of both domains.
    assert set(r["probes"]) == {c.source, c.target}
    assert "color" not in r["probes"]["dsprites"]["factors"]  # dSprites' colour is constant
    assert r["probes"]["solids"]["factors"] == list(data.SOLIDS_FACTORS)


def test_every_comparison_pairs_different_seeds_only(smoke):
    _, r = smoke
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


def test_a_second_run_reuses_every_run_and_step(smoke, tmp_path):
    out, r = smoke
    before = {p: p.stat().st_mtime_ns for p in out.glob("sweeps/*/runs/*/snapshots/*")}
    steps = {p: p.stat().st_mtime_ns for p in (out / "steps").glob("*.json")}
    assert cli.main(["run", "transfer", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    assert before and {p: p.stat().st_mtime_ns for p in out.glob("sweeps/*/runs/*/snapshots/*")} == before
    assert {p: p.stat().st_mtime_ns for p in (out / "steps").glob("*.json")} == steps


# ---------------------------------------------------------------------------------- public-code faults
def _model_runs(out):
    s = sweep.open_sweep(out / "sweeps" / "models")
    return {(r.params["label"], r.config["seed"]): load_run(s.run_dir(r.id)) for r in s.runs}


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
    spec = transfer._spec(c, "dsprites")
    train_rows, held = spec.rows()
    assert len(held) == round(c.test_fraction * c.n) and len(train_rows) + len(held) == c.n
    assert torch.unique(held).numel() == len(held)
    assert not set(held.tolist()) & set(train_rows.tolist())
    raw = transfer._held_out(c, "dsprites", 32, "similarity_n")
    assert len(raw) == 32 and torch.equal(raw.latents_classes, data.dsprites(held[:32]).latents_classes)
    # Over split seeds, the last row of a 10-row set is held out as often as any other row.
    hits = [int(9 in data.split_indices(10, 0.3, seed=s)[1].tolist()) for s in range(200)]
    assert 0.2 < sum(hits) / len(hits) < 0.4


def test_dataspec_rows_are_the_rows_build_returns():
    spec = sweep.DataSpec(name="solids", n=300, subset_seed=3, test_fraction=0.2, split_seed=5)
    train_rows, held = spec.rows()
    train_ds, test_ds = spec.build()
    full = data.solids(torch.cat([train_rows, held]))
    assert torch.equal(train_ds.images, data.as_dataset(data.solids(train_rows)).images)
    assert torch.equal(test_ds.images, data.as_dataset(data.solids(held)).images)
    assert len(full) == 300


# ---------------------------------------------------------------------------------- retraining stages
@pytest.fixture(scope="module")
def source_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("source")
    cfg = TrainConfig(steps=3, batch_size=8, seed=0)
    return train(cfg, data.dsprites(torch.arange(0, 737_280, 4096)), out / "src", progress=False)


def _stage_run(source_run, tmp_path, stage, lr=1e-3):
    decoder = transfer._decoder_layers()
    cfg = TrainConfig(steps=2, batch_size=8, seed=1, init_from=str(source_run.out_dir),
                      freeze=tuple(stage.freeze(decoder)), reinit=tuple(stage.reinit(decoder)))
    cfg.optimizer.lr = lr
    run = train(cfg, data.solids(torch.arange(0, 294_912, 4096)), tmp_path / stage.name.replace("/", "_"),
                progress=False)
    return decoder, run.model().state_dict(), source_run.model().state_dict()


@pytest.mark.parametrize("side, latent", [("latent", "frozen"), ("output", "retrained")])
def test_a_stage_trains_exactly_its_unfrozen_layers(source_run, tmp_path, side, latent):
    stage = transfer.Stage(side, latent, "finetune", 2, 0)
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
    stages = {init: transfer.Stage("latent", "frozen", init, 1, 0) for init in ("finetune", "reinit")}
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
    decoder = transfer._decoder_layers()
    assert transfer._stage_key(transfer.Stage("latent", "frozen", "finetune", 0, 0), decoder) is None
    full = [transfer._stage_key(transfer.Stage(side, "frozen", "finetune", len(decoder), 0), decoder)
            for side in transfer.SIDES]
    assert full[0] == full[1]
    zero = {transfer._stage_key(transfer.Stage(side, "retrained", init, 0, 0), decoder)
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
])
def test_bad_config_names_the_field(sets, argument):
    with pytest.raises((vaetransfer.ArgumentError, vaetransfer.ArgumentTypeError)) as info:
        experiments.make_config("transfer", "smoke", sets=sets)
    assert info.value.argument == argument


def test_domains_of_different_shapes_and_too_few_held_out_rows_are_refused_before_training(tmp_path):
    cfg = experiments.make_config("transfer", "smoke", sets=["target=color_dsprites"])
    with pytest.raises(vaetransfer.ArgumentError) as info:
        transfer.run(cfg, tmp_path / "a", progress=False)
    assert info.value.argument == "target"
    cfg = experiments.make_config("transfer", "smoke", sets=["probe_n=1000"])
    with pytest.raises(vaetransfer.ArgumentError) as info:
        transfer.run(cfg, tmp_path / "b", progress=False)
    assert info.value.argument == "probe_n"
    assert not (tmp_path / "b" / "sweeps").exists()
