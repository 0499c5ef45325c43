"""Verdicts only on models that trained (vaetransfer.studies.kit.trained): the checks on synthetic
histories and records, and a study's finding made undecided by a model that did not train."""
import json
import math

import numpy as np
import pytest
import torch

import vaetransfer as vt
from vaetransfer.studies import make_config, transfer
from vaetransfer.studies.kit import trained


def test_loss_summary_windows_and_divergence():
    loss = np.linspace(100.0, 10.0, 300)  # window = min(25, 300 // 10) = 25 steps
    s = trained.loss_summary(loss)
    assert s == {"loss_first": round(float(loss[:25].mean()), 3), "loss_last": round(float(loss[-25:].mean()), 3),
                 "finite": True}
    short = trained.loss_summary([5.0, 4.0, 3.0])  # window 1 step
    assert (short["loss_first"], short["loss_last"]) == (5.0, 3.0)
    spiked = loss.copy()
    spiked[150] = float("nan")  # a NaN the trainer got past still counts as a divergence
    assert trained.loss_summary(spiked)["finite"] is False
    blown = loss.copy()
    blown[-5:] = float("inf")
    assert trained.loss_summary(blown)["loss_last"] is None
    with pytest.raises(vt.ArgumentError) as e:
        trained.loss_summary([])
    assert e.value.argument == "loss"


def _record(history, **scores):
    return {**trained.loss_summary(history), **scores}


def test_failures_on_synthetic_histories():
    falling = np.linspace(3000.0, 100.0, 400)
    flat = np.full(400, 3000.0) + np.random.default_rng(0).normal(0, 1, 400)
    rising = np.linspace(100.0, 300.0, 400)
    nan = falling.copy()
    nan[200] = float("nan")
    rule = trained.TrainedRule.halfway("distortion", 378.0, 68.0, what="held-out distortion",
                                       reference_name="the beta1 models'")
    assert rule.maximum == pytest.approx(223.0)
    models = {"ok": _record(falling, distortion=70.0), "strong": _record(falling, distortion=180.0),
              "plateau": _record(flat, distortion=60.0), "worse": _record(rising, distortion=60.0),
              "nan": _record(nan, distortion=60.0), "blurry": _record(falling, distortion=390.0),
              "missing": _record(falling)}
    failed = dict(f.split(": ", 1) for f in trained.failures(models, rule))
    assert set(failed) == {"plateau", "worse", "nan", "blurry", "missing"}
    assert "did not fall by 1%" in failed["plateau"] and "did not fall" in failed["worse"]
    assert "diverged" in failed["nan"]
    assert failed["blurry"].startswith("held-out distortion 390 > 223") and "halfway" in failed["blurry"]
    assert "not a finite number" in failed["missing"]
    assert trained.untrained({k: models[k] for k in ("ok", "strong")}, rule) is None
    assert trained.untrained({"blurry": models["blurry"]}, rule).startswith("did not train — blurry: ")
    # without a rule only the losses count
    assert trained.untrained({"blurry": models["blurry"]}) is None
    accuracy = trained.TrainedRule("accuracy", minimum=0.5, basis="chance 1/3 plus a margin")
    assert trained.failures({"a": _record(falling, accuracy=0.9), "b": _record(falling, accuracy=0.34)},
                            accuracy) == ["b: accuracy 0.34 < 0.5 (chance 1/3 plus a margin)"]


def test_rule_validation_names_the_argument():
    for kwargs, arg in (({"key": "d"}, "maximum"), ({"key": "d", "maximum": 1.0, "minimum": 0.0}, "maximum"),
                        ({"maximum": 1.0}, "key"), ({"key": "d", "maximum": math.nan}, "maximum")):
        with pytest.raises(vt.ArgumentError) as e:
            trained.TrainedRule(**kwargs)
        assert e.value.argument == arg
    with pytest.raises(vt.ArgumentError) as e:  # a reference no better than the baseline did not train itself
        trained.TrainedRule.halfway("d", 100.0, 120.0)
    assert e.value.argument == "reference"
    with pytest.raises(vt.ArgumentTypeError):
        trained.failures([("a", {})])


def test_input_ignoring_distortion_is_the_best_constant_bernoulli():
    g = torch.Generator().manual_seed(0)
    train = (torch.rand(400, 1, 6, 6, generator=g) < torch.linspace(0.05, 0.9, 36).reshape(1, 6, 6)).float()
    test = (torch.rand(200, 1, 6, 6, generator=g) < torch.linspace(0.05, 0.9, 36).reshape(1, 6, 6)).float()
    p = train.double().mean(0).clamp(1e-4, 1 - 1e-4)
    brute = -sum(float((test[i].double() * p.log() + (1 - test[i].double()) * (1 - p).log()).sum())
                 for i in range(200)) / 200
    assert trained.input_ignoring_distortion(train, test) == pytest.approx(brute, rel=1e-12)
    # on its own training images no other constant pixel probabilities do better
    best = trained.input_ignoring_distortion(train, train)
    for shift in (-0.05, 0.05):
        q = (p + shift).clamp(1e-4, 1 - 1e-4)
        other = float(-(train.double() * q.log() + (1 - train.double()) * (1 - q).log()).flatten(1).sum(1).mean())
        assert other > best
    with pytest.raises(vt.ArgumentError) as e:
        trained.input_ignoring_distortion(train, test[:, :, :3])
    assert e.value.argument == "test_images"


