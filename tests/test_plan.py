"""Transfer plans (vaetransfer.plan): the candidates along the layer order, the recommendation rule
on synthetic results (each branch), a plan end to end on a user-written VAE and classifier
(files, resume, command line), and equality with the transfer study's retraining numbers on the
same source model."""
import json
import math

import numpy as np
import pytest
import torch

import vaetransfer as vt
from vaetransfer import cli
from vaetransfer import plan as vp
from vaetransfer.plan.rule import recommend

import user_models


def _vae_config():
    return vt.module_model(user_models.SmallVAE, kind="vae", input_shape=(1, 8, 8))


# ---------------------------------------------------------------- candidates

def test_candidates_follow_the_layer_order_with_their_costs():
    m = vt.build_model(vt.ModelConfig("mlp", input_shape=[12], hidden=[8, 6], latent_dim=2), seed=0)
    layers = vp.parameterised_layers(m)
    assert layers == ["enc1", "enc2", "mean", "logvar", "dec1", "dec2", "dec3"]
    plans = {c.id: c for c in vp.candidates(m)}
    sizes = {n: p.numel() for n, p in m.named_parameters().items()}
    total = sum(sizes.values())
    assert plans["finetune_all"].parameters == plans["scratch"].parameters == total and plans["as_is"].parameters == 0
    k5 = plans["keep5/reinit"]
    assert k5.kept == ("enc1", "enc2", "mean", "logvar", "dec1") and k5.retrained == ("dec2", "dec3")
    assert k5.reinit == ("dec2", "dec3") and k5.latent == "frozen"
    assert k5.parameters == sum(v for n, v in sizes.items() if n.startswith(("dec2.", "dec3.")))
    # latent retrained: the latent fine-tuned, the other retrained layers re-initialised (the study's stages)
    k5l = plans["keep5/reinit/latent-retrained"]
    assert k5l.freeze == ("enc1", "enc2", "dec1") and k5l.reinit == ("dec2", "dec3")
    # before the latent, a re-initialised plan re-initialises everything it retrains
    assert plans["keep1/reinit"].reinit == ("enc2", "mean", "logvar", "dec1", "dec2", "dec3")
    assert plans["keep1/reinit"].latent is None
    # the latent alone, and no two plans training the same thing
    assert plans["keep7/finetune/latent-retrained"].retrained == ("mean", "logvar")
    keys = [(frozenset(c.freeze), c.reinit, c.reference) for c in plans.values()]
    assert len(keys) == len(set(keys))
    assert "keep4/finetune/latent-retrained" not in plans  # = keep2/finetune


def test_candidate_choices_are_checked():
    m = vt.build_model(vt.ModelConfig("mlp", input_shape=[12], hidden=[8], latent_dim=2), seed=0)
    with pytest.raises(vt.ArgumentError, match="layers kept") as e:
        vp.candidates(m, keep=[0])
    assert e.value.argument == "keep"
    with pytest.raises(vt.ArgumentError) as e:
        vp.candidates(m, inits=("warm",))
    assert e.value.argument == "inits"
    only = vp.candidates(m, keep=[3], inits=("finetune",), latent=("retrained",), references=())
    assert [c.id for c in only] == ["keep3/finetune/latent-retrained"]


# ---------------------------------------------------------------- the rule

def test_the_rule_recommends_the_cheapest_plan_shown_within_tolerance():
    losses = {"all": {0: 100.0, 1: 101.0, 2: 99.0},
              "cheap": {0: 100.2, 1: 101.3, 2: 99.1},      # +0.2 ± small: within τ = 1
              "cheaper": {0: 103.0, 1: 104.0, 2: 102.2}}   # +3: not
    r = recommend(losses, {"all": 1000, "cheap": 100, "cheaper": 10}, tolerance=0.01)
    assert r["best"] == "all" and r["recommended"] == "cheap"
    assert r["plans"]["cheap"]["as_good"] and not r["plans"]["cheaper"]["as_good"]
    assert r["plans"]["cheap"]["high"] < r["tau"] == pytest.approx(1.0)


def test_a_cheap_plan_within_tolerance_by_its_mean_but_not_its_interval_is_not_recommended():
    losses = {"all": {0: 100.0, 1: 100.0, 2: 100.0},
              "noisy": {0: 97.0, 1: 103.5, 2: 100.0}}   # mean +0.17 but spread of ±3
    r = recommend(losses, {"all": 1000, "noisy": 100}, tolerance=0.01)
    assert r["recommended"] == "all" and r["plans"]["noisy"]["possibly_as_good"]
    assert "more seeds would decide" in r["reason"] and "noisy" in r["reason"]


