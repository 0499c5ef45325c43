"""Repository tools: tools/check-cuda.sh skips without nvcc and fails only on a source that does not compile;
tools/build-against-torch.sh skips in CI without the other torch's wheels."""
import os
import pathlib
import shutil
import subprocess

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "tools" / "check-cuda.sh"
BASH = shutil.which("bash")


def run_check_cuda(tmp_path, nvcc=None):
    """Runs the script with no nvcc on PATH or under CUDA_HOME; `nvcc` sets NVCC."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not os.access(os.path.join(d, "nvcc"), os.X_OK)]
    env = {k: v for k, v in os.environ.items() if k != "NVCC"}
    env.update(PATH=os.pathsep.join(path), CUDA_HOME=str(tmp_path / "no-cuda"))
    if nvcc is not None:
        env["NVCC"] = str(nvcc)
    return subprocess.run([BASH, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("nvcc", [None, "/nonexistent/nvcc"])
def test_check_cuda_skips_without_nvcc(tmp_path, nvcc):
    r = run_check_cuda(tmp_path, nvcc)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("check-cuda: skipped: no nvcc")


@pytest.mark.parametrize("compiles", [True, False])
def test_check_cuda_fails_only_when_a_source_does_not_compile(tmp_path, compiles):
    fake = tmp_path / "nvcc"  # stands in for nvcc: answers --version, "compiles" by exit status
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo fake nvcc; exit 0; }\n"
                    f"exit {0 if compiles else 1}\n")
    fake.chmod(0o755)
    r = run_check_cuda(tmp_path, fake)
    assert r.returncode == (0 if compiles else 1), r.stdout + r.stderr
    assert ("check-cuda: ok" in r.stdout) == compiles and ("check-cuda: FAIL" in r.stdout) != compiles
    assert "compiled with fake nvcc" in r.stdout


AGAINST = SCRIPT.parent / "build-against-torch.sh"


@pytest.mark.parametrize("wheels", [None, "empty"])
def test_build_against_torch_skips_in_ci_without_the_wheels(tmp_path, wheels):
    """CI runs `tools/build-against-torch.sh --if-wheels`: without a folder holding the torch
    wheel it says so and exits 0 before creating anything."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_WHEELS"}
    if wheels:
        (tmp_path / "wheels").mkdir()
        env["TORCH_WHEELS"] = str(tmp_path / "wheels")
    env["VENV"] = str(tmp_path / "venv")
    r = subprocess.run([BASH, str(AGAINST), "--if-wheels"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("build-against-torch: skipped: set TORCH_WHEELS") and not (tmp_path / "venv").exists()
