"""Study 4 (rr_pretraining): the smoke preset end to end, the MI measure, the methods' configurations,
λ on the paper's scale, the config's checks, every finding's rule (at the study's λ alone, on models
that trained), the λ sweep's diagnoses and the λ diagnostic."""
import json

import pytest
import torch

import vaetransfer as vt
from vaetransfer import data, estimators, rr, studies
from vaetransfer.studies import rr_pretraining as study
from vaetransfer.studies.pipeline import MEASURED_FILE
from vaetransfer.train import load_run


@pytest.fixture(scope="module")
def smoke(study_smoke):
    """`vaetransfer run rr_pretraining --preset smoke`, once per test session (tests/conftest.py)."""
    return study_smoke("rr_pretraining")


def test_smoke_writes_every_section_and_figure(smoke):
    out, r = smoke
    c = study.PRESETS["smoke"]
    assert studies.get("rr_pretraining") is study
    a = r["analysis"]
    for key in ("svd", "mi", "mi_deep", "transfer"):
        assert a[key], key
    assert r["findings"] and r["figures"]
    for path in r["figures"]:
        assert (out / path).stat().st_size > 1000
    assert set(a["svd"]) == {"peak", "pair", "full"}
    assert set(a["mi"]) == set(c.methods)  # RR¹ belongs to the MI planes only
    assert set(a["transfer"]) == set(c.methods) - {"rr1"}
    assert [f["name"] for f in r["findings"]] == [f.name for f in study.FINDINGS]
    for f in r["findings"]:  # 2 seeds and every experiment: decided, or undecided for a model that did not train
        assert isinstance(f["reproduced"], bool) or "did not train" in f["reason"] or "left out" in f["reason"], f
        assert f["figures"] and set(f["figures"]) <= set(r["figures"]), f["name"]
        if f["name"] in (KEEP, TUNE, TRANSFER):  # the λ findings are diagnosed (the study's λ alone here)
            d = f["diagnosis"]
            assert d["kind"] in studies.DIAGNOSIS_KINDS and [e["lambda"] for e in d["evidence"]["per_lambda"]] \
                == [study.lambdas_of(c, "transfer" if f["name"] == TRANSFER else "mi")[0]]
            assert d["evidence"]["per_lambda"][0]["reproduced"] == f["reproduced"]
    assert set(a["trained"]) == set(study.CHECKS)  # did the models train: every check, the losses recorded
    for check in a["trained"].values():
        assert check["models"] and all({"accuracy", "loss_first", "loss_last", "finite"} <= set(m)
                                       for m in check["models"].values())
    finetuned = {k: a["trained"][k]["context"]["finetuned"] for k in ("mi", "transfer")}
    assert len(finetuned["mi"]) == 2 * len(c.seeds) * (len(c.methods) - 1)  # AA and AB, no Pre
    assert len(finetuned["transfer"]) == len(c.seeds) * (len(c.methods) - 1)  # every method but RR¹
    assert set(a["mi_deep"]["curve"]["ixt"]) == set(c.methods) - {"pre"}
    per_experiment = {e: len(study.methods_of(c, e)) for e in c.experiments}
    assert r["runs"]["train"]["runs"] == r["runs"]["train"]["done"] == len(c.seeds) * sum(per_experiment.values())
    text = (out / "index.md").read_text()
    for heading in ("## SVD insight", "## MI planes", "## Shape transfer", "## Did the models train?", "## Findings"):
        assert heading in text


def test_each_method_trains_what_it_should(smoke):
    out, _ = smoke
    seen = set()
    for d in (out / "sweeps" / "train" / "runs").iterdir():
        assert json.loads((d / MEASURED_FILE).read_text())
        for config in d.rglob("config.json"):
            stage = config.parent.name
            if stage not in ("stage_a", "AA", "AB", "finetune") and not stage.startswith("layer"):
                continue
            cfg = load_run(config.parent).config
            assert cfg.threads is None  # execution settings come from the sweep worker, never the study
            regs = tuple(sorted(x.name for x in cfg.regularizers))
            if stage.startswith("layer"):  # Pre: one layer trains alone on its reconstruction
                assert cfg.objective.name == "forward-only" and regs == ("rr",)
                assert cfg.regularizers[0].params["variant"] == "local"
            elif stage != "stage_a":  # fine-tuning never has a regulariser
                assert regs == () and cfg.init_from
            seen.add((stage if not stage.startswith("layer") else "layer", regs))
    assert {("stage_a", ("srip",)), ("stage_a", ("rr",)), ("stage_a", ()), ("layer", ("rr",))} <= seen


def test_mi_of_the_input_layer_is_twelve_bits():
    t = data.twelve_bit_task()
    mi = estimators.binned_mutual_information(t.images.float(), t.labels, 30)
    assert float(mi.i_xt) == pytest.approx(12.0, abs=1e-9)  # 4,096 distinct patterns: H(X) = 12 bits
    assert 0.0 < float(mi.i_ty) <= 1.0
    p = float(t.labels.float().mean())
    assert abs(p - 0.5) < 0.05


def test_layer_mi_reports_every_layer_in_bits():
    t = data.twelve_bit_task()
    model = vt.build_model(vt.ModelConfig("mlp-classifier", input_shape=[12], hidden=[10, 7], activation="tanh",
                                          num_classes=2), seed=0)
    values = study.layer_mi(model, t.images.float(), t.labels, 30)
    assert list(values) == ["fc1", "fc2", "logits"]
    for v in values.values():
        assert 0.0 <= v["ity"] <= v["ixt"] + 1e-9 <= 12.0 + 1e-9
    # I(T; Y) ≤ H(Y) ≤ 1 bit, and a layer of 10 tanh units keeps nearly all of X's 12 bits at init
    assert values["fc1"]["ixt"] > 10 and all(v["ity"] <= 1.0 + 1e-9 for v in values.values())


