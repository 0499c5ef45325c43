"""The command line and its main job."""
import dataclasses
import json
from pathlib import Path
import subprocess
import sys

from vaetransfer import cli


def test_quickstart_is_the_small_quickstart_study(tmp_path, monkeypatch):
    """`vaetransfer quickstart` = `vaetransfer run quickstart --preset small`; the old options map to --set.
    (The study itself runs in tests/test_studies.py with its smoke preset.)"""
    from vaetransfer.studies import pipeline, quickstart

    seen = []
    real_run = pipeline.run

    def pin_only(study, config, out_dir, *, progress=True, **kw):  # the config and study.json, no training
        seen.append((config, Path(out_dir), progress))
        return real_run(dataclasses.replace(study, stages=(), analyse=lambda c, r, x: {}, figures=None,
                                                      findings=(), report=None), config, out_dir, progress=False, **kw)

    monkeypatch.setattr(pipeline, "run", pin_only)
    assert cli.main(["quickstart", "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert seen[-1] == (quickstart.PRESETS["small"], tmp_path / "a", False)
    assert cli.main(["quickstart", "--out", str(tmp_path / "b"), "--seed", "3", "--steps", "30", "--n", "512",
                     "--similarity-n", "200"]) == 0
    config, _, progress = seen[-1]
    assert (config.seed, config.steps, config.n, config.similarity_n, progress) == (3, 30, 512, 200, True)
    assert config.batch_size == quickstart.PRESETS["small"].batch_size
    study = json.loads((tmp_path / "b" / "study.json").read_text())
    assert study["study"] == "quickstart" and study["preset"] == "small" and study["config"]["steps"] == 30


def test_info_command_runs_as_module():
    proc = subprocess.run([sys.executable, "-m", "vaetransfer", "info"], capture_output=True, text=True, check=True)
    info = json.loads(proc.stdout)
    assert {"torch", "cuda", "compiler", "num_threads", "eigen"} <= set(info)


def test_train_command_is_wired(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--dataset", "tetrominoes", "--n", "256", "--objective", "beta-tc", "--beta", "4",
            "--steps", "6", "--batch-size", "32", "--out", str(out), "--quiet"]
    assert cli.main(argv) == 0
    assert json.loads((out / "config.json").read_text())["steps"] == 6
    assert cli.main(argv) == 0  # a finished run is not retrained


def test_unknown_command_is_refused():
    proc = subprocess.run([sys.executable, "-m", "vaetransfer", "frobnicate"], capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