def _transfer_analysis(annealed_distortion: float, seeds=(0, 1, 2)) -> dict:
    """A synthetic transfer analysis: three seeds of beta1, annealed and tc6; two objective pairs with
    per-pair encoder-trunk CKA (beta1 vs tc6 alike, beta1 vs annealed not)."""
    falling = trained.loss_summary(np.linspace(3000.0, 100.0, 100))
    models, vaes = {}, {"source": {}, "target": {}}
    for label, d in (("source/beta1", 68.0), ("source/annealed", annealed_distortion), ("source/tc6", 70.0),
                     ("target/beta1", 100.0)):
        for s in seeds:
            models[f"{label}/seed={s}"] = {"label": label, "seed": s, "steps": 100, **falling}
            vaes[label.split("/")[0]][f"{label}/seed={s}"] = {**models[f"{label}/seed={s}"], "distortion": d}
    rule = trained.TrainedRule.halfway("distortion", 378.0, 68.0, what="held-out distortion",
                                       reference_name="the beta1 models'")

    def pairs(level):   # seed effects: what the leave-one-seed-out jackknife's spread is made of
        u = (0.0, 1.0, 3.0)
        return {f"{a}/{b}": {"trunk_diagonal_mean": level + 0.005 * (u[a % 3] + 2 * u[b % 3])} for a in seeds
                for b in seeds if a != b}
    return {"models": models,
            "trained": {"source": trained.check(vaes["source"], rule, baseline=378.0),
                        "target": trained.check(vaes["target"])},
            "objectives": {"beta1_vs_tc6": {"a": "beta1", "b": "tc6", "matrices": {"cka": {"pairs": pairs(0.93)}}},
                           "beta1_vs_annealed": {"a": "beta1", "b": "annealed",
                                                 "matrices": {"cka": {"pairs": pairs(0.55)}}}}}


def _decided(c, a):
    from vaetransfer.studies.kit.decision import decide
    out = transfer.findings._encoders_alike(c, a)
    return out if not hasattr(out, "parts") else decide(out)


def test_transfer_decides_per_objective_and_names_the_untrained_one_left_out():
    c = make_config("transfer", "smoke")
    d = _decided(c, _transfer_analysis(annealed_distortion=390.0))
    # the Annealed VAE did not train: its pair is left out, named; the pair that trained is decided
    assert d["verdict"] == "reproduced" and set(d["left_out"]) == {"beta1_vs_annealed"}
    assert "source/annealed/seed=0: held-out distortion 390 > 223" in d["left_out"]["beta1_vs_annealed"]
    assert "beta1_vs_annealed" in d["reason"] and d["parts"]["beta1_vs_tc6"]["seeds"] == 3
    # trained, the annealed pair is decided too — and its encoders are not alike: the finding is decided against
    d = _decided(c, _transfer_analysis(annealed_distortion=150.0))
    assert d["left_out"] == {} and d["parts"]["beta1_vs_annealed"]["verdict"] == "contradicted"
    assert d["verdict"] == "contradicted" and "beta1_vs_annealed" in d["reason"]
    # the reference itself no better than the baseline: no VAE of the domain can be judged, nothing decided
    a = _transfer_analysis(annealed_distortion=150.0)
    a["trained"]["source"]["rule"] = {"error": "argument 'reference': expected a reference loss below the baseline"}
    d = _decided(c, a)
    assert d["verdict"] == "undecided" and set(d["left_out"]) == {"beta1_vs_tc6", "beta1_vs_annealed"}
    # results written before the check existed: the losses alone decide
    old = _transfer_analysis(annealed_distortion=390.0)
    del old["trained"]
    assert _decided(c, old)["left_out"] == {}


