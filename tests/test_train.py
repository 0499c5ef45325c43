"""Models, objectives and the training loop against independent oracles: plain-PyTorch twins
with copied weights, torch.optim, hand computations in float64, and real short runs."""
from __future__ import annotations

import json
import shutil
import math
import threading
import time
from pathlib import Path

import pytest
import torch

import vaetransfer as vt
from vaetransfer import _C
from vaetransfer.export import ReferenceVAE
from vaetransfer.studies.transfer.twin_training import kl_per_dim, reconstruction_loss
from vaetransfer.train import load_snapshot, train_main

ARCHS = [
    ("conv", (1, 64, 64), {}),
    ("conv", (3, 64, 64), {"kernel_sizes": (4, 4, 2, 2)}),
    ("fc", (1, 64, 64), {}),
    ("mlp", (3, 32, 32), {"depth": 1}),
    ("mlp", (3, 32, 32), {"depth": 3}),
    ("cnn", (3, 32, 32), {"depth": 1}),
    ("cnn", (3, 32, 32), {"depth": 3}),
    ("mlp", (12,), {"hidden": (10, 7, 5, 4, 3)}),
]


def _model(arch, shape, kw, latent=10, seed=0):
    return vt.VAE(vt.ModelConfig(architecture=arch, input_shape=shape, latent_dim=latent, **kw), seed=seed)


def _close(a, b, tol=1e-5):
    scale = max(1.0, float(b.abs().max())) if b.numel() else 1.0
    return float((a - b).abs().max()) <= tol * scale


@pytest.fixture(scope="module")
def dsprites_small():
    return vt.data.dsprites(indices=torch.arange(0, 737280, 180))  # 4,096 images spread over the grid


# ---------------------------------------------------------------- models vs plain PyTorch

@pytest.mark.parametrize("arch,shape,kw", ARCHS, ids=[f"{a}-{s[-1]}-{k}" for a, s, k in ARCHS])
def test_architecture_matches_torch_twin(arch, shape, kw):
    latent = 2 if "hidden" in kw else 10
    m = _model(arch, shape, kw, latent)
    ref = ReferenceVAE(arch, shape, latent, **kw)
    ref.load_state_dict(m.state_dict())
    assert [n for n, _ in ref.named_parameters()] == m.parameter_names
    g = torch.Generator().manual_seed(1)
    x = torch.rand(5, *shape, generator=g)
    eps = torch.randn(5, latent, generator=g)
    ours = m.forward(x, eps)
    theirs = ref(x, eps)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and _close(a.detach(), b.detach())
    assert ours[3].shape == (5, *shape)
    # Gradients of the β-VAE loss through both networks.
    def loss(mean, logvar, z, logits):
        return reconstruction_loss(x, logits) + 4.0 * kl_per_dim(mean, logvar).sum()
    loss(*ours).backward()
    loss(*theirs).backward()
    for (name, p), (rname, q) in zip(m.named_parameters().items(), ref.named_parameters()):
        assert name == rname
        assert p.grad is not None and _close(p.grad, q.grad), name


def test_conv_layer_names_and_activations_match_twin():
    m = _model("conv", (1, 64, 64), {})
    assert m.layer_names == ["input", "enc1", "enc2", "enc3", "enc4", "enc5", "mean", "logvar", "sampled",
                             "dec1", "dec2", "dec3", "dec4", "dec5", "dec6"]
    x = torch.rand(7, 1, 64, 64, generator=torch.Generator().manual_seed(0))
    acts = m.activations(x, chunk_size=3, use_mean=True)
    ref = m.to_torch()
    with torch.no_grad():
        expected = ref.activations(x, torch.zeros(7, 10))
    assert list(acts) == list(expected) == m.layer_names
    for name in acts:
        assert _close(acts[name], expected[name]), name
    spatial = m.activations(x, ["enc2", "input"], flatten=False)
    assert list(spatial) == ["input", "enc2"] and spatial["enc2"].shape == (7, 32, 16, 16)
    # sampled: mean + σ ε, decoder fed with it; same seed → same draw.
    a1 = m.activations(x, ["sampled", "dec6"], seed=3)
    a2 = m.activations(x, ["sampled", "dec6"], seed=3)
    assert torch.equal(a1["sampled"], a2["sampled"]) and not torch.equal(a1["sampled"], acts["mean"])
    with pytest.raises(vt.ArgumentError) as e:
        m.activations(x, ["enc9"])
    assert e.value.argument == "layers"


def test_reconstruct_sample_traverse():
    m = _model("cnn", (3, 32, 32), {"depth": 1})
    ref = m.to_torch()
    x = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        mean, _ = ref.encode(x)
        assert _close(m.reconstruct(x, chunk_size=3), torch.sigmoid(ref.decode(mean)))
        values = torch.tensor([-1.5, 0.0, 2.0])
        trav = m.traverse(x[:1], values)
        assert trav.shape == (10, 3, 3, 32, 32)
        z = mean[:1].repeat(3, 1)
        z[:, 4] = values
        assert _close(trav[4], torch.sigmoid(ref.decode(z)))
    s = m.sample(6, seed=1)
    assert s.shape == (6, 3, 32, 32) and torch.equal(s, m.sample(6, seed=1)) and float(s.min()) >= 0


