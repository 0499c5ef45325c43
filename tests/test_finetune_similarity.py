"""Study 3 (finetune_similarity): the smoke preset end to end, the CKA measures against a plain
linear-CKA twin, the kept initialisation, true test labels, and the config's checks."""
import json
from collections import OrderedDict

import pytest
import torch

import vaetransfer as vt
from vaetransfer import cli, data, experiments
from vaetransfer.experiments import finetune_similarity as fs
from vaetransfer.nn import build_model
from vaetransfer.train import load_run, train


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """`vaetransfer run finetune_similarity --preset smoke`, once for the module."""
    out = tmp_path_factory.mktemp("finetune_similarity") / "smoke"
    assert cli.main(["run", "finetune_similarity", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    return out, json.loads((out / "results.json").read_text())


def _linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Eq. 2 of Kornblith et al. in plain float64 torch: ‖YᵀX‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F), columns centred."""
    x = x.reshape(len(x), -1).double()
    y = y.reshape(len(y), -1).double()
    x, y = x - x.mean(0), y - y.mean(0)
    return float((y.T @ x).norm() ** 2 / ((x.T @ x).norm() * (y.T @ y).norm()))


def test_smoke_writes_every_section_and_figure(smoke):
    out, r = smoke
    c = fs.PRESETS["smoke"]
    assert experiments.get("finetune_similarity") is fs
    for key in ("accuracy", "dynamics", "random_labels", "finetuning", "cross_seed", "findings", "figures"):
        assert r[key], key
    for path in r["figures"]:
        assert (out / path).stat().st_size > 1000
    text = (out / "index.md").read_text()
    for heading in ("## Findings", "## Cross-seed baselines", "## Accuracy"):
        assert heading in text
    assert set(r["finetuning"]) == {t.label for t in c.tasks}
    findings = r["findings"]
    for name in ("early_layers_change_less", "less_structure_less_early_change",
                 "memorisation_uses_early_layers_with_more_data", "random_labels_change_early_layers",
                 "structured_closer_to_pretrained", "random_closer_to_init", "cross_domain_changes_penultimate"):
        assert isinstance(findings[name]["holds"], bool), name
    assert r["runs"] == len(c.seeds) * (len(c.randomness) + len(c.memorisation_sizes) + len(c.tasks))


def test_cka_to_the_initial_representation_is_one_at_step_0(smoke):
    out, _ = smoke
    for sweep in ("scratch", "finetune"):
        for curves in (out / "sweeps" / sweep / "runs").glob("*/curves.json"):
            c = json.loads(curves.read_text())
            first = "init" if sweep == "scratch" else "pretrained"
            for layer in fs.LAYERS:
                epoch, value = c["cka"][first][layer][0]
                assert epoch == 0 and abs(value - 1.0) < 1e-12, (curves, layer, value)
    model = build_model(fs.RunArgs(channels=4).model_config(), seed=3).eval()
    x = data.object_shapes(range(30)).to_dataset().float_images()
    values = fs.layer_cka(model, x, OrderedDict(init=fs._activations(model, x)))
    assert all(abs(v - 1.0) < 1e-12 for v in values.values())


def test_cka_compares_whole_layers_on_held_out_rows(tmp_path):
    """The public follow-up code sliced channels instead of examples: ours keeps every feature of
    a layer and subsamples rows (the first cka_n held-out test rows); the values equal plain
    linear CKA on the full activations."""
    a = fs.RunArgs(n_train=40, n_test=30, cka_n=20, channels=4)
    train_set, test_set, x = a.datasets()
    assert x.shape == (20, 3, 32, 32) and torch.equal(x, test_set.float_images(range(20)))
    assert torch.equal(x, a.cka_inputs())
    same = fs.RunArgs(n_train=40, n_test=30, cka_n=20, same_domain_finetune=True)
    assert torch.equal(same.cka_inputs(), same.datasets()[2])
    first = build_model(a.model_config(), seed=0).eval()
    second = build_model(a.model_config(), seed=1).eval()
    acts = fs._activations(first, x)
    widths = {"block1": 4 * 16 * 16, "block2": 4 * 8 * 8, "block3": 4 * 4 * 4, "block4": 4 * 2 * 2, "logits": 10}
    assert {k: v.shape for k, v in acts.items()} == {k: (20, p) for k, p in widths.items()}
    values = fs.layer_cka(second, x, OrderedDict(other=acts))
    for layer in fs.LAYERS:
        twin = _linear_cka(second.activations(x, layer)[layer], acts[layer])
        assert values[f"cka_other_{layer}"] == pytest.approx(twin, abs=1e-9)


def test_training_rows_are_disjoint_from_test_rows_and_test_labels_stay_true():
    a = fs.RunArgs(n_train=50, n_test=40, cka_n=10, randomness=9, seed=2, channels=4)
    train_set, test_set, _ = a.datasets()
    truth_train = data.object_shapes(range(50), images=False).latents_classes[:, 0]
    truth_test = data.object_shapes(range(50_000, 50_040), images=False).latents_classes[:, 0]
    assert torch.equal(test_set.labels, truth_test)
    assert torch.equal(train_set.labels, data.partially_random_labels(truth_train, 9, seed=a.label_seed + 2))
    randomized = fs.RunArgs(n_train=50, n_test=40, cka_n=10, randomness=9, seed=2, randomize_test=True).datasets()[1]
    assert not torch.equal(randomized.labels, truth_test)
    shifted, shifted_test, _ = fs.RunArgs(n_train=50, n_test=40, cka_n=10, shift=3, seed=7).datasets()
    assert torch.equal(shifted.labels, (truth_train + 3) % 10)  # the shift does not depend on the seed
    assert torch.equal(shifted_test.labels, (truth_test + 3) % 10)  # the renamed task is tested as such
    # Same-domain fine-tuning: the pretraining domain's test part, train and test halves disjoint.
    ft_train, ft_test, _ = fs.RunArgs(n_train=50, n_test=40, cka_n=10, same_domain_finetune=True).datasets()
    half = (data.OBJECT_SHAPES_COUNT - 50_000) // 2
    assert torch.equal(ft_train.images, data.object_shapes(range(50_000, 50_050)).imgs)
    assert torch.equal(ft_test.images, data.object_shapes(range(50_000 + half, 50_000 + half + 40)).imgs)


def test_kept_initialisation_is_the_one_pretraining_started_from(tmp_path):
    args = {"n_train": 64, "n_test": 32, "cka_n": 16, "epochs": 1, "channels": 4, "seed": 5}
    fs.train_from_scratch(args, tmp_path / "run")
    init = fs.load_init(tmp_path / "run")
    # A 1-step run with a vanishing learning rate moves the parameters by at most ~1e-12: it
    # starts from the kept weights and not, say, from another seed's.
    a = fs.RunArgs(**{**args, "lr": 1e-12})
    cfg = a.train_config()
    cfg.steps, cfg.eval_every, cfg.metrics_every, cfg.snapshot_every = 1, 0, 0, 1
    start = train(cfg, a.datasets()[0], tmp_path / "tiny", progress=False).model()
    other = build_model(a.model_config(), seed=6)
    for name, value in init.named_parameters().items():
        assert torch.allclose(start.named_parameters()[name], value, atol=1e-6), name
    assert any(not torch.allclose(other.named_parameters()[n], v, atol=1e-3) for n, v in init.named_parameters().items())


def test_finetuning_starts_from_the_pretrained_weights_and_tracks_both_references(smoke):
    out, r = smoke
    for d in (out / "sweeps" / "finetune" / "runs").iterdir():
        c = json.loads((d / "curves.json").read_text())
        assert set(c["cka"]) == {"pretrained", "init"}
        config = load_run(d / "train").config
        assert config.init_from and config.init_from.startswith(str(out.resolve() / "sweeps" / "scratch"))
        assert config.optimizer.name == "sgd" and config.batch_size == 32
    # Per-epoch final values agree with the cross-seed analysis' same-seed values (two computations).
    for label, v in r["finetuning"].items():
        for ref in ("pretrained", "init"):
            for layer in fs.LAYERS:
                same = r["cross_seed"][label][ref][layer]["same_seed"]["mean"]
                assert v["final"][ref][layer]["mean"] == pytest.approx(same, abs=2e-4), (label, ref, layer)
                other = r["cross_seed"][label][ref][layer]["other_seeds"]
                assert other is not None and other["n"] == 2  # 2 seeds: 2 different-seed pairs


def test_task_sizes_are_capped_by_the_domain(smoke):
    c = fs.PRESETS["smoke"]
    big = experiments.override(c, {"finetune_n": 5000, "finetune_test_n": 5000})
    assert fs._task_sizes(big, fs.TaskSpec("sklearn_digits")) == (1797 - 898, 898)
    assert fs._task_sizes(big, fs.TaskSpec()) == (5000, 5000)


def test_rerun_resumes_without_training(smoke):
    out, r = smoke
    again = experiments.run_study("finetune_similarity", out, preset="smoke", progress=False)
    assert again["findings"] == r["findings"] and again["train_seconds"] == r["train_seconds"]


@pytest.mark.parametrize("sets, argument", [
    (["domain=cifar10"], "domain"),
    (["domain=mnist"], "domain"),
    (["domain=sklearn_digits"], "domain"),
    (["cka_n=1000"], "cka_n"),
    (["randomness=[1, 2]"], "randomness"),
    (["memorisation_sizes=[100000]"], "memorisation_sizes"),
    (['tasks=[{"randomness": 2, "shift": 1}]'], "tasks[0]"),
    (['tasks=[{"domain": "nowhere"}]'], "tasks[0].domain"),
    (["block_order=bn-first"], "block_order"),
    (["seeds=[1, 1]"], "seeds"),
    (["momentum=1.5"], "momentum"),
])
def test_config_errors_name_the_key(sets, argument):
    with pytest.raises((vt.ArgumentError, vt.ArgumentTypeError)) as e:
        experiments.make_config("finetune_similarity", "smoke", sets=sets)
    assert argument in str(e.value)


def test_file_domains_are_studied_from_their_folders(tmp_path):
    """CIFAR-10 and SVHN from files (as the paper): the domain rows come from the loaders."""
    from test_labelled_domains import _write_cifar

    _write_cifar(tmp_path / "cifar", rows_per_batch=12)
    dirs = {"cifar10": str(tmp_path / "cifar")}
    ds = fs.domain_rows("cifar10", "test", 2, 5, data_dirs=dirs)
    ref = data.load_cifar10(tmp_path / "cifar", "test")
    assert torch.equal(ds.images, ref.imgs[2:7]) and torch.equal(ds.labels, ref.latents_classes[2:7, 0])
    with pytest.raises(vt.ArgumentError, match="count"):
        fs.domain_rows("cifar10", "test", 10, 5, data_dirs=dirs)
    config = experiments.make_config("finetune_similarity", "smoke", sets=[
        f'data_dirs={json.dumps(dirs)}', "domain=cifar10", "pretrain_n=48", "memorisation_sizes=[24]", "cka_n=12",
        "test_n=12", "finetune_n=6", "finetune_test_n=12", 'tasks=[{}]'])
    assert config.domain == "cifar10"


def test_report_statistics_match_scipy():
    import statistics

    from scipy import stats

    from vaetransfer.experiments._stats import mean_se, spearman

    for x, y in (([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]), ([0, 1, 1, 2], [3.0, 2.0, 2.0, 0.5]), ([9, 4, 2, 1], [1, 1, 2, 2])):
        assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-3)
    assert spearman([1, 2], [2, 1]) is None and spearman([1, 1, 1], [1, 2, 3]) is None
    vals = [0.3, 0.7, 0.4, None]
    got = mean_se(vals)
    assert got["n"] == 3 and got["mean"] == pytest.approx(statistics.mean([0.3, 0.7, 0.4]), abs=1e-5)
    assert got["se"] == pytest.approx(statistics.stdev([0.3, 0.7, 0.4]) / 3 ** 0.5, abs=1e-5)
    assert mean_se([None]) == {"mean": None, "se": None, "n": 0}
