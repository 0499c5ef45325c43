"""Training runs under faults: two writers, torn records, damaged or foreign snapshots, interrupts,
bad data, file modes — each test sits at the spot of a fault a probe found."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
import torch

import vaetransfer as vt
from vaetransfer._C import ArgumentError
from vaetransfer.io import CorruptFileWarning, TornRecordWarning

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(**kw) -> vt.TrainConfig:
    base = dict(model=vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(16,), latent_dim=3),
                steps=30, batch_size=8, seed=3, snapshot_every=10, threads=1)
    base.update(kw)
    return vt.TrainConfig(**base)


def _data(n: int = 64) -> torch.Tensor:
    return torch.rand(n, 12, generator=torch.Generator().manual_seed(0))


def _same_weights(a: vt.Run, b: vt.Run) -> None:
    sa, sb = a.model().state_dict(), b.model().state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


# A training process for the tests below: trains `steps` steps (no progress bar) into OUT, after
# printing "ready" (imports done). Data and config are those of _config/_data.
_TRAINER = textwrap.dedent("""
    import os, sys, time, torch
    sys.path.insert(0, {tests!r})
    from test_reliability_train import _config, _data
    import vaetransfer as vt
    torch.set_num_threads(1)
    print("ready", flush=True)
    while {go!r} and not os.path.exists({go!r}):  # started together when asked
        time.sleep(0.005)
    vt.train(_config(steps={steps}, snapshot_every={every}), _data(), {out!r}, progress={progress})