def test_paper_lambda_is_converted_per_term():
    model = vt.ModelConfig("mlp-classifier", input_shape=[1, 28, 28], hidden=[2], batch_norm=True, num_classes=2)
    lam = study.stages._layer_lambdas(model, 1e-6, 100)
    assert lam == pytest.approx([1e-6 * 50 * 255 ** 2, 1e-6 * 50])
    regs = study.stages._regularizers("rr", lam, reduction="sum", output_activation="relu", variant="full", beta=0.01)
    assert regs[0].params["layer_weights"] == pytest.approx(lam)
    rr1 = study.stages._regularizers("rr1", lam, reduction="sum", output_activation="relu", variant="full",
                                     beta=0.01)[0]
    assert rr1.params["input_only"] and rr1.weight == pytest.approx(lam[0])
    assert study.stages._regularizers("std", lam, reduction="sum", output_activation="relu", variant="full",
                                      beta=0.01) == ()
    assert study.stages._regularizers("ort", lam, reduction="sum", output_activation="relu", variant="full",
                                      beta=0.5)[0].weight == 0.5


def test_rerun_resumes_without_training(smoke):
    out, r = smoke
    again = studies.run_study("rr_pretraining", out, preset="smoke", progress=False)
    assert again["findings"] == r["findings"] and again["runs"] == r["runs"]


@pytest.mark.parametrize("sets, argument", [
    (["experiments=[\"peak\", \"gan\"]"], "experiments"),
    (["methods=[\"rr\"]"], "methods"),
    (["methods=[\"std\", \"svd\"]"], "methods"),
    (["seeds=[1, 1]"], "seeds"),
    (["peak.train=200"], "peak.train"),
    (["mi.rr_lambda=0"], "mi.rr_lambda"),
    (["transfer.lr=-1"], "transfer.lr"),
    (["mi.hidden=[]"], "mi.hidden"),
    (["mi.rr_lambdas=[0.1]"], "mi.rr_lambdas"),  # the study's own λ again
    (["transfer.rr_lambdas=[0.5, 0.5]"], "transfer.rr_lambdas"),
    (["transfer.rr_lambdas=[0]"], "transfer.rr_lambdas"),
    (["executor=slurm"], "executor"),  # execution settings are no config fields
])
def test_config_errors_name_the_key(sets, argument):
    with pytest.raises((vt.ArgumentError, vt.ArgumentTypeError)) as e:
        studies.make_config("rr_pretraining", "smoke", sets=sets)
    assert argument in str(e.value)


def test_execution_errors_name_the_key():
    with pytest.raises(vt.ArgumentError) as e:
        studies.Execution(executor="slurm")
    assert "executor" in str(e.value)


def test_presets_keep_their_science():
    small, paper = study.PRESETS["small"], study.PRESETS["paper"]
    assert studies.config_to_dict(study.Config()) == studies.config_to_dict(small)
    assert (small.seeds, small.digits.full_epochs, small.mi.epochs, small.transfer.channels) == ((0, 1, 2), 150, 600, 32)
    assert (paper.seeds, paper.digits.full_epochs, paper.mi.epochs, paper.mi.finetune_epochs) == \
        ((0, 1, 2, 3, 4), 1_000, 2_000, 1_000)
    assert (paper.transfer.channels, paper.transfer.n_train, paper.transfer.epochs) == (64, 20_000, 30)
    for c in (small, paper, study.PRESETS["smoke"]):  # no λ sweep: the stage 'lambdas' is empty
        assert (c.mi.rr_lambdas, c.transfer.rr_lambdas) == ((), ()) and study.LAMBDAS.runs(c, {"train": []}) == []
    assert [s.name for s in study.STUDY.stages] == ["train", "lambdas"]


def test_medium_preset_runs_what_it_was_sized_for():
    """The medium preset (issue 32): the λ sweeps, 8 seeds (the shapes 3), the paper's lengths on
    the 12-bit task and the digits, the paper preset's on the shapes; its runs per stage, counted
    without running."""
    c = studies.make_config("rr_pretraining", "medium")
    assert studies.config_to_dict(c) == studies.config_to_dict(study.PRESETS["medium"])
    assert c.seeds == tuple(range(8)) and c.experiments == study.EXPERIMENTS and c.methods == study.METHODS
    assert {e: study.seeds_of(c, e) for e in study.EXPERIMENTS} == {"peak": c.seeds, "digits": c.seeds, "mi": c.seeds,
                                                                   "transfer": (0, 1, 2)}
    assert study.lambdas_of(c, "mi") == [0.1, 0.01, 0.001]
    assert study.lambdas_of(c, "transfer") == [1.0, 0.1]
    assert (c.mi.epochs, c.mi.finetune_epochs, c.digits.full_epochs) == (2_000, 1_000, 1_000)
    assert (c.transfer.channels, c.transfer.n_train, c.transfer.n_test, c.transfer.epochs,
            c.transfer.finetune_epochs) == (32, 5_000, 2_000, 30, 10)
    assert c.peak == study.PRESETS["small"].peak  # the paper's peak test already
    train = study.TRAIN.runs(c, {})
    per = {e: sum(r["experiment"] == e for r in train) for e in study.EXPERIMENTS}
    assert per == {"peak": 4 * 8, "digits": 4 * 8, "mi": 5 * 8, "transfer": 4 * 3} and len(train) == 116
    assert {r["seed"] for r in train if r["experiment"] == "transfer"} == {0, 1, 2}
    lambdas = study.LAMBDAS.runs(c, {"train": []})
    count = {}
    for r in lambdas:
        key = (r["experiment"], r["method"])
        count[key] = count.get(key, 0) + 1
    assert count == {("mi", "rr"): 2 * 8, ("mi", "rr1"): 2 * 8, ("transfer", "rr"): 1 * 3} and len(lambdas) == 35
    assert {r["lambda"] for r in lambdas if r["experiment"] == "mi"} == {0.01, 0.001}
    assert {(r["lambda"], r["seed"]) for r in lambdas if r["experiment"] == "transfer"} == {(0.1, 0), (0.1, 1), (0.1, 2)}
    assert {frozenset(r) for r in lambdas} == {frozenset({"experiment", "lambda", "method", "seed"})}


