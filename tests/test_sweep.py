"""Sweeps: declaration and ids, the SQLite store, the local and Ray executors, kill and resume,
retries, Ctrl-C, analysis."""
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import vaetransfer
import vaetransfer.cli
from vaetransfer import sweep
from vaetransfer.sweep import Declaration, config_id
from vaetransfer.sweep.store import Store
from vaetransfer.train import OptimizerConfig, TrainConfig

SLEEP = "vaetransfer.sweep.calibration:sleep"
FAIL = "vaetransfer.sweep.calibration:fail"


def tiny_train_base(steps=40, snapshot_every=20, **data) -> dict:
    cfg = TrainConfig(model=vaetransfer.ModelConfig("mlp", input_shape=(3, 32, 32), latent_dim=3, depth=1, width=16),
                      objective=vaetransfer.TaskConfig("beta-vae"), optimizer=OptimizerConfig(lr=1e-3), steps=steps,
                      batch_size=16, snapshot_every=snapshot_every)
    return {**cfg.to_dict(), "data": {"name": "tetrominoes", "n": 256, **data}}


def data_sizes(run, train, test):
    """An ``evaluate`` hook of the train job (imported by the workers as test_sweep:data_sizes)."""
    return {"n_train": len(train), "n_test": len(test), "final_step": run.step}