def test_freeze_unfreeze_reinitialize():
    m = _model("conv", (1, 64, 64), {})
    m.freeze("encoder", "mean")
    assert set(m.frozen_parameters) == {f"enc{i}.{p}" for i in range(1, 6) for p in ("weight", "bias")} | {
        "mean.weight", "mean.bias"}
    m.unfreeze("enc5.bias")
    assert "enc5.bias" not in m.frozen_parameters
    before = m.state_dict()
    m.reinitialize("dec3", seed=5)
    after = m.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"dec3.weight", "dec3.bias"}
    bound = 1 / math.sqrt(32 * 4 * 4)  # ConvTranspose2d fan_in = out_channels · k²
    assert float(after["dec3.weight"].abs().max()) <= bound
    for bad, call in [("groups", lambda: m.freeze("dekoder")), ("group", lambda: m.reinitialize("sampled"))]:
        with pytest.raises(vt.ArgumentError) as e:
            call()
        assert e.value.argument == bad


# ---------------------------------------------------------------- optimisers vs torch.optim

@pytest.mark.parametrize("name", ["adam", "adamw", "sgd"])
def test_optimizer_steps_match_torch_optim(name):
    m = _model("mlp", (12,), {"hidden": (10, 7)}, latent=3)
    ref = m.to_torch()
    cfg = vt.OptimizerConfig(name=name, lr=1e-2, weight_decay=0.05, momentum=0.9 if name == "sgd" else 0.0)
    ours = _C.train.Optimizer(cfg.to_spec(), m._impl)
    theirs = {"adam": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.05),
              "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.05),
              "sgd": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, weight_decay=0.05)}[name](ref.parameters())
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        x, eps = torch.rand(8, 12, generator=g), torch.randn(8, 3, generator=g)
        out, rout = m.forward(x, eps), ref(x, eps)
        ours.zero_grad()
        theirs.zero_grad()
        (reconstruction_loss(x, out[3]) + kl_per_dim(out[0], out[1]).sum()).backward()
        (reconstruction_loss(x, rout[3]) + kl_per_dim(rout[0], rout[1]).sum()).backward()
        ours.step()
        theirs.step()
    for (k, p), (_, q) in zip(m.named_parameters().items(), ref.named_parameters()):
        assert _close(p.detach(), q.detach()), k


# ---------------------------------------------------------------- objectives vs hand computation

def _tiny_batch(m=4, L=3, D=5):
    g = torch.Generator().manual_seed(7)
    x = torch.rand(m, D, generator=g, dtype=torch.float64).round()
    logits = torch.randn(m, D, generator=g, dtype=torch.float64)
    mean = torch.randn(m, L, generator=g, dtype=torch.float64)
    logvar = 0.5 * torch.randn(m, L, generator=g, dtype=torch.float64)
    z = mean + torch.exp(0.5 * logvar) * torch.randn(m, L, generator=g, dtype=torch.float64)
    return x, logits, mean, logvar, z


def _hand_terms(x, logits, mean, logvar):
    m = x.shape[0]
    rec = 0.0
    for i in range(m):
        for j in range(x.shape[1]):
            p = 1 / (1 + math.exp(-float(logits[i, j])))
            rec -= float(x[i, j]) * math.log(p) + (1 - float(x[i, j])) * math.log(1 - p)
    rec /= m
    kl_dims = [sum(0.5 * (float(mean[i, d]) ** 2 + math.exp(float(logvar[i, d])) - float(logvar[i, d]) - 1)
                   for i in range(m)) / m for d in range(mean.shape[1])]
    return rec, kl_dims


def test_beta_vae_and_annealed_match_hand_computation():
    x, logits, mean, logvar, z = _tiny_batch()
    rec, kl_dims = _hand_terms(x, logits, mean, logvar)
    kl = sum(kl_dims)
    t = vt.objectives.make_objective(vt.ObjectiveConfig(name="beta-vae", beta=4.0))(x, logits, mean, logvar, z)
    assert float(t["reconstruction"]) == pytest.approx(rec, rel=1e-12)
    assert t["kl_per_dim"].tolist() == pytest.approx(kl_dims, rel=1e-12)
    assert float(t["loss"]) == pytest.approx(rec + 4 * kl, rel=1e-12)
    ann = vt.objectives.make_objective(vt.ObjectiveConfig(name="annealed", gamma=1000, c_max=5, iteration_threshold=100))
    for step, c in [(0, 0.0), (30, 1.5), (100, 5.0), (1000, 5.0)]:
        t = ann(x, logits, mean, logvar, z, step)
        assert float(t["capacity"]) == pytest.approx(c)
        assert float(t["loss"]) == pytest.approx(rec + 1000 * abs(kl - c), rel=1e-12)
    # Gaussian likelihood: ½ Σ ((x − μ)² + log 2π) with σ = 1.
    g = vt.objectives.make_objective(vt.ObjectiveConfig(likelihood="gaussian"))(x, logits, mean, logvar, z)
    hand = sum(0.5 * ((float(x[i, j]) - float(logits[i, j])) ** 2 + math.log(2 * math.pi))
               for i in range(4) for j in range(5)) / 4
    assert float(g["reconstruction"]) == pytest.approx(hand, rel=1e-12)


