"""The command line and its main job."""
import dataclasses
import json
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest
import torch

import vaetransfer as vt
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


# ---------------------------------------------------------------- your data and your model on the command line

def _arrays(tmp_path, n=200):
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(n, 8, 8, generator=g) > 0.5).to(torch.uint8) * 255
    np.save(tmp_path / "x.npy", x.numpy())
    np.savez(tmp_path / "xy.npz", x=torch.randn(n, 12, generator=g).numpy(),
             y=torch.randint(0, 3, (n,), generator=g).numpy())
    return x


def test_train_reads_npy_examples_and_npz_with_labels(tmp_path):
    _arrays(tmp_path)
    assert cli.main(["train", "--dataset", str(tmp_path / "x.npy"), "--steps", "5", "--batch-size", "16",
                     "--out", str(tmp_path / "vae"), "--quiet"]) == 0
    run = vt.load_run(tmp_path / "vae")
    assert run.step == 5 and run.config.model.input_shape == [1, 8, 8] and run.config.dataset == "x.npy"
    assert cli.main(["train", "--dataset", str(tmp_path / "xy.npz"), "--architecture", "mlp-classifier",
                     "--steps", "5", "--out", str(tmp_path / "clf"), "--quiet"]) == 0
    assert vt.load_run(tmp_path / "clf").model().num_classes == 3


def test_train_init_from_freeze_reinit_and_eval_every(tmp_path):
    _arrays(tmp_path)
    base = ["train", "--dataset", str(tmp_path / "x.npy"), "--batch-size", "16", "--quiet"]
    assert cli.main(base + ["--steps", "10", "--out", str(tmp_path / "src")]) == 0
    assert cli.main(base + ["--steps", "6", "--out", str(tmp_path / "dst"), "--init-from", str(tmp_path / "src"),
                            "--freeze", "encoder,latent", "--reinit", "dec2", "--eval-data", str(tmp_path / "x.npy"),
                            "--eval-every", "3"]) == 0
    src, dst = vt.load_run(tmp_path / "src").model(), vt.load_run(tmp_path / "dst").model()
    a, b = src.state_dict(), dst.state_dict()
    kept = set(src.group("encoder")) | set(src.group("latent"))
    assert all(torch.equal(a[k], b[k]) for k in kept)
    assert not torch.equal(a["dec2.weight"], b["dec2.weight"])
    assert [r["step"] for r in vt.load_run(tmp_path / "dst").metrics] == [3, 6]
    cfg = vt.load_run(tmp_path / "dst").config
    assert cfg.freeze == ("encoder", "latent") and cfg.reinit == ("dec2",)


def test_train_takes_your_module_and_your_registered_data_set(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text(
        "import torch\n"
        "import vaetransfer as vt\n"
        "from torch import nn\n"
        "class Tiny(nn.Module):\n"
        "    def __init__(self, latent=2):\n"
        "        super().__init__()\n"
        "        self.enc, self.mu, self.lv = nn.Linear(12, 8), nn.Linear(8, latent), nn.Linear(8, latent)\n"
        "        self.dec = nn.Linear(latent, 12)\n"
        "    def encode(self, x):\n"
        "        h = torch.relu(self.enc(x))\n"
        "        return self.mu(h), self.lv(h)\n"
        "    def decode(self, z):\n"
        "        return self.dec(z)\n"
        "def bits(indices=None, **_):\n"
        "    x = ((torch.arange(4096).unsqueeze(1) >> torch.arange(11, -1, -1)) & 1).to(torch.uint8)\n"
        "    return vt.data.as_dataset(x if indices is None else x[indices], name='bits')\n"
        "vt.data.register('my_bits', bits, factor_names=(), count=4096, overwrite=True)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert cli.main(["train", "--import", str(tmp_path / "mine.py"), "--dataset", "my_bits", "--module",
                         "mine:Tiny", "--kind", "vae", "--module-kwargs", '{"latent": 3}', "--steps", "8",
                         "--out", str(tmp_path / "run"), "--quiet"]) == 0
    finally:
        vt.data.unregister("my_bits")
    m = vt.load_run(tmp_path / "run").model()
    assert type(m.module).__name__ == "Tiny" and m.latent_dim == 3


@pytest.mark.parametrize("extra, argument", [
    (["--module", "mine:Tiny"], "kind"),
    (["--eval-every", "5"], "eval_every"),
    (["--labels", "y.npy"], "labels"),
])
def test_train_names_bad_combinations(tmp_path, capsys, extra, argument):
    _arrays(tmp_path)
    argv = ["train", "--dataset", str(tmp_path / "x.npy") if argument != "labels" else "tetrominoes", "--steps", "1",
            "--out", str(tmp_path / "r"), "--quiet"] + extra
    assert cli.main(argv) == 2
    assert f"error: argument '{argument}'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_load_arrays_refuses_pickles_and_names_missing_keys(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(vt.ArgumentError, match="Python objects"):
        vt.data.load_arrays(tmp_path / "obj.npy")
    np.savez(tmp_path / "two.npz", a=np.zeros((3, 2)), b=np.zeros(3))
    with pytest.raises(vt.ArgumentError, match="expected the examples under"):
        vt.data.load_arrays(tmp_path / "two.npz")
    np.save(tmp_path / "x.npy", np.zeros((4, 2), dtype=np.float32))
    np.save(tmp_path / "bad.npy", np.array([0.5, 1.0, 2.0, 0.0]))
    with pytest.raises(vt.ArgumentError, match="integer class labels") as e:
        vt.data.load_arrays(tmp_path / "x.npy", tmp_path / "bad.npy")
    assert e.value.argument == "labels"
