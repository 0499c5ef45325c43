"""Sweeps and studies under faults: two processes on one output, a corrupt store, a corrupt run
result or measurement, SIGINT/SIGTERM to a driver, and bad input — each named or recovered from,
never a traceback, never a stranded run."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import vaetransfer
from vaetransfer import cli, interrupts, studies, sweep
from vaetransfer.io import CorruptFileWarning
from vaetransfer.studies import pipeline
from vaetransfer.studies.kit import declarations

from test_sweep import wait_for  # noqa: E402 - the suite's one polling helper

SLEEP = "vaetransfer.sweep.calibration:sleep"

HELPERS = '''
"""Jobs and a study for tests/test_reliability_sweeps.py. A run appends "start PID" to its
executions.log, works until the file ``go`` exists (60 s at most), then appends "end"."""
import os
import time
from dataclasses import dataclass
from pathlib import Path

from vaetransfer.studies import Stage, Study


def work(run_dir, go):
    log = Path(run_dir) / "executions.log"
    with open(log, "a") as f:
        f.write(f"start {os.getpid()}\\n")
    deadline = time.time() + 60
    while not os.path.exists(go) and time.time() < deadline:
        time.sleep(0.02)
    with open(log, "a") as f:
        f.write("end\\n")


def slow_job(args, run_dir):
    work(run_dir, args["go"])
    return {"value": args["value"]}


@dataclass
class Config:
    values: tuple = (1.0, 2.0, 3.0)
    go: str = ""


PRESETS = {"smoke": Config(), "small": Config(), "medium": Config(), "paper": Config()}


def _measure(c, row, job):
    work(job.run_dir, c.go)
    return {"twice": 2 * row["value"]}


def _analyse(c, runs, ctx):
    return {"total": ctx.step("total", lambda: sum(r["twice"] for r in runs["work"]))}


STUDY = Study(name="slow", title="A slow study", config=Config, presets=PRESETS,
              stages=(Stage("work", lambda c, earlier: [{"value": v} for v in c.values], _measure),),
              analyse=_analyse)
'''
HELPERS_MODULE = "reliability_helpers"


@pytest.fixture
def helpers(tmp_path, monkeypatch):
    """The helper module, importable here, by workers and by driver subprocesses; its ``go`` file."""
    (tmp_path / f"{HELPERS_MODULE}.py").write_text(textwrap.dedent(HELPERS))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return tmp_path / "go"


def cli_process(*argv):
    return subprocess.Popen([sys.executable, "-m", "vaetransfer", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stop(proc):
    """Kills ``proc`` if a failed test left it running."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


def executions(run_dir: Path) -> tuple[int, int]:
    """(starts, ends) in a helper run's executions.log."""
    lines = (run_dir / "executions.log").read_text().splitlines()
    return sum(l.startswith("start") for l in lines), lines.count("end")