def test_dip_vae_ii_matches_hand_computation():
    x, logits, mean, logvar, z = _tiny_batch(m=5, L=3)
    rec, kl_dims = _hand_terms(x, logits, mean, logvar)
    m, L = mean.shape
    mu_bar = [sum(float(mean[i, a]) for i in range(m)) / m for a in range(L)]
    cov = [[sum((float(mean[i, a]) - mu_bar[a]) * (float(mean[i, b]) - mu_bar[b]) for i in range(m)) / m
            + (sum(math.exp(float(logvar[i, a])) for i in range(m)) / m if a == b else 0.0)
            for b in range(L)] for a in range(L)]
    od = sum(cov[a][b] ** 2 for a in range(L) for b in range(L) if a != b)
    d = sum((cov[a][a] - 1) ** 2 for a in range(L))
    t = vt.objectives.make_objective(vt.ObjectiveConfig(name="dip-vae-ii", lambda_od=10, lambda_d=5))(
        x, logits, mean, logvar, z)
    assert float(t["latent_penalty"]) == pytest.approx(sum(kl_dims) + 10 * od + 5 * d, rel=1e-12)
    assert float(t["loss"]) == pytest.approx(rec + sum(kl_dims) + 10 * od + 5 * d, rel=1e-12)


@pytest.mark.parametrize("sampling", ["mws", "mss"])
def test_beta_tc_vae_uses_estimator_tc(sampling):
    x, logits, mean, logvar, z = _tiny_batch(m=6, L=3)
    n = 50
    _, kl_dims = _hand_terms(x, logits, mean, logvar)
    obj = vt.objectives.make_objective(vt.ObjectiveConfig(name="beta-tc", beta=6.0, tc_sampling=sampling), dataset_size=n)
    t = obj(x, logits, mean, logvar, z)
    mode = {"mws": "MinibatchWeighted", "mss": "MinibatchStratified"}[sampling]
    tc_est = _C.estimators.minibatch_total_correlation(z, mean, logvar, n, getattr(_C.estimators.TCSampling, mode))[0]
    assert float(t["tc"]) == pytest.approx(float(tc_est), rel=1e-12)
    assert float(t["latent_penalty"]) == pytest.approx(sum(kl_dims) + 5.0 * float(t["tc"]), rel=1e-12)
    if sampling == "mws":  # Eq. 12 by hand, constants log(n·m) included
        m, L = mean.shape

        def logq(i, k, dims):
            return sum(-0.5 * (math.log(2 * math.pi) + float(logvar[k, d])
                               + (float(z[i, d]) - float(mean[k, d])) ** 2 / math.exp(float(logvar[k, d])))
                       for d in dims)

        def lse(v):
            mx = max(v)
            return mx + math.log(sum(math.exp(a - mx) for a in v))

        joint = [lse([logq(i, k, range(L)) for k in range(m)]) - math.log(n * m) for i in range(m)]
        marg = [sum(lse([logq(i, k, [d]) for k in range(m)]) - math.log(n * m) for d in range(L)) for i in range(m)]
        assert float(t["tc"]) == pytest.approx(sum(a - b for a, b in zip(joint, marg)) / m, rel=1e-10)


def test_bad_objective_configs_raise_named_errors():
    for cfg, arg in [(vt.ObjectiveConfig(beta=-1.0), "beta"), (vt.ObjectiveConfig(name="vqvae"), "objective"),
                     (vt.ObjectiveConfig(name="annealed", gamma=-2.0), "gamma"),
                     (vt.ObjectiveConfig(name="beta-tc"), "dataset_size"),
                     (vt.ObjectiveConfig(name="beta-tc", tc_sampling="xyz", dataset_size=9), "tc_sampling"),
                     (vt.ObjectiveConfig(likelihood="poisson"), "likelihood")]:
        with pytest.raises(vt.ArgumentError) as e:
            vt.objectives.make_objective(cfg)
        assert e.value.argument == arg
    with pytest.raises(vt.ArgumentTypeError) as e:
        vt.objectives.make_objective(vt.ObjectiveConfig(beta="4"))
    assert e.value.argument == "beta"