""")


def _start_trainer(out, steps: int, every: int, go: str = "", progress: bool = False) -> subprocess.Popen:
    script = _TRAINER.format(tests=os.path.join(ROOT, "tests"), out=str(out), steps=steps, every=every, go=go,
                             progress=progress)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert proc.poll() is None, f"the training process ended early: {proc.stderr.read()}"
        assert time.time() < deadline, "timed out"
        time.sleep(0.02)


# ------------------------------------------------------------------------- one writer per run

def test_a_second_process_training_the_same_run_is_refused_at_once(tmp_path):
    out = tmp_path / "run"
    proc = _start_trainer(out, steps=100_000, every=0)
    try:
        _wait_for(lambda: (out / "data.json").exists(), proc)  # the first holds the lock: it wrote its files
        start = time.perf_counter()
        with pytest.raises(ArgumentError) as e:
            vt.train(_config(steps=100_000, snapshot_every=0), _data(), out, progress=False)
        assert time.perf_counter() - start < 5  # refused at once, not after waiting
        assert e.value.argument == "out_dir" and "another process is training a run" in str(e.value)
        # Reading a run while it is written never blocks.
        assert vt.load_run(out).config.steps == 100_000
    finally:
        proc.kill()
        proc.wait(30)
    # The kernel released the killed writer's lock: the run can be taken over (and finished).
    finished = vt.train(_config(steps=40), _data(), tmp_path / "again", progress=False)
    assert finished.history["step"].tolist() == list(range(1, 41))


def test_two_trainings_into_one_directory_leave_one_clean_history(tmp_path):
    out = tmp_path / "run"
    go = tmp_path / "go"
    procs = [_start_trainer(out, steps=2000, every=500, go=str(go)) for _ in range(2)]
    go.touch()
    codes = [p.wait(120) for p in procs]
    errors = [p.stderr.read() for p in procs]
    assert sorted(codes) == [0, 1], errors  # one trained, one was refused with a named error
    assert "argument 'out_dir'" in next(e for c, e in zip(codes, errors) if c)
    run = vt.load_run(out)
    assert run.history["step"].tolist() == list(range(1, 2001))  # not twice as many rows


# ------------------------------------------------------------------------- torn records

def test_a_torn_history_row_is_dropped_with_a_warning_and_cut_on_resume(tmp_path):
    out = tmp_path / "run"
    vt.train(_config(steps=20), _data(), out, progress=False)
    path = out / "history.csv"
    lines = path.read_text().splitlines()
    ncols = len(lines[0].split(","))
    path.write_text("\n".join(lines) + "\n" + lines[-1][: len(lines[-1]) // 3])  # a write cut by a kill
    with pytest.warns(TornRecordWarning, match="torn"):
        h = vt.load_run(out).history
    assert len(h) == ncols and h["step"].tolist() == list(range(1, 21))  # every column, every whole row
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:5] + "\n")  # torn, then a newline
    with pytest.warns(TornRecordWarning):
        assert vt.load_run(out).history["step"].tolist() == list(range(1, 20))
    # Resumed from step 10, the run cuts the torn row and rewrites what follows the snapshot.
    (out / "snapshots" / "step_00000020.pt").unlink()
    resumed = vt.train(_config(steps=20), _data(), out, progress=False)
    reference = vt.train(_config(steps=20), _data(), tmp_path / "ref", progress=False)
    a, b = resumed.history, reference.history
    assert a.keys() == b.keys()
    for col in a:
        assert torch.equal(a[col], b[col]), col


def test_a_torn_metrics_record_neither_breaks_reading_nor_resuming(tmp_path):
    out = tmp_path / "run"
    cfg = _config(steps=20, eval_every=5)
    vt.train(cfg, _data(), out, eval_data=_data(16), progress=False)
    path = out / "metrics.jsonl"
    text = path.read_text()
    path.write_text(text + text.splitlines()[-1][:9])  # what a kill mid-append leaves
    with pytest.warns(TornRecordWarning):
        assert [m["step"] for m in vt.load_run(out).metrics] == [5, 10, 15, 20]
    (out / "snapshots" / "step_00000020.pt").unlink()  # resume from step 10: records past it go again
    with pytest.warns(TornRecordWarning):
        run = vt.train(cfg, _data(), out, eval_data=_data(16), progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [m["step"] for m in run.metrics] == [5, 10, 15, 20]
    assert path.read_text() == text


def test_a_corrupt_record_before_the_last_is_named(tmp_path):
    out = tmp_path / "run"
    vt.train(_config(steps=20, eval_every=5), _data(), out, eval_data=_data(16), progress=False)
    path = out / "metrics.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:4]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ArgumentError, match="metrics.jsonl.*corrupt.*line 2") as e:
        vt.load_run(out).metrics
    assert e.value.argument == "out_dir"


# ------------------------------------------------------------------------- what is resumed

def _flip_tensor_byte(path) -> None:
    """Flips one bit inside the stored tensor data (not the pickle structure, which would not parse)."""
    from vaetransfer.train import load_snapshot

    blob = bytearray(path.read_bytes())
    w = load_snapshot(path)["model"]["enc1.weight"].contiguous()  # 16×12 floats, stored whole in the file
    raw = w.numpy().tobytes()
    at = bytes(blob).find(raw)
    assert at >= 0, "the tensor's bytes were not found in the snapshot"
    blob[at + 17] ^= 0x04
    path.write_bytes(bytes(blob))


def test_a_flipped_byte_in_a_snapshot_is_caught_and_resume_falls_back(tmp_path):
    out = tmp_path / "run"
    vt.train(_config(steps=20), _data(), out, progress=False)
    newest = out / "snapshots" / "step_00000020.pt"
    _flip_tensor_byte(newest)
    with pytest.raises(ArgumentError, match="checksum") as e:
        vt.load_run(out).model()
    assert e.value.argument == "path" and "step_00000020.pt" in str(e.value)
    from vaetransfer.train import load_snapshot
    with pytest.raises(ArgumentError, match="checksum") as e:   # load_snapshot verifies what it returns
        load_snapshot(newest)
    assert e.value.argument == "path"
    # Resume sets the damaged snapshot aside, warns, and continues from step 10.
    with pytest.warns(CorruptFileWarning, match="step_00000020.pt.*checksum"):
        run = vt.train(_config(steps=20), _data(), out, progress=False)
    assert (out / "snapshots" / "step_00000020.pt.corrupt").exists()
    assert [s for s, _ in run.snapshots()] == [10, 20]
    _same_weights(run, vt.train(_config(steps=20), _data(), tmp_path / "ref", progress=False))


def test_an_unreadable_snapshot_is_named_not_a_unicode_error(tmp_path):
    out = tmp_path / "run"
    vt.train(_config(steps=10), _data(), out, progress=False)
    path = out / "snapshots" / "step_00000010.pt"
    blob = bytearray(path.read_bytes())
    for i in range(0, len(blob), 97):
        blob[i] = 0xFF
    path.write_bytes(bytes(blob))
    with pytest.raises(ArgumentError) as e:
        vt.load_run(out).model()
    assert e.value.argument == "path" and "step_00000010.pt" in str(e.value)
    with pytest.warns(CorruptFileWarning):  # no readable snapshot is left: the run starts afresh
        run = vt.train(_config(steps=10), _data(), out, progress=False)
    _same_weights(run, vt.train(_config(steps=10), _data(), tmp_path / "ref", progress=False))


def test_snapshots_without_their_config_are_refused(tmp_path):
    foreign = vt.train(_config(steps=10, seed=9), _data(), tmp_path / "foreign", progress=False)
    out = tmp_path / "run"
    (out / "snapshots").mkdir(parents=True)
    for _, path in foreign.snapshots():
        os.link(path, out / "snapshots" / os.path.basename(path))
    with pytest.raises(ArgumentError, match="snapshots but no config.json") as e:
        vt.train(_config(steps=20), _data(), out, progress=False)
    assert e.value.argument == "out_dir"


def test_a_snapshot_of_another_config_is_refused_by_its_hash(tmp_path):
    foreign = vt.train(_config(steps=10, seed=9), _data(), tmp_path / "foreign", progress=False)
    out = tmp_path / "run"
    vt.train(_config(steps=20, snapshot_every=5), _data(), out, progress=False)
    for step in (10, 15, 20):
        (out / "snapshots" / f"step_{step:08d}.pt").unlink()
    os.link(foreign.snapshots()[-1][1], out / "snapshots" / "step_00000010.pt")  # seed 9's step 10
    with pytest.raises(ArgumentError, match="another config") as e:
        vt.train(_config(steps=20, snapshot_every=5), _data(), out, progress=False)
    assert e.value.argument == "out_dir"


def test_truncated_state_files_are_named(tmp_path):
    out = tmp_path / "run"
    vt.train(_config(steps=10), _data(), out, progress=False)
    for name in ("data.json", "config.json"):
        path = out / name
        good = path.read_text()
        path.write_text(good[: len(good) // 2])
        with pytest.raises(ArgumentError, match=f"{name}.*corrupt") as e:
            vt.train(_config(steps=10), _data(), out, progress=False)
        assert e.value.argument == "out_dir"
        path.write_text("[]")
        with pytest.raises(ArgumentError, match="expected an object"):
            vt.train(_config(steps=10), _data(), out, progress=False)
        path.write_text(good)


# ------------------------------------------------------------------------- interrupts

# SIGTERM raises vaetransfer.interrupts.Interrupted, a KeyboardInterrupt: uncaught in a script, Python
# exits 1 with its traceback (the command line exits 143).
@pytest.mark.parametrize("sig, code, progress", [(signal.SIGINT, -signal.SIGINT, False),
                                                 (signal.SIGTERM, 1, False),
                                                 (signal.SIGINT, -signal.SIGINT, True)])
def test_an_interrupt_stops_training_within_a_second_and_leaves_a_resumable_run(tmp_path, sig, code, progress):
    out = tmp_path / "run"
    steps = 100_000
    proc = _start_trainer(out, steps=steps, every=0, progress=progress)  # no snapshot until the end
    try:
        _wait_for(lambda: (out / "data.json").exists(), proc)
        time.sleep(1.0)  # well into the loop
        sent = time.perf_counter()
        proc.send_signal(sig)
        # Stopped = the snapshot of the step reached is on disk (the interpreter's exit comes after).
        _wait_for(lambda: any((out / "snapshots").glob("step_*.pt")), proc, timeout=20)
        stopped = time.perf_counter() - sent
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    err = proc.stderr.read()
    assert proc.returncode == code, err
    assert stopped < 1.0, f"stopped {stopped:.2f} s after the signal"
    assert "KeyboardInterrupt" in err if sig == signal.SIGINT else "Interrupted: stopped by SIGTERM" in err
    run = vt.load_run(out)
    reached = run.step
    assert 0 < reached < steps  # a snapshot of the step reached, though snapshot_every is 0
    assert run.history["step"].tolist() == list(range(1, reached + 1))
    # It resumes to the same weights as an uninterrupted run.
    torch.set_num_threads(1)
    target = reached + 7
    cfg = json.loads((out / "config.json").read_text())
    cfg["steps"] = target
    (out / "config.json").write_text(json.dumps(cfg))
    resumed = vt.train(_config(steps=target, snapshot_every=0), _data(), out, progress=False)
    _same_weights(resumed, vt.train(_config(steps=target, snapshot_every=0), _data(), tmp_path / "ref",
                                    progress=False))


# ------------------------------------------------------------------------- bad input

def test_nan_or_infinite_training_data_is_named_before_the_first_step(tmp_path):
    for bad in (float("nan"), float("inf")):
        data = _data()
        data[37, 3] = bad
        with pytest.raises(ArgumentError, match="NaN or infinite.*example 37") as e:
            vt.train(_config(), data, tmp_path / "bad", progress=False)
        assert e.value.argument == "data"
        assert not (tmp_path / "bad").exists()
        with pytest.raises(ArgumentError) as e:
            vt.train(_config(), _data(), tmp_path / "bad", eval_data=data, progress=False)
        assert e.value.argument == "eval_data"


def test_train_cli_refuses_n_out_of_range_and_an_out_that_is_a_file(tmp_path, capsys):
    from vaetransfer.cli import main

    for n in ("-3", "99999999"):
        assert main(["train", "--dataset", "dsprites", "--n", n, "--steps", "1", "--out", str(tmp_path / "r"),
                     "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "argument 'n'" in err and n in err
    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["train", "--dataset", "dsprites", "--n", "64", "--steps", "1", "--out", str(afile), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "argument 'out_dir'" in err and "is a file" in err
    assert afile.read_text() == "x"


def test_written_files_follow_the_umask(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys, torch
        sys.path.insert(0, {os.path.join(ROOT, "tests")!r})
        from test_reliability_train import _config, _data
        import vaetransfer as vt
        os.umask({{umask}})
        vt.train(_config(steps=10, eval_every=5, keep_best=True), _data(), sys.argv[1], eval_data=_data(16),
                 progress=False)
    """)
    for umask in (0o022, 0o002):
        out = tmp_path / f"run{umask:o}"
        subprocess.run([sys.executable, "-c", script.format(umask=umask), str(out)], check=True, timeout=120)
        files = [p for p in out.rglob("*") if p.is_file() and p.name != ".lock"]
        assert {p.name for p in files} >= {"config.json", "data.json", "history.csv", "metrics.jsonl", "best.pt",
                                           "best.json", "step_00000010.pt"}
        for p in files:
            assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask, p


