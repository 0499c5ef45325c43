"""The trainer over any model and objective: classifiers train and resume bit for bit after a
SIGKILL, a regulariser registered in C++ adds its column and its gradient, schedules follow
their formulas, freeze phases keep groups bit-identical, held-out evaluation leaves the
trajectory unchanged, and unknown names are named errors."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import vaetransfer as vt
from vaetransfer import _C


@pytest.fixture(scope="module")
def shapes():
    """dSprites (a spread of the grid) labelled by shape: 3 classes, chance 1/3."""
    ds = vt.data.as_dataset(vt.data.dsprites(torch.arange(0, 737280, 90)), label="shape")  # 8,192 images
    return vt.data.split(ds, 0.25, seed=0)


def _clf_config(**kw):
    base = dict(model=vt.ModelConfig(architecture="mlp-classifier", input_shape=(1, 64, 64), hidden=(64,),
                                     batch_norm=True, num_classes=3),
                objective=vt.TaskConfig("classification"),
                optimizer=vt.OptimizerConfig(name="sgd", lr=0.05, momentum=0.9), steps=60, batch_size=32, seed=1)
    base.update(kw)
    return vt.TrainConfig(**base)


def test_conv4_learns_a_built_in_labelled_set_well_above_chance(tmp_path):
    """Tetrominoes labelled by hue stratum: 8 classes, chance 1/8 (BatchNorm in training mode)."""
    labelled = vt.data.as_dataset(vt.data.tetrominoes(torch.arange(0, 163840, 40)), label="hue")  # 4,096 images
    train_set, test_set = vt.data.split(labelled, 0.25, seed=0)
    cfg = vt.TrainConfig(model=vt.ModelConfig(architecture="conv4", channels=16, num_classes=8),
                         objective=vt.TaskConfig("classification"), steps=120, batch_size=32, seed=1,
                         optimizer=vt.OptimizerConfig(name="sgd", lr=0.01, momentum=0.9), eval_every=60)
    run = vt.train(cfg, train_set, tmp_path / "clf", eval_data=test_set, progress=False)
    evals = [m for m in run.metrics if "eval_accuracy" in m]
    assert [m["step"] for m in evals] == [60, 120]
    assert evals[-1]["eval_accuracy"] > 0.5, evals
    h = run.history
    assert {"loss", "cross_entropy", "accuracy"} <= set(h) and torch.equal(h["loss"], h["cross_entropy"])
    pred = run.model().predict(test_set.float_images())  # the loaded model is in eval mode
    acc = float((pred == test_set.labels).double().mean())
    assert acc == pytest.approx(evals[-1]["eval_accuracy"], abs=1e-6)


_KILLED_RUN = textwrap.dedent("""
    import sys, torch, vaetransfer as vt
    sys.path.insert(0, {tests!r})
    from test_training_core import _clf_config
    ds = vt.data.as_dataset(vt.data.dsprites(torch.arange(0, 737280, 90)), label="shape")
    train_set, test_set = vt.data.split(ds, 0.25, seed=0)
    torch.set_num_threads(1)
    vt.train(_clf_config(steps=100000, snapshot_every=7, threads=1), train_set, {out!r}, progress=False)