def test_the_shapes_can_run_fewer_seeds_than_the_study():
    """``transfer.n_seeds``: the first n of the study's seeds on the shapes (0: all), checked
    against the number of seeds; the other experiments keep every seed."""
    c = studies.override(SMOKE, {"seeds": [3, 5, 7], "transfer.n_seeds": 2})
    assert study.seeds_of(c, "transfer") == (3, 5) and study.seeds_of(c, "mi") == (3, 5, 7)
    assert study.seeds_of(studies.override(c, {"transfer.n_seeds": 0}), "transfer") == (3, 5, 7)
    rows = study.TRAIN.runs(c, {})
    assert {r["seed"] for r in rows if r["experiment"] == "transfer"} == {3, 5}
    assert {r["seed"] for r in rows if r["experiment"] == "mi"} == {3, 5, 7}
    for bad in (-1, 4):
        with pytest.raises(vt.ArgumentError) as e:
            studies.override(c, {"transfer.n_seeds": bad})
        assert "transfer.n_seeds" in str(e.value) and "expected 0 (all seeds) .. 3" in str(e.value)
    # an effect over an experiment's seeds needs two of its own, whatever the study's count: the procedure says so
    one = studies.override(c, {"transfer.n_seeds": 1})
    transfer = {m: {"final": {st: ms(v, seeds=(3,)) for st, v in (("textured", 0.9), ("filled", f), ("edges", f))}}
                for m, f in (("std", 0.5), ("pre", 0.2), ("rr", 0.6))}
    v = decided(finding("rr_transfers_best_to_shape_variants"), one, {"transfer": transfer})
    assert v.reproduced is None and "one unit: its spread is unknown" in v.reason


