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
from vaetransfer.train import load_run
from vaetransfer.studies.kit import declarations, trained
from vaetransfer.studies.kit.stats import spearman

PNG = b"\x89PNG\r\n\x1a\n"
FINDINGS = {"mi_saturates_marginal_kl_grows", "u_vs_l_shape", "gap_vs_beta", "early_stopping_shape", "ablations"}


@pytest.fixture(scope="module")
def smoke(study_smoke):
    """`vaetransfer run rate_distortion --preset smoke`, once per test session (tests/conftest.py)."""
    return study_smoke("rate_distortion")


def test_smoke_writes_every_section_and_figure(smoke):
    out, r = smoke
    c = rd.PRESETS["smoke"]
    assert r["runs"]["train"]["runs"] == r["runs"]["train"]["done"] == len(rd.stages.train_runs(c, {}))
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
    # every finding names figures the study wrote; the trained check covers every run, against the
    # input-ignoring baseline of each split's training rows (recomputed here)
    for f in r["findings"]:
        assert f["figures"] and set(f["figures"]) <= set(r["figures"]), f["name"]
    check = r["analysis"]["trained"]
    assert len(check) == len(rd.analysis.WEIGHTS) * r["runs"]["train"]["runs"]  # one check per run and weights
    for name, v in check.items():
        weights, run = name.split(": ", 1)
        assert v["context"]["weights"] == weights and list(v["models"]) == [run]
        assert {"loss_first", "loss_last", "finite"} <= set(v["models"][run])
    baselines = rd.analysis.trained_baselines(check)
    for s in c.splits:
        rows = rd.stages.subset(rd.split_rows(s, c.data_seed, c.validation_fraction)[0], c.eval_n, c.data_seed)
        x = data.tetrominoes(rows, seed=c.data_seed).float_images()
        assert baselines[s.label] == pytest.approx(trained.input_ignoring_distortion(x, x), abs=1e-3)
    for f in r["findings"]:  # smoke learns nothing: a finding resting on an untrained run says which
        if f["reproduced"] is None and f["reason"].startswith("did not train — "):
            assert " seed " in f["reason"] and (f["diagnosis"] is None or f["diagnosis"]["kind"] == "open")
    assert "## Did the runs train?" in index


def test_run_measures_follow_their_definitions(smoke):
    out, r = smoke
    c = rd.PRESETS["smoke"]
    assert studies.get("rate_distortion") is rd and studies.get_study("rate_distortion") is rd.STUDY  # discoverable
    stage = rd.STUDY.stage("train")
    rows = pipeline.run_sweep(out / declarations.SWEEPS_DIR / "train", rd.STUDY, stage, c, stage.runs(c, {}),
                              Execution(), progress=False)  # finished: nothing retrains
    assert all(row.status == "done" for row in rows)
    row = next(x for x in rows if x["architecture"] == "mlp1" and x["objective"] == "beta-vae"
               and rd.stages.split_label(x["split"]) == c.focus_split.label and x["beta"] == 1.0)
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
        assert x["loss"] == trained.loss_summary(load_run(x.dir / "train").history["loss"].tolist())
    # Recompute D and R of the final model on the same rows, from the definitions.
    model = load_run(row.dir / "train").model()
    picked = rd.stages.subset(train_rows, c.eval_n, c.data_seed)
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
    assert (out / declarations.STEPS_DIR / "nearest_neighbours.json").exists()