def test_the_best_plan_is_recommended_when_it_is_the_cheapest_and_as_is_can_win():
    r = recommend({"a": {0: 1.0, 1: 1.1}, "b": {0: 2.0, 1: 2.1}}, {"a": 5, "b": 50})
    assert r["recommended"] == r["best"] == "a" and "also the cheapest" in r["reason"]
    r = recommend({"as_is": {0: 5.0, 1: 5.0}, "all": {0: 5.01, 1: 4.99}}, {"as_is": 0, "all": 9})
    assert r["recommended"] == "as_is"


def test_one_seed_gives_no_interval_and_only_the_best():
    r = recommend({"a": {0: 1.0}, "b": {0: 1.001}}, {"a": 10, "b": 1})
    assert r["recommended"] == "a" and r["plans"]["b"]["low"] is None and r["plans"]["b"]["possibly_as_good"]
    with pytest.raises(vt.ArgumentError) as e:
        recommend({"a": {0: 1.0}}, {"a": 1}, tolerance=1.5)
    assert e.value.argument == "tolerance"


# ---------------------------------------------------------------- end to end

@pytest.fixture(scope="module")
def source_vae(tmp_path_factory):
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(300, 1, 8, 8, generator=g) > 0.5).to(torch.uint8)
    cfg = vt.TrainConfig(model=_vae_config(), objective=vt.TaskConfig("beta-vae"), steps=60, batch_size=32,
                         optimizer=vt.OptimizerConfig(lr=1e-3))
    return vt.train(cfg, x, tmp_path_factory.mktemp("plan") / "source", progress=False)


def _target(n=240, p=0.3):
    g = torch.Generator().manual_seed(1)
    return (torch.rand(n, 1, 8, 8, generator=g) > p).to(torch.uint8)


def test_a_plan_for_a_user_vae_end_to_end_and_resumed(source_vae, tmp_path):
    config = vp.PlanConfig(steps=12, seeds=(0, 1), batch_size=32, optimizer=vt.OptimizerConfig(lr=1e-3),
                           keep=(1, 3), similarity_n=40)
    result = vp.plan(source_vae, _target(), tmp_path / "p", config=config, workers=2, progress=False)
    r = result.results
    assert r["primary"] == "neg_elbo" and r["n_eval"] == 24 and r["n_train"] == 216
    ids = set(r["plans"])
    assert {"as_is", "finetune_all", "scratch", "keep1/finetune", "keep3/reinit", "keep3/reinit/latent-retrained"} <= ids
    assert "keep3/finetune/latent-retrained" not in ids  # = keep1/finetune
    for p in r["plans"].values():
        assert p["loss"]["n"] == 2 and math.isfinite(p["loss"]["mean"])
        assert set(p["by_seed"]) == {"0", "1"}
    # the trained plans report the objective's own loss beside, labelled
    assert r["plans"]["finetune_all"]["objective_loss"]["mean"] > 0 and "objective_loss" in r["conventions"]
    assert result.recommended["id"] == r["recommendation"]["recommended"]
    prof = r["change_profile"]
    assert prof["layers"][0] == "enc.1" and all(-1e-6 <= v["mean"] <= 1 + 1e-6 for v in prof["cka"].values())
    for f in ("results.json", "report.md", "plan_loss.png", "plan_change_profile.png"):
        assert (tmp_path / "p" / f).exists(), f
    report = (tmp_path / "p" / "report.md").read_text()
    assert "**Recommended:" in report and "Rule (fixed before the runs)" in report
    # as is: exactly the source evaluated on the held-out target
    held = vt.data.split(vt.data.as_dataset(_target()), 0.1, seed=0)[1]
    expected = vp.job.evaluate(source_vae.model(), source_vae.config.objective, held)["neg_elbo"]
    assert r["plans"]["as_is"]["loss"]["mean"] == pytest.approx(expected)
    # a second call trains nothing and gives the same numbers
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "p" / "runs").rglob("*.pt")}
    again = vp.plan(source_vae, _target(), tmp_path / "p", config=config, progress=False)
    assert again.results["plans"] == r["plans"]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "p" / "runs").rglob("*.pt")} == stamps
    # other data in the same directory is refused
    with pytest.raises(vt.ArgumentError, match="differs") as e:
        vp.plan(source_vae, _target(p=0.6), tmp_path / "p", config=config, progress=False)
    assert e.value.argument == "target"