@pytest.mark.parametrize("name, kept", [("mi-vae", "mutual_information"), ("marginal-kl-vae", "marginal_kl")])
def test_rate_ablation_objectives_keep_one_term_of_the_rate(name, kept):
    # Rate-Regularization and Generalization in VAEs §4.5: R = I_q + KL(q(z)‖p(z)) with one term removed.
    x, logits, mean, logvar, z = _tiny_batch(m=6, L=3)
    n = 40
    rec, _ = _hand_terms(x, logits, mean, logvar)
    obj = vt.objectives.make_objective(vt.ObjectiveConfig(name=name, beta=3.0), dataset_size=n)
    t = obj(x, logits, mean, logvar, z)
    ref = vt.estimators.minibatch_rate_terms(mean, logvar, z=z, dataset_size=n)
    assert float(t["mutual_information"]) == pytest.approx(float(ref.mutual_information), rel=1e-9)
    assert float(t["marginal_kl"]) == pytest.approx(float(ref.marginal_kl), rel=1e-9)
    assert float(t["latent_penalty"]) == pytest.approx(3.0 * float(t[kept]), rel=1e-12)
    assert float(t["loss"]) == pytest.approx(rec + 3.0 * float(t[kept]), rel=1e-12)
    # The two terms add up to the Monte Carlo rate of the batch, so β-VAE ≈ both kept at once.
    mc_rate = (normal_logpdf(z, mean, logvar) - normal_logpdf(z, 0 * z, 0 * z)).sum(1).mean()
    assert float(t["mutual_information"]) + float(t["marginal_kl"]) == pytest.approx(float(mc_rate), rel=1e-9)
    with pytest.raises(ValueError, match="argument 'dataset_size'"):
        vt.objectives.make_objective(vt.ObjectiveConfig(name=name))


def normal_logpdf(z, mean, logvar):
    return torch.distributions.Normal(mean, (0.5 * logvar).exp()).log_prob(z)


def test_rate_ablation_objective_trains_and_logs_both_terms(tmp_path):
    data = vt.data.tetrominoes(range(0, 163_840, 160))  # 1,024 images
    cfg = vt.TrainConfig(model=vt.ModelConfig("mlp", input_shape=(3, 32, 32), depth=1, width=64),
                         objective=vt.ObjectiveConfig(name="marginal-kl-vae", beta=1.0),
                         optimizer=vt.OptimizerConfig(lr=1e-3), steps=20, batch_size=64)
    run = vt.train(cfg, data, tmp_path / "run", progress=False)
    h = run.history
    for col in ("mutual_information", "marginal_kl", "latent_penalty"):
        assert torch.isfinite(h[col]).all(), col
    assert torch.allclose(h["latent_penalty"], h["marginal_kl"], rtol=1e-5, atol=1e-5)
    assert (h["mutual_information"] <= math.log(1024) + 1e-3).all()


def test_keep_best_keeps_the_weights_of_the_lowest_held_out_loss(tmp_path):
    data = vt.data.tetrominoes(range(0, 163_840, 128))  # 1,280 images
    train_set, held_out = vt.data.split(data, 0.2, seed=0)
    cfg = vt.TrainConfig(model=vt.ModelConfig("mlp", input_shape=(3, 32, 32), depth=1, width=32),
                         optimizer=vt.OptimizerConfig(lr=3e-2), steps=40, batch_size=32, eval_every=5,
                         snapshot_every=5, keep_best=True)
    assert "keep_best" in cfg.to_dict() and "keep_best" not in vt.TrainConfig().to_dict()  # old ids unchanged
    run = vt.train(cfg, train_set, tmp_path / "run", eval_data=held_out, progress=False)
    evals = [(m["step"], m["eval_loss"], m["eval_neg_elbo"]) for m in run.metrics if "eval_loss" in m]
    step, value, neg_elbo = min(evals, key=lambda e: e[1])
    assert run.best == {"step": step, "eval_loss": pytest.approx(value, rel=1e-12),
                        "eval_neg_elbo": pytest.approx(neg_elbo, rel=1e-12)}
    best, at_step = run.model("best").state_dict(), run.model(step).state_dict()
    assert all(torch.equal(best[k], at_step[k]) for k in at_step)
    # A run killed after its first snapshot resumes and finds the same best weights again.
    assert step > 5
    for s, path in run.snapshots():
        if s > 5:
            Path(path).unlink()
    again = vt.train(cfg, train_set, tmp_path / "run", eval_data=held_out, progress=False)
    assert again.best["step"] == step and again.finished
    assert all(torch.equal(again.model("best").state_dict()[k], best[k]) for k in best)
    no_eval = vt.TrainConfig.from_dict({**cfg.to_dict(), "eval_every": 0})
    with pytest.raises(ValueError, match="argument 'keep_best'"):
        vt.train(no_eval, train_set, tmp_path / "no-eval", eval_data=held_out, progress=False)
    with pytest.raises(ValueError, match="argument 'step'"):
        vt.train(vt.TrainConfig(model=cfg.model, steps=2, batch_size=32), train_set, tmp_path / "plain",
                 progress=False).model("best")


# ---------------------------------------------------------------- training runs

def _mlp_config(**kw):
    base = dict(model=vt.ModelConfig(architecture="mlp", input_shape=(1, 64, 64), depth=1, width=64),
                objective=vt.ObjectiveConfig(name="beta-tc", beta=4.0), optimizer=vt.OptimizerConfig(lr=1e-3),
                steps=30, batch_size=32, snapshot_every=10, seed=3)
    base.update(kw)
    return vt.TrainConfig(**base)