def test_a_lambda_row_trains_with_its_lambda_alone(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setitem(study.RUNNERS, "mi", lambda c, m, s, d, device: seen.setdefault("mi", c) and {})
    monkeypatch.setitem(study.RUNNERS, "transfer", lambda c, m, s, d, device: seen.setdefault("transfer", c) and {})
    c = study.PRESETS["medium"]
    job = studies.Job("lambdas", tmp_path, tmp_path)
    study.stages._train_one(c, {"experiment": "mi", "lambda": 0.01, "method": "rr", "seed": 0}, job)
    study.stages._train_one(c, {"experiment": "transfer", "lambda": 0.1, "method": "rr", "seed": 3}, job)
    assert (seen["mi"].mi.rr_lambda, seen["mi"].mi.rr_lambdas) == (0.01, ())
    assert (seen["transfer"].transfer.rr_lambda, seen["transfer"].transfer.rr_lambdas) == (0.1, ())
    assert seen["mi"].mi.epochs == c.mi.epochs  # nothing else changes


# ---------------------------------------------------------------------------------- findings' rules
def ms(mean, se=0.01, seeds=(0, 1)):
    """A summary over two seeds whose own values are mean ∓ se·f (f in [1, 1.01) depends on the value, so
    differences between methods of equal se still vary a little by seed; a spread of exactly zero would be
    decided by a sign test instead): the ``by_seed`` units the findings decide over."""
    return {"mean": mean, "se": se, "n": len(seeds),
            "by_seed": {str(s): round(mean + se * (2 * k - 1) * _f(mean), 6) for k, s in enumerate(seeds)}}


def _f(value: float) -> float:
    return 1 + 0.01 * ((value * 7.31) % 1)


def deep(layers, ixt, spread=0.01):
    """A ``mi_deep`` section: each method's deep-layer I(X; D), its seeds at ∓ ``spread``."""
    return {"layers": layers, "ixt": ixt,
            "ixt_by_seed": {m: {"0": v - spread * _f(v), "1": v + spread * _f(v)} for m, v in ixt.items()}}


def finding(name):
    return next(f for f in study.FINDINGS if f.name == name)


def decided(f, c, a):
    """A finding's judged record as ``.reproduced`` (True: reproduced; False: contradicted or absent;
    None: undecided), ``.reason`` and ``.record``."""
    from types import SimpleNamespace
    r = f.judge(c, a)
    return SimpleNamespace(reproduced=r["reproduced"], reason=r["reason"], record=r)


SMOKE = study.PRESETS["smoke"]
ONE_SEED = studies.override(SMOKE, {"seeds": [0]})
NO_RR = studies.override(SMOKE, {"methods": ["std", "ort", "pre"]})


def svd_analysis(rr_distance, case):
    return {"svd": {case: {"std": {"distance": ms(0.8)}, "ort": {"distance": ms(0.7)}, "rr": {"distance": rr_distance}}}}


@pytest.mark.parametrize("name, experiment, case", [("peak_vectors_show_peaks", "peak", "peak"),
                                                    ("digit_vectors_show_digits_pair", "digits", "pair"),
                                                    ("digit_vectors_show_digits_full", "digits", "full")])
def test_svd_findings_follow_their_rule(name, experiment, case):
    f = finding(name)
    v = decided(f, SMOKE, svd_analysis(ms(0.3), case))
    assert v.reproduced is True and v.record["effect"]["parts"]["RR vs ort"]["mean"] == pytest.approx(0.4)
    # within Ort's spread over two seeds: undecided, not decided either way
    v = decided(f, SMOKE, svd_analysis(ms(0.69, 0.02), case))
    assert v.reproduced is None and "underpowered" in v.reason
    assert decided(f, SMOKE, svd_analysis(ms(0.9), case)).reproduced is False   # RR's vectors the least alike
    one = {"svd": {case: {m: {"distance": ms(d, seeds=(0,))} for m, d in (("std", 0.8), ("ort", 0.7), ("rr", 0.3))}}}
    assert decided(f, ONE_SEED, one).reproduced is None  # one seed: no spread
    assert decided(f, NO_RR, svd_analysis(ms(0.3), case)).reproduced is None
    other = [e for e in study.EXPERIMENTS if e != experiment]
    v = decided(f, studies.override(SMOKE, {"experiments": other}), {})
    assert v.reproduced is None and experiment in v.reason


def test_deep_layers_finding_follows_its_rule():
    f = finding("rr_keeps_input_information_in_deep_layers")
    a = {"mi_deep": deep(["fc2", "fc3", "logits"], {"std": 6.0, "ort": 7.0, "pre": 11.0, "rr": 8.0})}
    assert decided(f, SMOKE, a).reproduced is True
    a = {"mi_deep": deep(["fc2", "fc3", "logits"], {"std": 6.0, "ort": 7.0, "pre": 11.0, "rr": 6.5})}
    v = decided(f, SMOKE, a)  # above Std, below Ort
    assert v.reproduced is False and "RR vs ort" in v.reason
    assert decided(f, studies.override(SMOKE, {"experiments": ["peak"]}), {}).reproduced is None
    assert decided(f, NO_RR, a).reproduced is None
    assert decided(f, SMOKE, {"mi_deep": deep([], {"rr": 8.0})}).reproduced is None  # means only


def test_finetune_finding_follows_its_rule():
    f = finding("rr_finetunes_as_well_on_A_better_on_B")

    def analysis(rr_aa, rr_ab):
        return {"mi": {"std": {"AA": {"test_accuracy": ms(0.95)}, "AB": {"test_accuracy": ms(0.80)}},
                       "rr": {"AA": {"test_accuracy": rr_aa}, "AB": {"test_accuracy": rr_ab}}}}
    assert decided(f, SMOKE, analysis(ms(0.94), ms(0.9))).reproduced is True   # A within 0.02 of Std's, B better
    v = decided(f, SMOKE, analysis(ms(0.9), ms(0.9)))
    assert v.reproduced is False and "A: at least as well" in v.reason
    v = decided(f, SMOKE, analysis(ms(0.95), ms(0.815, 0.05)))  # B better by 0.015 inside its spread
    assert v.reproduced is None and "B: better" in v.reason
    assert decided(f, studies.override(SMOKE, {"experiments": ["transfer"]}), {}).reproduced is None


def test_transfer_finding_follows_its_rule():
    f = finding("rr_transfers_best_to_shape_variants")
    transfer = {m: {"final": {"textured": ms(0.9), "filled": ms(fi), "edges": ms(e)}}
                for m, fi, e in (("std", 0.5, 0.3), ("rr", 0.6, 0.4), ("pre", 0.2, 0.2))}
    v = decided(f, SMOKE, {"transfer": transfer})
    assert v.reproduced is True and set(v.record["effect"]["parts"]) == {
        "filled: RR vs std", "filled: RR vs pre", "edges: RR vs std", "edges: RR vs pre"}
    transfer["std"]["final"]["edges"] = ms(0.5)
    assert decided(f, SMOKE, {"transfer": transfer}).reproduced is False
    transfer["std"]["final"]["edges"] = ms(0.3)
    assert decided(f, studies.override(SMOKE, {"experiments": ["mi"]}), {}).reproduced is None
    assert decided(f, NO_RR, {"transfer": transfer}).reproduced is None


SWEPT = studies.override(SMOKE, {"mi.rr_lambdas": [0.01, 0.001], "transfer.rr_lambdas": [0.1]})


def mi_entry(lam, rr_ixt, rr_aa, rr_ab):
    return {"lambda": lam,
            "mi": {"std": {"AA": {"test_accuracy": ms(0.95)}, "AB": {"test_accuracy": ms(0.80)}},
                   "rr": {"AA": {"test_accuracy": rr_aa}, "AB": {"test_accuracy": rr_ab}}},
            "mi_deep": deep(["fc2", "fc3", "logits"], {"std": 6.0, "ort": 7.0, "rr": rr_ixt})}


def swept_mi(*entries):
    a = {"lambdas": {"mi": list(entries)}}
    a.update({k: v for k, v in entries[0].items() if k != "lambda"})  # the study's own sections are its first λ's
    return a


def tr_entry(lam, filled, edges):
    return {"lambda": lam, "transfer": {m: {"final": {"textured": ms(0.9), "filled": ms(fi), "edges": ms(e)}}
                                        for m, fi, e in (("std", 0.5, 0.3), ("pre", 0.2, 0.2), ("rr", filled, edges))}}


def swept_transfer(*entries):
    return {"lambdas": {"transfer": list(entries)}, "transfer": entries[0]["transfer"]}


KEEP, TUNE, TRANSFER = ("rr_keeps_input_information_in_deep_layers", "rr_finetunes_as_well_on_A_better_on_B",
                        "rr_transfers_best_to_shape_variants")


def test_verdicts_are_decided_at_the_study_lambda_alone():
    """The sweep gives a verdict no further chances: the rule at the study's λ (the analysis' own
    sections, the sweep's first entry) decides it, whatever the other λ say."""
    a = swept_mi(mi_entry(0.1, 6.5, ms(0.90), ms(0.90)),      # below Ort; A clearly worse
                 mi_entry(0.01, 8.0, ms(0.94), ms(0.90)),     # both rules hold
                 mi_entry(0.001, 7.5, ms(0.95), ms(0.815, 0.05)))   # I(X; D) holds, B inside its spread
    keep, tune = decided(finding(KEEP), SWEPT, a), decided(finding(TUNE), SWEPT, a)
    assert keep.reproduced is False and tune.reproduced is False and "per_lambda" not in keep.record["evidence"]
    # The other way round: holding at the study's λ alone is enough, failing elsewhere changes nothing.
    a = swept_mi(mi_entry(0.1, 8.0, ms(0.94), ms(0.90)), mi_entry(0.01, 6.5, ms(0.90), ms(0.80)),
                 mi_entry(0.001, 5.0, ms(0.5), ms(0.5)))
    assert decided(finding(KEEP), SWEPT, a).reproduced is True and decided(finding(TUNE), SWEPT, a).reproduced is True
    t = swept_transfer(tr_entry(1.0, 0.4, 0.2), tr_entry(0.1, 0.6, 0.35))
    assert decided(finding(TRANSFER), SWEPT, t).reproduced is False


def test_the_lambda_diagnosis_follows_its_rules():
    a = swept_mi(mi_entry(0.1, 6.5, ms(0.90), ms(0.90)), mi_entry(0.01, 8.0, ms(0.94), ms(0.90)),
                 mi_entry(0.001, 7.5, ms(0.95), ms(0.815, 0.05)))
    # Setting: fails at the study's λ, holds at swept ones (named, with every λ's verdict and numbers).
    d = finding(KEEP).diagnose(SWEPT, a, None)
    assert d.kind == "setting" and "λ = 0.01, 0.001" in d.text and "study's λ = 0.1" in d.text
    assert d.evidence["study_lambda"] == 0.1 and d.evidence["lambdas_holding"] == [0.01, 0.001]
    assert d.evidence["verdicts"] == {"0.1": False, "0.01": True, "0.001": True}
    assert [(e["lambda"], e["reproduced"]) for e in d.evidence["per_lambda"]] == [(0.1, False), (0.01, True),
                                                                                  (0.001, True)]
    assert d.evidence["per_lambda"][1]["mean_ixt"]["rr"] == 8.0
    d = finding(TUNE).diagnose(SWEPT, a, None)
    assert d.kind == "setting" and d.evidence["lambdas_holding"] == [0.01] and "λ = 0.01," in d.text
    # Open: it holds at no λ (and no curves to show a trend still moving).
    a["lambdas"]["mi"][1] = mi_entry(0.01, 6.8, ms(0.90), ms(0.80))
    d = finding(TUNE).diagnose(SWEPT, a, None)
    assert d.kind == "open" and d.evidence["lambdas_holding"] == [] and "0.01, 0.001" in d.text
    # Reproduced: it holds at the study's λ (the swept λ where it also holds are named).
    a = swept_mi(mi_entry(0.1, 8.0, ms(0.94), ms(0.90)), mi_entry(0.01, 6.8, ms(0.90), ms(0.80)),
                 mi_entry(0.001, 7.5, ms(0.95), ms(0.815, 0.05)))
    d = finding(KEEP).diagnose(SWEPT, a, None)
    assert d.kind == "reproduced" and "also at λ = 0.001" in d.text and d.evidence["lambdas_holding"] == [0.1, 0.001]
    # The shapes: best on both styles at λ = 0.1 only.
    t = swept_transfer(tr_entry(1.0, 0.4, 0.2), tr_entry(0.1, 0.6, 0.35))
    d = finding(TRANSFER).diagnose(SWEPT, t, None)
    assert d.kind == "setting" and d.evidence["lambdas_holding"] == [0.1]
    assert d.evidence["per_lambda"][0]["accuracy"]["rr"]["filled"] == 0.4
    t["lambdas"]["transfer"][1] = tr_entry(0.1, 0.6, 0.25)  # best on filled only
    assert finding(TRANSFER).diagnose(SWEPT, t, None).kind == "open"
    # Without a sweep: the study's λ alone (reproduced or open); nothing to diagnose where the
    # verdict is undecided for another reason than training (one seed, the experiment not run).
    assert finding(TRANSFER).diagnose(SMOKE, {"transfer": t["transfer"]}, None).kind == "open"
    assert finding(KEEP).diagnose(studies.override(SMOKE, {"experiments": ["peak"]}), {}, None) is None


def test_a_still_closing_deficit_is_diagnosed_as_scale():
    def curve(rr_end):  # RR's deep-layer I(X; D) catching up on Ort's over stage A
        return {"epoch": [10, 20, 30, 40], "ixt": {"std": [9.0, 8.0, 7.0, 6.0], "ort": [9.0, 8.0, 7.5, 7.0],
                                                   "rr": [5.0, 5.5, 6.0, rr_end]}}
    a = swept_mi(mi_entry(0.1, 6.5, ms(0.94), ms(0.90)), mi_entry(0.01, 6.0, ms(0.94), ms(0.90)))
    a["mi_deep"]["curve"] = curve(6.6)  # deficit 2.5 at epoch 20, 0.4 at the end: shrank by 2.1 ≥ 0.2
    c = studies.override(SMOKE, {"mi.rr_lambdas": [0.01]})
    d = finding(KEEP).diagnose(c, a, None)
    assert d.kind == "scale" and "λ = 0.1" in d.text and "2.5 to 0.4" in d.text
    assert d.evidence["trend"]["0.1"] == {"from_epoch": 20, "to_epoch": 40, "deficit_from": 2.5, "deficit_to": 0.4,
                                          "still_moving": True}
    a["mi_deep"]["curve"] = curve(5.2)  # deficit 1.8 at the end: shrank by 0.7 < 0.9 — settled enough
    assert finding(KEEP).diagnose(c, a, None).kind == "open"
    assert study.findings._deficit_trend({"mi_deep": {"curve": curve(5.2)}})["still_moving"] is False
    assert study.findings._deficit_trend({"mi_deep": deep([], {})}) is None  # no curves: no trend


# ---------------------------------------------------------------------------------- did the models train?
TRAINED = {"loss_first": 0.7, "loss_last": 0.2, "finite": True}
FLAT = {"loss_first": 0.7, "loss_last": 0.699, "finite": True}
DIVERGED = {"loss_first": 0.7, "loss_last": None, "finite": False}


def measured(experiment, acc, loss=TRAINED, finetune=TRAINED):
    """A run's measured dict, as the study's runners write it, reduced to what the checks read
    (on the shapes, Pre learns the task in its fine-tuning: give it ``finetune=loss``)."""
    if experiment == "peak":
        return {"train_accuracy": acc, "loss": loss}
    if experiment == "digits":
        return {case: {"train_accuracy": acc, "loss": loss} for case in ("pair", "full")}
    if experiment == "mi":
        return {"A": {"test_accuracy": acc, "loss": loss}, "AA": {"loss": TRAINED}, "AB": {"loss": finetune}}
    return {"final": {"textured": acc}, "loss_stage_a": loss, "loss_finetune": finetune}


def checks(experiment, *, chance, reference=(0.9, 0.9), **runs):
    """``analysis["trained"]`` of one experiment from synthetic runs (method → [measured per seed];
    Std's scores ``reference`` unless given, every other method of the experiment trained)."""
    default = {"std": [measured(experiment, acc) for acc in reference]}
    results = {(experiment, m): runs.get(m, default.get(m, [measured(experiment, 0.9)] * 2))
               for m in study.methods_of(SMOKE, experiment)}
    names = [k for k, (e, _) in study.CHECKS.items() if e == experiment]
    return {k: study.analysis.trained_check(SMOKE, results, k, chance) for k in names}


def test_the_trained_check_reads_chance_and_std():
    t = checks("mi", chance=0.5, reference=(0.9, 0.7))["mi"]
    assert (t["context"]["chance"], t["context"]["reference"]) == (0.5, 0.8)
    assert t["rule"] == {"key": "accuracy", "minimum": 0.65, "what": "stage-A test accuracy on task A",
                         "basis": "halfway from chance 0.5 to Std's mean 0.8"}
    assert set(t["models"]) == {f"{m}/seed={s}" for m in ("std", "ort", "rr", "rr1") for s in SMOKE.seeds}  # no Pre
    assert t["models"]["std/seed=1"] == {"method": "std", "accuracy": 0.7, **TRAINED}
    assert set(t["context"]["finetuned"]) == {f"{m}/{task}/seed={s}" for m in ("std", "ort", "rr", "rr1")
                                              for task in ("AA", "AB") for s in SMOKE.seeds}
    shapes = checks("transfer", chance=0.1)["transfer"]
    assert "pre/seed=0" in shapes["models"] and shapes["rule"]["minimum"] == 0.5  # Pre's fine-tuned model counts
    assert set(checks("digits", chance=0.5)) == {"pair", "full"}
    stuck = checks("peak", chance=0.5, reference=(0.5, 0.5))["peak"]
    assert "error" in stuck["rule"] and "reference itself did not train" in stuck["rule"]["error"]
    old = {(e, m): [{"A": {"test_accuracy": 0.9}, "AA": {"test_accuracy": 0.9}, "AB": {"test_accuracy": 0.9}}] * 2
           for e, m in (("mi", "std"), ("mi", "rr"))}  # measured before the loss summaries
    t = study.analysis.trained_check(SMOKE, old, "mi", 0.5)
    assert t["models"]["rr/seed=1"] == {"method": "rr", "accuracy": 0.9} and t["context"]["finetuned"] == {}
    assert study.analysis.models_failed(t, ("std", "rr"), finetuned=True) == []
    chances = study.analysis.chances(SMOKE)  # from the data: the most frequent class's share of the rows scored
    assert set(chances) == set(study.CHECKS) and chances["pair"] == 0.5 and 0.5 <= chances["mi"] < 0.55
    assert 0.1 <= chances["transfer"] < 1 and 0.1 <= chances["full"] < 0.11


@pytest.mark.parametrize("name, experiment, model, trained_analysis", [
    ("peak_vectors_show_peaks", "peak", "rr", lambda: svd_analysis(ms(0.3), "peak")),
    ("digit_vectors_show_digits_pair", "digits", "ort", lambda: svd_analysis(ms(0.3), "pair")),
    ("digit_vectors_show_digits_full", "digits", "std", lambda: svd_analysis(ms(0.3), "full")),
    (KEEP, "mi", "ort", lambda: {"mi_deep": deep(["fc3", "logits"], {"std": 6.0, "ort": 7.0, "rr": 8.0})}),
    (TUNE, "mi", "rr", lambda: {"mi": {"std": {"AA": {"test_accuracy": ms(0.95)}, "AB": {"test_accuracy": ms(0.8)}},
                                       "rr": {"AA": {"test_accuracy": ms(0.952)}, "AB": {"test_accuracy": ms(0.9)}}}}),
    (TRANSFER, "transfer", "pre", lambda: {"transfer": {m: {"final": {"textured": ms(0.9), "filled": ms(f),
                                                                      "edges": ms(f)}}
                                                        for m, f in (("std", 0.5), ("pre", 0.2), ("rr", 0.6))}}),
])
def test_a_model_that_did_not_train_leaves_each_finding_undecided(name, experiment, model, trained_analysis):
    f = finding(name)
    a = trained_analysis()
    assert decided(f, SMOKE, a).reproduced is True  # an analysis without the checks: not checked
    a["trained"] = checks(experiment, chance=0.5)
    assert decided(f, SMOKE, a).reproduced is True and decided(f, SMOKE, a).reason is None
    pre = {"finetune": DIVERGED} if model == "pre" else {}  # Pre learns the shapes in its fine-tuning
    for bad, why in ((measured(experiment, 0.6), f"{model}/seed=1: "),             # below halfway (0.7)
                     (measured(experiment, 0.9, DIVERGED, **pre), f"{model}/seed=1: diverged"),
                     (measured(experiment, 0.9, FLAT, **({"finetune": FLAT} if pre else {})),
                      f"{model}/seed=1: training loss did not fall by 1%")):
        a["trained"] = checks(experiment, chance=0.5, **{model: [measured(experiment, 0.9), bad]})
        v = decided(f, SMOKE, a)
        # the seed whose model did not train is left out, named; the other seed alone cannot decide
        assert v.reproduced is None and why in v.reason, (bad, v.reason)
        assert v.record["evidence"] is not None  # the numbers stay, for the diagnosis and the page
    if model != "std":  # the score is that of the check's own rows: halfway from chance 0.5 to Std's 0.9
        assert "< 0.7 (halfway from chance 0.5 to Std's mean 0.9)" in \
            decided(f, SMOKE, {**a, "trained": checks(experiment, chance=0.5, **{model: [measured(experiment, 0.6)] * 2})
                             }).reason
    # Std itself at chance: no model of the task can be judged.
    v = decided(f, SMOKE, {**a, "trained": checks(experiment, chance=0.5, reference=(0.5, 0.5))})
    assert v.reproduced is None and "Std reference" in v.reason and "the reference itself did not train" in v.reason
    # Outputs measured before the loss summaries: only the scores are checked.
    old = checks(experiment, chance=0.5)
    for check in old.values():
        for m in check["models"].values():
            for k in TRAINED:
                m.pop(k)
    assert decided(f, SMOKE, {**a, "trained": old}).reproduced is True


def test_only_the_models_a_finding_rests_on_are_checked():
    keep = {"mi_deep": deep(["fc3", "logits"], {"std": 6.0, "ort": 7.0, "rr": 8.0}),
            "mi": {"std": {"AA": {"test_accuracy": ms(0.95)}, "AB": {"test_accuracy": ms(0.8)}},
                   "rr": {"AA": {"test_accuracy": ms(0.952)}, "AB": {"test_accuracy": ms(0.9)}}}}
    keep["trained"] = checks("mi", chance=0.5, rr1=[measured("mi", 0.5)] * 2)  # RR¹ rests under no finding
    assert decided(finding(KEEP), SMOKE, keep).reproduced is True and decided(finding(TUNE), SMOKE, keep).reproduced
    keep["trained"] = checks("mi", chance=0.5, ort=[measured("mi", 0.5)] * 2)  # Ort: the I(X; D) finding only
    assert decided(finding(KEEP), SMOKE, keep).reproduced is None and decided(finding(TUNE), SMOKE, keep).reproduced
    # Fine-tuning on B: its accuracy is the outcome (not gated), but a diverged run leaves it undecided.
    keep["trained"] = checks("mi", chance=0.5, rr=[measured("mi", 0.9, finetune=DIVERGED)] * 2)
    v = decided(finding(TUNE), SMOKE, keep)
    assert v.reproduced is None and "rr/AB/seed=0: diverged" in v.reason
    assert decided(finding(KEEP), SMOKE, keep).reproduced is True
    shapes = {"transfer": {m: {"final": {"textured": ms(0.9), "filled": ms(f), "edges": ms(f)}}
                           for m, f in (("std", 0.5), ("pre", 0.2), ("rr", 0.6))}}
    shapes["trained"] = checks("transfer", chance=0.1, pre=[measured("transfer", 0.9, finetune=DIVERGED)] * 2)
    v = decided(finding(TRANSFER), SMOKE, shapes)
    assert v.reproduced is None and "pre/finetune/seed=1: diverged" in v.reason


def test_a_model_that_did_not_train_at_the_study_lambda_is_diagnosed_from_the_sweep():
    def trained_at(rr_accuracy):
        return {"mi": checks("mi", chance=0.5, rr=[measured("mi", rr_accuracy)] * 2)["mi"]}
    a = swept_mi(mi_entry(0.1, 8.0, ms(0.94), ms(0.90)), mi_entry(0.01, 8.0, ms(0.94), ms(0.90)),
                 mi_entry(0.001, 7.5, ms(0.95), ms(0.95)))
    for entry, acc in zip(a["lambdas"]["mi"], (0.55, 0.9, 0.55)):  # RR learns task A at λ = 0.01 only
        entry["trained"] = trained_at(acc)
    a["trained"] = a["lambdas"]["mi"][0]["trained"]
    v = decided(finding(KEEP), SWEPT, a)
    assert v.reproduced is None and "rr/seed=0: stage-A test accuracy on task A 0.55 < 0.7" in v.reason
    d = finding(KEEP).diagnose(SWEPT, a, None)
    assert d.kind == "setting" and d.evidence["lambdas_holding"] == [0.01] and "every unit left out" in d.text
    assert [e["reproduced"] for e in d.evidence["per_lambda"]] == [None, True, None]
    assert "rr/seed=1" in d.evidence["per_lambda"][2]["reason"]
    a["lambdas"]["mi"][1]["trained"] = trained_at(0.6)  # now RR trains at no λ
    d = finding(KEEP).diagnose(SWEPT, a, None)
    assert d.kind == "open" and "Undecided at every λ" in d.text
    a["lambdas"]["mi"][1]["trained"] = trained_at(0.9)
    a["lambdas"]["mi"][1]["mi_deep"] = deep(["fc2", "fc3", "logits"], {"std": 6.0, "ort": 7.0, "rr": 6.5})  # fails
    d = finding(KEEP).diagnose(SWEPT, a, None)
    assert d.kind == "open" and "undecided at λ = 0.1, 0.001, where a model did not train" in d.text


def test_lambda_sweep_analysis_swaps_in_rr_runs_of_each_lambda():
    from vaetransfer.studies.pipeline import RunResult

    def run(stage, method, seed, filled, lam=None):
        row = {"experiment": "transfer", "method": method, "seed": seed}
        if lam is not None:
            row["lambda"] = lam
        accs = {"textured": 0.5, "filled": filled, "edges": 0.2}
        return RunResult(stage, row, f"{stage}{method}{seed}{lam}", None, "done", 1.0,
                         {"final": accs, "stage_a": accs})
    c = studies.override(SMOKE, {"experiments": ["transfer"], "methods": ["std", "rr"], "transfer.rr_lambdas": [0.1]})
    runs = {"train": [run("train", m, s, f) for m, f in (("std", 0.5), ("rr", 0.3)) for s in (0, 1)],
            "lambdas": [run("lambdas", "rr", s, 0.6 + 0.02 * s, 0.1) for s in (0, 1)]}
    a = study.analysis.analyse(c, runs, None)
    assert [e["lambda"] for e in a["lambdas"]["transfer"]] == [1.0, 0.1]
    assert a["lambdas"]["transfer"][0]["transfer"] == a["transfer"]  # the study's own λ first
    assert a["transfer"]["rr"]["final"]["filled"]["mean"] == pytest.approx(0.3)
    at = a["lambdas"]["transfer"][1]["transfer"]
    assert at["rr"]["final"]["filled"]["mean"] == pytest.approx(0.61) and at["std"] == a["transfer"]["std"]
    v = decided(finding("rr_transfers_best_to_shape_variants"), c, a)
    # edges: RR and Std tie at 0.2 in every seed — an effect of exactly zero with no spread decides nothing
    assert v.reproduced is None and "edges: RR vs std" in v.reason
    assert "lambdas" not in study.analysis.analyse(studies.override(c, {"transfer.rr_lambdas": []}),
                                           {"train": runs["train"], "lambdas": []}, None)
    text = study.report.render_report({"analysis": a})
    assert "## λ sweep" in text and "| 0.1 |" in text and "## Did the models train?" in text
    assert "| 0 of 2 |" in text  # RR at λ = 0.1: both seeds trained (0.5 on the textured rows; no losses recorded)


def test_a_lambda_sweep_runs_end_to_end(tmp_path):
    """The stage 'lambdas' at smoke sizes: RR and RR¹ once more per further λ, every seed; the
    findings decided per λ; a re-run resumes."""
    sets = ["experiments=[\"mi\", \"transfer\"]", "mi.rr_lambdas=[0.01]", "transfer.rr_lambdas=[0.1]"]
    ex = studies.Execution(workers=2, threads=1)
    r = studies.run_study("rr_pretraining", tmp_path, preset="smoke", sets=sets, progress=False, execution=ex)
    c = studies.make_config("rr_pretraining", "smoke", sets=sets)
    assert r["runs"]["lambdas"]["runs"] == r["runs"]["lambdas"]["done"] == len(c.seeds) * 3
    assert [e["lambda"] for e in r["analysis"]["lambdas"]["mi"]] == [0.1, 0.01]
    assert set(r["analysis"]["lambdas"]["mi"][1]["mi"]) == set(c.methods)
    lams = []
    for d in (tmp_path / "sweeps" / "lambdas" / "runs").iterdir():
        cfg = load_run(d / "stage_a").config
        reg = cfg.regularizers[0]  # RR's λ per term, RR¹'s as the weight of its one term
        lams.append((cfg.model.architecture, reg.params["layer_weights"][0] if reg.params.get("layer_weights")
                     else reg.weight))
    assert sorted(lams) == [("conv4", 0.1)] * len(c.seeds) + [("mlp-classifier", 0.01)] * (2 * len(c.seeds))
    for f in r["findings"][3:]:  # decided at the study's λ; the sweep in the diagnosis, every λ with its checks
        assert isinstance(f["reproduced"], bool) or "did not train" in f["reason"] or "left out" in f["reason"]
        assert "per_lambda" not in f["evidence"]
        per = f["diagnosis"]["evidence"]["per_lambda"]
        assert [e["lambda"] for e in per] in ([0.1, 0.01], [1.0, 0.1]) and per[0]["reproduced"] == f["reproduced"]
        assert f["diagnosis"]["kind"] in studies.DIAGNOSIS_KINDS
    for e in r["analysis"]["lambdas"]["mi"] + r["analysis"]["lambdas"]["transfer"]:
        assert set(e["trained"]) in ({"mi"}, {"transfer"})
    at = r["analysis"]["lambdas"]["mi"][1]["trained"]["mi"]
    assert at["rule"] == r["analysis"]["trained"]["mi"]["rule"]  # Std shared: the same reference at every λ
    assert at["models"]["std/seed=0"] == r["analysis"]["trained"]["mi"]["models"]["std/seed=0"]
    assert at["models"]["rr/seed=0"] != r["analysis"]["trained"]["mi"]["models"]["rr/seed=0"]
    assert "## λ sweep" in (tmp_path / "index.md").read_text()
    again = studies.run_study("rr_pretraining", tmp_path, preset="smoke", sets=sets, progress=False, execution=ex)
    assert again["runs"] == r["runs"] and again["findings"] == r["findings"]


def test_right_singular_vectors_are_those_of_the_first_weight_matrix():
    model = vt.build_model(vt.ModelConfig("mlp-classifier", input_shape=[1, 5, 5], hidden=[3], num_classes=2), seed=1)
    vectors, s = rr.right_singular_vectors(model)
    w = model.named_parameters()["fc1.linear.weight"].detach().double()
    _, s_ref, vh = torch.linalg.svd(w, full_matrices=False)
    torch.testing.assert_close(s.double(), s_ref, rtol=1e-5, atol=1e-6)
    for v, ref in zip(vectors.reshape(3, -1).double(), vh):
        assert abs(float(v @ ref)) == pytest.approx(1.0, abs=1e-5)  # up to sign
    with pytest.raises(vt.ArgumentError):
        rr.right_singular_vectors(model, layer="logits2")


def test_lambda_sensitivity_reruns_an_experiment_per_lambda(smoke, tmp_path):
    out, _ = smoke
    c = studies.override(study.PRESETS["smoke"], {"seeds": [0]})
    with pytest.raises(vt.ArgumentError) as info:  # a diagnostic runs beside a study, never alone
        study.lambda_sensitivity(c, tmp_path, "mi", [0.5], execution=studies.Execution(workers=2, threads=1))
    assert info.value.argument == "out_dir"
    got = study.lambda_sensitivity(c, out, "mi", [0.5, 0.05], execution=studies.Execution(workers=2, threads=1))
    assert set(got) == {0.5, 0.05}
    for per in got.values():
        assert {"accuracy_A", "accuracy_AA", "accuracy_AB", "deep_ixt_A"} <= set(per["rr"])
    runs = list((out / "sweeps" / "lambda_mi" / "runs").iterdir())
    lams = sorted(load_run(d / "stage_a").config.regularizers[0].params["layer_weights"][0] for d in runs)
    assert lams == [0.05, 0.5]  # each run trained with its own λ
    with pytest.raises(vt.ArgumentError):
        study.lambda_sensitivity(c, tmp_path, "gan", [1.0])
    with pytest.raises(vt.ArgumentError):
        study.lambda_sensitivity(c, tmp_path, "mi", [1.0], methods=("svd",))
