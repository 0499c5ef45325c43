"""Study 4 (rr): the smoke preset end to end, the MI measure, the methods' configurations, λ on the
paper's scale, and the config's checks."""
import json

import pytest
import torch

import vaetransfer as vt
from vaetransfer import cli, data, estimators, experiments, rr
from vaetransfer.experiments import rr as study
from vaetransfer.train import load_run


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """`vaetransfer run rr --preset smoke`, once for the module."""
    out = tmp_path_factory.mktemp("rr") / "smoke"
    assert cli.main(["run", "rr", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    return out, json.loads((out / "results.json").read_text())


def test_smoke_writes_every_section_and_figure(smoke):
    out, r = smoke
    c = study.PRESETS["smoke"]
    assert experiments.get("rr") is study
    for key in ("svd", "mi", "transfer", "findings", "figures"):
        assert r[key], key
    for path in r["figures"]:
        assert (out / path).stat().st_size > 1000
    assert set(r["svd"]) == {"peak", "pair", "full"}
    assert set(r["mi"]) == set(c.methods)  # RR¹ belongs to the MI planes only
    assert set(r["transfer"]) == set(c.methods) - {"rr1"}
    for name in ("peak_vectors_show_peaks", "digit_vectors_show_digits_pair", "digit_vectors_show_digits_full",
                 "rr_keeps_input_information_in_deep_layers", "rr_finetunes_as_well_on_A_better_on_B",
                 "rr_transfers_best_to_shape_variants"):
        assert isinstance(r["findings"][name]["holds"], bool), name
    per_experiment = {e: len(study.methods_of(c, e)) for e in c.experiments}
    assert r["runs"] == len(c.seeds) * sum(per_experiment.values())
    text = (out / "index.md").read_text()
    for heading in ("## SVD insight", "## MI planes", "## Shape transfer", "## Findings"):
        assert heading in text


def test_each_method_trains_what_it_should(smoke):
    out, _ = smoke
    seen = set()
    for d in (out / "sweeps" / "runs" / "runs").iterdir():
        assert json.loads((d / study.RESULT_FILE).read_text())
        for config in d.rglob("config.json"):
            stage = config.parent.name
            if stage not in ("stage_a", "AA", "AB", "finetune") and not stage.startswith("layer"):
                continue
            cfg = load_run(config.parent).config
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
    mi = estimators.binned_mutual_information(t.inputs.float(), t.labels, 30)
    assert float(mi.i_xt) == pytest.approx(12.0, abs=1e-9)  # 4,096 distinct patterns: H(X) = 12 bits
    assert 0.0 < float(mi.i_ty) <= 1.0
    p = float(t.labels.float().mean())
    assert abs(p - 0.5) < 0.05


def test_layer_mi_reports_every_layer_in_bits():
    t = data.twelve_bit_task()
    model = vt.build_model(vt.ModelConfig("mlp-classifier", input_shape=[12], hidden=[10, 7], activation="tanh",
                                          num_classes=2), seed=0)
    values = study.layer_mi(model, t.inputs.float(), t.labels, 30)
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
    again = experiments.run_study("rr", out, preset="smoke", progress=False)
    assert again["findings"] == r["findings"] and again["train_seconds"] == r["train_seconds"]


@pytest.mark.parametrize("sets, argument", [
    (["experiments=[\"peak\", \"gan\"]"], "experiments"),
    (["methods=[\"rr\"]"], "methods"),
    (["methods=[\"std\", \"svd\"]"], "methods"),
    (["seeds=[1, 1]"], "seeds"),
    (["peak.train=200"], "peak.train"),
    (["mi.rr_lambda=0"], "mi.rr_lambda"),
    (["transfer.lr=-1"], "transfer.lr"),
    (["mi.hidden=[]"], "mi.hidden"),
    (["executor=slurm"], "executor"),
])
def test_config_errors_name_the_key(sets, argument):
    with pytest.raises((vt.ArgumentError, vt.ArgumentTypeError)) as e:
        experiments.make_config("rr", "smoke", sets=sets)
    assert argument in str(e.value)


def test_findings_follow_their_rules():
    def ms(mean, se=0.01):
        return {"mean": mean, "se": se, "n": 3}
    per = {"std": {"distance": ms(0.8)}, "ort": {"distance": ms(0.7)}, "rr": {"distance": ms(0.3)}}
    assert study._svd_finding(per)["holds"]
    per["rr"]["distance"] = ms(0.69, 0.02)  # within the standard errors of Ort
    assert not study._svd_finding(per)["holds"]
    transfer = {m: {"final": {"textured": ms(0.9), "filled": ms(f), "edges": ms(e)}}
                for m, f, e in (("std", 0.5, 0.3), ("rr", 0.6, 0.4), ("pre", 0.2, 0.2))}
    f = study._findings(study.PRESETS["smoke"], {}, {}, transfer)["rr_transfers_best_to_shape_variants"]
    assert f["holds"] and f["order"]["filled"] == ["rr", "std", "pre"]
    transfer["std"]["final"]["edges"] = ms(0.5)
    assert not study._findings(study.PRESETS["smoke"], {}, {}, transfer)["rr_transfers_best_to_shape_variants"]["holds"]


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


def test_lambda_sensitivity_reruns_an_experiment_per_lambda(tmp_path):
    c = experiments.override(study.PRESETS["smoke"], {"seeds": [0]})
    got = study.lambda_sensitivity(c, tmp_path, "mi", [0.5, 0.05])
    assert set(got) == {0.5, 0.05}
    for per in got.values():
        assert {"accuracy_A", "accuracy_AA", "accuracy_AB", "deep_ixt_A"} <= set(per["rr"])
    runs = list((tmp_path / "sweeps" / "lambda_mi" / "runs").iterdir())
    lams = sorted(load_run(d / "stage_a").config.regularizers[0].params["layer_weights"][0] for d in runs)
    assert lams == [0.05, 0.5]  # each run trained with its own λ
    with pytest.raises(vt.ArgumentError):
        study.lambda_sensitivity(c, tmp_path, "gan", [1.0])