def test_short_conv_run_on_dsprites_loss_falls(dsprites_small, tmp_path):
    cfg = vt.TrainConfig(steps=40, batch_size=32, snapshot_every=20, optimizer=vt.OptimizerConfig(lr=1e-3),
                         threads=torch.get_num_threads())
    reports = []
    run = vt.train(cfg, dsprites_small, tmp_path / "run", progress=False,
                   metrics_hook=lambda model, r: reports.append(r) or {"kl": r["kl"]})
    h = run.history
    assert h["step"].tolist() == list(range(1, 41))
    first, last = float(h["loss"][:5].mean()), float(h["loss"][-5:].mean())
    assert last < 0.5 * first, (first, last)
    assert run.finished and [s for s, _ in run.snapshots()] == [20, 40]
    assert [r["step"] for r in reports] == []  # metrics_every = 0: the hook never runs
    snap = load_snapshot(run.snapshots()[-1][1])
    assert snap["step"] == 40 and set(snap["model"]) == set(run.model().parameter_names)
    assert torch.equal(snap["model"]["dec6.weight"], run.model().state_dict()["dec6.weight"])


def test_resume_reproduces_uninterrupted_run(dsprites_small, tmp_path):
    cfg = _mlp_config()
    full = vt.train(cfg, dsprites_small, tmp_path / "full", progress=False)

    class Interrupt(Exception):
        pass

    def stop_at_15(model, report):
        if report["step"] == 15:
            raise Interrupt
        return {}

    cfg_hook = _mlp_config(metrics_every=5)
    with pytest.raises(Interrupt):
        vt.train(cfg_hook, dsprites_small, tmp_path / "cut", progress=False, metrics_hook=stop_at_15)
    cut = vt.load_run(tmp_path / "cut")
    assert cut.step == 10 and not cut.finished
    resumed = vt.train(cfg_hook, dsprites_small, tmp_path / "cut", progress=False, metrics_hook=lambda m, r: {})
    a, b = full.history, resumed.history
    assert a["step"].tolist() == b["step"].tolist() == list(range(1, 31))
    for col in ("loss", "reconstruction", "kl", "tc"):
        assert torch.equal(a[col], b[col]), col
    assert all(torch.equal(full.model().state_dict()[k], v) for k, v in resumed.model().state_dict().items())
    assert [m["step"] for m in resumed.metrics] == [5, 10, 15, 20, 25, 30]



def test_scheduled_snapshots_leave_out_where_a_run_stopped_or_was_lengthened(dsprites_small, tmp_path):
    # A run of 13 steps (snapshot every 5) ends with a snapshot at 13; lengthened to 30 it goes on
    # from there. Its snapshots hold 13, off the schedule of 5 — as an interrupted run holds the step
    # where it stopped. Runs of one config compared step by step (the transfer study's dynamics, one
    # seed resumed and one not) must meet at the schedule's steps only.
    short = vt.train(_mlp_config(steps=13, snapshot_every=5), dsprites_small, tmp_path / "r", progress=False)
    assert [s for s, _ in short.snapshots()] == [5, 10, 13]
    assert [s for s, _ in short.scheduled_snapshots()] == [5, 10, 13]  # the last step is on the schedule
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    cfg["steps"] = 30  # as the interrupt tests lengthen a run
    (tmp_path / "r" / "config.json").write_text(json.dumps(cfg))
    run = vt.train(_mlp_config(steps=30, snapshot_every=5), dsprites_small, tmp_path / "r", progress=False)
    assert [s for s, _ in run.snapshots()] == [5, 10, 13, 15, 20, 25, 30]
    assert [s for s, _ in run.scheduled_snapshots()] == [5, 10, 15, 20, 25, 30]
    assert dict(run.scheduled_snapshots())[15] == dict(run.snapshots())[15]
    only_final = vt.train(_mlp_config(steps=7, snapshot_every=0), dsprites_small, tmp_path / "f", progress=False)
    assert [s for s, _ in only_final.scheduled_snapshots()] == [7]

def test_step_0_is_the_weights_training_started_from(dsprites_small, tmp_path):
    # At lr 1e-12 one Adam step moves no weight by more than ~1e-11: the first snapshot is the start,
    # and model(0) rebuilds it; another seed's start is another model (the check is not vacuous).
    cfg = _mlp_config(steps=2, snapshot_every=1, optimizer=vt.OptimizerConfig(lr=1e-12))
    run = vt.train(cfg, dsprites_small, tmp_path / "r", progress=False)
    start, first = run.model(0).state_dict(), run.model(1).state_dict()
    assert start.keys() == first.keys() and all(torch.allclose(start[k], first[k], rtol=0, atol=1e-9) for k in start)
    other = vt.train(_mlp_config(steps=2, snapshot_every=1, seed=4, optimizer=vt.OptimizerConfig(lr=1e-12)),
                     dsprites_small, tmp_path / "o", progress=False)
    assert any(not torch.allclose(other.model(0).state_dict()[k], v) for k, v in start.items())
    moved = vt.train(_mlp_config(steps=2, snapshot_every=1), dsprites_small, tmp_path / "m", progress=False)
    assert any(not torch.equal(moved.model(0).state_dict()[k], v) for k, v in moved.model(2).state_dict().items())
    tuned = vt.train(_mlp_config(steps=2, init_from=str(tmp_path / "m")), dsprites_small, tmp_path / "t",
                     progress=False)
    with pytest.raises(vt.ArgumentError, match="other weights"):
        tuned.model(0)