def statuses(out) -> list[str]:
    return [r["status"] for r in sweep.open_sweep(out).results()]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished sweep of five quick runs, the last failed; each test gets a copy of it."""
    out = tmp_path_factory.mktemp("finished") / "s"
    s = sweep.create(out, "function", {"function": SLEEP, "args": {"seconds": 0}},
                     zip=[{"value": [0.0, 1.0, 2.0, 3.0, 4.0], "fail_attempts": [0, 0, 0, 0, 1]}])
    s.run(workers=2, retries=0, progress=False)
    assert statuses(out) == ["done"] * 4 + ["failed"]

    def copy(to: Path) -> sweep.Sweep:
        shutil.copytree(out, to, ignore=shutil.ignore_patterns(".lock"))
        return sweep.open_sweep(to)

    return copy


# ---------------------------------------------------------------------------------- 1: one writer per study output
def test_a_second_study_process_on_one_output_is_refused_at_once(tmp_path, study_smoke):
    out = tmp_path / "same"
    argv = ["run", "quickstart", "--preset", "smoke", "--out", out, "--quiet", "--workers", "2", "--threads", "1"]
    first = cli_process(*argv)
    try:
        wait_for(lambda: (out / declarations.STUDY_FILE).exists(), timeout=60, what="the first study to hold its lock")
        second = cli_process(*argv)
        try:
            _, err = second.communicate(timeout=60)
        finally:
            stop(second)
        assert first.poll() is None  # refused while the first one runs, not after it
        assert second.returncode == 2
        assert err.strip().splitlines() == [f"vaetransfer run: error: argument 'out_dir': another process is running a "
                                             f"study in {out}; wait for it to finish (or stop it) or use another "
                                             "directory"]
        _, err = first.communicate(timeout=300)
    finally:
        stop(first)
    assert first.returncode == 0, err
    results = json.loads((out / declarations.RESULTS_FILE).read_text())
    _, clean = study_smoke("quickstart")  # the same command alone
    assert results["config"] == clean["config"] and results["findings"] == clean["findings"]


# ---------------------------------------------------------------------------------- 2: a corrupt store
@pytest.mark.parametrize("damage", ["garbage", "truncated", "deleted"])
def test_a_corrupt_or_deleted_store_is_rebuilt_from_the_result_files(tmp_path, finished, damage):
    out = finished(tmp_path / "s").out_dir
    store = out / sweep.STORE_FILE
    if damage == "garbage":
        store.write_bytes(os.urandom(5000))
    elif damage == "truncated":
        os.truncate(store, store.stat().st_size // 2)
    else:
        store.unlink()
    start = time.perf_counter()
    if damage == "deleted":  # nothing to warn about: a missing store is built
        rows = sweep.open_sweep(out).results()
    else:
        with pytest.warns(CorruptFileWarning, match=r"results.sqlite' is corrupt .*set aside as results.sqlite.corrupt: "
                                                    r"rebuilt it from the runs' result.json files"):
            rows = sweep.open_sweep(out).results()
        assert (out / "results.sqlite.corrupt").exists()
    assert time.perf_counter() - start < 5
    # Finished runs stay finished with their metrics; the failed run lost its record and runs again.
    original = finished(tmp_path / "again").results()
    assert [r["status"] for r in rows] == ["done"] * 4 + ["pending"]
    keys = ("id", "value", "slept", "pid", "seconds")
    assert [{k: r[k] for k in keys} for r in rows[:4]] == [{k: r[k] for k in keys} for r in original[:4]]


def test_a_corrupt_store_while_a_driver_runs_is_a_named_error(tmp_path, finished):
    finished(tmp_path / "s")
    tmp_path = tmp_path / "s"
    store = tmp_path / sweep.STORE_FILE
    store.write_bytes(b"not a database" * 100)
    with open(tmp_path / ".lock", "w") as held:  # another process running the sweep
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(vaetransfer.ArgumentError) as info:
            sweep.open_sweep(tmp_path)
    assert info.value.argument == "out_dir"
    assert f"the sweep store {str(store)!r} is corrupt (file is not a database) and another process is running " \
           f"the sweep in {tmp_path}; stop it, then open the sweep again" in str(info.value)
    assert store.read_bytes().startswith(b"not a database")  # left alone


# ---------------------------------------------------------------------------------- 3: a corrupt result of one run
def test_a_corrupt_run_result_reruns_that_run_only(tmp_path, finished):
    s = finished(tmp_path / "s")
    texts = ["[]", '{"status": "do', '{"status": "running", "metrics": {}}']
    dirs = [s.run_dir(r.id) for r in s.runs]
    for d, text in zip(dirs, texts):
        (d / "result.json").write_text(text)
    stamp = (dirs[3] / "result.json").stat().st_mtime_ns
    with pytest.warns(CorruptFileWarning) as caught:
        assert s.run(workers=2, progress=False) == {"pending": 0, "running": 0, "done": 4, "failed": 1, "diverged": 0}
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 3 and all(f"{d / 'result.json'}' is corrupt" in m and m.endswith(
        "set aside as result.json.corrupt: the run counts as not finished and runs again") for d, m in
        zip(sorted(dirs[:3]), messages))
    for d, text in zip(dirs, texts):
        assert json.loads((d / "result.json").read_text())["status"] == "done"
        assert (d / "result.json.corrupt").read_text() == text
    assert (dirs[3] / "result.json").stat().st_mtime_ns == stamp  # the others are not disturbed
    assert [r["attempts"] for r in s.results()] == [2, 2, 2, 1, 1]


def test_a_corrupt_progress_file_is_no_progress(tmp_path):
    for text in ("[]", '{"step": 3', "\xff"):
        (tmp_path / sweep.jobs.PROGRESS_FILE).write_text(text)
        assert sweep.jobs.read_progress(tmp_path) is None


def test_a_worker_finding_a_corrupt_result_runs_the_run(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "result.json").write_text("[]")
    with pytest.warns(CorruptFileWarning, match="result.json' is corrupt"):
        result = sweep.jobs.execute("function", "x", {"function": SLEEP, "args": {"seconds": 0}}, run_dir)
    assert result["status"] == "done" and json.loads((run_dir / "result.json").read_text()) == result


def test_a_corrupt_measurement_or_step_is_redone_and_study_json_is_the_users(tmp_path, helpers):
    helpers.touch()  # runs finish at once
    out = tmp_path / "out"
    first = studies.run_study(HELPERS_MODULE, out, sets=[f"go={helpers}"], progress=False)
    runs = sorted((out / declarations.SWEEPS_DIR / "work" / "runs").iterdir())
    (runs[0] / declarations.MEASURED_FILE).write_text("[]")
    (out / declarations.STEPS_DIR / "total.json").write_text('{"key": nu')
    with pytest.warns(CorruptFileWarning) as caught:
        again = studies.run_study(HELPERS_MODULE, out, sets=[f"go={helpers}"], progress=False)
    messages = " | ".join(str(w.message) for w in caught)
    assert "measured.json' is corrupt: expected an object, found list []; set aside as measured.json.corrupt, " \
           "result.json.corrupt: the run measures again" in messages
    assert "total.json' is corrupt (not valid JSON" in messages and "the step is computed again" in messages
    assert again["analysis"] == first["analysis"] == {"total": 12.0}
    assert [executions(r) for r in runs] == [(2, 2), (1, 1), (1, 1)]  # only the damaged run measured again

    (out / declarations.STUDY_FILE).write_text("[]")
    study = studies.get_study(HELPERS_MODULE)
    for attempt in (lambda: studies.run_study(HELPERS_MODULE, out, sets=[f"go={helpers}"], progress=False),
                    lambda: pipeline.run_beside(out, study, "extra", study.stages[0], study.config(), [{"value": 9.0}])):
        with pytest.raises(vaetransfer.ArgumentError) as info:
            attempt()
        assert str(info.value) == f"argument 'out_dir': {str(out / 'study.json')!r} is corrupt: expected an object, " \
                                  "found list []"


# ---------------------------------------------------------------------------------- 4: --out naming a file
def test_out_naming_a_file_is_a_named_error(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    decl = tmp_path / "decl.json"
    decl.write_text(json.dumps({"job": "function", "base": {"function": SLEEP}}))
    for argv, message in [(["sweep", "run", decl, "--out", afile], f"{str(afile)!r} is a file, not a directory"),
                          (["run", "quickstart", "--preset", "smoke", "--out", afile],
                           f"{str(afile)!r} is a file, not a directory"),
                          (["quickstart", "--out", afile / "below"],
                           f"cannot create the directory {str(afile / 'below')!r}: Not a directory")]:
        assert cli.main(list(map(str, argv))) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith(f"argument 'out_dir': {message}"), err
    with pytest.raises(vaetransfer.ArgumentError, match="is a file, not a directory"):
        sweep.create(afile, "function", {"function": SLEEP})
    assert afile.read_text() == "mine"


# ---------------------------------------------------------------------------------- 5: SIGINT and SIGTERM
def _interrupt_and_check(proc, run_dirs, signum, out):
    """Waits until two runs are running, sends ``signum`` to the driver ``proc``; checks that it
    exits within 2 s, its workers with it, and that no row is left running. Returns the stderr."""
    try:
        wait_for(lambda: all((d / "executions.log").exists() for d in run_dirs), timeout=60, what="two runs to start")
        workers = [sweep.jobs.read_progress(d)["pid"] for d in run_dirs]
        assert all(alive(pid) for pid in workers)
        proc.send_signal(signum)
        start = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - start < 2.0, err
    finally:
        stop(proc)
    assert proc.returncode in (130, 128 + signum), err
    assert "Traceback" not in err and "interrupted" in err
    assert not any(alive(pid) for pid in workers)
    rows = sweep.open_sweep(out).results()
    assert [r["status"] for r in rows] == ["pending"] * 3 and [r["attempts"] for r in rows] == [0] * 3
    return err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_sweep_driver_and_its_workers_and_a_rerun_finishes(tmp_path, helpers, signum):
    decl = sweep.Declaration("function", {"function": f"{HELPERS_MODULE}:slow_job", "args": {"go": str(helpers)}},
                             grid={"value": [1.0, 2.0, 3.0]})
    (tmp_path / "decl.json").write_text(json.dumps(decl.to_dict()))
    out = tmp_path / "s"
    run_dirs = [out / "runs" / r.id for r in decl.expand()]
    proc = cli_process("sweep", "run", tmp_path / "decl.json", "--out", out, "--workers", "2", "--quiet")
    err = _interrupt_and_check(proc, run_dirs[:2], signum, out)
    assert f"`vaetransfer sweep run {out}` resumes" in err
    assert proc.returncode == 128 + signum
    helpers.touch()
    assert sweep.open_sweep(out).run(workers=1, progress=False)["done"] == 3
    assert [executions(d) for d in run_dirs] == [(2, 1), (2, 1), (1, 1)]  # each finished once
    assert [r["attempts"] for r in sweep.open_sweep(out).results()] == [1, 1, 1]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_study_and_its_workers_and_a_rerun_finishes(tmp_path, helpers, signum):
    out = tmp_path / "study"
    proc = cli_process("run", HELPERS_MODULE, "--set", f"go={helpers}", "--out", out, "--workers", "2", "--quiet")
    sweep_dir = out / declarations.SWEEPS_DIR / "work"
    try:
        wait_for(lambda: (sweep_dir / "sweep.json").exists(), timeout=60, what="the study's sweep")
    except AssertionError:
        stop(proc)
        raise
    decl = sweep.Declaration.from_dict(json.loads((sweep_dir / "sweep.json").read_text()))
    run_dirs = [sweep_dir / "runs" / r.id for r in decl.expand()]
    _interrupt_and_check(proc, run_dirs[:2], signum, sweep_dir)
    assert not (out / declarations.RESULTS_FILE).exists()
    helpers.touch()
    results = studies.run_study(HELPERS_MODULE, out, sets=[f"go={helpers}"], progress=False)
    assert results["analysis"] == {"total": 12.0}
    assert [executions(d) for d in run_dirs] == [(2, 1), (2, 1), (1, 1)]


def test_sigterm_handler_is_installed_only_while_a_driver_runs():
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.stop_on_signals():
        assert signal.getsignal(signal.SIGTERM) is not before
        with pytest.raises(interrupts.Interrupted) as info:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
    assert info.value.signum == signal.SIGTERM and isinstance(info.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is before
    seen = []

    def elsewhere():  # signals reach the main thread only: nothing to install in another
        with interrupts.stop_on_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(timeout=10)
    assert seen == [before]


# ---------------------------------------------------------------------------------- 6: bad input
def _declaration(tmp_path, text) -> Path:
    path = tmp_path / "decl.json"
    path.write_text(text if isinstance(text, str) else json.dumps(text))
    return path


FN = {"function": SLEEP, "args": {"seconds": 0}}
STUDY_JOB = "vaetransfer.studies.sweep_job:StudyJob"


@pytest.mark.parametrize("decl, extra, argument, words", [
    ("job: function\n", [], "declaration", "is corrupt (not valid JSON"),
    ("[]", [], "declaration", "expected a JSON object"),
    ('{"job": "function", "base": {"function": "%s"}, "grid": {"value": [NaN]}}' % SLEEP, [], "value",
     "expected JSON data"),
    ({"job": "function", "base": {"function": SLEEP, "args": []}}, [], "args", "expected a JSON object"),
    ({"job": STUDY_JOB, "base": {"study": "quickstart", "preset": "smoke", "config": []}}, [], "config",
     "expected an object"),
    ({"job": "function", "base": FN}, ["--workers", "-1"], "workers", ">= 1"),
    ({"job": "function", "base": FN}, ["--executor", "ray", "--cpus", "-3"], "cpus", ">= 1"),
    ({"job": "function", "base": FN}, ["--executor", "ray", "--cpus", "0"], "cpus", ">= 1"),
])
def test_bad_sweep_input_is_named(tmp_path, capsys, decl, extra, argument, words):
    path = _declaration(tmp_path, decl)
    assert cli.main(["sweep", "run", str(path), "--out", str(tmp_path / "s"), "--quiet", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"argument '{argument}'" in err[0] and words in err[0], err


def test_a_bad_ray_address_is_named(tmp_path, capsys):
    pytest.importorskip("ray")
    path = _declaration(tmp_path, {"job": "function", "base": FN})
    assert cli.main(["sweep", "run", str(path), "--out", str(tmp_path / "s"), "--executor", "ray", "--address",
                     "no-such-address", "--quiet"]) == 2
    assert "argument 'address': cannot start or reach the Ray cluster at 'no-such-address'" in capsys.readouterr().err


def test_a_corrupt_declaration_of_a_sweep_directory_is_named(tmp_path, finished, capsys):
    finished(tmp_path / "s")
    (tmp_path / "s" / "sweep.json").write_text('{"job')
    for argv in (["sweep", "run", str(tmp_path / "s")], ["sweep", "status", str(tmp_path / "s")]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert "argument 'out_dir'" in err and "sweep.json' is corrupt" in err and "declare the sweep again" in err


def test_a_ray_address_that_refuses_connections_is_named_within_seconds(tmp_path, capsys):
    """``--address 127.0.0.1:1`` (a closed port) looped on Ray's retries past 150 s; it is probed first."""
    import socket
    import time

    pytest.importorskip("ray")
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        path = _declaration(tmp_path, {"job": "function", "base": FN})
        start = time.monotonic()
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}", "127.0.0.1:1"):
            assert cli.main(["sweep", "run", str(path), "--out", str(tmp_path / "s"), "--executor", "ray", "--address",
                             address, "--quiet"]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "argument 'address': nothing accepts connections" in err[0], err
        assert time.monotonic() - start < 20
    assert not (tmp_path / "s" / "runs").exists() or not any((tmp_path / "s" / "runs").iterdir())


def test_a_full_disk_at_the_results_write_is_one_line_and_exit_2(study_smoke, tmp_path, monkeypatch, capsys):
    """A disk full exactly at the results.json write printed a traceback (nothing was corrupted): now one
    line naming the file, exit 2, the previous results.json byte for byte as it was."""
    import errno

    out, _ = study_smoke("quickstart")
    copy = tmp_path / "quickstart"
    shutil.copytree(out, copy)
    before = (copy / "results.json").read_bytes()
    write_text = Path.write_text

    def full(self, *args, **kwargs):
        if self.name.startswith(".results.json."):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--out", str(copy), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and str(copy / "results.json") in err[0], err
    assert (copy / "results.json").read_bytes() == before
    assert not list(copy.glob(".results.json.*"))  # no temporary left behind
