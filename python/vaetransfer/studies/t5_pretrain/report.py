"""The T5 pretraining study's report (``index.md``)."""
from __future__ import annotations

from ..kit import trained
from ..kit.markdown import fmt, markdown_table
from ..kit.t5_pretraining import UNIGRAM_MARGIN


def render_report(r: dict) -> str:
    """The study's sections of ``index.md``: the pretrained T5, its training, the reload check and examples."""
    a, c = r["analysis"], r["config"]
    h, m = a["held_out_cross_entropy"], a["model"]
    lines = [
        "## The pretrained T5", "",
        f"{a['corpus']['n_train']:,} training sentences ({a['corpus']['variant']} variant, "
        f"{a['corpus']['tokens_per_sentence_mean']} tokens on average, {a['corpus']['truncated']} truncated), "
        f"a SentencePiece unigram tokenizer of {a['tokenizer']['vocab_size']} ids "
        f"({a['tokenizer']['extra_ids']} sentinels), and a T5 of {m['parameters']:,} parameters "
        f"(d_model {m['d_model']}, {m['num_layers']}+{m['num_layers']} blocks, {m['num_heads']} heads, "
        f"{m['feed_forward_proj']}, tied output: {m['tie_word_embeddings']}) trained for "
        f"{c['steps']:,} steps of span corruption in {a['train_seconds']} s.", ""]
    lines += markdown_table(["held-out cross-entropy per target token (nats)", "value"],
                            [["untrained model", h["untrained"]],
                             ["unigram token frequencies (ignores the input)", h["unigram"]],
                             ["pretrained model", f"{fmt(h['pretrained'])} (perplexity "
                                                  f"{fmt(h['pretrained_perplexity'])})"]])
    tr = a.get("training")
    if tr:
        lines += ["", f"Training loss (span-corruption cross-entropy per target token, mean of the first and last "
                      f"{trained.loss_window(c['steps'])} steps): {fmt(tr['loss_first'])} → {fmt(tr['loss_last'])}"
                      f"{'' if tr['finite'] else ' (not finite at some step: diverged)'}."]
    if "t5_vae_failures" in a:
        lines += ["", "As the pretrained T5 of the `t5_vae` study (held-out cross-entropy at least "
                      f"{UNIGRAM_MARGIN * 100:g} % "
                      "below the unigram baseline's, training loss finite and 1 % lower at the end): "
                  + ("; ".join(a["t5_vae_failures"]) if a["t5_vae_failures"] else "it qualifies") + "."]
    lines += ["", "![loss.png](loss.png)", "",
              f"Reloading `{a['model_dir']}/` with `T5.from_pretrained` gives bit-identical logits: "
              f"{fmt(a['reload_bit_exact'])}.", ""]
    if a["examples"]:
        lines += ["## Held-out sentences: corrupted input, target spans, greedy output", "",
                  f"{a['exact_span_reconstructions']} of {len(a['examples'])} reconstructed exactly.", ""]
        for e in a["examples"]:
            lines += [f"- input: `{e['input']}`", f"  - target: `{e['target']}`",
                      f"  - generated: `{e['generated']}`"]
    return "\n".join(lines) + "\n"
