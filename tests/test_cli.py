"""The command line and its main job."""
import json
import subprocess
import sys

from vaetransfer import cli, data


def test_quickstart_writes_figures_and_summary(tmp_path):
    out = tmp_path / "qs"
    # A short version of the main job: full data sets, two tiny training runs.
    assert cli.main(["quickstart", "--out", str(out), "--steps", "30", "--n", "512", "--similarity-n", "200",
                     "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data"]["dsprites"]["count"] == data.DSPRITES_COUNT
    assert summary["data"]["tetrominoes"]["count"] == data.TETROMINOES_COUNT
    assert summary["data"]["tetrominoes"]["bin_counts_per_factor"] == [[data.TETROMINOES_COUNT // 8] * 8] * 5
    assert 0 < summary["data"]["dsprites"]["mean_pixel"] < 0.2
    runs = summary["training"]["runs"]
    assert set(runs) == {"β=1", "β=8"} and all(r["steps"] == 30 for r in runs.values())
    assert all(r["loss_last"] < r["loss_first"] for r in runs.values())
    for name in ("dsprites_samples", "dsprites_shapes", "tetrominoes_samples", "tetrominoes_factors",
                 "loss_curves", "reconstructions", "traversal_beta_1", "traversal_beta_8",
                 "heatmap_cka", "heatmap_procrustes"):
        png = (out / f"{name}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000, name
    sim = summary["similarity"]
    assert sim["n"] == 200 and len(sim["layers"]) == 15
    assert sim["diagonal"]["cka"]["input"] == 1.0 and sim["diagonal"]["procrustes"]["input"] == 1.0
    assert all(0.0 <= v <= 1.0 for d in sim["diagonal"].values() for v in d.values())
    index = (out / "index.md").read_text()
    assert "tetrominoes_factors.png" in index
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporaries


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