def test_finished_run_is_not_retrained_and_config_is_checked(dsprites_small, tmp_path):
    cfg = _mlp_config(steps=10)
    run = vt.train(cfg, dsprites_small, tmp_path / "r", progress=False)
    files = [tmp_path / "r" / "history.csv"] + [Path(p) for _, p in run.snapshots()]
    stamps = [f.stat().st_mtime_ns for f in files]
    again = vt.train(cfg, dsprites_small, tmp_path / "r", progress=False)
    assert again.finished and again.snapshots() == run.snapshots()
    assert [f.stat().st_mtime_ns for f in files] == stamps  # nothing was rewritten
    assert vt.TrainConfig.load(tmp_path / "r" / "config.json") == vt.TrainConfig.from_dict(cfg.to_dict() | {"dataset": "dsprites"})
    with pytest.raises(vt.ArgumentError) as e:
        vt.train(_mlp_config(steps=10, seed=4), dsprites_small, tmp_path / "r", progress=False)
    assert e.value.argument == "config"


def test_nan_loss_stops_with_clear_error_and_keeps_last_snapshot(tmp_path):
    data = torch.rand(64, 12, generator=torch.Generator().manual_seed(0))
    data[37, 3] = 3e38  # finite, but its loss term overflows float32 when the batch holding it comes
    cfg = vt.TrainConfig(model=vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(8,), latent_dim=2),
                         steps=40, batch_size=4, snapshot_every=1, seed=1)
    with pytest.raises(vt.TrainingDivergedError) as e:
        vt.train(cfg, data, tmp_path / "nan", progress=False)
    assert isinstance(e.value, FloatingPointError) and ("nan" in str(e.value) or "inf" in str(e.value))
    run = vt.load_run(tmp_path / "nan")
    assert e.value.step > 1 and run.step == e.value.step - 1
    assert f"step_{run.step:08d}.pt" in str(e.value)
    assert all(torch.isfinite(v).all() for v in run.model().state_dict().values())


def test_divergence_before_the_first_snapshot_keeps_the_loss_history(tmp_path):
    data = torch.rand(64, 12, generator=torch.Generator().manual_seed(0))
    data[37, 3] = 3e38
    cfg = vt.TrainConfig(model=vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(8,), latent_dim=2),
                         steps=40, batch_size=4, snapshot_every=100, seed=1)
    with pytest.raises(vt.TrainingDivergedError) as e:
        vt.train(cfg, data, tmp_path / "nan", progress=False)
    run = vt.load_run(tmp_path / "nan")
    assert run.snapshots() == [] and "No snapshot" in str(e.value)
    # every step before the one that broke, none after (a diverged run once left no history at all)
    assert run.history["step"].tolist() == list(range(1, e.value.step))
    assert torch.isfinite(run.history["loss"]).all()


def test_freeze_and_reinit_in_a_transfer_run(dsprites_small, tmp_path):
    src = vt.train(_mlp_config(steps=10, objective=vt.ObjectiveConfig()), dsprites_small, tmp_path / "src", progress=False)
    cfg = _mlp_config(steps=10, objective=vt.ObjectiveConfig(), init_from=str(tmp_path / "src"),
                      freeze=("encoder", "latent"), reinit=("dec2",))
    dst = vt.train(cfg, dsprites_small, tmp_path / "dst", progress=False)
    a, b = src.model().state_dict(), dst.model().state_dict()
    for k in a:
        same = torch.equal(a[k], b[k])
        assert same == (k.startswith("enc") or k.startswith("mean") or k.startswith("logvar")), k
    assert load_snapshot(dst.snapshots()[-1][1])["frozen"] == ["enc1.weight", "enc1.bias", "mean.weight", "mean.bias",
                                                            "logvar.weight", "logvar.bias"]


def test_training_releases_the_gil(dsprites_small, tmp_path):
    cfg = vt.TrainConfig(steps=15, batch_size=64)
    done = threading.Event()
    t = threading.Thread(target=lambda: (vt.train(cfg, dsprites_small, tmp_path / "g", progress=False), done.set()))
    t.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    assert ticks > 50


