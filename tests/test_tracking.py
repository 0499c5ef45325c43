"""Experiment tracking (vaetransfer.tracking): TensorBoard event files read back with TensorBoard's own
reader, the callback interface, W&B offline and MLflow local (where their libraries are installed),
trackers reaching a sweep's workers, event files for runs made before."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

import vaetransfer as vt
from vaetransfer import sweep, tracking
from vaetransfer.cli import main as cli_main
from vaetransfer.studies import Execution
from vaetransfer.tensorboard_export import export_tensorboard

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                        reason="the tensorboard package (requirements.txt) reads the event files")


def _setup(steps=12):
    data = vt.data.tetrominoes(range(0, 163_840, 320))  # 512 images
    train_set, held_out = vt.data.split(data, 0.25, seed=0)
    cfg = vt.TrainConfig(model=vt.ModelConfig("mlp", input_shape=(3, 32, 32), depth=1, width=16, latent_dim=3),
                         objective=vt.ObjectiveConfig(name="beta-vae", beta=4.0), steps=steps, batch_size=32,
                         eval_every=4, snapshot_every=4)
    return cfg, train_set, held_out


def _events(log_dir: Path):
    acc = event_accumulator.EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    return acc


def _f32(x) -> float:
    return float(torch.tensor(float(x), dtype=torch.float32))


def test_tensorboard_holds_the_history_evaluations_images_and_config_and_changes_nothing(tmp_path):
    cfg, train_set, held_out = _setup()
    run = vt.train(cfg, train_set, tmp_path / "tracked", eval_data=held_out, progress=False,
                   callbacks=[tracking.TensorBoardCallback(images=4)])
    plain = vt.train(cfg, train_set, tmp_path / "plain", eval_data=held_out, progress=False)
    for (k, a), (_, b) in zip(run.model().state_dict().items(), plain.model().state_dict().items()):
        assert torch.equal(a, b), k  # the callback never changes the trajectory
    acc = _events(tmp_path / "tracked" / "tensorboard")
    h = run.history
    for column in [k for k in h if k != "step"]:
        events = acc.Scalars(f"train/{column}")
        assert [e.step for e in events] == h["step"].long().tolist(), column
        assert [e.value for e in events] == [_f32(v) for v in h[column]], column
    evaluations = [m for m in run.metrics if "eval_loss" in m]
    for name in ("loss", "neg_elbo", "kl", "latent_penalty", "reconstruction"):
        events = acc.Scalars(f"eval/{name}")
        assert [(e.step, e.value) for e in events] == [(m["step"], _f32(m[f"eval_{name}"])) for m in evaluations]
    images = acc.Images("eval/reconstructions")
    assert [e.step for e in images] == [4, 8, 12] and images[0].height == 32 and images[0].width == 32 * 8
    assert [e.step for e in acc.Images("eval/samples")] == [4, 8, 12]
    config = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert json.loads(config.strip("`\n"))["objective"]["beta"] == 4.0
    final = {t: acc.Scalars(t)[-1].value for t in ("hparam/eval_neg_elbo", "hparam/loss")}
    assert final["hparam/eval_neg_elbo"] == _f32(evaluations[-1]["eval_neg_elbo"])
    assert final["hparam/loss"] == _f32(h["loss"][-1])


def test_a_resumed_run_logs_each_step_once(tmp_path):
    """A run killed after its snapshot at step 4 logged up to step 6; resumed, TensorBoard purges what
    came after the snapshot, so each step appears once, with the resumed (identical) values."""
    cfg, train_set, held_out = _setup()
    short = vt.TrainConfig.from_dict({**cfg.to_dict(), "steps": 6})
    vt.train(short, train_set, tmp_path / "run", eval_data=held_out, progress=False,
             callbacks=[tracking.TensorBoardCallback(images=0)])
    for step, path in vt.Run(tmp_path / "run").snapshots():
        if step > 4:
            Path(path).unlink()  # as a kill between steps 4 and 6 leaves it: steps 5, 6 were logged
    run = vt.train(cfg, train_set, tmp_path / "run", eval_data=held_out, progress=False,
                   callbacks=[tracking.TensorBoardCallback(images=0)])
    events = _events(tmp_path / "run" / "tensorboard").Scalars("train/loss")
    assert [e.step for e in events] == list(range(1, 13))
    assert [e.value for e in events] == [_f32(v) for v in run.history["loss"]]


class _Recorder(tracking.Callback):
    def __init__(self):
        self.events = []

    def on_train_begin(self, context):
        self.events.append(("begin", context.start_step, context.run_dir.name))

    def on_step(self, step, values):
        self.events.append(("step", step, values["loss"]))

    def on_evaluate(self, step, values):
        self.events.append(("evaluate", step, values["eval_loss"]))

    def on_train_end(self, run, error):
        self.events.append(("end", run.step, error))


def test_a_callback_is_told_of_every_step_then_its_evaluation_in_order(tmp_path):
    cfg, train_set, held_out = _setup(steps=8)
    rec = _Recorder()
    run = vt.train(cfg, train_set, tmp_path / "run", eval_data=held_out, progress=False, callbacks=[rec])
    kinds = [(e[0], e[1]) for e in rec.events]
    expected = [("begin", 0)]
    for s in range(1, 9):
        expected.append(("step", s))
        if s % 4 == 0:
            expected.append(("evaluate", s))
    assert kinds == expected + [("end", 8)]
    assert [_f32(e[2]) for e in rec.events if e[0] == "step"] == [_f32(v) for v in run.history["loss"]]
    assert rec.events[-1][2] is None


def test_trackers_are_named_and_checked(tmp_path):
    cfg, train_set, _ = _setup(steps=2)
    cfg = vt.TrainConfig.from_dict({**cfg.to_dict(), "eval_every": 0})
    with pytest.raises(TypeError, match="argument 'callbacks'"):
        vt.train(cfg, train_set, tmp_path / "a", progress=False, callbacks=tracking.TensorBoardCallback())
    with pytest.raises(ValueError, match="unknown tracker 'tensorbord'"):
        tracking.make_callbacks(["tensorbord"])
    with pytest.raises(ValueError, match="argument 'tracking'"):
        Execution(tracking=("nope",))
    assert Execution(tracking="tensorboard").tracking == ("tensorboard",)
    with tracking.using("tensorboard"):
        assert tracking.active() == ("tensorboard",)
        vt.train(cfg, train_set, tmp_path / "b", progress=False)
    assert tracking.active() == ()
    assert list((tmp_path / "b" / "tensorboard").glob("events.out.tfevents.*"))


def test_a_sweep_hands_its_trackers_to_every_worker(tmp_path):
    cfg, _, _ = _setup(steps=3)
    s = sweep.create(tmp_path / "sweep", "train",
                     {**cfg.to_dict(), "eval_every": 0, "snapshot_every": 0,
                      "data": {"name": "tetrominoes", "n": 256}}, grid={"seed": [0, 1]})
    s.run(workers=1, threads=1, progress=False, tracking="tensorboard")
    runs = [p.parent.parent for p in (tmp_path / "sweep").rglob("tensorboard/events.out.tfevents.*")]
    assert len(set(runs)) == 2
    for d in set(runs):
        events = _events(d / "tensorboard").Scalars("train/loss")
        assert [e.value for e in events] == [_f32(v) for v in vt.Run(d).history["loss"]]


def test_runs_made_before_get_event_files_from_their_files(tmp_path, capsys):
    cfg, train_set, held_out = _setup(steps=8)
    run = vt.train(cfg, train_set, tmp_path / "study" / "runs" / "a", eval_data=held_out, progress=False)
    assert not (run.out_dir / "tensorboard").exists()
    assert cli_main(["tensorboard", str(tmp_path / "study")]) == 0
    acc = _events(run.out_dir / "tensorboard")
    assert [e.value for e in acc.Scalars("train/neg_elbo")] == [_f32(v) for v in run.history["neg_elbo"]]
    assert [e.step for e in acc.Scalars("eval/loss")] == [4, 8]
    assert export_tensorboard([tmp_path / "study"]) == []  # written already: skipped
    assert export_tensorboard([tmp_path / "study"], overwrite=True) == [run.out_dir]
    assert cli_main(["tensorboard", str(tmp_path / "nothing-here")]) == 2


def test_wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is an optional extra (vaetransfer[wandb])")
    monkeypatch.setenv("WANDB_SILENT", "true")

    class Probe(tracking.WandbCallback):  # W&B's own view of the run, read just before it closes
        def on_train_end(self, run, error):
            self._commit()
            self.summary = {k: self.run.summary[k] for k in ("train/loss", "eval/neg_elbo")}
            self.config = dict(self.run.config)
            super().on_train_end(run, error)

    probe = Probe(project="test")
    cfg, train_set, held_out = _setup(steps=8)
    run = vt.train(cfg, train_set, tmp_path / "run", eval_data=held_out, progress=False, callbacks=[probe])
    offline = list((tmp_path / "run" / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and list(offline[0].glob("*.wandb"))  # what `wandb sync` uploads later
    assert _f32(probe.summary["train/loss"]) == _f32(run.history["loss"][-1])
    assert probe.summary["eval/neg_elbo"] == run.metrics[-1]["eval_neg_elbo"]
    assert probe.config["objective"]["beta"] == 4.0 and probe.run is None


def test_mlflow_local(tmp_path, monkeypatch):
    pytest.importorskip("mlflow", reason="mlflow is an optional extra (vaetransfer[mlflow])")
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3's local folder store, no server
    uri = (tmp_path / "mlruns").as_uri()
    cfg, train_set, held_out = _setup(steps=8)
    run = vt.train(cfg, train_set, tmp_path / "run", eval_data=held_out, progress=False,
                   callbacks=[tracking.MLflowCallback("test", tracking_uri=uri)])
    client = MlflowClient(tracking_uri=uri)
    [found] = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    assert found.info.status == "FINISHED" and found.data.params["objective.beta"] == "4.0"
    history = client.get_metric_history(found.info.run_id, "train/loss")
    assert [(m.step, _f32(m.value)) for m in sorted(history, key=lambda m: m.step)] == \
        [(int(s), _f32(v)) for s, v in zip(run.history["step"], run.history["loss"])]
    evals = client.get_metric_history(found.info.run_id, "eval/neg_elbo")
    assert sorted(m.step for m in evals) == [4, 8]
    assert os.environ["MLFLOW_ALLOW_FILE_STORE"] == "true"