def test_a_plan_for_a_classifier_judges_cross_entropy(tmp_path):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, 12, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    src = vt.train(vt.TrainConfig(model=vt.module_model(user_models.PlainNet, kind="classifier", input_shape=(12,)),
                                  objective=vt.TaskConfig("classification"), steps=40, batch_size=32,
                                  optimizer=vt.OptimizerConfig(lr=1e-2)), (x, y), tmp_path / "src", progress=False)
    xt = torch.randn(200, 12, generator=g) + 0.5
    yt = (xt[:, 0] > 0.5).long() + (xt[:, 1] > 1.0).long()
    result = vp.plan(src, (xt, yt), tmp_path / "p", config=vp.PlanConfig(steps=10, seeds=(0, 1), batch_size=32,
                                                                        similarity_n=30), progress=False)
    assert result.results["primary"] == "cross_entropy"
    assert set(result.results["conventions"]) == {"cross_entropy", "error_rate", "objective_loss"}
    assert 0 <= result.results["plans"]["finetune_all"]["error_rate"]["mean"] <= 1
    with pytest.raises(vt.ArgumentError, match="class labels") as e:
        vp.plan(src, xt, tmp_path / "q", progress=False)
    assert e.value.argument == "target"


def test_the_plan_command_line(source_vae, tmp_path, capsys):
    np.savez(tmp_path / "target.npz", x=_target().numpy())
    assert cli.main(["plan", "--source", str(source_vae.out_dir), "--target", str(tmp_path / "target.npz"),
                     "--steps", "6", "--seeds", "0,1", "--batch-size", "32", "--keep", "3", "--inits", "finetune",
                     "--latent", "frozen", "--similarity-n", "20", "--out", str(tmp_path / "p"), "--quiet"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["recommended"] in {"as_is", "keep3/finetune", "finetune_all", "scratch"}
    assert vp.load_plan(tmp_path / "p").results["config"]["keep"] == [3]


# ---------------------------------------------------------------- the study it generalises

def test_the_plan_equals_the_transfer_studys_retraining_on_the_same_runs(study_smoke, tmp_path):
    """The transfer study's "output side" decoder retraining is a set of keep-k plans (the encoder and
    the first decoder layers kept): on its smoke source model, with its budget and held-out images, the
    plan's reconstruction loss (z = posterior mean) equals every such stage's number."""
    from vaetransfer import sweep
    from vaetransfer.studies import transfer
    from vaetransfer.studies.transfer.stages import data_spec, decoder_layers, held_out

    out, r = study_smoke("transfer")
    c = transfer.PRESETS["smoke"]
    models = sweep.open_sweep(out / "sweeps" / "models")
    source_id = next(x.id for x in models.runs if x.params["model"] == f"source/{c.reference}" and x.params["seed"] == 0)
    source = vt.load_run(models.run_dir(source_id))
    train_set, _ = data_spec(c, c.target).build()
    x_eval = held_out(c, c.target, c.eval_n, "eval_n")
    decoder = decoder_layers()
    n = len(vp.parameterised_layers(source.model()))
    config = vp.PlanConfig(steps=c.retrain_steps, seeds=(0,), batch_size=c.batch_size,
                           optimizer=vt.OptimizerConfig(lr=c.lr), keep=tuple(n - k for k in range(1, len(decoder) + 1)),
                           references=("as_is",), similarity_n=8)
    result = vp.plan(source, train_set, tmp_path / "p", eval_data=x_eval, config=config, workers=2, progress=False)
    by_key = {(frozenset(p["freeze"]), tuple(p["reinit"])): p for p in result.results["plans"].values()}
    compared = 0
    for name, curve in r["analysis"]["retraining"]["curves"].items():
        if curve["side"] != "output":
            continue
        for k, loss in enumerate(curve["loss"]):
            layers = vp.parameterised_layers(source.model())
            unfrozen = decoder[len(decoder) - k:] if k else []
            kept = [l for l in layers if l not in unfrozen and not (curve["latent"] == "retrained" and
                                                                    l in ("mean", "logvar"))]
            reinit = tuple(unfrozen) if curve["init"] == "reinit" else ()
            plan_row = by_key[(frozenset(kept), reinit)]
            # the study rounds to 3 decimals; float32 sums over 4,096 pixels differ in the 7th digit
            assert plan_row["reconstruction_at_mean"]["mean"] == pytest.approx(loss, abs=1.5e-3), (name, k)
            compared += 1
    assert compared == 4 * (len(decoder) + 1)
