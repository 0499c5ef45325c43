"""T5-VAE training throughput: our C++ training loop (vaetransfer.train, the "t5-vae" objective,
AdamW) vs the same T5-VAE written in plain PyTorch on transformers' T5ForConditionalGeneration
(every encoder block's hidden states, masked pooling, μ / log σ Linear layers, z W_proj set as
each decoder block's cross-attention key and value) in an idiomatic Python loop — same config,
same initial weights, same batches, same thread count, KL threshold 0.5 and β = 1 in both,
dropout on in both, no token deletion (the reference would need its own). In the same run, the
logits of both for the same z are compared (eval mode, |Δ| ≤ 1e-5 · max(1, max |logit|)).

Throughput counts input tokens (encoder and decoder) processed per second of training.

    python benchmarks/bench_t5_vae.py [--threads T] [--steps S] [--pooling mean|max]
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

from _common import header, python_training_seconds
import vaetransfer as vt
from vaetransfer.text import T5, T5Config, T5VAE, T5VAEConfig

SIZES = {
    # The layout of the study's pretrained T5 (v1.0: ReLU, tied) at two sizes.
    "tiny": dict(d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16, vocab_size=1000, batch=32, length=24),
    "small": dict(d_model=128, d_ff=512, num_layers=2, num_heads=4, d_kv=32, vocab_size=1000, batch=32, length=48),
}
LATENT, FREE_BITS = 32, 0.5


def sentences(n: int, length: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """Token ids [n, length]: random tokens, eos after a random length, then padding."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 3, length - 1, (n,), generator=g)
    ids = torch.randint(3, vocab - 100, (n, length), generator=g)
    pos = torch.arange(length).expand(n, -1)
    ids = ids.masked_fill(pos > lengths[:, None], 0).masked_fill(pos == lengths[:, None], 1)
    return ids


class _Memory(torch.nn.Module):
    """A cross-attention key/value projection replaced by the latent memory of the current batch."""

    def __init__(self, owner: "Reference", layer: int):
        super().__init__()
        self.owner, self.layer = [owner], layer  # a list: not a registered submodule

    def forward(self, _):
        return self.owner[0].memory[:, self.layer:self.layer + 1]


class Reference(torch.nn.Module):
    """The paper's T5-VAE on transformers' T5 (Eq. 3–5)."""

    def __init__(self, hf, state: dict, pooling: str, num_heads: int, d_kv: int):
        super().__init__()
        self.hf, self.pooling, self.inner = hf, pooling, num_heads * d_kv
        d_model = hf.config.d_model
        self.mean = torch.nn.Linear(d_model, LATENT)
        self.log_sigma = torch.nn.Linear(d_model, LATENT)
        self.proj = torch.nn.Linear(LATENT, len(hf.decoder.block) * self.inner)
        with torch.no_grad():
            for name, mod in (("bottleneck.mean", self.mean), ("bottleneck.log_sigma", self.log_sigma),
                              ("memory_projection", self.proj)):
                mod.weight.copy_(state[name + ".weight"])
                mod.bias.copy_(state[name + ".bias"])
        for l, block in enumerate(hf.decoder.block):
            block.layer[1].EncDecAttention.k = _Memory(self, l)
            block.layer[1].EncDecAttention.v = _Memory(self, l)
        self.memory = None

    def posterior(self, ids, mask):
        enc = self.hf.encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        states = torch.stack(enc.hidden_states[1:])
        w = mask.view(1, *mask.shape, 1).to(states.dtype)
        if self.pooling == "mean":
            h = (states * w).sum((0, 2)) / (w.sum((0, 2)) * states.shape[0])
        else:
            h = states.masked_fill(w == 0, -float("inf")).amax((0, 2))
        return self.mean(h), self.log_sigma(h)

    def logits(self, ids, z):
        self.memory = self.proj(z).view(len(z), -1, self.inner)
        dec = self.hf._shift_right(ids.masked_fill(ids.eq(0), -100))
        out = self.hf.decoder(input_ids=dec, encoder_hidden_states=torch.zeros(len(z), 1, self.hf.config.d_model),
                              encoder_attention_mask=torch.ones(len(z), 1), use_cache=False)
        h = out.last_hidden_state
        if self.hf.config.scale_decoder_outputs:  # the tied output embedding's d_model^-0.5
            h = h * self.hf.config.d_model ** -0.5
        return self.hf.lm_head(h)

    def loss(self, ids, noise):
        mask = ids.ne(0)
        mu, log_sigma = self.posterior(ids, mask.long())
        z = mu + log_sigma.exp() * noise
        logits = self.logits(ids, z)
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids, reduction="none")
        recon = (nll * mask).sum(1)
        kl = 0.5 * (mu.pow(2) + (2 * log_sigma).exp() - 1 - 2 * log_sigma)
        return (recon + kl.clamp_min(FREE_BITS).sum(1)).mean()