def test_a_run_diverging_before_its_first_snapshot_is_measured_at_its_early_stopping_weights(tmp_path):
    """The medium preset's mi-vae ablation runs broke (NaN) at step ~900, before their first
    snapshot: their history was lost (``KeyError: 'loss'`` here) and their collapsed posteriors'
    log-variances lie beyond float32's range. lr 0.1 makes that happen within a few steps."""
    c = dataclasses.replace(rd.PRESETS["smoke"], lr=0.1, steps=40, eval_every=1)
    row = {"architecture": "mlp1", "split": c.focus_split, "objective": "mi-vae", "beta": 1.0, "seed": 0}
    m = rd.train_and_measure(c, row, declarations.Job("train", tmp_path, tmp_path))
    run = load_run(tmp_path / "train")
    assert m["diverged"] == 1.0 and run.snapshots() == []  # broke before step c.steps // 4
    assert 1 <= m["steps"] < c.steps // 4 and run.history["step"].tolist() == list(range(1, m["steps"] + 1))
    assert m["loss"] == trained.loss_summary(run.history["loss"].tolist()) and m["loss"]["finite"]
    assert m["early_stopping_step"] <= m["steps"]
    assert all(math.isfinite(m[k]) for k in ("mi_whole", "marginal_kl_whole", "rate_whole", "train_distortion"))


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
    assert len(rd.stages.train_runs(s, {})) <= 60 and any(sp.kind == "cv" for sp in s.splits)
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
    u = rd.analysis.shape([0.001, 0.1, 1.0], [120.0, 100.0, 110.0], [0.5, 0.5, 0.5])
    assert u["u_shaped"] and not u["l_shaped"] and u["argmin_beta"] == 0.1
    l_shape = rd.analysis.shape([0.001, 0.1, 1.0], [100.0, 100.05, 130.0], [0.5, 0.5, 0.5])
    assert l_shape["l_shaped"] and not l_shape["u_shaped"]
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0 and spearman([1, 2, 3], [1, 2, 3]) == 1.0


# ---------------------------------------------------------------------------------- the findings' rules
SMALL = rd.PRESETS["small"]  # sparse split cv(0.01) = the focus split, 2 restarts there
U = rd.analysis.shape([0.001, 0.1, 1.0], [120.0, 100.0, 110.0], [0.5, 0.5, 0.5])
L = rd.analysis.shape([0.001, 0.1, 1.0], [100.0, 100.05, 130.0], [0.5, 0.5, 0.5])
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
    sparse = rd.analysis.sparse_split(m)
    assert sparse == m.focus_split == rd.SplitSpec("cv", 0.01) and len(m.seeds_of(sparse)) == 3
    assert m.betas == (0.001, 0.005, 0.01, 0.1, 0.3, 1.0, 4.0)
    assert set(m.ablation_betas) <= set(m.betas) and min(m.betas) < 1 <= max(m.betas)
    # run counts of the one stage, from its runs function (nothing runs)
    stage = rd.STUDY.stage("train")
    assert [s.name for s in rd.STUDY.stages] == ["train"]
    rows = stage.runs(m, {})
    assert rows == rd.stages.train_runs(m, {})
    count = {}
    for r in rows:
        key = (r["objective"], r["architecture"], rd.stages.split_label(r["split"]))
        count[key] = count.get(key, 0) + 1
    assert count == {("beta-vae", "mlp1", "cv(0.01)"): 21, ("beta-vae", "mlp3", "cv(0.01)"): 21,  # 7 β × 3 seeds
                     ("beta-vae", "mlp1", "cd(0.02)"): 7, ("beta-vae", "mlp3", "cd(0.02)"): 7,    # 7 β × 1 seed
                     ("mi-vae", "mlp3", "cv(0.01)"): 2, ("marginal-kl-vae", "mlp3", "cv(0.01)"): 2}  # 2 β × 1 seed
    assert len(rows) == 60 and len({json.dumps(r, sort_keys=True) for r in rows}) == 60  # distinct runs


# ---------------------------------------------------------------------------------- did the runs train?
BETAS = [0.001, 0.01, 0.1, 1.0, 4.0]
BASELINES = {"cv(0.01)": 300.0, "cv(0.04)": 280.0, "cd(0.02)": 200.0}


def rec(arch="mlp3", beta=0.1, seed=0, d=100.0, es=None, split="cv(0.01)", obj="beta-vae", loss=(1000.0, 100.0),
        **extra):
    """A run's record of the `trained` section (rd.analysis.run_record's fields)."""
    r = {"objective": obj, "architecture": arch, "split": split, "beta": float(beta), "seed": seed,
         "train_distortion": d, "es_train_distortion": d if es is None else es}
    if loss is not None:
        r.update(loss_first=loss[0], loss_last=loss[1], finite=True)
    return {**r, **extra}


