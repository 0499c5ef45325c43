"""Installing without root, and the wheel.

* Eigen comes from pip (cmeel-eigen) when the system has none: cmake/FindEigenAnywhere.cmake,
  configured with the system prefixes ignored, finds pip's copy and a program using it compiles.
* ``python -m build`` makes a wheel whose version and Requires-Dist name the torch it was compiled
  against; the wheel installs into a fresh venv that has that torch and trains a model there.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
EIGEN_PROGRAM = r"""
#include <Eigen/Dense>
#include <iostream>
int main() {
  Eigen::Matrix2d a;
  a << 4, 1, 2, 3;
  std::cout << "det " << a.determinant() << " inverse00 " << a.inverse()(0, 0) << "\n";
}
"""


def _cmake() -> str:
    found = shutil.which("cmake", path=str(Path(sys.executable).parent)) or shutil.which("cmake")
    if found is None:
        pytest.skip("no cmake (requirements.txt installs it)")
    return found


def _configure(tmp_path: Path, name: str, *extra: str) -> str:
    src = tmp_path / "src"
    if not src.exists():
        src.mkdir()
        (src / "main.cpp").write_text(EIGEN_PROGRAM)
        (src / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.25)\nproject(eigen_probe CXX)\n"
            "find_package(Python 3.10 REQUIRED COMPONENTS Interpreter)\n"
            f'list(APPEND CMAKE_MODULE_PATH "{REPO / "cmake"}")\ninclude(FindEigenAnywhere)\n'
            "add_executable(probe main.cpp)\ntarget_link_libraries(probe Eigen3::Eigen)\n")
    out = subprocess.run([_cmake(), "-S", str(src), "-B", str(tmp_path / name), f"-DPython_EXECUTABLE={sys.executable}",
                          *extra], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def test_eigen_comes_from_pip_when_the_system_has_none(tmp_path):
    pytest.importorskip("cmeel", reason="cmeel-eigen (requirements.txt) puts Eigen's headers in the environment")
    text = _configure(tmp_path, "pip", "-DCMAKE_IGNORE_PREFIX_PATH=/usr;/usr/local")  # as on a machine without it
    line = next(x for x in text.splitlines() if "vaetransfer: Eigen3" in x)
    assert "(pip)" in line and "cmeel.prefix" in line
    built = subprocess.run([_cmake(), "--build", str(tmp_path / "pip")], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    ran = subprocess.run([str(tmp_path / "pip" / "probe")], capture_output=True, text=True, timeout=60)
    assert ran.stdout.split() == ["det", "10", "inverse00", "0.3"]
    if Path("/usr/share/eigen3/cmake/Eigen3Config.cmake").exists():  # the system's copy wins where it is
        assert "(system)" in _configure(tmp_path, "system")


def test_the_wheel_names_its_torch_and_installs_into_a_fresh_venv(tmp_path):
    pytest.importorskip("build", reason="the build frontend (requirements.txt) makes the wheel")
    release = torch.__version__.partition("+")[0]
    dist = tmp_path / "dist"
    made = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
                          capture_output=True, text=True, timeout=3000)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    (wheel,) = dist.glob("vaetransfer-*.whl")
    assert f"+torch{release}." in wheel.name
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        assert any(n.startswith("vaetransfer/_C") and n.endswith(".so") for n in z.namelist())
    assert f"Requires-Dist: torch=={release}" in meta.splitlines()

    # A fresh venv that has this torch (and the other dependencies) from this environment's
    # site-packages, through a .pth line; vaetransfer only from the wheel.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    smoke = subprocess.run([str(python), "-c", SMOKE, str(tmp_path / "run")], capture_output=True, text=True,
                           timeout=600, cwd=tmp_path)
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    where, version, loss = smoke.stdout.split()
    assert where.startswith(str(venv)) and version == wheel.name.split("-")[1] and float(loss) > 0


SMOKE = """
import sys
import torch
import vaetransfer as vt
x = torch.rand(64, 12, generator=torch.Generator().manual_seed(0))
cfg = vt.TrainConfig(model=vt.ModelConfig("mlp", input_shape=(12,), hidden=(8,), latent_dim=2), steps=5, batch_size=16)
run = vt.train(cfg, x, sys.argv[1], progress=False)
print(vt.__file__, vt.__version__, float(run.history["loss"][-1]))
"""
