"""The t5-vae objective: token-deletion denoising, the ELBO with KL thresholding, β schedules and
the two-phase training of "Finetuning Pretrained Transformers into Variational Autoencoders"."""
from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from vaetransfer import _C
from vaetransfer.objectives import TaskConfig
from vaetransfer.schedules import ScheduleConfig
from vaetransfer.text import T5, T5Config, T5VAE, T5VAEConfig, delete_tokens
from vaetransfer.train import OptimizerConfig, PhaseConfig, TrainConfig, train

VOCAB = 40


def sentences(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(4, 11, (n,), generator=g)
    ids = torch.zeros(n, 11, dtype=torch.long)
    for i, l in enumerate(lengths.tolist()):
        ids[i, :l] = torch.randint(3, VOCAB, (l,), generator=g)
        ids[i, l] = 1  # eos
    return ids


def config(**kw) -> T5VAEConfig:
    return T5VAEConfig(T5Config(vocab_size=VOCAB, d_model=16, d_kv=4, d_ff=24, num_layers=1, num_heads=2,
                                dropout_rate=0.0), latent_dim=4, **kw)


def test_deletion_keeps_order_eos_and_the_mask_with_the_ids():
    ids = sentences(2000)
    out, mask = delete_tokens(ids, 0.4, seed=1)
    assert torch.equal(mask, out.ne(0).long())  # ids and mask together
    deleted = kept = 0
    for row, new in zip(ids.tolist(), out.tolist()):
        real = [t for t in row if t != 0]
        survivors = [t for t in new if t != 0]
        assert survivors[-1] == 1  # eos stays
        it = iter(real)
        assert all(t in it for t in survivors)  # a subsequence: order kept
        deleted += len(real) - len(survivors)
        kept += len(real) - 1
    assert abs(deleted / kept - 0.4) < 0.02
    again, _ = delete_tokens(ids, 0.4, seed=1)
    assert torch.equal(again, out) and not torch.equal(delete_tokens(ids, 0.4, seed=2)[0], out)
    same, _ = delete_tokens(ids, 0.0, seed=1)
    assert torch.equal(same, ids)
    with pytest.raises(ValueError, match="deletion"):
        delete_tokens(ids, 1.0)


def _step(model: T5VAE, x, *, training, free_bits=0.0, beta=1.0, deletion=0.0, seed=0):
    """One objective step through the core (the trainer's path), returning (loss, scalars)."""
    task = _C.objectives.make_task("t5-vae", {"free_bits": free_bits, "beta": beta, "deletion": deletion})
    model.train(training)
    return task.step(model._impl, x, None, {"beta": beta}, seed)


def test_elbo_kl_and_thresholding_follow_their_formulas():
    model = T5VAE(config(pooling="max"), seed=0)
    x = sentences(8)
    mean, log_sigma = model.eval().posterior(x, x.ne(0))
    kl_dims = 0.5 * (mean ** 2 + (2 * log_sigma).exp() - 1 - 2 * log_sigma)
    loss, s = _step(model, x, training=False)
    assert math.isclose(s["kl"], kl_dims.sum(1).mean().item(), rel_tol=1e-5)
    # Evaluation: no threshold; −ELBO = reconstruction + KL, and the loss is that with β = 1.
    loss_t, s_t = _step(model, x, training=False, free_bits=3.0)
    assert math.isclose(s_t["kl_thresholded"], s_t["kl"], rel_tol=1e-6)
    assert math.isclose(s["neg_elbo"], s["reconstruction"] + s["kl"], rel_tol=1e-6)
    assert math.isclose(loss.item(), s["neg_elbo"], rel_tol=1e-5)
    # Training: Σ_i max(λ, KL_i) per example and dimension (the noise draws differ per call,
    # so compare each call with its own KL).
    _, s_tr = _step(model, x, training=True, free_bits=3.0, seed=4)
    assert s_tr["kl_thresholded"] >= 3.0 * 4 - 1e-5 and s_tr["kl_thresholded"] >= s_tr["kl"]
    loss_b, s_b = _step(model, x, training=True, free_bits=0.5, beta=0.25, seed=4)
    assert math.isclose(loss_b.item(), s_b["reconstruction"] + 0.25 * s_b["kl_thresholded"], rel_tol=1e-5)


def test_reconstruction_sums_the_real_tokens_of_each_sentence():
    model = T5VAE(config(), seed=0).eval()
    x = sentences(6)
    _, s = _step(model, x, training=False, seed=9)
    # Brute force with the same ε (in evaluation the step's first draw is the latent noise).
    mean, log_sigma = model.posterior(x, x.ne(0))
    z = mean + log_sigma.exp() * model.noise(6, seed=9)
    labels = x.masked_fill(x.eq(0), -100)
    logits = model.decode_latent(model.shift_right(labels), z)
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100, reduction="none").sum(1)
    assert math.isclose(s["reconstruction"], nll.mean().item(), rel_tol=1e-5)
    assert math.isclose(s["cross_entropy"], nll.sum().item() / x.ne(0).sum().item(), rel_tol=1e-5)
    assert s["tokens"] == x.ne(0).sum().item()
    # Padding never counts: longer padding leaves the per-sentence sums alone.
    padded = torch.cat([x, torch.zeros(6, 5, dtype=torch.long)], 1)
    _, s_pad = _step(model, padded, training=False, seed=9)
    assert math.isclose(s_pad["reconstruction"], s["reconstruction"], rel_tol=1e-5)