def records(overrides=(), archs=("mlp1", "mlp3"), split="cv(0.01)", seeds=(0, 1)):
    """Every β-VAE of a grid that trained (train D: 60 at β = 0.001 … 120 at β = 1, 170 at β = 4),
    with ``overrides`` (records) replacing or adding runs by name."""
    d = {0.001: 60.0, 0.01: 70.0, 0.1: 90.0, 1.0: 120.0, 4.0: 170.0}
    out = {}
    for arch in archs:
        for b in BETAS:
            for s in seeds:
                r = rec(arch, b, s, d[b], split=split)
                out[rd.analysis.run_name(r)] = r
    for r in overrides:
        out[rd.analysis.run_name(r)] = r
    return out


def failures_of(checks: dict) -> dict:
    """weights → the runs of a `trained` section that did not train (rd.analysis.untrained_runs)."""
    return {w: rd.analysis.untrained_runs({"trained": checks}, weights=w) for w in rd.analysis.WEIGHTS}


def test_trained_rule_references_and_thresholds():
    t = rd.analysis.trained_section(records(), BASELINES)
    assert all(v["context"]["baseline"] == BASELINES[m["split"]] for v in t.values() for m in v["models"].values())
    assert failures_of(t) == {"final": [], "early_stopped": []}
    # β < 1: halfway from the baseline 300 to the β = 1 runs' mean 120; β = 1: halfway to the smallest β's 60;
    # β > 1: loss checks only
    assert t["final: beta-vae mlp3 cv(0.01) β=0.1 seed 0"]["rule"]["maximum"] == 210.0
    assert t["final: beta-vae mlp3 cv(0.01) β=1 seed 1"]["rule"]["maximum"] == 180.0
    assert t["final: beta-vae mlp3 cv(0.01) β=4 seed 0"]["rule"]["maximum"] == 306.0  # the baseline + 2 %
    # a run that cannot reconstruct its training images fails, named, with the rule's numbers
    bad = rec("mlp3", 0.01, 1, 250.0)
    t = rd.analysis.trained_section(records([bad]), BASELINES)
    [why] = failures_of(t)["final"]
    assert why.startswith("beta-vae mlp3 cv(0.01) β=0.01 seed 1: train distortion 250 > 2")
    assert "halfway from the input-ignoring baseline 300" in why and "β = 1 β-VAEs' mean" in why
    # its early-stopped weights judged on their own distortion
    es = failures_of(rd.analysis.trained_section(records([rec("mlp3", 0.01, 1, 80.0, es=260.0)]), BASELINES))
    assert es["final"] == [] and len(es["early_stopped"]) == 1 and "early-stopped train distortion 260" in \
        es["early_stopped"][0]
    # β = 4 may legitimately sit at the baseline (posterior collapse), not above it
    assert failures_of(rd.analysis.trained_section(records([rec("mlp3", 4.0, 0, 303.0)]), BASELINES))["final"] == []
    assert failures_of(rd.analysis.trained_section(records([rec("mlp3", 4.0, 0, 1250.0)]), BASELINES))["final"][0].startswith(
        "beta-vae mlp3 cv(0.01) β=4 seed 0: train distortion 1250 > 306 (the input-ignoring baseline 300 plus 2 %")
    # ... but a loss that did not fall, or diverged, fails at any β
    flat = rec("mlp3", 4.0, 0, 170.0, loss=(100.0, 99.5))
    assert "did not fall by 1%" in failures_of(rd.analysis.trained_section(records([flat]), BASELINES))["final"][0]
    nan = rec("mlp1", 0.001, 0, 60.0, finite=False)
    assert "diverged" in failures_of(rd.analysis.trained_section(records([nan]), BASELINES))["final"][0]
    # the β = 1 runs themselves: against the smallest β's mean (against their own they would always pass)
    one = rec("mlp1", 1.0, 0, 200.0)
    assert failures_of(rd.analysis.trained_section(records([one]), BASELINES))["final"][0].startswith(
        "beta-vae mlp1 cv(0.01) β=1 seed 0: train distortion 200 > 180")
    # a reference no better than ignoring the input: every run resting on it fails, saying so
    lost = [rec("mlp3", 1.0, s, 310.0) for s in (0, 1)]
    failed = failures_of(rd.analysis.trained_section(records(lost), BASELINES))["final"]
    assert {f.split(":")[0] for f in failed} >= {f"beta-vae mlp3 cv(0.01) β={b:g} seed {s}" for b in BETAS[:3]
                                                  for s in (0, 1)}
    assert any("is not below the input-ignoring baseline 300" in f for f in failed)
    # ablations at β ≤ 1 against the β-VAEs' β = 1 mean
    mi = rec("mlp3", 0.01, 0, 230.0, obj="mi-vae")
    assert failures_of(rd.analysis.trained_section(records([mi]), BASELINES))["final"][0].startswith(
        "mi-vae mlp3 cv(0.01) β=0.01 seed 0: train distortion 230 > 210")


