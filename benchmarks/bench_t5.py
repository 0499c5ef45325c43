"""T5 training throughput: our C++ training loop (vaetransfer.train, the "seq2seq" objective,
AdamW) vs Hugging Face's T5ForConditionalGeneration in an idiomatic Python loop
(``model(input_ids, attention_mask, labels).loss.backward(); optimizer.step()`` with
torch.optim.AdamW) — same config, same initial weights (loaded from the folder we save), same
batch size and sequence lengths, same thread count, dropout on in both — and, in the same run,
the forward logits of both in eval mode compared to 1e-5.

Throughput counts target tokens and input tokens processed per second of training (wall time of
whole steps: forward, backward, optimiser update; the data are span-corrupted once beforehand so
both loops see the same kind of batches).

    python benchmarks/bench_t5.py [--threads T] [--steps S] [--size tiny|small]
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

from _common import header, python_training_seconds
import vaetransfer as vt
from vaetransfer.text import T5, T5Config, span_corrupt

SIZES = {
    # T5 v1.1 layout (gated GELU, untied output) and v1.0 layout (ReLU, tied, as t5-small)
    "tiny": dict(d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16, vocab_size=1000, batch=32, length=32,
                 feed_forward_proj="gated-gelu", tie_word_embeddings=False),
    "small": dict(d_model=128, d_ff=512, num_layers=4, num_heads=4, d_kv=32, vocab_size=4000, batch=32, length=48,
                  feed_forward_proj="relu", tie_word_embeddings=True),
}


def data(size: dict, n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, size["vocab_size"] - 100, (n, size["length"]), generator=g)
    ids, mask, labels = span_corrupt(tokens, vocab_size=size["vocab_size"], seed=seed)
    return ids, mask, labels


def ours(cfg: T5Config, ids, labels, steps: int, batch: int) -> float:
    tc = vt.TrainConfig(model=cfg.model_config(), objective=vt.TaskConfig("seq2seq"),
                        optimizer=vt.OptimizerConfig("adamw", lr=1e-3), steps=steps, batch_size=batch, seed=0)
    with tempfile.TemporaryDirectory() as d:  # warm-up (allocator)
        vt.train(vt.TrainConfig.from_dict({**tc.to_dict(), "steps": 3}), (ids, labels), d, progress=False)
    with tempfile.TemporaryDirectory() as d:
        start = time.perf_counter()
        vt.train(tc, (ids, labels), d, progress=False)
        return time.perf_counter() - start


def reference(hf, ids, mask, labels, steps: int, batch: int) -> float:
    def batch_loss(g):
        idx = torch.randint(0, len(ids), (batch,), generator=g)
        return hf(input_ids=ids[idx], attention_mask=mask[idx], labels=labels[idx], use_cache=False).loss

    return python_training_seconds(hf, batch_loss, steps, lr=1e-3, weight_decay=0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--size", choices=sorted(SIZES), nargs="*", default=["tiny", "small"])
    ap.add_argument("--dropout", type=float, nargs="*", default=[0.1, 0.0])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import transformers

    header(f"T5 training step: ours (C++) vs transformers {transformers.__version__} (Python loop)")
    print(f"{'size':<8} {'layout':<16} {'params':>9} {'batch×len':>10} {'dropout':>7} {'max |Δlogits|':>14} "
          f"{'max|logit|':>10} {'ref tok/s':>10} {'ours tok/s':>10} {'speed-up':>9}")
    for name, p in ((n, p) for n in a.size for p in a.dropout):
        s = dict(SIZES[name])
        batch, length = s.pop("batch"), s.pop("length")
        layout = ("v1.1 gated,untied" if s["feed_forward_proj"] == "gated-gelu" else "v1.0 relu,tied")
        cfg = T5Config(**s, dropout_rate=p)
        ids, mask, labels = data({**s, "length": length}, 2048)
        model = T5(cfg, seed=0).eval()
        with tempfile.TemporaryDirectory() as d:
            model.save_pretrained(d)
            hf = transformers.T5ForConditionalGeneration.from_pretrained(d, attn_implementation="eager")
        hf.eval()
        with torch.no_grad():
            theirs = hf(input_ids=ids[:64], attention_mask=mask[:64], labels=labels[:64], use_cache=False).logits
            diff = (model(ids[:64], mask[:64], labels=labels[:64]) - theirs).abs()
        # float32 rounding grows with the logits' size (an untied N(0, 1) head gives logits of ~10):
        # the criterion is |Δ| ≤ 1e-5 · max(1, max |logit|).
        scale = max(1.0, theirs.abs().max().item())
        diff = diff.max().item()
        tokens = a.steps * batch * (ids.shape[1] + labels.shape[1])
        t_ref = reference(hf, ids, mask, labels, a.steps, batch)
        t_ours = ours(cfg, ids, labels, a.steps, batch)
        nparams = sum(p.numel() for p in model.named_parameters().values())
        print(f"{name:<8} {layout:<16} {nparams:>9,} {batch:>4}×{ids.shape[1]}+{labels.shape[1]:<3} {p:>7.2f} {diff:>14.2e} "
              f"{scale:>10.1f} "
              f"{tokens / t_ref:>10,.0f} {tokens / t_ours:>10,.0f} {t_ref / t_ours:>8.2f}×")
        if diff > 1e-5 * scale:
            raise SystemExit(f"forward logits differ by {diff:.2e} > 1e-5 · {scale:.1f}")


if __name__ == "__main__":
    main()