def test_transfer_retraining_runs_go_through_the_trained_check():
    from vaetransfer.studies.transfer.analysis import retraining_checks
    c = make_config("transfer", "smoke")
    decoder = transfer.stages.decoder_layers()
    curves = {name: {"loss": [300.0] + [200.0 - k for k in range(1, len(stages))]}
              for name, stages in transfer.stages.retraining_curves(c, decoder)}
    reinit = [n for n in curves if "/reinit/" in n][0]
    curves[reinit]["loss"][-1] = 800.0  # re-initialised layers not recovered: above the input-ignoring baseline
    target = trained.check({}, trained.TrainedRule.halfway("distortion", 400.0, 100.0), baseline=400.0)
    runs = [type("R", (), {"row": {"label": s.name}, "measured": {"loss_first": 10.0, "loss_last": 1.0, "finite": True}})
            for s in {s for s in transfer.stages.retrain_plan(c, decoder).values() if s is not None}]
    checks = retraining_checks(c, runs, target, {"curves": curves}, decoder)
    check = checks["retraining_final"]   # the all-layers stages, under the target models' rule
    last = len(curves[reinit]["loss"]) - 1
    assert set(check["models"]) == {f"{n}/k={last}" for n in curves}
    assert not trained.check_failures(checks["retraining"])   # every stage's own loss fell
    assert trained.check_failures(check, [f"{reinit}/k={last}"]) == [f"{reinit}/k={last}: distortion 800 > 250 (halfway "
                                                                     "from the input-ignoring baseline 400 to the "
                                                                     "reference 100)"]
    assert not trained.check_failures(check, [n for n in check["models"] if not n.startswith(reinit)])
    a = {"trained": {**checks, "source": None, "target": None},
         "retraining": {"curves": {n: {**curves[n], **{k: v for k, v in zip(("side", "latent", "init"),
                                                                            n.split("/")[:3])}, "seed": 0}
                                   for n in curves}}}
    effect = transfer.findings._more_layers_better(c, a)
    part = effect.parts["/".join(reinit.split("/")[:3])]   # its one seed did not train: the part is left out
    assert part.reason.startswith("every unit left out: seed=0:") and "distortion 800 > 250" in part.reason
    fine = effect.parts["/".join([n for n in curves if "/finetune/" in n][0].split("/")[:3])]
    assert fine.reason is None and fine.values == {"seed=0": 300.0 - curves[[n for n in curves
                                                                            if "/finetune/" in n][0]]["loss"][-1]}


def test_one_json_shape_for_every_check():
    """``check`` stores every study's trained check as ``{"rule", "models", "context"}``; the rule
    record round-trips to the same TrainedRule, and a halfway rule whose reference did not train
    becomes ``{"error"}``."""
    rule = trained.TrainedRule.halfway("distortion", 300.0, 100.0, what="held-out distortion")
    record = trained.rule_record(rule)
    assert record == {"key": "distortion", "what": "held-out distortion", "basis": rule.basis, "maximum": 200.0}
    assert trained.rule_of(record) == rule
    assert trained.halfway_record("distortion", 300.0, 100.0, what="held-out distortion") == record
    bad = trained.halfway_record("distortion", 100.0, 300.0)
    assert set(bad) == {"error"} and "did not train" in bad["error"] and trained.rule_of(bad) is None
    # in the reader's words, not an argument error's (it was repeated in every finding's reason)
    assert bad["error"] == ("the reference did not train (its loss 300 is not below the input-ignoring baseline's "
                            "100), so no model can be judged against it")
    assert "argument" not in trained.halfway_record("d", 100.0, 300.0, reference_name="the β = 1 models")["error"]
    accuracy = trained.rule_record(trained.TrainedRule("accuracy", minimum=0.123456, what="accuracy"), digits=4)
    assert accuracy["minimum"] == 0.1235 and "maximum" not in accuracy
    assert trained.rule_record(None) is None and trained.rule_record(trained.TrainedRule()) is None
    models = {"a": {"loss_first": 10.0, "loss_last": 5.0, "distortion": 150.0}}
    section = trained.check(models, rule, baseline=300.0)
    assert section == {"rule": record, "models": models, "context": {"baseline": 300.0}}
    assert json.loads(json.dumps(section)) == section   # JSON data, stored as is
    assert trained.check(models, record) == trained.check(models, rule)
    with pytest.raises(vt.ArgumentTypeError) as e:
        trained.check([("a", {})])
    assert e.value.argument == "models"


def test_check_failures_and_reason_read_the_one_shape():
    """Each branch: a loss that did not fall, a score over the maximum, a model that trained, a
    record without losses (an old output: its score only), names not in the check, a reference
    that did not train (every asked-for model fails with its reason), no check at all."""
    rule = trained.TrainedRule("distortion", maximum=200.0, what="held-out distortion")
    models = {"flat": {"loss_first": 10.0, "loss_last": 9.99, "distortion": 100.0},
              "blurry": {"loss_first": 10.0, "loss_last": 5.0, "distortion": 250.0},
              "good": {"loss_first": 10.0, "loss_last": 5.0, "distortion": 150.0},
              "old": {"distortion": 260.0},
              "old_good": {"distortion": 120.0}}
    section = trained.check(models, rule)
    failed = trained.check_failures(section)
    assert [f.split(":")[0] for f in failed] == ["flat", "blurry", "old"]
    assert "did not fall" in failed[0] and "250 > 200" in failed[1] and "260 > 200" in failed[2]
    assert trained.check_failures(section, ["good", "old_good", "missing"]) == []
    assert trained.check_reason(section, ["good"]) is None
    assert trained.check_reason(section, ["blurry"]).startswith("did not train — blurry: held-out distortion")
    broken = trained.check(models, {"error": "the reference did not train"})
    assert trained.check_failures(broken, ["good"]) == ["no model can be judged: the reference did not train"]
    assert trained.check_failures(broken, ["missing"]) == []
    assert trained.check_reason(None, ["good"]) is None and trained.check_reason({}, ["good"]) is None
    loss_only = trained.check({"a": {"loss_first": 1.0, "loss_last": float("nan"), "finite": False}})
    assert trained.check_failures(loss_only) == ["a: diverged (non-finite training loss)"]
