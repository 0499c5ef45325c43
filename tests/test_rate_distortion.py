"""Study 2 (rate_distortion): the smoke preset end to end, the per-run measures against their
definitions, the split rows, the presets, the findings' rules, and the spots where the paper's
public code differs."""
import dataclasses
import json
import math

import pytest
import torch

from vaetransfer import data, objectives, studies
from vaetransfer.config import config_to_dict
from vaetransfer.studies import Execution, pipeline
from vaetransfer.studies import rate_distortion as rd
from vaetransfer.studies.stats import spearman
from vaetransfer.train import load_run

PNG = b"\x89PNG\r\n\x1a\n"
FINDINGS = {"mi_saturates_marginal_kl_grows", "u_vs_l_shape", "gap_vs_beta", "early_stopping_shape", "ablations"}


@pytest.fixture(scope="module")
def smoke(study_smoke):
    """`vaetransfer run rate_distortion --preset smoke`, once per test session (tests/conftest.py)."""
    return study_smoke("rate_distortion")


def test_smoke_writes_every_section_and_figure(smoke):
    out, r = smoke
    c = rd.PRESETS["smoke"]
    assert r["runs"]["train"]["runs"] == r["runs"]["train"]["done"] == len(rd._train_runs(c, {}))
    for p in r["figures"]:
        assert (out / p).read_bytes()[:8] == PNG, p
    names = {p.split(".")[0] for p in r["figures"]}
    assert {"rd_planes", "rd_planes_early_stopping", "test_vs_beta", "rate_decomposition", "log_px",
            "nn_distances", "ablations"} <= names
    assert {f"hard_examples_{a}" for a in c.architectures} <= names
    index = (out / "index.md").read_text()
    assert "## Findings" in index and "## Rate decomposition" in index
    assert {f["name"] for f in r["findings"]} >= FINDINGS
    assert all(f["reproduced"] is not None or f["reason"] for f in r["findings"])
    assert set(r["analysis"]) >= FINDINGS
    # every (objective, architecture, split, β) cell of the grid has its measures
    t = r["analysis"]["table"]
    for arch in c.architectures:
        for s in c.splits:
            assert sorted(float(b) for b in t["beta-vae"][arch][s.label]) == sorted(c.betas)
    for obj in c.ablations:
        assert sorted(float(b) for b in t[obj][c.ablation_architecture][c.focus_split.label]) == sorted(c.ablation_betas)


def test_run_measures_follow_their_definitions(smoke):
    out, r = smoke
    c = rd.PRESETS["smoke"]
    assert studies.get("rate_distortion") is rd and studies.get_study("rate_distortion") is rd.STUDY  # discoverable
    stage = rd.STUDY.stage("train")
    rows = pipeline.run_sweep(out / pipeline.SWEEPS_DIR / "train", rd.STUDY, stage, c, stage.runs(c, {}),
                              Execution(), progress=False)  # finished: nothing retrains
    assert all(row.status == "done" for row in rows)
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
        assert x["trained"] in (0.0, 1.0) and x["diverged"] in (0.0, 1.0)
    # Recompute D and R of the final model on the same rows, from the definitions.
    model = load_run(row.dir / "train").model()
    picked = rd._subset(train_rows, c.eval_n, c.data_seed)
    x = data.tetrominoes(picked, seed=c.data_seed).float_images()
    with torch.no_grad():
        mean, logvar = model.encode(x)
        kl = (0.5 * (mean ** 2 + logvar.exp() - logvar - 1)).sum(1)
        z = objectives.evaluate(model, "beta-vae", x, seed=row["seed"])["z"]  # the draws the study's evaluation made
        logits = model.decode(z)
        bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="none").flatten(1).sum(1)
    assert row["train_rate"] == pytest.approx(float(kl.mean()), rel=1e-4)
    assert row["train_distortion"] == pytest.approx(float(bce.mean()), rel=1e-4)
    # early stopping kept the weights of the lowest validation loss
    run = load_run(row.dir / "train")
    evals = [m for m in run.metrics if "eval_loss" in m]
    assert row["early_stopping_step"] == min(evals, key=lambda m: m["eval_loss"])["step"]