""")


def test_sigkill_in_a_classifier_run_resumes_bit_for_bit(shapes, tmp_path):
    train_set, _ = shapes
    out = tmp_path / "killed"
    script = _KILLED_RUN.format(tests=os.path.dirname(__file__), out=str(out))
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            snaps = list((out / "snapshots").glob("step_*.pt")) if (out / "snapshots").exists() else []
            if len(snaps) >= 3:
                break
            assert proc.poll() is None, "the training process ended early"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    run = vt.load_run(out)
    cut = run.step
    assert cut >= 21 and cut % 7 == 0
    steps = cut + 12
    # Resume the killed run to `steps` (same config but for the length), and run it uninterrupted.
    cfg = json.loads((out / "config.json").read_text())
    cfg["steps"] = steps
    (out / "config.json").write_text(json.dumps(cfg))
    torch.set_num_threads(1)
    resumed = vt.train(_clf_config(steps=steps, snapshot_every=7, threads=1), train_set, out, progress=False)
    full = vt.train(_clf_config(steps=steps, snapshot_every=7, threads=1), train_set, tmp_path / "full", progress=False)
    a, b = full.history, resumed.history
    assert a["step"].tolist() == b["step"].tolist() == list(range(1, steps + 1))
    for col in a:
        assert torch.equal(a[col], b[col]), col
    sa, sb = full.model().state_dict(), resumed.model().state_dict()
    assert any("running_mean" in k for k in sa)
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def test_l2_regulariser_column_and_gradient(tmp_path):
    data = torch.rand(32, 6, generator=torch.Generator().manual_seed(0))
    labels = torch.arange(32) % 2
    model = vt.ModelConfig(architecture="mlp-classifier", input_shape=(6,), hidden=(4,), num_classes=2)
    lam, lr = 0.3, 0.1
    base = dict(model=model, objective=vt.TaskConfig("classification"), steps=1, batch_size=32,
                optimizer=vt.OptimizerConfig(name="sgd", lr=lr))
    plain = vt.train(vt.TrainConfig(**base), (data, labels), tmp_path / "plain", progress=False)
    reg = vt.RegularizerConfig("l2", weight=lam, label="decay", groups=["encoder"])
    with_l2 = vt.train(vt.TrainConfig(**base, regularizers=(reg,)), (data, labels), tmp_path / "l2", progress=False)
    theta0 = vt.build_model(model, seed=0).state_dict()
    penalised = set(vt.build_model(model).group("encoder"))
    h = with_l2.history
    assert "decay" in h and float(h["decay"][0]) == pytest.approx(
        sum(float(theta0[k].double().square().sum()) for k in penalised), rel=1e-6)
    assert float(h["loss"][0]) == pytest.approx(float(plain.history["loss"][0]) + lam * float(h["decay"][0]), rel=1e-6)
    a, b = plain.model().state_dict(), with_l2.model().state_dict()
    for k in a:  # one SGD step: θ₁ − θ₁' = lr · 2λ θ₀ on the penalised parameters only
        expected = lr * 2 * lam * theta0[k] if k in penalised else torch.zeros_like(theta0[k])
        assert torch.allclose(a[k] - b[k], expected, atol=1e-6), k
    with pytest.raises(vt.ArgumentError) as e:
        vt.train(vt.TrainConfig(**base, regularizers=(vt.RegularizerConfig("l1"),)), (data, labels), tmp_path / "x",
                 progress=False)
    assert e.value.argument == "regularizer"


def test_schedules_follow_their_formulas():
    lin = vt.schedules.make_schedule(vt.ScheduleConfig("linear", start=0.5, end=2.0, steps=10, delay=5))
    for s in range(0, 30):
        expected = 0.5 if s < 5 else 0.5 + 1.5 * min(1.0, (s - 5) / 10)
        assert lin.value(s) == pytest.approx(expected, abs=1e-15)
    cyc = vt.schedules.make_schedule(vt.ScheduleConfig("cyclical", start=0.0, end=1.0, period=8, ratio=0.5, cycles=2))
    values = [cyc.value(s) for s in range(24)]
    assert values[:8] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0, 1.0]
    assert values[8:16] == values[:8] and values[16:] == [1.0] * 8  # reaches β = 1 each cycle, then stays
    assert vt.schedules.make_schedule(3.0).value(1000) == 3.0
    for cfg, arg in [(vt.ScheduleConfig("cosine"), "schedule"), (vt.ScheduleConfig("linear", steps=0), "steps"),
                     (vt.ScheduleConfig("cyclical", ratio=1.5), "ratio"), (vt.ScheduleConfig("linear", strat=0), "strat")]:
        with pytest.raises(vt.ArgumentError) as e:
            vt.schedules.make_schedule(cfg)
        assert e.value.argument == arg


def test_scheduled_kl_weight_reaches_the_loss(tmp_path):
    data = torch.rand(64, 12, generator=torch.Generator().manual_seed(0))
    model = vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(8,), latent_dim=2)
    cfg = vt.TrainConfig(model=model, objective=vt.TaskConfig("beta-vae", beta=4.0), steps=12, batch_size=16,
                         schedules={"beta": vt.ScheduleConfig("linear", start=0.0, end=4.0, steps=8)})
    h = vt.train(cfg, data, tmp_path / "warm", progress=False).history
    betas = [4.0 * min(1.0, s / 8) for s in range(12)]
    assert h["beta"].tolist() == pytest.approx(betas)
    assert h["latent_penalty"].tolist() == pytest.approx((h["beta"] * h["kl"]).tolist(), rel=1e-6)
    ann = vt.train(vt.TrainConfig(model=model, objective=vt.TaskConfig("annealed-vae", c_max=6.0, iteration_threshold=4),
                                  steps=6, batch_size=16), data, tmp_path / "ann", progress=False).history
    assert ann["capacity"].tolist() == pytest.approx([0.0, 1.5, 3.0, 4.5, 6.0, 6.0])
    with pytest.raises(vt.ArgumentError) as e:
        vt.train(vt.TrainConfig(model=model, steps=2, schedules={"gamma": vt.ScheduleConfig("constant")}), data,
                 tmp_path / "bad", progress=False)
    assert e.value.argument == "schedules"


def test_freeze_phase_keeps_the_group_bit_identical(tmp_path):
    data = torch.rand(64, 12, generator=torch.Generator().manual_seed(0))
    model = vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(8,), latent_dim=2)
    cfg = vt.TrainConfig(model=model, steps=10, batch_size=16, snapshot_every=1, optimizer=vt.OptimizerConfig(lr=1e-2),
                         phases=(vt.PhaseConfig(5, ("decoder",)),))
    run = vt.train(cfg, data, tmp_path / "phases", progress=False)
    init = vt.build_model(model, seed=0).state_dict()
    decoder = set(vt.build_model(model).group("decoder"))
    for step in range(1, 6):
        s = run.model(step).state_dict()
        for k in s:
            assert torch.equal(s[k], init[k]) == (k in decoder), (step, k)
    last = run.model(10).state_dict()
    assert all(not torch.equal(last[k], init[k]) for k in decoder)  # trained in the second phase


def test_evaluation_does_not_change_the_trajectory(shapes, tmp_path):
    train_set, test_set = shapes
    small_test = test_set.subset(range(300))
    a = vt.train(_clf_config(steps=20), train_set, tmp_path / "a", progress=False)
    b = vt.train(_clf_config(steps=20, eval_every=5), train_set, tmp_path / "b", eval_data=small_test, progress=False)
    for col in a.history:
        assert torch.equal(a.history[col], b.history[col]), col
    assert [m["step"] for m in b.metrics] == [5, 10, 15, 20]
    assert all(0 <= m["eval_accuracy"] <= 1 and m["eval_loss"] > 0 for m in b.metrics)
    sa, sb = a.model().state_dict(), b.model().state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)  # BatchNorm statistics untouched by evaluation


def test_evaluation_leaves_a_vae_trajectory_and_its_noise_untouched(tmp_path):
    # A β-VAE draws noise every step: evaluation must not consume the training noise stream.
    x = torch.rand(256, 12)
    model = vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(16,), latent_dim=3)
    cfg = dict(model=model, steps=30, batch_size=32, snapshot_every=10, optimizer=vt.OptimizerConfig(lr=1e-3))
    a = vt.train(vt.TrainConfig(**cfg), x, tmp_path / "a", progress=False)
    b = vt.train(vt.TrainConfig(**cfg, eval_every=7), x, tmp_path / "b", eval_data=x[:64], progress=False)
    for col in a.history:
        assert torch.equal(a.history[col], b.history[col]), col
    assert [m["step"] for m in b.metrics] == [7, 14, 21, 28]


def test_a_bad_regulariser_group_fails_before_the_run_directory_is_written(tmp_path):
    x = torch.rand(64, 12)
    model = vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(8,), latent_dim=2)
    bad = vt.TrainConfig(model=model, steps=5, regularizers=(vt.RegularizerConfig("l2", groups=["decodr"]),))
    with pytest.raises(vt.ArgumentError) as info:
        vt.train(bad, x, tmp_path / "run", progress=False)
    assert info.value.argument == "groups" and not (tmp_path / "run").exists()
    good = vt.TrainConfig(model=model, steps=5, regularizers=(vt.RegularizerConfig("l2", groups=["decoder"]),))
    assert vt.train(good, x, tmp_path / "run", progress=False).finished  # the directory is still usable
    clash = vt.TrainConfig(model=model, steps=5, regularizers=(vt.RegularizerConfig("l2", label="kl"),))
    with pytest.raises(vt.ArgumentError):
        vt.train(clash, x, tmp_path / "clash", progress=False)
    scheduled = vt.TrainConfig(model=model, steps=5, schedules={"beta": vt.ScheduleConfig("linear", start=0.0, end=1.0,
                                                                                            steps=5)},
                               regularizers=(vt.RegularizerConfig("l2", label="beta"),))
    with pytest.raises(vt.ArgumentError) as info:
        vt.train(scheduled, x, tmp_path / "scheduled", progress=False)
    assert "beta" in str(info.value)


def test_resume_drops_a_history_row_torn_by_a_kill(tmp_path):
    x = torch.rand(64, 12)
    model = vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(8,), latent_dim=2)
    cfg = vt.TrainConfig(model=model, steps=20, batch_size=16, snapshot_every=10)
    whole = vt.train(cfg, x, tmp_path / "whole", progress=False).history
    part = vt.TrainConfig(**{**cfg.__dict__, "steps": 20})
    run_dir = tmp_path / "torn"
    vt.train(vt.TrainConfig(**{**cfg.__dict__, "steps": 10}), x, tmp_path / "ten", progress=False)
    import shutil
    shutil.copytree(tmp_path / "ten", run_dir)
    (run_dir / "config.json").write_text((tmp_path / "whole" / "config.json").read_text())
    with open(run_dir / "history.csv", "a") as f:
        f.write("11,12.5\n1\n\nnot,a,row\n")  # a torn row, a stray digit, an empty and a foreign line
    resumed = vt.train(part, x, run_dir, progress=False).history
    for col in whole:
        assert torch.equal(whole[col], resumed[col]), col


def test_unknown_names_are_named_errors(tmp_path):
    data = torch.rand(8, 12)
    model = vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(4,), latent_dim=2)
    cases = [
        (vt.TrainConfig(model=model, steps=1, objective=vt.TaskConfig("vqvae")), "objective"),
        (vt.TrainConfig(model=model, steps=1, objective=vt.TaskConfig("beta-vae", likelihood="poisson")), "likelihood"),
        (vt.TrainConfig(model=model, steps=1, schedules={"beta": vt.ScheduleConfig("warmup")}), "schedule"),
        (vt.TrainConfig(model=model, steps=1, objective=vt.TaskConfig("classification")), "objective"),
        (vt.TrainConfig(model=model, steps=1, phases=(vt.PhaseConfig(2, ("dekoder",)),)), "phases"),
    ]
    for cfg, arg in cases:
        with pytest.raises(vt.ArgumentError) as e:
            vt.train(cfg, data, tmp_path / "bad", progress=False)
        assert e.value.argument == arg, (cfg, e.value)
        assert not (tmp_path / "bad").exists()
    with pytest.raises(vt.ArgumentError) as e:
        vt.objectives.negative_log_likelihood(torch.rand(2, 3), torch.rand(2, 3), "poisson")
    assert e.value.argument == "likelihood"
    clf = vt.ModelConfig(architecture="mlp-classifier", input_shape=(12,), num_classes=2)
    with pytest.raises(vt.ArgumentError) as e:  # labels needed
        vt.train(vt.TrainConfig(model=clf, objective=vt.TaskConfig("classification"), steps=1), data,
                 tmp_path / "bad", progress=False)
    assert e.value.argument == "labels"
    with pytest.raises(vt.ArgumentError) as e:  # labels outside [0, num_classes)
        vt.train(vt.TrainConfig(model=clf, objective=vt.TaskConfig("classification"), steps=1),
                 (data, torch.arange(8)), tmp_path / "bad", progress=False)
    assert e.value.argument == "labels"


def test_registries_are_read_from_the_core():
    tasks = {e["name"]: e for e in vt.objectives.registered()}
    assert {"beta-vae", "beta-tc-vae", "annealed-vae", "dip-vae-ii", "classification"} <= set(tasks)
    assert vt.objectives.OBJECTIVES == vt.objectives.objective_names("vae")
    assert "classification" not in vt.objectives.OBJECTIVES
    assert {p["name"] for p in tasks["beta-tc-vae"]["params"]} >= {"beta", "tc_sampling", "likelihood", "report_tc"}
    assert "l2" in {e["name"] for e in vt.regularizers.registered()}
    assert {"constant", "linear", "cyclical"} <= {e["name"] for e in vt.schedules.registered()}
    assert vt.TaskConfig("beta-tc", beta=3).canonical_name() == "beta-tc-vae"
    assert vt.TaskConfig("annealed").gamma == 1000.0  # unset parameters read the core's default