def test_trained_check_of_runs_measured_before_it(tmp_path):
    """Old outputs load: a run without a loss summary or history keeps its old flag, or is not checked."""
    row = {"architecture": "mlp1", "split": {"kind": "cv", "ratio": 0.01}, "objective": "beta-vae", "beta": 0.1,
           "seed": 0}
    old = declarations.RunResult("train", row, "r0", tmp_path, "done", 1.0, {"train_distortion": 90.0, "trained": 0.0})
    r = rd.analysis.run_record(old)
    assert "loss_first" not in r and r["loss_fell"] is False
    assert "did not fall" in failures_of(rd.analysis.trained_section(records([r]), BASELINES))["final"][0]
    unchecked = rd.analysis.run_record(dataclasses.replace(old, measured={"train_distortion": 90.0,
                                                                  "es_train_distortion": 95.0}))
    assert "loss_fell" not in unchecked and failures_of(rd.analysis.trained_section(records([unchecked]), BASELINES)) == {
        "final": [], "early_stopped": []}
    diverged = rd.analysis.run_record(dataclasses.replace(old, measured={"train_distortion": 90.0, "diverged": 1.0,
                                                                 "loss": {"loss_first": 900.0, "loss_last": 80.0,
                                                                          "finite": True}}))
    assert diverged["finite"] is False


# ---------------------------------------------------------------------------------- shape diagnoses
def cells(curves: dict, sd: float = 2.0, n: int = 3, **extra) -> dict:
    """A β-VAE table: {(arch, split): {metric: [value per β of BETAS]}} → the analysis' table form."""
    table = {}
    for (arch, split), metrics in curves.items():
        for k, b in enumerate(BETAS):
            cell = {m: {"mean": v[k], "se": sd / math.sqrt(n), "n": n, "sd": sd} for m, v in metrics.items()}
            cell.update({m: {"mean": v, "se": 0.0, "n": n, "sd": 0.0} for m, v in extra.items()})
            table.setdefault("beta-vae", {}).setdefault(arch, {}).setdefault(split, {})[str(b)] = cell
    return table


SHALLOW_U = [141.0, 130.0, 121.0, 112.0, 126.0]
DEEP_L = [190.0, 191.0, 193.0, 230.0, 260.0]
DEEP_UPTURN = [205.0, 192.0, 193.0, 230.0, 260.0]   # L from β = 0.01 up; β = 0.001 13 nats above
DEEP_U = [205.0, 200.0, 190.0, 230.0, 260.0]


def shape_analysis(mlp1=SHALLOW_U, mlp3=DEEP_L, es1=None, es3=None, sd=2.0, overrides=(), stop=None, table=None):
    """A synthetic analysis of the shape findings on cv(0.01) (small: 2 restarts there)."""
    es1, es3 = es1 or mlp1, es3 or mlp3
    t = table or cells({("mlp1", "cv(0.01)"): {"test_distortion": mlp1, "es_test_distortion": es1},
                        ("mlp3", "cv(0.01)"): {"test_distortion": mlp3, "es_test_distortion": es3}}, sd=sd, n=2,
                       early_stopping_step=500.0, n_train=1474.0)
    if stop is not None:
        t["beta-vae"]["mlp3"]["cv(0.01)"]["0.001"]["early_stopping_step"]["mean"] = stop
    return {"table": t, "trained": rd.analysis.trained_section(records(overrides), BASELINES),
            "u_vs_l_shape": {"split": "cv(0.01)", "per_architecture": {
                "mlp1": rd.analysis.shape(BETAS, mlp1, [sd] * 5), "mlp3": rd.analysis.shape(BETAS, mlp3, [sd] * 5)}},
            "early_stopping_shape": {"split": "cv(0.01)", "per_architecture": {
                "mlp1": rd.analysis.shape(BETAS, es1, [sd] * 5), "mlp3": rd.analysis.shape(BETAS, es3, [sd] * 5)}}}