def test_rerun_resumes_without_training(smoke):
    out, r = smoke
    res = studies.run_study("rate_distortion", out, preset="smoke", progress=False)
    assert res["analysis"]["table"] == r["analysis"]["table"]
    assert res["analysis"]["nearest_neighbours"] == r["analysis"]["nearest_neighbours"]
    assert (out / pipeline.STEPS_DIR / "nearest_neighbours.json").exists()


def test_split_rows_hold_out_validation_from_training():
    tr, va, te = rd.split_rows(rd.SplitSpec("cv", 0.01), 0, 0.1)
    full = data.tetrominoes_split("cv", 0.01)
    assert len(va) == round(0.1 * len(full.train)) and len(tr) + len(va) == len(full.train)
    assert torch.equal(torch.cat([tr, va]).sort().values, full.train) and torch.equal(te, full.test)
    assert torch.equal(rd.split_rows({"kind": "cv", "ratio": 0.01}, 0, 0.1)[1], va)  # dict form (stage rows)
    sizes = {row["split"]: (row["n_train"], row["n_test"]) for row in rd.paper_split_sizes()}
    assert sizes["random"] == (81_920, 81_920) and sizes["cv(0.1)"] == (16_384, 147_456)
    assert sizes["cv(0.5)"] == (81_920, 81_920)
    for ratio in rd.PAPER_CD_RATIOS:
        assert abs(sizes[f"cd({ratio:g})"][0] - ratio * 81_920) < 0.03 * ratio * 81_920


def test_paper_preset_is_the_papers_grid():
    p = rd.PRESETS["paper"]
    assert p.betas == (0.001, 0.005, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0, 2.0, 3.0, 5.0)
    assert p.steps == 257_000 and p.batch_size == 128 and p.latent_dim == 10 and len(p.seeds) == 5
    assert set(p.architectures) == {"mlp1", "mlp3", "cnn1", "cnn3"}
    # execution is no part of the science config: paper runs name Ray on the command line
    assert not {"executor", "workers", "threads", "address"} & set(config_to_dict(p))
    assert "--executor ray" in rd.STUDY.description
    labels = {s.label for s in p.splits}
    assert {"random", "checkerboard", "cv(0.1)"} <= labels
    a = rd.ARCHITECTURES
    assert a["mlp3"] == {"architecture": "mlp", "depth": 3, "width": 512}
    assert a["cnn1"] == {"architecture": "cnn", "depth": 1, "width": 64}
    # the small preset: every run within the hour's budget and the findings' splits present
    s = rd.PRESETS["small"]
    assert s == rd.Config()
    assert len(rd._train_runs(s, {})) <= 60 and any(sp.kind == "cv" for sp in s.splits)
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
        studies.make_config("rate_distortion", "smoke", sets=sets)
    assert arg.split("[")[0] in str(info.value)


def test_shape_rule_separates_u_from_l():
    u = rd._shape([0.001, 0.1, 1.0], [120.0, 100.0, 110.0], [0.5, 0.5, 0.5])
    assert u["u_shaped"] and not u["l_shaped"] and u["argmin_beta"] == 0.1
    l_shape = rd._shape([0.001, 0.1, 1.0], [100.0, 100.05, 130.0], [0.5, 0.5, 0.5])
    assert l_shape["l_shaped"] and not l_shape["u_shaped"]
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0 and spearman([1, 2, 3], [1, 2, 3]) == 1.0


# ---------------------------------------------------------------------------------- the findings' rules
SMALL = rd.PRESETS["small"]  # sparse split cv(0.01) = the focus split, 2 restarts there
U = rd._shape([0.001, 0.1, 1.0], [120.0, 100.0, 110.0], [0.5, 0.5, 0.5])
L = rd._shape([0.001, 0.1, 1.0], [100.0, 100.05, 130.0], [0.5, 0.5, 0.5])
DIVERGED = {"beta-vae": {"mlp1": {"cv(0.01)": {"1.0": {"diverged": {"mean": 0.5}, "trained": {"mean": 1.0}}}}}}
UNTRAINED = {"beta-vae": {"mlp3": {"cv(0.01)": {"0.1": {"diverged": {"mean": 0.0}, "trained": {"mean": 0.5}}}}}}