def wait_for(predicate, timeout=60.0, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ------------------------------------------------------------------------------ declaration
def test_grid_times_zip_in_order_with_stable_ids():
    d = Declaration("function", {"function": SLEEP, "args": {"seconds": 0}},
                    grid={"a": [1, 2], "b": ["x", "y"]}, zip=[{"c": [10, 20], "d": [0.1, 0.2]}])
    runs = d.expand()
    assert len(runs) == 8
    assert [r.params for r in runs[:3]] == [{"a": 1, "b": "x", "c": 10, "d": 0.1}, {"a": 1, "b": "x", "c": 20, "d": 0.2},
                                            {"a": 1, "b": "y", "c": 10, "d": 0.1}]
    assert runs[0].config == {"function": SLEEP, "args": {"seconds": 0, "a": 1, "b": "x", "c": 10, "d": 0.1}}
    assert len({r.id for r in runs}) == 8
    # Key order of the base and of the axes does not change ids.
    d2 = Declaration("function", {"args": {"seconds": 0}, "function": SLEEP},
                     grid={"b": ["x", "y"], "a": [1, 2]}, zip=[{"d": [0.1, 0.2], "c": [10, 20]}])
    assert {r.id for r in d2.expand()} == {r.id for r in runs}
    # ... nor another Python session (hash randomisation) does.
    code = ("from vaetransfer.sweep import Declaration; import json, sys;"
            f"d = Declaration.from_dict(json.loads(sys.argv[1])); print(json.dumps([r.id for r in d.expand()]))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(d.to_dict())], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONHASHSEED="123"), check=True)
    assert json.loads(out.stdout) == [r.id for r in runs]
    assert runs[0].id == config_id(runs[0].config)


def test_train_ids_do_not_depend_on_int_or_float_spelling():
    base = tiny_train_base()
    a = Declaration("train", base, grid={"objective.beta": [4]}).expand()
    b = Declaration("train", base, grid={"objective.beta": [4.0]}).expand()
    assert a[0].id == b[0].id
    assert a[0].config["objective"]["beta"] == 4.0
    assert a[0].id != Declaration("train", base, grid={"objective.beta": [5]}).expand()[0].id


def test_a_zip_axis_may_repeat_a_value_paired_with_different_ones(tmp_path):
    s = sweep.create(tmp_path / "s", "train", tiny_train_base(),
                     zip=[{"seed": [1, 1, 2], "objective.beta": [1.0, 2.0, 1.0]}])
    assert [(r.params["seed"], r.params["objective.beta"]) for r in s.runs] == [(1, 1.0), (1, 2.0), (2, 1.0)]
    assert len({r.id for r in s.runs}) == 3


@pytest.mark.parametrize("grid, zip_, cls, argument", [
    ({"objective.betaa": [1.0]}, [], vaetransfer.ArgumentError, "objective.betaa"),
    ({"nope": [1]}, [], vaetransfer.ArgumentError, "nope"),
    ({"seed": ["x"]}, [], vaetransfer.ArgumentTypeError, "seed"),
    ({"objective.beta": ["big"]}, [], vaetransfer.ArgumentTypeError, "objective.beta"),
    ({"model.architecture": ["mlpp"]}, [], vaetransfer.ArgumentError, "model.architecture"),
    ({"data.name": ["mnist-nope"]}, [], vaetransfer.ArgumentError, "data.name"),
    ({"seed": 3}, [], vaetransfer.ArgumentTypeError, "seed"),
    ({"seed": []}, [], vaetransfer.ArgumentError, "seed"),
    ({"seed": [1, 1]}, [], vaetransfer.ArgumentError, "seed"),
    ({}, [{"seed": [1, 2], "objective.beta": [1.0]}], vaetransfer.ArgumentError, "zip[0]"),
    ({"seed": [1]}, [{"seed": [2]}], vaetransfer.ArgumentError, "seed"),
    ({}, [{"seed": [1, 1], "objective.beta": [2.0, 2.0]}], vaetransfer.ArgumentError, "zip[0]"),
])
def test_bad_axis_is_an_argument_error_naming_it_before_anything_runs(tmp_path, grid, zip_, cls, argument):
    with pytest.raises(cls) as info:
        sweep.create(tmp_path / "s", "train", tiny_train_base(), grid=grid, zip=zip_)
    assert getattr(info.value, "argument", None) == argument, str(info.value)
    assert not (tmp_path / "s").exists()


def test_unknown_job_and_bad_function_are_named(tmp_path):
    with pytest.raises(vaetransfer.ArgumentError) as info:
        sweep.create(tmp_path / "s", "trian", {})
    assert info.value.argument == "job"
    with pytest.raises(vaetransfer.ArgumentError) as info:
        sweep.create(tmp_path / "s", "function", {"function": "vaetransfer.sweep.calibration:nothing"})
    assert info.value.argument == "function"


def test_reopening_with_another_declaration_must_only_add_runs(tmp_path):
    base = {"function": SLEEP, "args": {"seconds": 0}}
    s = sweep.create(tmp_path, "function", base, grid={"value": [1, 2]})
    assert len(s.runs) == 2
    bigger = sweep.create(tmp_path, "function", base, grid={"value": [1, 2, 3]})  # adds a run: fine
    assert len(bigger.runs) == 3 and json.loads((tmp_path / "sweep.json").read_text())["grid"]["value"] == [1, 2, 3]
    with pytest.raises(vaetransfer.ArgumentError) as info:
        sweep.create(tmp_path, "function", base, grid={"value": [1, 4]})
    assert info.value.argument == "declaration"
    with pytest.raises(vaetransfer.ArgumentError):
        sweep.create(tmp_path, "function", {**base, "args": {"seconds": 0.5}}, grid={"value": [1, 2, 3]})
    assert sweep.open_sweep(tmp_path).declaration.grid == {"value": [1, 2, 3]}


# ------------------------------------------------------------------------------ local executor
def test_local_sweep_of_four_tiny_models(tmp_path):
    base = {**tiny_train_base(test_fraction=0.25), "eval_every": 20, "evaluate": "test_sweep:data_sizes"}
    s = sweep.create(tmp_path, "train", base,
                     grid={"objective.beta": [1.0, 4.0], "seed": [0, 1]})
    counts = s.run(workers=2, threads=1, progress=False)
    assert counts["done"] == 4 and counts["pending"] == counts["failed"] == 0
    rows = s.results()
    assert [r["name"] for r in rows] == ["objective.beta=1.0,seed=0", "objective.beta=1.0,seed=1",
                                         "objective.beta=4.0,seed=0", "objective.beta=4.0,seed=1"]
    for r, spec in zip(rows, s.runs):
        run = vaetransfer.load_run(s.run_dir(r["id"]))
        assert run.finished and run.config.seed == r["seed"] and run.config.objective.beta == r["objective.beta"]
        h = run.history
        assert r["loss"] == pytest.approx(float(h["loss"][-1])) and r["kl"] == pytest.approx(float(h["kl"][-1]))
        assert r["step"] == 40 and math.isfinite(r["eval_loss"])
        assert (r["n_train"], r["n_test"], r["final_step"]) == (192, 64, 40)  # the evaluate hook's metrics
        assert r["status"] == "done" and r["attempts"] == 1 and r["host"] and r["ended"] >= r["started"]
        assert (s.run_dir(r["id"]) / "result.json").exists()
    # A larger β gives a smaller KL at the same seed (the β-VAE trade-off, here after 40 steps).
    by = {(r["objective.beta"], r["seed"]): r for r in rows}
    assert by[(4.0, 0)]["kl"] < by[(1.0, 0)]["kl"] and by[(4.0, 1)]["kl"] < by[(1.0, 1)]["kl"]
    df = s.dataframe()
    assert list(df["seed"]) == [0, 1, 0, 1] and df.shape[0] == 4
    # The store holds the same rows; a second run() runs nothing.
    store = Store(tmp_path / "results.sqlite")
    try:
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert [json.loads(r[0])["seed"] for r in store.db.execute("SELECT config FROM runs ORDER BY position")] == \
            [0, 1, 0, 1]
    finally:
        store.close()
    mtimes = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.pt")}
    assert s.run(workers=2, progress=False)["done"] == 4
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.pt")} == mtimes
    g = sweep.group(rows, by="objective.beta", metric="kl")
    assert [x["objective.beta"] for x in g] == [1.0, 4.0] and all(x["n"] == 2 for x in g)


def test_failing_run_is_retried_then_recorded_while_others_finish(tmp_path):
    s = sweep.create(tmp_path, "function", {"function": SLEEP, "args": {"seconds": 0.05}},
                     zip=[{"fail_attempts": [0, 1, 5], "value": [1.0, 2.0, 3.0]}])
    counts = s.run(workers=2, retries=2, progress=False)
    rows = {r["value"]: r for r in s.results()}
    assert counts == {"pending": 0, "running": 0, "done": 2, "failed": 1, "diverged": 0}
    assert rows[1.0]["status"] == "done" and rows[1.0]["attempts"] == 1
    assert rows[2.0]["status"] == "done" and rows[2.0]["attempts"] == 2  # failed once, then succeeded
    assert rows[3.0]["status"] == "failed" and rows[3.0]["attempts"] == 3
    assert "probe failure on attempt 3 of 5 planned" in rows[3.0]["error"]
    assert "failed" in s.status_table()
    # retry_failed gives the failed run new attempts (it fails twice more, then succeeds).
    assert s.run(workers=1, retries=2, retry_failed=True, progress=False)["done"] == 3


def test_diverged_run_is_recorded_and_not_retried(tmp_path):
    base = tiny_train_base(steps=30, snapshot_every=0)
    base["optimizer"]["lr"] = 1e12
    base["objective"] = {"name": "beta-vae", "likelihood": "gaussian"}
    s = sweep.create(tmp_path, "train", base, grid={"seed": [0]})
    s.run(retries=3, progress=False)
    row = s.results()[0]
    assert row["status"] == "diverged" and row["attempts"] == 1 and row["error"]


def test_killed_worker_fails_its_attempt_and_is_replaced(tmp_path):
    s = sweep.create(tmp_path, "function", {"function": SLEEP, "args": {"seconds": 2.0}}, grid={"value": [1.0]})
    run_dir = s.run_dir(s.runs[0].id)

    def kill_first_worker():
        wait_for(lambda: (run_dir / "progress.json").exists(), what="the run to start")
        os.kill(json.loads((run_dir / "progress.json").read_text())["pid"], signal.SIGKILL)

    killer = threading.Thread(target=kill_first_worker)
    killer.start()
    counts = s.run(workers=1, retries=1, progress=False)
    killer.join()
    row = s.results()[0]
    assert counts["done"] == 1 and row["attempts"] == 2 and "died (killed by signal 9)" in row["error"]


def _driver(decl_path, out, *extra):
    return subprocess.Popen([sys.executable, "-m", "vaetransfer", "sweep", "run", str(decl_path), "--out", str(out),
                             "--quiet", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_of_the_driver_then_resume_equals_an_uninterrupted_sweep(tmp_path):
    base = tiny_train_base(steps=1500, snapshot_every=250)
    decl = Declaration("train", base, grid={"seed": [0, 1, 2, 3]})
    decl_path = tmp_path / "decl.json"
    decl_path.write_text(json.dumps(decl.to_dict()))
    out = tmp_path / "killed"
    runs = decl.expand()
    second = out / "runs" / runs[1].id
    proc = _driver(decl_path, out, "--workers", "1")
    try:
        def second_run_half_done():
            p = sweep.jobs.read_progress(second)
            return p is not None and p["step"] >= 600
        wait_for(second_run_half_done, timeout=240, what="the second run to pass step 600")
        proc.kill()
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    s = sweep.open_sweep(out)
    first = out / "runs" / runs[0].id
    assert (first / "result.json").exists()
    first_snaps = {p: p.stat().st_mtime_ns for p in (first / "snapshots").glob("*.pt")}
    early = {p: p.stat().st_mtime_ns for p in (second / "snapshots").glob("*.pt")}
    assert early and not (second / "result.json").exists()
    # The worker died with its driver: no process goes on writing the interrupted run.
    pid = sweep.jobs.read_progress(second)["pid"]
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or
             "zombie" in Path(f"/proc/{pid}/status").read_text().lower(), timeout=10, what="the worker to die")
    assert s.run(workers=2, progress=False)["done"] == 4
    assert {p: p.stat().st_mtime_ns for p in (first / "snapshots").glob("*.pt")} == first_snaps  # untouched
    assert {p: p.stat().st_mtime_ns for p in early} == early  # resumed from them, not redone
    assert s.results()[1]["attempts"] == 1  # the killed attempt was the driver's, not the run's

    clean = sweep.create(tmp_path / "clean", "train", base, grid={"seed": [0, 1, 2, 3]})
    clean.run(workers=2, progress=False)
    metric_keys = ("loss", "kl", "reconstruction", "step")
    for a, b in zip(s.results(), clean.results()):
        assert a["id"] == b["id"]
        assert {k: a[k] for k in metric_keys if k in a} == {k: b[k] for k in metric_keys if k in b}
    ha = vaetransfer.load_run(second).history
    hb = vaetransfer.load_run(clean.run_dir(runs[1].id)).history
    assert torch.equal(ha["loss"], hb["loss"])


def test_ctrl_c_stops_cleanly_and_rows_go_back_to_pending(tmp_path):
    decl = Declaration("function", {"function": SLEEP, "args": {"seconds": 60.0}}, grid={"value": [1.0, 2.0]})
    decl_path = tmp_path / "decl.json"
    decl_path.write_text(json.dumps(decl.to_dict()))
    out = tmp_path / "s"
    proc = _driver(decl_path, out, "--workers", "1")
    run_dir = out / "runs" / decl.expand()[0].id
    try:
        wait_for(lambda: (run_dir / "progress.json").exists(), what="the run to start")
        worker = json.loads((run_dir / "progress.json").read_text())["pid"]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    rows = sweep.open_sweep(out).results()
    assert [r["status"] for r in rows] == ["pending", "pending"] and rows[0]["attempts"] == 0
    wait_for(lambda: not Path(f"/proc/{worker}").exists(), timeout=10, what="the worker to stop")


def test_a_second_driver_is_refused(tmp_path):
    s = sweep.create(tmp_path, "function", {"function": SLEEP, "args": {"seconds": 0}}, grid={"value": [1.0]})
    import fcntl
    with open(tmp_path / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(vaetransfer.ArgumentError) as info:
            s.run(progress=False)
    assert info.value.argument == "out_dir"


def test_status_command_prints_the_table(tmp_path, capsys):
    s = sweep.create(tmp_path, "function", {"function": SLEEP, "args": {"seconds": 0}}, grid={"value": [1.0, 2.0]})
    s.run(progress=False)
    assert vaetransfer.cli.main(["sweep", "status", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 runs, 2 done" in out and "value=1.0" in out and s.runs[1].id in out
    assert vaetransfer.cli.main(["sweep", "results", str(tmp_path)]) == 0
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert [l["value"] for l in lines] == [1.0, 2.0]


def test_study_job_runs_a_study_per_run_and_checks_its_fields(tmp_path):
    from vaetransfer.studies.pipeline import scalars
    from vaetransfer.studies.sweep_job import STUDY_JOB

    base = {"study": "quickstart", "preset": "smoke",
            "config": {"procrustes": False, "same_seed_baseline": False, "steps": 10}}
    with pytest.raises(vaetransfer.ArgumentError) as info:
        sweep.create(tmp_path / "bad", STUDY_JOB, base, grid={"stepz": [5]})
    assert info.value.argument == "stepz"
    with pytest.raises(vaetransfer.ArgumentTypeError) as info:
        sweep.create(tmp_path / "bad", STUDY_JOB, base, grid={"betas": [[1.0, "x"]]})
    assert info.value.argument == "betas"
    with pytest.raises(vaetransfer.ArgumentError) as info:
        sweep.create(tmp_path / "bad", "nope:Nothing", base)
    assert info.value.argument == "job"
    s = sweep.create(tmp_path / "s", STUDY_JOB, base, grid={"seed": [3]})
    assert s.runs[0].config["config"]["seed"] == 3 and s.runs[0].config["config"]["steps"] == 10
    assert s.run(progress=False)["done"] == 1
    row = s.results()[0]
    run_dir = s.run_dir(row["id"])
    results = json.loads((run_dir / "results.json").read_text())
    assert json.loads((run_dir / "study.json").read_text())["config"]["seed"] == 3
    numbers = scalars(results["analysis"], depth=3)
    assert numbers
    for k, v in numbers.items():  # a metric named like a row field ("seconds") gets the prefix "metrics."
        assert row[f"metrics.{k}" if k in ("seconds", "id", "name", "status") else k] == pytest.approx(v), k
    assert row["findings_reproduced"] == sum(f["kind"] == "finding" and f["verdict"] == "reproduced" for f in results["findings"])


# ------------------------------------------------------------------------------ Ray
def test_ray_gives_the_local_results_and_survives_a_killed_worker(tmp_path):
    ray = pytest.importorskip("ray")
    base = tiny_train_base()
    grid = {"objective.beta": [1.0, 4.0], "seed": [0, 1]}
    local = sweep.create(tmp_path / "local", "train", base, grid=grid)
    local.run(workers=2, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    try:
        on_ray = sweep.create(tmp_path / "ray", "train", base, grid=grid)
        assert on_ray.run("ray", num_cpus=1, progress=False)["done"] == 4
        keys = ("id", "loss", "kl", "reconstruction", "step")
        assert [{k: r[k] for k in keys} for r in on_ray.results()] == [{k: r[k] for k in keys} for r in local.results()]

        killed = sweep.create(tmp_path / "kill", "function", {"function": SLEEP, "args": {"seconds": 3.0}},
                              grid={"value": [1.0, 2.0]})
        target = killed.run_dir(killed.runs[0].id)

        def kill_worker():
            wait_for(lambda: (target / "progress.json").exists(), what="the Ray task to start")
            os.kill(json.loads((target / "progress.json").read_text())["pid"], signal.SIGKILL)

        killer = threading.Thread(target=kill_worker)
        killer.start()
        counts = killed.run("ray", num_cpus=1, retries=2, progress=False)
        killer.join()
        rows = killed.results()
        assert counts["done"] == 2 and rows[0]["attempts"] == 2 and rows[1]["attempts"] == 1
        assert rows[0]["error"]  # the crash of the first attempt stays visible
    finally:
        ray.shutdown()
    assert not ray.is_initialized()


# ------------------------------------------------------------------------------ analysis
def test_group_gives_mean_and_standard_error_over_seeds():
    rows = [{"status": "done", "b": 1, "seed": s, "m": v} for s, v in enumerate([1.0, 2.0, 4.0])]
    rows += [{"status": "done", "b": 2, "seed": 0, "m": 5.0}, {"status": "failed", "b": 2, "seed": 1, "m": 100.0},
             {"status": "done", "b": 2, "seed": 2, "m": float("nan")}]
    g = sweep.group(rows, by="b", metric="m")
    assert g[0]["n"] == 3 and g[0]["mean"] == pytest.approx(7 / 3)
    sd = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64).std().item()
    assert g[0]["sem"] == pytest.approx(sd / math.sqrt(3))
    assert g[1]["n"] == 1 and g[1]["mean"] == 5.0 and math.isnan(g[1]["sem"])
    with pytest.raises(vaetransfer.ArgumentError):
        sweep.group(rows, by="nope", metric="m")
    ax = sweep.plot(rows, x="b", metric="m")
    assert ax.get_xlabel() == "b" and len(ax.lines) >= 1