def ours(model: T5VAE, ids, steps: int, batch: int, pooling: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        init = f"{d}/init.pt"
        torch.save(model.state_dict(), init)
        tc = vt.TrainConfig(model=model.config, objective=vt.TaskConfig("t5-vae", free_bits=FREE_BITS),
                            optimizer=vt.OptimizerConfig("adamw", lr=1e-3, eps=1e-3), steps=steps, batch_size=batch,
                            seed=0, init_from=init)
        vt.train(vt.TrainConfig.from_dict({**tc.to_dict(), "steps": 3}), ids, f"{d}/warm", progress=False)
        start = time.perf_counter()
        vt.train(tc, ids, f"{d}/run", progress=False)
        return time.perf_counter() - start


def reference(ref: Reference, ids, steps: int, batch: int) -> float:
    def batch_loss(g):
        idx = torch.randint(0, len(ids), (batch,), generator=g)
        return ref.loss(ids[idx], torch.randn(batch, LATENT, generator=g))

    return python_training_seconds(ref, batch_loss, steps, lr=1e-3, eps=1e-3, weight_decay=0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--size", choices=sorted(SIZES), nargs="*", default=["tiny", "small"])
    ap.add_argument("--pooling", choices=["mean", "max"], default="max")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import transformers

    header(f"T5-VAE training step: ours (C++) vs a PyTorch twin on transformers {transformers.__version__}")
    print(f"{'size':<6} {'params':>9} {'batch×len':>10} {'max |Δlogits|':>14} {'max|logit|':>10} "
          f"{'ref tok/s':>10} {'ours tok/s':>10} {'speed-up':>9}")
    for name in a.size:
        s = dict(SIZES[name])
        batch, length = s.pop("batch"), s.pop("length")
        cfg = T5Config(**s, dropout_rate=0.1)
        ids = sentences(2048, length, s["vocab_size"])
        model = T5VAE(T5VAEConfig(cfg, latent_dim=LATENT, pooling=a.pooling), seed=0).eval()
        state = model.state_dict()
        g = torch.Generator().manual_seed(1)  # W_σ starts at zero: give it values, so that log σ is compared too
        state["bottleneck.log_sigma.weight"] = 0.01 * torch.randn(state["bottleneck.log_sigma.weight"].shape, generator=g)
        model.load_state_dict(state)
        t5 = T5(cfg, seed=0)
        t5.load_state_dict({k: v for k, v in state.items() if k in t5.parameter_names})
        with tempfile.TemporaryDirectory() as d:
            t5.save_pretrained(d)
            hf = transformers.T5ForConditionalGeneration.from_pretrained(d, attn_implementation="eager")
        ref = Reference(hf, state, a.pooling, s["num_heads"], s["d_kv"]).eval()
        x = ids[:64]
        with torch.no_grad():
            mu, log_sigma = model.posterior(x, x.ne(0))
            theirs = ref.logits(x, mu)
            diff = (model.decode_latent(model.shift_right(x.masked_fill(x.eq(0), -100)), mu) - theirs).abs()
            mu_ref, log_sigma_ref = ref.posterior(x, x.ne(0).long())
        scale = max(1.0, theirs.abs().max().item())
        diff = max(diff.max().item(), (mu - mu_ref).abs().max().item(), (log_sigma - log_sigma_ref).abs().max().item())
        tokens = a.steps * batch * 2 * length
        t_ref = reference(ref, ids, a.steps, batch)
        t_ours = ours(model, ids, a.steps, batch, a.pooling)
        nparams = sum(p.numel() for p in model.named_parameters().values())
        print(f"{name:<6} {nparams:>9,} {batch:>5}×{length:<4} {diff:>14.2e} {scale:>10.1f} "
              f"{tokens / t_ref:>10,.0f} {tokens / t_ours:>10,.0f} {t_ref / t_ours:>8.2f}×")
        if diff > 1e-5 * scale:
            raise SystemExit(f"logits or posteriors differ by {diff:.2e} > 1e-5 · {scale:.1f}")


if __name__ == "__main__":
    main()