def decide(name: str, analysis: dict, config=SMALL):
    verdict = next(f for f in rd.FINDINGS if f.name == name).decide(config, analysis)
    assert verdict.reproduced is not None or verdict.reason
    return verdict.reproduced


def test_every_finding_has_claim_source_and_rule():
    assert {f.name for f in rd.FINDINGS} == FINDINGS
    for f in rd.FINDINGS:
        assert f.claim and "Rate-Regularization and Generalization in VAEs" in f.source and f.rule.endswith(".")


def test_mi_saturation_rule():
    def analysis(ratio, grows, table=None):
        return {"table": table or {}, "mi_saturates_marginal_kl_grows": {
            "mlp1/cv(0.01)": {"mi_over_log_n_below_1": [1.0, 1.0], "marginal_kl": [300.0, 5.0], "mi_saturates": True,
                              "marginal_kl_grows": True, "holds": True},
            "mlp3/cv(0.01)": {"mi_over_log_n_below_1": [ratio], "marginal_kl": [20.0, 5.0], "mi_saturates": ratio >= 0.9,
                              "marginal_kl_grows": grows, "holds": ratio >= 0.9 and grows}}}
    assert decide("mi_saturates_marginal_kl_grows", analysis(0.95, True)) is True
    assert decide("mi_saturates_marginal_kl_grows", analysis(0.5, True)) is False
    assert decide("mi_saturates_marginal_kl_grows", analysis(0.95, False)) is False
    assert decide("mi_saturates_marginal_kl_grows", analysis(0.95, True, DIVERGED)) is None
    assert decide("mi_saturates_marginal_kl_grows", analysis(0.95, True),
                  dataclasses.replace(SMALL, betas=(1.0, 2.0, 4.0))) is None  # no β < 1 in the grid


def test_u_vs_l_rule():
    def analysis(mlp1, mlp3, table=None):
        return {"table": table or {}, "u_vs_l_shape": {"split": "cv(0.01)", "per_architecture": {"mlp1": mlp1,
                                                                                             "mlp3": mlp3}}}
    assert decide("u_vs_l_shape", analysis(U, L)) is True
    assert decide("u_vs_l_shape", analysis(L, L)) is False
    assert decide("u_vs_l_shape", analysis(U, U)) is False
    assert decide("u_vs_l_shape", analysis(U, L, UNTRAINED)) is None
    assert decide("u_vs_l_shape", analysis(U, L), dataclasses.replace(SMALL, focus_seeds=(0,))) is None  # one restart
    one_depth = {"table": {}, "u_vs_l_shape": {"split": "cv(0.01)", "per_architecture": {"mlp1": U}}}
    assert decide("u_vs_l_shape", one_depth, dataclasses.replace(SMALL, architectures=("mlp1",),
                                                                 ablation_architecture="mlp1")) is None


def test_gap_rule():
    def analysis(rho, table=None):
        return {"table": table or {}, "gap_vs_beta": {"per_run_group": {
            "mlp1/cv(0.01)": {"spearman_beta_gap": -1.0, "shrinks_as_beta_grows": True},
            "mlp1/cd(0.02)": {"spearman_beta_gap": rho, "shrinks_as_beta_grows": rho is not None and rho < 0}}}}
    assert decide("gap_vs_beta", analysis(-0.6)) is True
    assert decide("gap_vs_beta", analysis(0.8)) is False
    assert decide("gap_vs_beta", analysis(None)) is False  # a constant gap does not shrink
    assert decide("gap_vs_beta", analysis(-0.6, DIVERGED)) is None