def finding(name: str):
    return next(f for f in rd.FINDINGS if f.name == name)


def judged(name: str, analysis: dict, config=SMALL):
    f = finding(name)
    return f.decide(config, analysis), f.diagnose(config, analysis)


def test_u_vs_l_undecided_on_an_untrained_run_naming_it():
    bad = rec("mlp3", 0.001, 1, 280.0)
    verdict, d = judged("u_vs_l_shape", shape_analysis(overrides=[bad]))
    assert verdict.reproduced is None and "beta-vae mlp3 cv(0.01) β=0.001 seed 1" in verdict.reason
    assert verdict.reason.startswith("did not train — ")
    assert d.kind == "open" and "beta-vae mlp3 cv(0.01) β=0.001 seed 1" in d.text
    # a run on another split does not touch the sparse-split finding; it does the every-split ones
    other = rec("mlp3", 0.1, 0, 60.0, split="cd(0.02)", loss=(500.0, 499.0))
    analysis = shape_analysis(overrides=[other])
    assert judged("u_vs_l_shape", analysis)[0].reproduced is True
    gap = {**analysis, "gap_vs_beta": {"per_run_group": {"mlp1/cv(0.01)": {"spearman_beta_gap": -1.0,
                                                                           "shrinks_as_beta_grows": True}}}}
    verdict = finding("gap_vs_beta").decide(SMALL, gap)
    assert verdict.reproduced is None and "beta-vae mlp3 cd(0.02) β=0.1 seed 0" in verdict.reason
    # early stopping rests on the early-stopped weights
    es_bad = rec("mlp1", 0.01, 0, 70.0, es=290.0)
    verdict, d = judged("early_stopping_shape", shape_analysis(mlp1=SHALLOW_U, es1=DEEP_L, overrides=[es_bad]))
    assert verdict.reproduced is None and "early-stopped train distortion 290" in verdict.reason
    assert d.kind == "open" and "beta-vae mlp1 cv(0.01) β=0.01 seed 0" in d.text
    assert judged("u_vs_l_shape", shape_analysis(overrides=[es_bad]))[0].reproduced is True  # final weights fine