def test_two_phase_training_freezes_decoder_and_memory_projection_then_trains_all(tmp_path):
    x = sentences(256)
    t5 = T5(config().t5, seed=3)
    phase1 = 30
    tc = TrainConfig(model=config(pooling="max").model_config(),
                     objective=TaskConfig("t5-vae", free_bits=0.5, deletion=0.15),
                     optimizer=OptimizerConfig("adamw", lr=3e-3, eps=1e-3),
                     schedules={"beta": ScheduleConfig("linear", start=0.0, end=1.0, steps=20, delay=phase1)},
                     phases=(PhaseConfig(phase1, freeze=("decoder", "memory_projection")),),
                     steps=60, batch_size=32, snapshot_every=phase1, seed=0)
    start = T5VAE.from_t5(t5, latent_dim=4, pooling="max", seed=0)
    init = tmp_path / "init.pt"
    torch.save(start.state_dict(), init)
    tc = TrainConfig.from_dict({**tc.to_dict(), "init_from": str(init)})
    run = train(tc, x, tmp_path / "run", progress=False)
    after1 = run.model(phase1).state_dict()
    final = run.model().state_dict()
    for k, v in start.state_dict().items():
        frozen = k.startswith(("decoder.", "memory_projection."))
        assert torch.equal(after1[k], v) == frozen, k  # phase 1 moves only what is not frozen
        # With one memory slot the cross-attention's softmax is 1 whatever q and k: its q, k and v
        # projections and the norm feeding q get no gradient (the memory is the key and value itself).
        dead = any(k.endswith(f"EncDecAttention.{p}.weight") for p in "qkv") or k.endswith("layer.1.layer_norm.weight")
        if frozen:
            assert torch.equal(final[k], v) == dead, k  # phase 2 trains everything else
    beta = run.history["beta"]
    assert beta[:phase1].eq(0).all() and beta[-1].item() == 1.0
    # Resumable across the phase boundary: stop at phase1, resume, same trajectory.
    half = TrainConfig.from_dict({**tc.to_dict(), "steps": phase1})
    train(half, x, tmp_path / "half", progress=False)
    (tmp_path / "half" / "config.json").write_text(json.dumps(tc.to_dict()))
    resumed = train(tc, x, tmp_path / "half", progress=False)
    assert torch.equal(resumed.history["loss"], run.history["loss"])


def test_evaluate_reports_the_elbo_terms_iw_bound_mi_and_active_units():
    from vaetransfer.studies.kit.t5_vae_metrics import evaluate

    model = T5VAE(config(pooling="max"), seed=0)
    x = sentences(120, seed=3)
    m = evaluate(model, x, batch_size=50, iw_samples=20, samples_per_chunk=10, minibatch_mi=16,
                 attributes={"first_token_even": (x[:, 0] % 2).numpy()})
    assert math.isclose(m["neg_elbo"], m["reconstruction"] + m["kl"], rel_tol=1e-9)
    assert math.isclose(m["tokens"], x.ne(0).sum().item() / 120, rel_tol=1e-9)
    assert math.isclose(m["ppl_elbo"], math.exp(m["neg_elbo"] / m["tokens"]), rel_tol=1e-9)
    assert m["ppl_iw"] <= m["ppl_elbo"] * 1.02  # the importance-weighted bound is the tighter one
    assert -m["log_px"] <= m["neg_elbo"] * 1.02
    assert 0 <= m["mi"] <= m["mi_cap"] + 1e-9 and math.isclose(m["mi_cap"], math.log(120), rel_tol=1e-9)
    assert math.isclose(m["mi_minibatch_cap"], math.log(16), rel_tol=1e-9) and m["mi_minibatch"] <= math.log(16) + 1e-9
    assert 0 <= m["active_units"] <= 4
    assert m["probe_first_token_even_chance"] >= 0.5 and 0 <= m["probe_first_token_even"] <= 1
    # Latent use by brute force: NLL of each sentence from its own posterior mean and from the next one's.
    model.eval()
    with torch.no_grad():
        mean, _ = model.posterior(x, x.ne(0))
        dec = model.shift_right(x.masked_fill(x.eq(0), -100))

        def nll(z):
            logp = model.decode_latent(dec, z).double().log_softmax(-1).gather(2, x.unsqueeze(2)).squeeze(2)
            return -(logp * x.ne(0)).sum().item() / len(x)

        own, other = nll(mean), nll(torch.roll(mean, -1, 0))
    model.train()
    assert math.isclose(m["nll_own_mean"], own, rel_tol=1e-6) and math.isclose(m["nll_other_mean"], other, rel_tol=1e-6)
    assert math.isclose(m["latent_use"], other - own, rel_tol=1e-6, abs_tol=1e-9)
    # A collapsed posterior (q(z|x) the same for every sentence): no active unit, no information.
    state = model.state_dict()
    for k in ("bottleneck.mean.weight", "bottleneck.log_sigma.weight"):
        state[k] = torch.zeros_like(state[k])
    model.load_state_dict(state)
    collapsed = evaluate(model, x, batch_size=50)
    assert collapsed["active_units"] == 0 and collapsed["mi"] < 1e-6
    assert abs(collapsed["latent_use"]) < 1e-9  # every sentence gets the same z: nothing to draw from it
    assert model.training  # evaluate restores the mode it found