@pytest.mark.parametrize("kw,arg", [
    (dict(model=vt.ModelConfig(input_shape=(1, 32, 32))), "input_shape"),
    (dict(model=vt.ModelConfig(architecture="resnet")), "architecture"),
    (dict(model=vt.ModelConfig(kernel_sizes=(4, 3, 4, 4))), "kernel_sizes"),
    (dict(objective=vt.ObjectiveConfig(beta=-0.5)), "beta"),
    (dict(objective=vt.ObjectiveConfig(name="wae")), "objective"),
    (dict(optimizer=vt.OptimizerConfig(name="lbfgs")), "optimizer"),
    (dict(optimizer=vt.OptimizerConfig(lr=-1.0)), "lr"),
    (dict(batch_size=0), "batch_size"),
    (dict(steps=0), "steps"),
])
def test_bad_train_configs_raise_named_errors(kw, arg, tmp_path):
    data = torch.zeros(8, 1, 64, 64, dtype=torch.uint8)
    with pytest.raises(vt.ArgumentError) as e:
        vt.train(vt.TrainConfig(**kw), data, tmp_path / "bad", progress=False)
    assert e.value.argument == arg
    assert not (tmp_path / "bad").exists()


def test_bad_data_raises_named_errors(tmp_path):
    for data in [torch.zeros(0, 1, 64, 64), torch.zeros(8, 1, 32, 32), torch.zeros(8, 3, 64, 64)]:
        with pytest.raises(vt.ArgumentError) as e:
            vt.train(vt.TrainConfig(steps=2), data, tmp_path / "bad", progress=False)
        assert e.value.argument == "data"
    with pytest.raises(vt.ArgumentTypeError) as e:
        vt.train(vt.TrainConfig(steps=2), torch.zeros(8, 1, 64, 64, dtype=torch.int32), tmp_path / "bad", progress=False)
    assert e.value.argument == "data"


def test_train_main_cli(tmp_path, capsys):
    out = tmp_path / "cli"
    assert train_main(["--dataset", "tetrominoes", "--n", "256", "--objective", "beta-tc", "--beta", "4",
                       "--steps", "6", "--depth", "1", "--out", str(out), "--quiet"]) == 0
    run = vt.load_run(out)
    assert run.finished and run.config.objective.canonical_name() == "beta-tc-vae"
    assert run.config.model.architecture == "mlp" and run.history["tc"].isfinite().all()


def test_held_out_data_is_evaluated_at_its_own_scale_and_never_changed(tmp_path):
    """uint8 training images (scale 1/255) beside float held-out images in [0, 1]: the evaluation
    reads the held-out images at their own scale, and the caller's tensor is left as it was (the
    trainer once scaled a float view of it in place by the training scale at every evaluation)."""
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(64, 1, 8, 8, generator=g) > 0.5).to(torch.uint8) * 255
    held = (torch.rand(32, 1, 8, 8, generator=g) > 0.5).float()
    before = held.clone()
    cfg = vt.TrainConfig(model=vt.ModelConfig("mlp", input_shape=[1, 8, 8], latent_dim=2, hidden=[8]), steps=4,
                         batch_size=16, eval_every=2)
    run = vt.train(cfg, x, tmp_path / "r", eval_data=held, progress=False)
    assert torch.equal(held, before)
    model = run.model()
    expected = vt.objectives.evaluate(model, cfg.objective, held, seed=0)
    evals = [r for r in run.metrics if "eval_loss" in r]
    # the trainer's evaluation (its own noise draws) agrees with the core's per-example terms on the
    # same images within a few nats — on images scaled by 1/255 it would be off by hundreds
    assert abs(evals[-1]["eval_reconstruction"] - float(expected["distortion"].mean())) < 5.0
    assert run.config.data_scale is None


def test_a_snapshots_path_that_is_a_file_is_named_before_training(tmp_path):
    """A file where the run keeps its snapshots failed after the training, at the first save, with a raw
    filesystem error; it is refused before anything trains (and the core names it too)."""
    (tmp_path / "snapshots").write_text("not a folder")
    cfg = vt.TrainConfig(model=vt.ModelConfig("mlp-classifier", input_shape=[4], hidden=[5], num_classes=2),
                         objective=vt.TaskConfig("classification"), steps=3, batch_size=4)
    x, y = torch.randn(20, 4), torch.randint(0, 2, (20,))
    with pytest.raises(vt.ArgumentError, match="snapshots.*is a file") as info:
        vt.train(cfg, (x, y), tmp_path, progress=False)
    assert info.value.argument == "out_dir"
    assert not (tmp_path / "history.csv").exists()
    assert (tmp_path / "snapshots").read_text() == "not a folder"


