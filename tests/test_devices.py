"""`device` everywhere: the same tests on every device torch reports (cpu always; cuda when
available, skipped with its reason otherwise). Cross-device tests compare a device with the CPU
on the same weights and inputs."""
import numpy as np
import pytest
import torch

import vaetransfer as vt
from conftest import DEVICES, OTHER_DEVICES, assert_resume_is_exact
from test_similarity import np_procrustes
from vaetransfer import data, estimators, similarity, studies
from vaetransfer.studies import pipeline


def _config(device, steps=12, **kw):
    return vt.TrainConfig(model=vt.ModelConfig("conv", input_shape=(1, 64, 64), latent_dim=6), steps=steps,
                          batch_size=16, seed=3, device=device, snapshot_every=6,
                          optimizer=vt.OptimizerConfig(lr=1e-3), **kw)


@pytest.fixture(scope="module")
def images():
    return data.dsprites(range(0, 737280, 1440))  # 512 images


@pytest.fixture
def deterministic_kernels():
    """cuDNN's default convolution backward kernels accumulate with atomics: two uninterrupted CUDA
    runs of one config parted by step 4 on an H100 (3.6e-4 relative in the loss by step 12), so
    bit-exact resume is a promise under deterministic kernels (no-op on the CPU)."""
    saved = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    yield
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved


@pytest.mark.parametrize("device", DEVICES)
def test_resume_is_exact_on_the_device(images, device, tmp_path, deterministic_kernels):
    assert_resume_is_exact(_config(device), images, tmp_path)