def test_damaged_weight_files_are_named(tmp_path):
    run = vt.train(_config(steps=10, eval_every=5, keep_best=True), _data(), tmp_path / "run", eval_data=_data(16),
                   progress=False)
    best = tmp_path / "run" / "best.pt"
    best.write_bytes(best.read_bytes()[:100])
    with pytest.raises(ArgumentError, match="best.pt.*corrupt") as e:
        run.model("best")
    assert e.value.argument == "out_dir"
    with pytest.raises(ArgumentError, match="best.pt.*corrupt") as e:
        vt.train(_config(steps=10, init_from=str(best)), _data(), tmp_path / "next", progress=False)
    assert e.value.argument == "init_from"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_train_command_stops_on_a_signal_with_one_line_and_128_plus_the_signal(tmp_path, sig):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "vaetransfer", "train", "--dataset", "dsprites", "--n", "256",
                             "--steps", "100000", "--threads", "1", "--quiet", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (out / "data.json").exists(), proc, timeout=120)
        time.sleep(0.5)
        proc.send_signal(sig)
        assert proc.wait(30) == 128 + sig
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.stderr.read().strip() == "vaetransfer train: interrupted; the same command resumes"
    assert vt.load_run(out).step > 0


def test_only_damaged_snapshots_are_set_aside(tmp_path):
    """A snapshot that cannot be opened (here: a directory in its place) is an error, not damage:
    resuming stops instead of setting it aside and falling back."""
    out = tmp_path / "run"
    vt.train(_config(steps=20), _data(), out, progress=False)
    (out / "snapshots" / "step_00000020.pt").unlink()
    (out / "snapshots" / "step_00000020.pt").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptFileWarning)
        with pytest.raises(ArgumentError, match="cannot read snapshot.*step_00000020.pt") as e:
            vt.train(_config(steps=20), _data(), out, progress=False)
    assert e.value.argument == "path"
    assert not list((out / "snapshots").glob("*.corrupt"))