def test_u_vs_l_diagnosis_branches():
    verdict, d = judged("u_vs_l_shape", shape_analysis())
    assert verdict.reproduced is True and d.kind == "reproduced" and "mlp3 minimum at β = 0.001" in d.text
    # MLP-3 still improving at the end at the smallest β → scale
    verdict, d = judged("u_vs_l_shape", shape_analysis(mlp3=DEEP_UPTURN, stop=1450.0))
    assert verdict.reproduced is False and d.kind == "scale"
    assert d.evidence["per_architecture"]["mlp3"]["class"] == "still improving" and "97%" in d.text
    # the early-stopped weights are L-shaped → setting (early stopping vs training to the end)
    verdict, d = judged("u_vs_l_shape", shape_analysis(mlp3=DEEP_UPTURN, es3=DEEP_L))
    assert verdict.reproduced is False and d.kind == "setting"
    assert d.evidence["per_architecture"]["mlp3"]["class"] == "early stopping" and "early-stopped" in d.text
    # ... but not when those early-stopped weights did not train
    es_bad = rec("mlp3", 0.001, 0, 60.0, es=295.0)
    _, d = judged("u_vs_l_shape", shape_analysis(mlp3=DEEP_UPTURN, es3=DEEP_L, overrides=[es_bad]))
    assert d.evidence["per_architecture"]["mlp3"]["class"] == "smallest β only"
    # the upturn only at the smallest β, beyond the spread, no denser CV split → open, with the numbers
    verdict, d = judged("u_vs_l_shape", shape_analysis(mlp3=DEEP_UPTURN))
    ev = d.evidence["per_architecture"]["mlp3"]
    assert d.kind == "open" and ev["class"] == "smallest β only" and ev["smallest_beta_excess"] == 13.0
    assert ev["second_beta_excess"] == 0.0 and "16,384" in d.text and "1,474" in d.text
    # ... and with a denser CV split (2 restarts) on which MLP-3 is L → setting: the training-set size
    table = cells({("mlp1", "cv(0.01)"): {"test_distortion": SHALLOW_U, "es_test_distortion": SHALLOW_U},
                   ("mlp3", "cv(0.01)"): {"test_distortion": DEEP_UPTURN, "es_test_distortion": DEEP_UPTURN},
                   ("mlp3", "cv(0.04)"): {"test_distortion": DEEP_L}}, n=2, early_stopping_step=500.0,
                  n_train=1474.0)
    for cell in table["beta-vae"]["mlp3"]["cv(0.04)"].values():
        cell["n_train"]["mean"] = 5898.0
    denser = shape_analysis(mlp3=DEEP_UPTURN, table=table)
    two = dataclasses.replace(SMALL, seeds=(0, 1))
    verdict, d = judged("u_vs_l_shape", denser, two)
    assert verdict.reproduced is False and d.kind == "setting"
    assert d.evidence["per_architecture"]["mlp3"]["class"] == "n_train" and "cv(0.04)" in d.text
    # one restart there: indicative only, not a separated cause
    assert judged("u_vs_l_shape", denser)[1].kind == "open"
    # a U of the 3-layer network (more than the smallest β above its minimum) → open
    _, d = judged("u_vs_l_shape", shape_analysis(mlp3=DEEP_U))
    assert d.kind == "open" and d.evidence["per_architecture"]["mlp3"]["class"] == "U"
    # MLP-1 off its U: minimum at the grid's largest β → setting (the β grid); inside the spread → open
    _, d = judged("u_vs_l_shape", shape_analysis(mlp1=[141.0, 130.0, 121.0, 112.0, 105.0]))
    assert d.kind == "setting" and d.evidence["per_architecture"]["mlp1"]["class"] == "beyond the grid"
    _, d = judged("u_vs_l_shape", shape_analysis(mlp1=[112.5, 130.0, 121.0, 112.0, 126.0]))
    assert d.kind == "open" and d.evidence["per_architecture"]["mlp1"]["class"] == "flat"
    # classes of different kinds → open
    _, d = judged("u_vs_l_shape", shape_analysis(mlp1=[141.0, 130.0, 121.0, 112.0, 105.0], mlp3=DEEP_UPTURN))
    assert d.kind == "open" and set(d.evidence["per_architecture"]) == {"mlp1", "mlp3"}
    # no verdict to explain: one restart
    assert finding("u_vs_l_shape").diagnose(dataclasses.replace(SMALL, focus_seeds=(0,)), shape_analysis()) is None
    # an analysis written before the `trained` section: the table's flags
    old = {k: v for k, v in shape_analysis(mlp3=DEEP_UPTURN).items() if k != "trained"}
    assert judged("u_vs_l_shape", old)[1].evidence["per_architecture"]["mlp3"]["class"] == "smallest β only"


def test_early_stopping_diagnosis_branches():
    verdict, d = judged("early_stopping_shape", shape_analysis(es1=DEEP_L))
    assert verdict.reproduced is True and d.kind == "reproduced"
    verdict, d = judged("early_stopping_shape", shape_analysis(es1=[125.0, 124.0, 121.0, 112.0, 126.0]))
    ev = d.evidence["per_architecture"]["mlp1"]
    assert verdict.reproduced is False and d.kind == "open" and ev["class"] == "narrowed"
    assert ev["es_smallest_beta_excess"] == 13.0 and ev["final_smallest_beta_excess"] == 29.0
    assert "this study's choice" in d.text


# ---------------------------------------------------------------------------------- gap and ablation diagnoses
def gap_analysis(groups: dict, table: dict, overrides=()) -> dict:
    per = {}
    for key, g in groups.items():
        rho = spearman(BETAS, g)
        per[key] = {"betas": BETAS, "gap_neg_elbo": g, "spearman_beta_gap": rho,
                    "shrinks_as_beta_grows": rho is not None and rho < 0}
    return {"table": table, "trained": rd.analysis.trained_section(records(overrides), BASELINES),
            "gap_vs_beta": {"per_run_group": per}}