@pytest.mark.parametrize("device", DEVICES)
def test_a_seed_names_the_same_noise_on_every_device(images, device):
    """ε for a seed is the CPU normal stream of that seed, moved to the model's device, so sampled
    activations and evaluations on a GPU match the CPU's (they drew from a CUDA generator, whose
    stream is another: the sampled layer differed by up to 3.3 on an H100)."""
    config = vt.ModelConfig("conv", input_shape=(1, 64, 64), latent_dim=6)
    on_cpu, on_device = vt.build_model(config, seed=1), vt.build_model(config, seed=1, device=device)
    eps = on_device.noise(10, seed=7)
    assert eps.device.type == device
    torch.testing.assert_close(eps.cpu(), torch.randn(10, 6, generator=torch.Generator().manual_seed(7)))
    a = vt.objectives.evaluate(on_cpu, "beta-vae", images, batch_size=128, seed=5)
    b = vt.objectives.evaluate(on_device, "beta-vae", images, batch_size=128, seed=5)
    assert set(a) == set(b)
    for name in a:
        assert b[name].device.type == "cpu"
        # rtol as the other cross-device checks: cuDNN convolutions may run in TF32 on the GPU.
        torch.testing.assert_close(b[name], a[name], rtol=1e-3, atol=1e-3, msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_snapshots_load_on_either_device(images, device, tmp_path):
    run = vt.train(_config(device, steps=6), images, tmp_path / "r", progress=False)
    on_cpu, on_device = run.model(device="cpu"), run.model(device=device)
    assert torch.device(on_device.device).type == device
    x = images.images[:8].float()
    a = similarity.activations(on_cpu, x, seed=0)
    b = similarity.activations(on_device, x, seed=0)
    assert list(a) == list(b)
    for name in a:
        assert b[name].device.type == "cpu"  # stored in CPU memory by default
        torch.testing.assert_close(b[name], a[name], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("device", OTHER_DEVICES)
def test_trainer_trajectory_on_the_device_follows_the_cpu(images, device, tmp_path):
    cpu = vt.train(_config("cpu", steps=30), images, tmp_path / "cpu", progress=False)
    dev = vt.train(_config(device, steps=30), images, tmp_path / "dev", progress=False)
    # Same seed and data order; the trainer's ε stream is each device's generator (CUDA's is not
    # the CPU's) and kernels round differently: the first losses (reconstruction-dominated) agree
    # to 1e-3, the last five's mean to 5 %.
    np.testing.assert_allclose(dev.history["loss"][:5], cpu.history["loss"][:5], rtol=1e-3)
    np.testing.assert_allclose(dev.history["loss"][-5:].mean(), cpu.history["loss"][-5:].mean(), rtol=0.05)


@pytest.mark.parametrize("device", OTHER_DEVICES)
@pytest.mark.parametrize("measure", ["cka", "cka_debiased", "procrustes", "cca", "svcca", "pwcca"])
def test_similarity_is_the_same_on_every_device(device, measure):
    g = torch.Generator().manual_seed(0)
    a = {"x": torch.randn(300, 20, generator=g, dtype=torch.float64), "w": torch.randn(300, 500, generator=g,
                                                                                      dtype=torch.float64)}
    b = {"y": a["x"] @ torch.randn(20, 30, generator=g, dtype=torch.float64) + torch.randn(300, 30, generator=g,
                                                                                            dtype=torch.float64)}
    cpu = similarity.similarity_matrix(a, b, measure, progress=False)
    dev = similarity.similarity_matrix({k: v.to(device) for k, v in a.items()}, {k: v.to(device) for k, v in b.items()},
                                       measure, progress=False)
    torch.testing.assert_close(dev.values.cpu(), cpu.values, rtol=0, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_batched_exact_procrustes_equals_one_at_a_time_and_brute_force(device):
    # Wide layers (p > n: eigendecomposed Grams, ranks 599 and 40) and narrow ones (p ≤ n), so the
    # batches mix ranks, pad, and cross the SVD / eigenvalue threshold of the nuclear norms (k = 512).
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    n = 600
    a = {"wide": r(n, 700), "low_rank": r(n, 40) @ r(40, 900), "narrow": r(n, 30), "mid": r(n, 550)}
    b = {"wide": a["wide"] @ r(700, 650) + r(n, 650), "narrow": r(n, 12), "mid": a["mid"][:, :520] + r(n, 520)}
    on = ({k: v.to(device) for k, v in a.items()}, {k: v.to(device) for k, v in b.items()})
    single = similarity.similarity_matrix(*on, "procrustes", progress=False, batch=1)
    steps = []
    batched = similarity.similarity_matrix(*on, "procrustes", progress=False, batch=3)
    torch.testing.assert_close(batched.values, single.values, rtol=0, atol=1e-10)
    auto = similarity.similarity_matrix(*on, "procrustes", progress=False)  # the default: by memory on CUDA
    torch.testing.assert_close(auto.values, single.values, rtol=0, atol=1e-10)
    brute = np.array([[np_procrustes(x.numpy(), y.numpy()) for y in b.values()] for x in a.values()])
    np.testing.assert_allclose(batched.values.numpy(), brute, rtol=0, atol=1e-8)
    both = similarity.similarity_matrix(*on, "min", progress=False, batch=4)
    cka = similarity.similarity_matrix(*on, "cka", progress=False)
    torch.testing.assert_close(both.values, torch.minimum(cka.values, single.values), rtol=0, atol=1e-10)
    # Progress still counts every layer fit and every pair once, in batches.
    from vaetransfer import _C
    fits = [similarity.fit_layers(acts) for acts in on]
    _C.similarity.similarity_matrices([fits[0]], [fits[1]], "procrustes", {"batch": 3},
                                      progress=lambda done, total: steps.append((done, total)))
    assert steps[-1][0] == steps[-1][1] == 7 + 12 and len(steps) < 19
    with pytest.raises(vt.ArgumentError, match="batch"):
        similarity.similarity_matrix(*on, "procrustes", progress=False, batch=-1)


@pytest.mark.parametrize("device", OTHER_DEVICES)
def test_estimators_are_the_same_on_every_device(device):
    g = torch.Generator().manual_seed(1)
    mean = torch.randn(400, 5, generator=g, dtype=torch.float64)
    logvar = 0.3 * torch.randn(400, 5, generator=g, dtype=torch.float64)
    z = mean + (0.5 * logvar).exp() * torch.randn(400, 5, generator=g, dtype=torch.float64)
    tc = [estimators.minibatch_total_correlation(*(t.to(d) for t in (z, mean, logvar)), dataset_size=10_000).tc
          for d in ("cpu", device)]
    assert float(tc[1]) == pytest.approx(float(tc[0]), rel=1e-9, abs=1e-9)
    rate = [estimators.rate_decomposition(mean.to(d), logvar.to(d), estimator="whole-dataset") for d in ("cpu", device)]
    assert float(rate[1].mutual_information) == pytest.approx(float(rate[0].mutual_information), rel=1e-7)


def test_an_unavailable_device_is_a_named_error_before_any_work(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: the error is for machines without it")
    with pytest.raises(vt.ArgumentError, match="CUDA") as e:
        studies.Execution(device="cuda")
    assert e.value.argument == "device"
    with pytest.raises(vt.ArgumentError) as e:
        vt.train(_config("cuda"), torch.zeros(4, 1, 64, 64), tmp_path / "r", progress=False)
    assert e.value.argument == "device" and not (tmp_path / "r").exists()
    from vaetransfer import cli
    # `vaetransfer run ... --device cuda`: refused before any run starts
    assert cli.main(["run", "quickstart", "--preset", "smoke", "--out", str(tmp_path / "s"), "--device", "cuda",
                     "--quiet"]) != 0
    assert "device" in capsys.readouterr().err and not (tmp_path / "s" / "sweeps").exists()


def test_the_execution_device_reaches_the_workers_and_not_the_run_ids():
    """A study builds its TrainConfig with the device it is given explicitly (an execution setting,
    from the run's job), a field that no run id or snapshot hash includes."""
    from vaetransfer.studies import quickstart
    from vaetransfer.train import config_hash

    c = quickstart.PRESETS["smoke"]
    on_gpu = quickstart.train_config(c, quickstart.models(c)[0], "cuda:7")
    on_cpu = quickstart.train_config(c, quickstart.models(c)[0], "cpu")
    assert (on_gpu.device, on_cpu.device) == ("cuda:7", "cpu")
    assert config_hash(on_gpu) == config_hash(on_cpu)
    assert studies.Execution().to_dict()["device"] == "cpu"


@pytest.mark.parametrize("device", OTHER_DEVICES)
def test_t5_logits_are_the_same_on_every_device(device):
    from vaetransfer.text import T5, T5Config
    cfg = T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=3, dropout_rate=0.0)
    g = torch.Generator().manual_seed(0)
    ids, labels = torch.randint(3, 64, (4, 9), generator=g), torch.randint(3, 64, (4, 7), generator=g)
    mask = torch.ones_like(ids)
    cpu = T5(cfg, seed=3).eval()
    dev = T5(cfg, seed=3).eval().to(device)
    torch.testing.assert_close(dev(ids.to(device), mask.to(device), labels=labels.to(device)).cpu(),
                               cpu(ids, mask, labels=labels), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", OTHER_DEVICES)
@pytest.mark.parametrize("name", studies.available())
def test_every_study_runs_on_the_device_at_smoke(name, device, tmp_path):
    """Training, the metrics hooks (which receive the training model on the device), the model
    loading of every analysis and the similarity engine, end to end on the device."""
    result = studies.run_study(name, tmp_path / name, preset="smoke", progress=False,
                               execution=studies.Execution(device=device))
    assert result["execution"]["device"] == device and result["findings"]


@pytest.mark.parametrize("device", DEVICES)
def test_the_transfer_crosscheck_twins_train_on_the_execution_device(device, tmp_path, monkeypatch):
    """The plain-PyTorch twins of the transfer study's cross-check train where the study's runs do
    (they trained on the CPU whatever the device: found on the first GPU run), and keep CPU weights."""
    from types import SimpleNamespace
    from vaetransfer.studies.transfer import twin_training as ref
    from vaetransfer.studies.transfer import config, crosscheck
    seen = {}
    real = ref.train_python

    def spy(model, *args, **kw):
        seen["device"], seen["weights"] = kw.get("device"), next(model.parameters()).device
        return real(model, *args, **kw)

    monkeypatch.setattr(ref, "train_python", spy)
    c = config.PRESETS["smoke"]
    row = crosscheck.crosscheck_runs(c, {})[0]
    rows = torch.rand(40, 1, 64, 64, generator=torch.Generator().manual_seed(0))
    crosscheck.train_reference(c, row, SimpleNamespace(run_dir=tmp_path / "run", device=device), rows)
    assert seen["device"] == device and seen["weights"].type == torch.device(device).type
    saved = torch.load(tmp_path / "run" / crosscheck.REFERENCE_WEIGHTS, weights_only=False)["state_dict"]
    assert {t.device.type for t in saved.values()} == {"cpu"}


@pytest.mark.parametrize("device", ["cpu", "cuda:7"])
def test_the_execution_device_reaches_each_run_as_an_argument_outside_its_identity(device, tmp_path):
    """The device travels with each run's job (no environment variable): a local worker process
    receives the sweep's device, and the runs' ids are the same under any device (the string is
    only handed over: no GPU is touched)."""
    import os

    from vaetransfer import sweep

    base = {"function": "vaetransfer.sweep.calibration:device", "args": {}}
    s = sweep.create(tmp_path / "s", "function", base, grid={"k": [0, 1]})
    before = os.environ.copy()
    s.run("local", workers=1, progress=False, device=device)
    assert os.environ == before
    assert [(s.run_dir(r.id) / "device.txt").read_text() for r in s.runs] == [device, device]
    other = sweep.create(tmp_path / "t", "function", base, grid={"k": [0, 1]})
    other.run("local", workers=1, progress=False)
    assert [r.id for r in other.runs] == [r.id for r in s.runs]
    assert [(other.run_dir(r.id) / "device.txt").read_text() for r in other.runs] == ["none", "none"]


def test_a_study_job_gets_its_device_in_the_job(tmp_path, monkeypatch):
    """``pipeline.execute_job`` hands the sweep's device to the stage's ``measure`` in ``job.device``."""
    from types import SimpleNamespace

    from vaetransfer.studies import pipeline
    from vaetransfer.studies.kit.declarations import Job

    seen = {}

    def measure(config, row, job):
        seen["job"], seen["row"] = job, row
        return {"x": 1}

    fake = SimpleNamespace(name="fake", config=None, stage=lambda name: studies.Stage(name, lambda c, e: [], measure))
    monkeypatch.setattr(pipeline, "get_study", lambda name: fake)
    monkeypatch.setattr(pipeline, "config_from_dict", lambda cls, values, argument=None: values)
    run_dir = tmp_path / "out" / "sweeps" / "train" / "runs" / "abc"
    run_dir.mkdir(parents=True)
    pipeline.execute_job({"study": "fake", "stage": "train", "config": {}, "seed": 2}, run_dir, device="cuda:3")
    job = seen["job"]
    assert isinstance(job, Job) and job.device == "cuda:3" and job.run_dir == run_dir and seen["row"] == {"seed": 2}
    assert job.out_dir == tmp_path / "out"