def test_early_stopping_rule():
    def analysis(mlp1, table=None):
        return {"table": table or {}, "early_stopping_shape": {"split": "cv(0.01)",
                                                               "per_architecture": {"mlp1": mlp1, "mlp3": U}}}
    assert decide("early_stopping_shape", analysis(L)) is True  # only the 1-layer network counts
    assert decide("early_stopping_shape", analysis(U)) is False
    assert decide("early_stopping_shape", analysis(L, DIVERGED)) is None
    assert decide("early_stopping_shape", analysis(L), dataclasses.replace(SMALL, focus_seeds=(3,))) is None
    deep_only = {"table": {}, "early_stopping_shape": {"split": "cv(0.01)", "per_architecture": {"mlp3": L}}}
    assert decide("early_stopping_shape", deep_only, dataclasses.replace(SMALL, architectures=("mlp3",))) is None


def test_ablation_rule():
    def cell(gap, diverged=0.0):
        return {"gap_neg_elbo": gap, "diverged": diverged, "trained": 1.0}

    def analysis(mi_gap, mkl_gap, diverged=0.0):
        return {"table": {}, "ablations": {"architecture": "mlp3", "split": "cv(0.01)", "per_objective": {
            "beta-vae": {"0.01": cell(40.0), "1.0": cell(30.0)},
            "mi-vae": {"0.01": cell(40.0 + mi_gap, diverged), "1.0": cell(30.0 + mi_gap)},
            "marginal-kl-vae": {"0.01": cell(40.0 + mkl_gap), "1.0": cell(30.0 - mkl_gap)}}}}
    assert decide("ablations", analysis(10.0, 2.0)) is True
    assert decide("ablations", analysis(1.0, 2.0)) is False
    assert decide("ablations", analysis(10.0, 2.0, diverged=1.0)) is None  # mi-vae collapsed
    assert decide("ablations", analysis(10.0, 2.0), dataclasses.replace(SMALL, ablations=("mi-vae",))) is None


def test_medium_preset_is_valid_and_sized_as_designed():
    """The medium preset (issue 32): constructs, is what make_config returns, and runs the counts it
    was sized for (60 runs of 6,000 steps: ≈ 1 h 50 min on 2 workers × 1 thread)."""
    m = rd.PRESETS["medium"]
    assert studies.make_config("rate_distortion", "medium") == m
    assert config_to_dict(studies.make_config("rate_distortion", "medium")) == config_to_dict(m)
    assert rd.PRESETS["small"] == rd.Config()  # unchanged
    # what the findings need: both depths, MLP-3 trained into its memorisation regime, ≥ 3 restarts on
    # the sparse CV split (the shape rules' tolerance), the ablation βs in the grid
    assert m.architectures == ("mlp1", "mlp3") and m.steps == 6000 and m.steps > rd.PRESETS["small"].steps
    sparse = rd._sparse_split(m)
    assert sparse == m.focus_split == rd.SplitSpec("cv", 0.01) and len(m.seeds_of(sparse)) == 3
    assert m.betas == (0.001, 0.005, 0.01, 0.1, 0.3, 1.0, 4.0)
    assert set(m.ablation_betas) <= set(m.betas) and min(m.betas) < 1 <= max(m.betas)
    # run counts of the one stage, from its runs function (nothing runs)
    stage = rd.STUDY.stage("train")
    assert [s.name for s in rd.STUDY.stages] == ["train"]
    rows = stage.runs(m, {})
    assert rows == rd._train_runs(m, {})
    count = {}
    for r in rows:
        key = (r["objective"], r["architecture"], rd._label(r["split"]))
        count[key] = count.get(key, 0) + 1
    assert count == {("beta-vae", "mlp1", "cv(0.01)"): 21, ("beta-vae", "mlp3", "cv(0.01)"): 21,  # 7 β × 3 seeds
                     ("beta-vae", "mlp1", "cd(0.02)"): 7, ("beta-vae", "mlp3", "cd(0.02)"): 7,    # 7 β × 1 seed
                     ("mi-vae", "mlp3", "cv(0.01)"): 2, ("marginal-kl-vae", "mlp3", "cv(0.01)"): 2}  # 2 β × 1 seed
    assert len(rows) == 60 and len({json.dumps(r, sort_keys=True) for r in rows}) == 60  # distinct runs
