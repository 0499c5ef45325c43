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
