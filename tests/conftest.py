import dataclasses

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same global RNG state."""
    torch.manual_seed(0)
    np.random.seed(0)
    yield


@pytest.fixture(scope="session")
def study_smoke(tmp_path_factory):
    """``study_smoke(name)``: ``vaetransfer run <name> --preset smoke`` (two workers of one thread),
    run once per test session and shared by every test module: ``(out_dir, results)``."""
    import json

    from vaetransfer import cli

    done = {}

    def run(name: str):
        if name not in done:
            out = tmp_path_factory.mktemp("smoke") / name
            assert cli.main(["run", name, "--preset", "smoke", "--out", str(out), "--quiet", "--workers", "2",
                             "--threads", "1"]) == 0
            done[name] = out, json.loads((out / "results.json").read_text())
        return done[name]

    return run


def finished_work(out) -> dict:
    """What resuming a finished study output must not redo: each run's measurements and snapshots
    and each analysis step, path (relative to ``out``) → modification time."""
    from vaetransfer.studies.kit import declarations as d

    paths = sorted((out / d.SWEEPS_DIR).rglob(d.MEASURED_FILE)) + \
        sorted((out / d.SWEEPS_DIR).rglob("*.pt")) + sorted((out / d.STEPS_DIR).glob("*.json"))
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in paths}


def _devices():
    """``cpu`` always; ``cuda`` when torch has a usable CUDA device, else a skipped parameter that
    says why — so the same device tests validate a GPU machine."""
    cuda = pytest.param("cuda", marks=pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="no CUDA device: " + ("this torch is a CPU build" if torch.version.cuda is None else "none visible")))
    return ["cpu", cuda]


#: ``@pytest.mark.parametrize("device", DEVICES)``: every device torch reports.
DEVICES = _devices()
#: Devices other than the CPU (compared with it); skipped on a CPU-only machine.
OTHER_DEVICES = DEVICES[1:]


class Interrupt(Exception):
    pass


def assert_resume_is_exact(config, images, tmp_path, stop_at: int = 9):
    """``config`` (snapshots every 6 steps) killed at ``stop_at`` and resumed from its snapshot at
    6 equals the uninterrupted run: every history value and every weight. Returns the latter."""
    import vaetransfer as vt
    def hook(model, report):
        if report["step"] == stop_at:
            raise Interrupt
        return {}

    config = dataclasses.replace(config, metrics_every=3)
    whole = vt.train(config, images, tmp_path / "whole", progress=False, metrics_hook=lambda m, r: {})
    with pytest.raises(Interrupt):
        vt.train(config, images, tmp_path / "cut", progress=False, metrics_hook=hook)
    assert vt.load_run(tmp_path / "cut").step == 6
    resumed = vt.train(config, images, tmp_path / "cut", progress=False, metrics_hook=lambda m, r: {})
    assert list(whole.history) == list(resumed.history)
    for k in whole.history:
        np.testing.assert_array_equal(whole.history[k], resumed.history[k], err_msg=k)
    for (n, a), (_, b) in zip(whole.model().state_dict().items(), resumed.model().state_dict().items()):
        assert torch.equal(a, b), n
    return whole
