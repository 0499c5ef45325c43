"""Study 2 (rate_distortion): the smoke preset end to end, the per-run measures against their
definitions, the split rows, the presets, and the spots where the paper's public code differs."""
import json
import math

import pytest
import torch

from vaetransfer import cli, data, estimators, experiments
from vaetransfer.experiments import rate_distortion as rd
from vaetransfer.experiments._stats import spearman
from vaetransfer.train import load_run

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """`vaetransfer run rate_distortion --preset smoke`, once for the module."""
    out = tmp_path_factory.mktemp("rate_distortion") / "smoke"
    assert cli.main(["run", "rate_distortion", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    return out, json.loads((out / "results.json").read_text())


def test_smoke_writes_every_section_and_figure(smoke):
    out, r = smoke
    c = rd.PRESETS["smoke"]
    assert r["runs"] == len(rd._declared_runs(c))
    for p in r["figures"]:
        assert (out / p).read_bytes()[:8] == PNG, p
    names = {p.split(".")[0] for p in r["figures"]}
    assert {"rd_planes", "rd_planes_early_stopping", "test_vs_beta", "rate_decomposition", "log_px",
            "nn_distances", "ablations"} <= names
    assert {f"hard_examples_{a}" for a in c.architectures} <= names
    assert "## Findings" in (out / "index.md").read_text()
    f = r["findings"]
    assert set(f) >= {"mi_saturates_marginal_kl_grows", "u_vs_l_shape", "gap_vs_beta", "early_stopping_shape",
                      "ablations"}
    # every (objective, architecture, split, β) cell of the grid has its measures
    t = r["table"]
    for arch in c.architectures:
        for s in c.splits:
            assert sorted(float(b) for b in t["beta-vae"][arch][s.label]) == sorted(c.betas)
    for obj in c.ablations:
        assert sorted(float(b) for b in t[obj][c.ablation_architecture][c.focus_split.label]) == sorted(c.ablation_betas)


def test_run_measures_follow_their_definitions(smoke):
    out, r = smoke
    c = rd.PRESETS["smoke"]
    s = experiments.get("rate_distortion")  # the study module is discoverable
    assert s is rd
    rows = experiments.run_sweep(rd._sweep(c, out), c, "training", progress=False)  # finished: nothing retrains
    assert all(row["status"] == "done" for row in rows)
    row = next(x for x in rows if x["architecture"] == "mlp1" and x["objective"] == "beta-vae"
               and rd._label(x["split"]) == c.focus_split.label and x["beta"] == 1.0)
    train_rows, val_rows, test_rows = rd.split_rows(c.focus_split, c.data_seed, c.validation_fraction)
    assert (row["n_train"], row["n_validation"], row["n_test"]) == (len(train_rows), len(val_rows), len(test_rows))
    assert row["log_n_train"] == pytest.approx(math.log(len(train_rows)))
    # I_q of the training encodings never exceeds log N_train (own-term weight 1/N)
    for x in rows:
        assert x["mi_minibatch"] <= x["log_n_train"] + 1e-3 and x["mi_whole"] <= x["log_n_train"] + 1e-3
        assert x["rate_whole"] == pytest.approx(x["mi_whole"] + x["marginal_kl_whole"], abs=1e-3)
        assert x["test_neg_elbo"] == pytest.approx(x["test_distortion"] + x["test_rate"], rel=1e-6)
        assert x["test_log_px"] >= -x["test_neg_elbo"] - 50  # IW bound near or above the ELBO
    # Recompute D and R of the final model on the same rows, from the definitions.
    sweep = rd._sweep(c, out)
    run_id = next(rr.id for rr in sweep.runs if rr.name == row["name"])
    model = load_run(sweep.run_dir(run_id) / "train").model()
    picked = rd._subset(train_rows, c.eval_n, c.data_seed)
    x = data.tetrominoes(picked, seed=c.data_seed).float_images()
    with torch.no_grad():
        mean, logvar = model.encode(x)
        kl = (0.5 * (mean ** 2 + logvar.exp() - logvar - 1)).sum(1)
        eps = estimators.sample_gaussian(mean, logvar, seed=0)[0] - mean  # distortion_rate's first chunk seed
        logits = model.decode(mean + eps)
        bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="none").flatten(1).sum(1)
    assert row["train_rate"] == pytest.approx(float(kl.mean()), rel=1e-4)
    assert row["train_distortion"] == pytest.approx(float(bce.mean()), rel=1e-4)
    # early stopping kept the weights of the lowest validation loss
    run = load_run(sweep.run_dir(run_id) / "train")
    evals = [m for m in run.metrics if "eval_loss" in m]
    assert row["early_stopping_step"] == min(evals, key=lambda m: m["eval_loss"])["step"]


def test_rerun_resumes_without_training(smoke):
    out, r = smoke
    res = experiments.run_study("rate_distortion", out, preset="smoke", progress=False)
    assert res["table"] == r["table"] and res["nearest_neighbours"] == r["nearest_neighbours"]


def test_split_rows_hold_out_validation_from_training():
    tr, va, te = rd.split_rows(rd.SplitSpec("cv", 0.01), 0, 0.1)
    full = data.tetrominoes_split("cv", 0.01)
    assert len(va) == round(0.1 * len(full.train)) and len(tr) + len(va) == len(full.train)
    assert torch.equal(torch.cat([tr, va]).sort().values, full.train) and torch.equal(te, full.test)
    assert torch.equal(rd.split_rows({"kind": "cv", "ratio": 0.01}, 0, 0.1)[1], va)  # dict form (sweep args)
    sizes = {row["split"]: (row["n_train"], row["n_test"]) for row in rd.paper_split_sizes()}
    assert sizes["random"] == (81_920, 81_920) and sizes["cv(0.1)"] == (16_384, 147_456)
    assert sizes["cv(0.5)"] == (81_920, 81_920)
    for ratio in rd.PAPER_CD_RATIOS:
        assert abs(sizes[f"cd({ratio:g})"][0] - ratio * 81_920) < 0.03 * ratio * 81_920


def test_paper_preset_is_the_papers_grid():
    p = rd.PRESETS["paper"]
    assert p.betas == (0.001, 0.005, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0, 2.0, 3.0, 5.0)
    assert p.steps == 257_000 and p.batch_size == 128 and p.latent_dim == 10 and len(p.seeds) == 5
    assert set(p.architectures) == {"mlp1", "mlp3", "cnn1", "cnn3"} and p.executor == "ray"
    labels = {s.label for s in p.splits}
    assert {"random", "checkerboard", "cv(0.1)"} <= labels
    a = rd.ARCHITECTURES
    assert a["mlp3"] == {"architecture": "mlp", "depth": 3, "width": 512}
    assert a["cnn1"] == {"architecture": "cnn", "depth": 1, "width": 64}
    # the small preset: every run within the hour's budget and the findings' splits present
    s = rd.PRESETS["small"]
    assert len(rd._declared_runs(s)) <= 60 and any(sp.kind == "cv" for sp in s.splits)
    assert any(sp.kind == "cd" for sp in s.splits)


@pytest.mark.parametrize("sets, arg", [
    (["betas=[1.0, 1.0, 2.0]"], "betas"),
    (["architectures=[\"mlp5\"]"], "architectures"),
    (["splits=[{\"kind\": \"cv\", \"ratio\": 1.5}]"], "splits[0]"),
    (["splits=[{\"kind\": \"random\", \"ratio\": 0.5}]"], "splits[0]"),
    (["focus=7"], "focus"),
    (["eval_every=100000"], "eval_every"),
    (["ablations=[\"tc-vae\"]"], "ablations"),
    (["ablation_architecture=\"cnn3\""], "ablation_architecture"),
    (["validation_fraction=0"], "validation_fraction"),
])
def test_bad_configs_name_the_field(sets, arg):
    with pytest.raises((ValueError, TypeError)) as info:
        experiments.make_config("rate_distortion", "smoke", sets=sets)
    assert arg.split("[")[0] in str(info.value)


def test_shape_rule_separates_u_from_l():
    u = rd._shape([0.001, 0.1, 1.0], [120.0, 100.0, 110.0], [0.5, 0.5, 0.5])
    assert u["u_shaped"] and not u["l_shaped"] and u["argmin_beta"] == 0.1
    l_shape = rd._shape([0.001, 0.1, 1.0], [100.0, 100.05, 130.0], [0.5, 0.5, 0.5])
    assert l_shape["l_shaped"] and not l_shape["u_shaped"]
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0 and spearman([1, 2, 3], [1, 2, 3]) == 1.0