def test_gap_diagnosis_branches():
    elbo = {"test_neg_elbo": [0.0] * 5, "train_neg_elbo": [0.0] * 5}
    table = cells({("mlp1", "cv(0.01)"): elbo, ("mlp3", "cv(0.01)"): elbo}, sd=1.5, n=2)
    shrink = [68.0, 60.0, 45.0, 30.0, 26.0]
    verdict, d = judged("gap_vs_beta", gap_analysis({"mlp1/cv(0.01)": shrink, "mlp3/cv(0.01)": shrink}, table))
    assert verdict.reproduced is True and d.kind == "reproduced"
    # the 3-layer gap smallest at an interior β and growing at large β beyond the noise (±6) → setting: depth
    memorise = [42.0, 35.0, 28.0, 60.0, 90.0]
    verdict, d = judged("gap_vs_beta", gap_analysis({"mlp1/cv(0.01)": shrink, "mlp3/cv(0.01)": memorise}, table))
    g = d.evidence["per_group"]["mlp3/cv(0.01)"]
    assert verdict.reproduced is False and d.kind == "setting" and g["class"] == "memorisation at large β"
    assert g["noise"] == 6.0 and "§4.4" in d.text
    # a CD group (one restart: the noise from the sparse split) whose gap hardly moves → open, noise
    flat = [3.0, 5.0, 2.0, 4.0, 6.0]
    verdict, d = judged("gap_vs_beta", gap_analysis({"mlp1/cv(0.01)": shrink, "mlp1/cd(0.02)": flat}, table))
    g = d.evidence["per_group"]["mlp1/cd(0.02)"]
    assert d.kind == "open" and g["class"] == "noise" and g["noise_from"] == "cv(0.01)"
    assert "cannot decide" in d.text
    # a 1-layer gap growing beyond the noise → open
    grows = [20.0, 30.0, 40.0, 50.0, 60.0]
    _, d = judged("gap_vs_beta", gap_analysis({"mlp1/cv(0.01)": grows, "mlp3/cv(0.01)": shrink}, table))
    assert d.kind == "open" and d.evidence["per_group"]["mlp1/cv(0.01)"]["class"] == "grows"
    # no restarts anywhere to size the noise
    single = cells({("mlp1", "cv(0.01)"): elbo}, n=1)
    _, d = judged("gap_vs_beta", gap_analysis({"mlp1/cv(0.01)": grows}, single))
    assert d.evidence["per_group"]["mlp1/cv(0.01)"]["class"] == "no noise scale" and d.kind == "open"
    # untrained → undecided and open, naming the run
    verdict, d = judged("gap_vs_beta", gap_analysis({"mlp1/cv(0.01)": shrink}, table,
                                                     [rec("mlp1", 0.1, 0, 280.0)]))
    assert verdict.reproduced is None and d.kind == "open" and "beta-vae mlp1 cv(0.01) β=0.1 seed 0" in d.text


def test_ablation_checks_and_diagnosis():
    def cell(gap):
        return {"gap_neg_elbo": gap, "diverged": 0.0, "trained": 1.0}

    per = {"beta-vae": {"0.01": cell(40.0), "1.0": cell(30.0)}, "mi-vae": {"0.01": cell(50.0), "1.0": cell(40.0)},
           "marginal-kl-vae": {"0.01": cell(42.0), "1.0": cell(28.0)}}
    ablated = [rec("mlp3", b, 0, 100.0, obj=obj) for obj in rd.ABLATIONS for b in (0.01, 1.0)]
    a = {"table": {}, "ablations": {"architecture": "mlp3", "split": "cv(0.01)", "per_objective": per},
         "trained": rd.analysis.trained_section(records(ablated), BASELINES)}
    verdict, d = judged("ablations", a)
    assert verdict.reproduced is True and d.kind == "reproduced"
    nan = rec("mlp3", 1.0, 0, 100.0, obj="mi-vae", finite=False)
    a["trained"] = rd.analysis.trained_section(records(ablated + [nan]), BASELINES)
    verdict, d = judged("ablations", a)
    assert verdict.reproduced is None and "mi-vae mlp3 cv(0.01) β=1 seed 0: diverged" in verdict.reason
    assert d.kind == "open" and "mi-vae mlp3 cv(0.01) β=1 seed 0" in d.text


def test_findings_name_their_figures_and_rule():
    for f in rd.FINDINGS:
        assert f.figures and all(x.endswith(".png") for x in f.figures), f.name
        assert "halfway from the input-ignoring baseline" in f.rule and "β > 1" in f.rule and "2 %" in f.rule, f.name
    assert all(finding(n).diagnose for n in ("u_vs_l_shape", "gap_vs_beta", "early_stopping_shape", "ablations"))