def test_a_finished_run_is_lengthened_to_the_weights_of_one_trained_that_long_at_once(tmp_path):
    """More steps into a finished run (the same science) resumes it; it was refused as "a different
    config" although the snapshots leave ``steps`` out for that purpose. A refused config names the
    fields that differ."""
    x, y = torch.randn(40, 4, generator=torch.Generator().manual_seed(0)), torch.arange(40) % 2
    cfg = vt.TrainConfig(model=vt.ModelConfig("mlp-classifier", input_shape=[4], hidden=[6], num_classes=2),
                         objective=vt.TaskConfig("classification"), steps=30, batch_size=8, snapshot_every=10)
    vt.train(cfg, (x, y), tmp_path / "short", progress=False)
    longer = vt.TrainConfig.from_dict({**cfg.to_dict(), "steps": 45})
    run = vt.train(longer, (x, y), tmp_path / "short", progress=False)
    once = vt.train(longer, (x, y), tmp_path / "once", progress=False)
    assert run.step == 45 and run.config.steps == 45
    for (k, a), (_, b) in zip(run.model().state_dict().items(), once.model().state_dict().items()):
        assert torch.equal(a, b), k
    assert torch.equal(run.history["loss"], once.history["loss"])
    with pytest.raises(vt.ArgumentError, match="not shortened") as info:
        vt.train(cfg, (x, y), tmp_path / "short", progress=False)
    assert info.value.argument == "steps"
    other = vt.TrainConfig.from_dict({**longer.to_dict(), "seed": 3, "batch_size": 4})
    with pytest.raises(vt.ArgumentError, match=r"batch_size \(8 there, 4 here\), seed \(0 there, 3 here\)") as info:
        vt.train(other, (x, y), tmp_path / "short", progress=False)
    assert info.value.argument == "config"


def test_losses_are_named_for_what_they_are_and_older_runs_load_and_resume_under_those_names(tmp_path):
    """``loss`` is the β-weighted objective, ``latent_penalty`` its term beside the reconstruction (was
    ``regularizer``, a clash with RR/SRIP), ``neg_elbo`` the −ELBO at β = 1 in history and evaluation.
    A run written under the old names loads under the new ones, and resumes without losing a row."""
    data = vt.data.tetrominoes(range(0, 163_840, 320))  # 512 images
    train_set, held_out = vt.data.split(data, 0.25, seed=0)
    cfg = vt.TrainConfig(model=vt.ModelConfig("mlp", input_shape=(3, 32, 32), depth=1, width=16, latent_dim=3),
                         objective=vt.ObjectiveConfig(name="beta-vae", beta=4.0), steps=12, batch_size=32,
                         eval_every=4, snapshot_every=4)
    run = vt.train(cfg, train_set, tmp_path / "run", eval_data=held_out, progress=False)
    h = run.history
    assert "regularizer" not in h
    assert torch.allclose(h["latent_penalty"], 4.0 * h["kl"], rtol=1e-5)
    assert torch.allclose(h["neg_elbo"], h["reconstruction"] + h["kl"], rtol=1e-6)
    assert torch.allclose(h["loss"], h["reconstruction"] + h["latent_penalty"], rtol=1e-6)
    assert (h["loss"] > h["neg_elbo"]).all()  # β = 4 counts the KL four times
    ev = [m for m in run.metrics if "eval_loss" in m]
    assert len(ev) == 3 and all(m["eval_neg_elbo"] == pytest.approx(m["eval_reconstruction"] + m["eval_kl"], rel=1e-6)
                                and m["eval_latent_penalty"] == pytest.approx(4.0 * m["eval_kl"], rel=1e-5) for m in ev)
    held = vt.objectives.evaluate(run.model(), cfg.objective, held_out, seed=0)
    assert set(held) >= {"neg_elbo", "distortion", "rate"}

    # The same run as an older release wrote it: `regularizer`, no neg_elbo, in both files.
    old = tmp_path / "old"
    shutil.copytree(tmp_path / "run", old)
    lines = (old / "history.csv").read_text().splitlines()
    header = lines[0].split(",")
    drop, rename = header.index("neg_elbo"), header.index("latent_penalty")
    rows = [line.split(",") for line in lines]
    rows = [[v for i, v in enumerate(r) if i != drop] for r in rows]
    rows[0][rename] = "regularizer"
    (old / "history.csv").write_text("".join(",".join(r) + "\n" for r in rows))
    records = [json.loads(line) for line in (old / "metrics.jsonl").read_text().splitlines()]
    for r in records:
        r.pop("eval_neg_elbo", None)
        r["eval_regularizer"] = r.pop("eval_latent_penalty")
    (old / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    loaded = vt.Run(old)
    assert list(loaded.history) == list(h)  # today's columns, in today's order
    for k in h:
        assert torch.allclose(loaded.history[k], h[k], rtol=1e-12, atol=1e-12), k
    assert [sorted(m) for m in loaded.metrics] == [sorted(m) for m in run.metrics]
    # Lengthened, it resumes on the same trajectory, keeping its 12 rows, and writes today's names.
    longer = vt.TrainConfig.from_dict({**cfg.to_dict(), "steps": 16})
    resumed = vt.train(longer, train_set, old, eval_data=held_out, progress=False)
    once = vt.train(longer, train_set, tmp_path / "once", eval_data=held_out, progress=False)
    assert (old / "history.csv").read_text().splitlines()[0] == (tmp_path / "once" / "history.csv").read_text().splitlines()[0]
    assert resumed.history["step"].tolist() == list(range(1, 17))
    assert torch.allclose(resumed.history["neg_elbo"], once.history["neg_elbo"], rtol=1e-12)
    assert torch.equal(resumed.history["loss"], once.history["loss"])
    assert [sorted(m) for m in resumed.metrics] == [sorted(m) for m in once.metrics]
