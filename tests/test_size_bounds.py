"""Sizes a user or a file gives are bounded before anything runs: each size below used to pass the
checks and then fail late (inside every worker after retries), with a raw error (a pybind
TypeError, ``std::bad_alloc``, MemoryError), or to allocate gigabytes first. Each is now a named
error when the config or the call is made — or, where the size needs no memory, simply works.

The memory bounds are checked in a child process under an address-space limit set here (2 GiB,
:data:`test_untrusted_files.LIMIT`), which :func:`vaetransfer._checks.memory_limit_bytes` reads: a
regression shows up as a MemoryError or a timeout in the child, never as a swapping test run."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import vaetransfer as vt
from vaetransfer import metrics, studies
from vaetransfer._checks import memory_limit_bytes
from vaetransfer.train import TrainConfig

from test_untrusted_files import LIMIT, TIMEOUT, _limit_memory, _refused


def test_counts_beyond_int64_or_any_run_are_named_when_the_config_is_made():
    """``--set steps=2**63`` passed the config check and failed in every worker (a raw pybind TypeError)."""
    for d, argument in ((dict(steps=2**63), "steps"), (dict(steps=2**60), "steps"), (dict(batch_size=2**31), "batch_size"),
                        (dict(eval_every=-1), "eval_every"), (dict(phases=[dict(steps=2**62)]), "phases[0].steps")):
        with pytest.raises(vt.ArgumentError) as info:
            TrainConfig.from_dict(d)
        assert info.value.argument == argument
    with pytest.raises(vt.ArgumentError, match="int64") as info:  # any study's integer, at make_config
        studies.make_config("quickstart", "smoke", sets=[f"steps={2**63}"])
    assert info.value.argument == "steps"
    with pytest.raises(vt.ArgumentError, match="digits") as info:  # a 5,000-digit integer: named, not a ValueError
        studies.make_config("quickstart", "smoke", sets=["steps=" + "9" * 5000])
    assert info.value.argument == "steps"


def test_a_batch_beyond_memory_stops_a_sweep_and_a_study_before_any_worker(tmp_path):
    """``batch_size=10**9`` failed inside every worker after retries (``std::bad_alloc``); the sweep's
    declaration and the study's preflight now name it before anything runs or is written."""
    from vaetransfer import sweep

    with pytest.raises(vt.ArgumentError, match="needs at least .*TiB") as info:
        sweep.create(tmp_path / "sw", "train", base={"batch_size": 10**9, "steps": 2, "data": {"name": "dsprites",
                                                                                                "n": 8}},
                     grid={"seed": [0, 1]})
    assert info.value.argument == "batch_size"
    assert not (tmp_path / "sw" / "runs").exists()
    for name in ("quickstart", "transfer", "rate_distortion", "finetune_similarity", "rr_pretraining"):
        config = studies.make_config(name, "smoke", sets=[f"{'transfer.' if name == 'rr_pretraining' else ''}"
                                                          f"batch_size=1000000000"])
        with pytest.raises(vt.ArgumentError, match="needs at least") as info:
            studies.run_study(name, tmp_path / name, config=config, progress=False)
        assert info.value.argument == "batch_size", name
        assert not (tmp_path / name).exists(), name  # nothing written


def test_the_memory_limit_is_read_from_the_process():
    """A batch that fits this machine is refused by name under a 2 GiB address-space limit."""
    code = ("from vaetransfer.train import TrainConfig; "
            "TrainConfig(batch_size=200_000).check_batch_memory((1, 64, 64))")  # 3.3 GB of inputs
    _refused(code, "batch_size", "2 GiB")
    assert memory_limit_bytes() > LIMIT  # here it fits
    TrainConfig(batch_size=200_000).check_batch_memory((1, 64, 64))


def test_a_model_too_large_to_build_is_named():
    _refused("import vaetransfer as vt; vt.nn.build_model(vt.nn.ModelConfig('conv', latent_dim=10**9))", "model",
             "latent_dim", "needs more memory")


def test_billions_of_bins_need_no_memory():
    """``bins=10**9`` allocated the bins' edges per column (a raw allocation error); they are computed,
    never stored, so it runs under the limit (each value then its own bin: MIG 0)."""
    code = ("import numpy as np; from vaetransfer import metrics; r = np.random.default_rng(0); "
            "c = r.standard_normal((300, 3)); f = r.integers(0, 3, (300, 2)); "
            "print(metrics.mig(c, f, bins=10**9).score, metrics.discretize(c, bins=10**9).max())")
    env = dict(os.environ, OMP_NUM_THREADS="1", MALLOC_ARENA_MAX="2")
    child = subprocess.run([sys.executable, "-c", code], preexec_fn=_limit_memory, env=env, capture_output=True,
                           text=True, timeout=TIMEOUT)
    assert child.returncode == 0, child.stderr
    score, top = child.stdout.split()
    assert float(score) == 0.0 and 0 < int(top) < 10**9
    rng = np.random.default_rng(0)
    c = rng.standard_normal((300, 3))
    np.testing.assert_array_equal(metrics.discretize(c, bins=20), metrics.discretize(c, bins=20))
    with pytest.raises(vt.ArgumentError) as info:
        metrics.discretize(c, bins=2**63)
    assert info.value.argument == "bins"


def test_sampled_metric_sizes_and_grids_are_bounded():
    """``num_train=2**40`` and a grid whose size overflows int64 gave raw errors."""
    _refused("from vaetransfer import metrics; import numpy as np; "
             "metrics.beta_vae_score(lambda x: np.zeros((len(x), 2)), metrics.FactorSampler([3, 4]), num_train=2**40)",
             "num_train", "2 GiB")
    with pytest.raises(vt.ArgumentError, match="int64") as info:
        metrics.FactorSampler([2**32, 2**32])
    assert info.value.argument == "source"
    with pytest.raises(vt.ArgumentError, match="int64") as info:
        metrics.FactorSampler(lambda f: np.zeros((len(f), 1, 4, 4)), factor_sizes=[2**40, 2**40])
    assert info.value.argument == "factor_sizes"
    assert metrics.FactorSampler([2**31, 2**31]).count == 2**62  # within int64: fine


@pytest.mark.parametrize("kw, argument", [(dict(null="permutation", permutations=10**9), "permutations"),
                                          (dict(ci=0.9, resampling="bootstrap", resamples=10**9), "resamples")])
def test_resamples_and_permutations_are_bounded_before_drawing(kw, argument):
    """``permutations=10**9`` reached 5.6 GB before ``std::bad_alloc``."""
    code = ("import torch; from vaetransfer import similarity as s; g = torch.Generator().manual_seed(0); "
            "x = torch.randn(50, 4, generator=g); "
            f"s.similarity_matrix({{'a': x}}, {{'b': x + 1}}, **{kw!r})")
    _refused(code, argument, "2 GiB")
