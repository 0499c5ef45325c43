"""Study 4 (rr_pretraining): the smoke preset end to end, the MI measure, the methods' configurations,
λ on the paper's scale, the config's checks, every finding's rule and the λ diagnostic."""
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
    verdicts = {f["name"]: f["reproduced"] for f in r["findings"]}
    assert list(verdicts) == [f.name for f in study.FINDINGS]
    for name in ("peak_vectors_show_peaks", "digit_vectors_show_digits_pair", "digit_vectors_show_digits_full",
                 "rr_keeps_input_information_in_deep_layers", "rr_finetunes_as_well_on_A_better_on_B",
                 "rr_transfers_best_to_shape_variants"):
        assert isinstance(verdicts[name], bool), name  # 2 seeds and every experiment: all decidable
    per_experiment = {e: len(study.methods_of(c, e)) for e in c.experiments}
    assert r["runs"]["train"]["runs"] == r["runs"]["train"]["done"] == len(c.seeds) * sum(per_experiment.values())
    text = (out / "index.md").read_text()
    for heading in ("## SVD insight", "## MI planes", "## Shape transfer", "## Findings"):
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
    lam = study._layer_lambdas(model, 1e-6, 100)
    assert lam == pytest.approx([1e-6 * 50 * 255 ** 2, 1e-6 * 50])
    regs = study._regularizers("rr", lam, reduction="sum", output_activation="relu", variant="full", beta=0.01)
    assert regs[0].params["layer_weights"] == pytest.approx(lam)
    rr1 = study._regularizers("rr1", lam, reduction="sum", output_activation="relu", variant="full", beta=0.01)[0]
    assert rr1.params["input_only"] and rr1.weight == pytest.approx(lam[0])
    assert study._regularizers("std", lam, reduction="sum", output_activation="relu", variant="full", beta=0.01) == ()
    assert study._regularizers("ort", lam, reduction="sum", output_activation="relu", variant="full",
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
    """The medium preset (issue 32): the λ sweeps, 8 seeds, the paper's lengths on the 12-bit task
    and the digits, the paper preset's on the shapes; its runs per stage, counted without running."""
    c = studies.make_config("rr_pretraining", "medium")
    assert studies.config_to_dict(c) == studies.config_to_dict(study.PRESETS["medium"])
    assert c.seeds == tuple(range(8)) and c.experiments == study.EXPERIMENTS and c.methods == study.METHODS
    assert study.lambdas_of(c, "mi") == [0.1, 0.03, 0.01, 0.003, 0.001]
    assert study.lambdas_of(c, "transfer") == [1.0, 0.1, 0.01, 0.001]
    assert (c.mi.epochs, c.mi.finetune_epochs, c.digits.full_epochs) == (2_000, 1_000, 1_000)
    assert (c.transfer.channels, c.transfer.n_train, c.transfer.n_test, c.transfer.epochs,
            c.transfer.finetune_epochs) == (32, 5_000, 2_000, 30, 10)
    assert c.peak == study.PRESETS["small"].peak  # the paper's peak test already
    train = study.TRAIN.runs(c, {})
    per = {e: sum(r["experiment"] == e for r in train) for e in study.EXPERIMENTS}
    assert per == {"peak": 4 * 8, "digits": 4 * 8, "mi": 5 * 8, "transfer": 4 * 8} and len(train) == 136
    lambdas = study.LAMBDAS.runs(c, {"train": []})
    count = {}
    for r in lambdas:
        key = (r["experiment"], r["method"])
        count[key] = count.get(key, 0) + 1
    assert count == {("mi", "rr"): 4 * 8, ("mi", "rr1"): 4 * 8, ("transfer", "rr"): 3 * 8} and len(lambdas) == 88
    assert {r["lambda"] for r in lambdas if r["experiment"] == "mi"} == {0.03, 0.01, 0.003, 0.001}
    assert {r["lambda"] for r in lambdas if r["experiment"] == "transfer"} == {0.1, 0.01, 0.001}
    assert {frozenset(r) for r in lambdas} == {frozenset({"experiment", "lambda", "method", "seed"})}


def test_a_lambda_row_trains_with_its_lambda_alone(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setitem(study.RUNNERS, "mi", lambda c, m, s, d: seen.setdefault("mi", c) and {})
    monkeypatch.setitem(study.RUNNERS, "transfer", lambda c, m, s, d: seen.setdefault("transfer", c) and {})
    c = study.PRESETS["medium"]
    job = studies.Job("lambdas", tmp_path, tmp_path)
    study._train_one(c, {"experiment": "mi", "lambda": 0.01, "method": "rr", "seed": 0}, job)
    study._train_one(c, {"experiment": "transfer", "lambda": 0.1, "method": "rr", "seed": 3}, job)
    assert (seen["mi"].mi.rr_lambda, seen["mi"].mi.rr_lambdas) == (0.01, ())
    assert (seen["transfer"].transfer.rr_lambda, seen["transfer"].transfer.rr_lambdas) == (0.1, ())
    assert seen["mi"].mi.epochs == c.mi.epochs  # nothing else changes


# ---------------------------------------------------------------------------------- findings' rules
def ms(mean, se=0.01):
    return {"mean": mean, "se": se, "n": 3}


def finding(name):
    return next(f for f in study.FINDINGS if f.name == name)


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
    v = f.decide(SMOKE, svd_analysis(ms(0.3), case))
    assert v.reproduced is True and v.evidence["distance"]["rr"]["mean"] == 0.3
    assert f.decide(SMOKE, svd_analysis(ms(0.69, 0.02), case)).reproduced is False  # within Ort's standard errors
    assert f.decide(ONE_SEED, svd_analysis(ms(0.3), case)).reproduced is None  # no standard error from one seed
    assert f.decide(NO_RR, svd_analysis(ms(0.3), case)).reproduced is None
    other = [e for e in study.EXPERIMENTS if e != experiment]
    v = f.decide(studies.override(SMOKE, {"experiments": other}), {})
    assert v.reproduced is None and experiment in v.reason


def test_deep_layers_finding_follows_its_rule():
    f = finding("rr_keeps_input_information_in_deep_layers")
    a = {"mi_deep": {"layers": ["fc2", "fc3", "logits"], "ixt": {"std": 6.0, "ort": 7.0, "pre": 11.0, "rr": 8.0}}}
    assert f.decide(SMOKE, a).reproduced is True
    a["mi_deep"]["ixt"]["rr"] = 6.5  # above Std, below Ort
    v = f.decide(SMOKE, a)
    assert v.reproduced is False and v.evidence["mean_ixt"]["rr"] == 6.5
    a["mi_deep"]["ixt"]["rr"] = 8.0
    assert f.decide(ONE_SEED, a).reproduced is True  # means only: one seed decides
    assert f.decide(studies.override(SMOKE, {"experiments": ["peak"]}), {}).reproduced is None
    assert f.decide(NO_RR, a).reproduced is None


def test_finetune_finding_follows_its_rule():
    f = finding("rr_finetunes_as_well_on_A_better_on_B")

    def analysis(rr_aa, rr_ab):
        return {"mi": {"std": {"AA": {"test_accuracy": ms(0.95)}, "AB": {"test_accuracy": ms(0.80)}},
                       "rr": {"AA": {"test_accuracy": rr_aa}, "AB": {"test_accuracy": rr_ab}}}}
    v = f.decide(SMOKE, analysis(ms(0.935), ms(0.9)))  # AA within both standard errors of Std's
    assert v.reproduced is True and v.evidence["A_at_least_as_well"] and v.evidence["B_better"]
    v = f.decide(SMOKE, analysis(ms(0.9), ms(0.9)))
    assert v.reproduced is False and not v.evidence["A_at_least_as_well"] and v.evidence["B_better"]
    v = f.decide(SMOKE, analysis(ms(0.95), ms(0.815)))  # B not clearly better
    assert v.reproduced is False and v.evidence["A_at_least_as_well"] and not v.evidence["B_better"]
    assert f.decide(ONE_SEED, analysis(ms(0.95), ms(0.9))).reproduced is None
    assert f.decide(studies.override(SMOKE, {"experiments": ["transfer"]}), {}).reproduced is None


def test_transfer_finding_follows_its_rule():
    f = finding("rr_transfers_best_to_shape_variants")
    transfer = {m: {"final": {"textured": ms(0.9), "filled": ms(fi), "edges": ms(e)}}
                for m, fi, e in (("std", 0.5, 0.3), ("rr", 0.6, 0.4), ("pre", 0.2, 0.2))}
    v = f.decide(SMOKE, {"transfer": transfer})
    assert v.reproduced is True and v.evidence["order"]["filled"] == ["rr", "std", "pre"]
    transfer["std"]["final"]["edges"] = ms(0.5)
    assert f.decide(SMOKE, {"transfer": transfer}).reproduced is False
    transfer["std"]["final"]["edges"] = ms(0.3)
    assert f.decide(ONE_SEED, {"transfer": transfer}).reproduced is True  # means only: one seed decides
    assert f.decide(studies.override(SMOKE, {"experiments": ["mi"]}), {}).reproduced is None
    assert f.decide(NO_RR, {"transfer": transfer}).reproduced is None


SWEPT = studies.override(SMOKE, {"mi.rr_lambdas": [0.01, 0.001], "transfer.rr_lambdas": [0.1]})


def mi_entry(lam, rr_ixt, rr_aa, rr_ab):
    return {"lambda": lam,
            "mi": {"std": {"AA": {"test_accuracy": ms(0.95)}, "AB": {"test_accuracy": ms(0.80)}},
                   "rr": {"AA": {"test_accuracy": rr_aa}, "AB": {"test_accuracy": rr_ab}}},
            "mi_deep": {"layers": ["fc2", "fc3", "logits"], "ixt": {"std": 6.0, "ort": 7.0, "rr": rr_ixt}}}


def test_lambda_sweep_findings_name_the_lambda_where_they_hold():
    a = {"lambdas": {"mi": [mi_entry(0.1, 6.5, ms(0.90), ms(0.90)),        # below Ort; A clearly worse
                            mi_entry(0.01, 8.0, ms(0.94), ms(0.90)),       # both rules hold
                            mi_entry(0.001, 7.5, ms(0.95), ms(0.815))]}}   # I(X; D) holds, B not clearly better
    a.update(a["lambdas"]["mi"][0])  # the study's own sections are its first λ's
    keep = finding("rr_keeps_input_information_in_deep_layers").decide(SWEPT, a)
    assert keep.reproduced is True and keep.evidence["lambdas_reproduced"] == [0.01, 0.001]
    assert [e["reproduced"] for e in keep.evidence["per_lambda"]] == [False, True, True]
    assert keep.evidence["per_lambda"][1]["mean_ixt"]["rr"] == 8.0
    tune = finding("rr_finetunes_as_well_on_A_better_on_B").decide(SWEPT, a)
    assert tune.reproduced is True and tune.evidence["lambdas_reproduced"] == [0.01]
    assert [e["lambda"] for e in tune.evidence["per_lambda"]] == [0.1, 0.01, 0.001]
    a["lambdas"]["mi"][1] = mi_entry(0.01, 6.8, ms(0.90), ms(0.80))  # now it holds at no λ
    assert finding("rr_finetunes_as_well_on_A_better_on_B").decide(SWEPT, a).reproduced is False
    v = finding("rr_keeps_input_information_in_deep_layers").decide(SWEPT, a)
    assert v.reproduced is True and v.evidence["lambdas_reproduced"] == [0.001]
    # One seed: no λ decides the ± se rule, so it stays undecided for the first λ's reason.
    v = finding("rr_finetunes_as_well_on_A_better_on_B").decide(studies.override(SWEPT, {"seeds": [0]}), a)
    assert v.reproduced is None and "seed" in v.reason

    def tr_entry(lam, filled, edges):
        return {"lambda": lam, "transfer": {m: {"final": {"textured": ms(0.9), "filled": ms(fi), "edges": ms(e)}}
                                            for m, fi, e in (("std", 0.5, 0.3), ("pre", 0.2, 0.2),
                                                             ("rr", filled, edges))}}
    t = {"lambdas": {"transfer": [tr_entry(1.0, 0.4, 0.2), tr_entry(0.1, 0.6, 0.35)]}}
    t["transfer"] = t["lambdas"]["transfer"][0]["transfer"]
    v = finding("rr_transfers_best_to_shape_variants").decide(SWEPT, t)
    assert v.reproduced is True and v.evidence["lambdas_reproduced"] == [0.1]
    assert v.evidence["per_lambda"][0]["order"]["filled"] == ["std", "rr", "pre"]
    t["lambdas"]["transfer"][1] = tr_entry(0.1, 0.6, 0.25)  # best on filled only
    assert finding("rr_transfers_best_to_shape_variants").decide(SWEPT, t).reproduced is False
    # Without a sweep in the analysis the rules decide as before (the old presets' verdicts).
    assert finding("rr_transfers_best_to_shape_variants").decide(SMOKE, {"transfer": t["transfer"]}).evidence \
        == {"accuracy": {m: {s: v["final"][s]["mean"] for s in study.STYLES} for m, v in t["transfer"].items()},
            "order": {s: sorted(t["transfer"], key=lambda m: -t["transfer"][m]["final"][s]["mean"])
                      for s in study.STYLES}}


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
    a = study._analyse(c, runs, None)
    assert [e["lambda"] for e in a["lambdas"]["transfer"]] == [1.0, 0.1]
    assert a["lambdas"]["transfer"][0]["transfer"] == a["transfer"]  # the study's own λ first
    assert a["transfer"]["rr"]["final"]["filled"]["mean"] == pytest.approx(0.3)
    at = a["lambdas"]["transfer"][1]["transfer"]
    assert at["rr"]["final"]["filled"]["mean"] == pytest.approx(0.61) and at["std"] == a["transfer"]["std"]
    v = finding("rr_transfers_best_to_shape_variants").decide(c, a)
    assert v.reproduced is False  # edges: a tie at 0.2 goes to the method listed first, Std
    assert "lambdas" not in study._analyse(studies.override(c, {"transfer.rr_lambdas": []}),
                                           {"train": runs["train"], "lambdas": []}, None)
    text = study._report({"analysis": a})
    assert "## λ sweep" in text and "| 0.1 |" in text


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
    for f in r["findings"][3:]:
        assert f["reproduced"] in (True, False) and [e["lambda"] for e in f["evidence"]["per_lambda"]] in \
            ([0.1, 0.01], [1.0, 0.1])
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
