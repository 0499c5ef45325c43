"""The T5-VAE study's metrics in both conventions: ours and the public code's of "Finetuning
Pretrained Transformers into Variational Autoencoders" (§4.1) — perplexity with and without the
end-of-sentence token in the denominator, active units unbiased > δ and biased >= δ — and the
faults of that code we must not have: −ELBO printed as rec − KL, MI per minibatch (at most log B)
taken for the whole set's, and a batch counted by the length of a (ids, mask, labels) tuple."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vaetransfer import objectives
from vaetransfer._C import ArgumentError
from vaetransfer.text import T5Config, T5VAE, T5VAEConfig
from vaetransfer.studies.kit.t5_vae_metrics import AU_THRESHOLD, active_units_public, evaluate

VOCAB, EOS, PAD = 40, 1, 0


def sentences(n: int, seed: int = 0) -> torch.Tensor:
    """n sentences of 4–10 tokens from {3, ..., VOCAB − 1}, one eos each, right-padded to 11."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(4, 11, (n,), generator=g)
    ids = torch.zeros(n, 11, dtype=torch.long)
    for i, l in enumerate(lengths.tolist()):
        ids[i, :l] = torch.randint(3, VOCAB, (l,), generator=g)
        ids[i, l] = EOS
    return ids


def tiny(seed: int = 0) -> T5VAE:
    return T5VAE(T5VAEConfig(T5Config(vocab_size=VOCAB, d_model=16, d_kv=4, d_ff=24, num_layers=1, num_heads=2,
                                      dropout_rate=0.0), latent_dim=4, pooling="max"), seed=seed)


def separated(model: T5VAE) -> T5VAE:
    """The same model with far-apart, nearly deterministic posteriors (σ = e^-9): every sentence's
    z is told apart from every other's, so MI over N sentences is log N and over a minibatch of b is log b."""
    state = model.state_dict()
    state["bottleneck.mean.weight"] = 200 * state["bottleneck.mean.weight"]
    state["bottleneck.log_sigma.weight"] = torch.zeros_like(state["bottleneck.log_sigma.weight"])
    state["bottleneck.log_sigma.bias"] = torch.full_like(state["bottleneck.log_sigma.bias"], -9.0)
    model.load_state_dict(state)
    return model


@pytest.fixture(scope="module")
def measured():
    """A tiny T5-VAE, 37 sentences (one eos each), batch 16 (does not divide 37): evaluate's metrics
    and the per-sentence terms and IW estimate of the same batches and seed."""
    model, x = tiny(), sentences(37, seed=3)
    m = evaluate(model, x, batch_size=16, iw_samples=12, samples_per_chunk=5, minibatch_mi=8, seed=5)
    task = objectives.make_objective(objectives.TaskConfig("t5-vae"))
    ev = objectives.evaluate(model, task, x, batch_size=16, seed=5)
    iw = objectives.importance_weighted_log_likelihood(model, task, x, mean=ev["mean"].double(),
                                                       logvar=ev["logvar"].double(), num_samples=12,
                                                       samples_per_chunk=5, batch_size=16, seed=5)
    return model, x, m, ev, iw


def test_neg_elbo_is_reconstruction_plus_kl_of_each_sentence(measured):
    model, x, m, ev, _ = measured
    # The terms by hand: the NLL of each sentence decoded from the z the evaluation drew, and the
    # closed-form KL of its posterior.
    model.eval()
    with torch.no_grad():
        labels = x.masked_fill(x.eq(PAD), -100)
        logits = model.decode_latent(model.shift_right(labels), ev["z"]).double()
        rec = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100,
                                                reduction="none").sum(1)
    model.train()
    mean, logvar = ev["mean"].double(), ev["logvar"].double()
    kl = 0.5 * (mean ** 2 + logvar.exp() - 1 - logvar).sum(1)
    assert m["n"] == len(x) == 37
    assert math.isclose(m["reconstruction"], rec.mean().item(), rel_tol=1e-5)
    assert math.isclose(m["kl"], kl.mean().item(), rel_tol=1e-5)
    assert m["kl"] > 0.5  # so rec − KL would be told apart
    assert math.isclose(m["neg_elbo"], (rec + kl).mean().item(), rel_tol=1e-5)
    assert math.isclose(m["neg_elbo"], m["reconstruction"] + m["kl"], rel_tol=1e-12)
    assert abs(m["neg_elbo"] - (m["reconstruction"] - m["kl"])) > 1.0  # the public code's "−ELBO" is not ours


def test_perplexity_with_and_without_eos_in_the_denominator(measured):
    _, x, m, ev, iw = measured
    tokens = x.ne(PAD).sum(1).double()           # real tokens of each sentence, its eos included
    assert bool((x.eq(EOS).sum(1) == 1).all())   # exactly one eos per sentence
    words = tokens - 1                           # the public code's count: one token less per sentence
    neg_elbo = ev["reconstruction"].double() + ev["kl"].double()
    assert math.isclose(m["tokens"], tokens.mean().item(), rel_tol=1e-12)
    assert math.isclose(m["tokens_no_eos"], words.mean().item(), rel_tol=1e-12)
    # Ours: every token in the denominator; the public code's: the same numerator, no eos below.
    assert math.isclose(m["ppl_elbo"], math.exp(neg_elbo.sum().item() / tokens.sum().item()), rel_tol=1e-9)
    assert math.isclose(m["ppl_elbo_no_eos"], math.exp(neg_elbo.sum().item() / words.sum().item()), rel_tol=1e-9)
    log_px = iw.log_px.double()
    assert math.isclose(m["log_px"], log_px.mean().item(), rel_tol=1e-9)
    assert math.isclose(m["ppl_iw"], math.exp(-log_px.sum().item() / tokens.sum().item()), rel_tol=1e-9)
    assert math.isclose(m["ppl_iw_no_eos"], math.exp(-log_px.sum().item() / words.sum().item()), rel_tol=1e-9)
    # Same numerator, so log PPL scales with the inverse token count: the public code's is higher.
    for ours, public in (("ppl_elbo", "ppl_elbo_no_eos"), ("ppl_iw", "ppl_iw_no_eos")):
        assert m[public] > m[ours] * 1.05
        assert math.isclose(math.log(m[public]) * words.sum().item(), math.log(m[ours]) * tokens.sum().item(),
                            rel_tol=1e-9)


def test_the_eos_tokens_counted_are_those_present():
    # A sentence cut before its eos loses no word from the public-code denominator.
    model, x = tiny(), sentences(6, seed=1)
    cut = x.clone()
    last = int(cut[0].ne(PAD).sum()) - 1
    cut[0, last] = 7  # its eos replaced by a word
    m = evaluate(model, cut, batch_size=4)
    assert math.isclose(m["tokens_no_eos"] * 6, cut.ne(PAD).sum().item() - 5, rel_tol=1e-12)
    # Only eos tokens: no word to count, the no-eos perplexity is undefined (None), ours is not.
    only_eos = torch.tensor([[EOS, PAD], [EOS, PAD], [EOS, PAD]])
    m = evaluate(model, only_eos, batch_size=2, iw_samples=2)
    assert m["ppl_elbo_no_eos"] is None and m["ppl_iw_no_eos"] is None and m["tokens_no_eos"] == 0
    assert math.isfinite(m["ppl_elbo"]) and math.isfinite(m["ppl_iw"])


def test_active_units_biased_at_least_delta_vs_unbiased_above_delta():
    # N = 4 rows, δ = 1/4 (exact in binary): each column's variances are exact too.
    delta = 0.25
    mean = torch.tensor([[0.5, 0.0, 0.0, 3.0],
                         [0.5, 0.0, 0.0, 3.0],
                         [-0.5, 0.0, 0.0, 3.0],
                         [-0.5, 1.0, 1.0625, 3.0]])
    biased = mean.double().var(0, unbiased=False).tolist()
    unbiased = mean.double().var(0, unbiased=True).tolist()
    assert biased[0] == delta and unbiased[0] > delta      # biased variance exactly δ
    assert unbiased[1] == delta and biased[1] < delta      # unbiased variance exactly δ
    assert biased[2] < delta < unbiased[2]                 # between the two conventions
    assert biased[3] == unbiased[3] == 0                   # constant
    public = [b >= delta for b in biased]                  # the public code: biased, >=
    ours = [u > delta for u in unbiased]                   # ours: unbiased, >
    assert public == [True, False, False, False] and ours == [True, False, True, False]
    assert active_units_public(mean, delta) == sum(public) == 1
    from vaetransfer import estimators
    au = estimators.active_units(mean, delta)  # the default: unbiased, strictly above
    assert au.count == sum(ours) == 2 and au.active.tolist() == ours
    # A strict biased count would miss column 0; an inclusive unbiased one would take column 1.
    assert estimators.active_units(mean, delta, unbiased=False).count == 0
    assert AU_THRESHOLD == 0.01 and active_units_public(mean) == 3  # δ = 0.01: every varying column
    with pytest.raises(ArgumentError, match="threshold"):
        active_units_public(mean, -1.0)
    with pytest.raises(ArgumentError, match="mean"):
        active_units_public(mean[:1])


def test_evaluate_reports_both_active_unit_counts(measured):
    model, x, m, ev, _ = measured
    mean = ev["mean"].double().numpy()
    assert m["active_units"] == int((mean.var(0, ddof=1) > 0.01).sum())
    assert m["active_units_public"] == int((mean.var(0, ddof=0) >= 0.01).sum())
    # A collapsed posterior (μ the same for every sentence): no unit in either convention.
    state = model.state_dict()
    state["bottleneck.mean.weight"] = torch.zeros_like(state["bottleneck.mean.weight"])
    collapsed = tiny()
    collapsed.load_state_dict(state)
    c = evaluate(collapsed, x, batch_size=16)
    assert c["active_units"] == c["active_units_public"] == 0


def test_mi_is_over_the_whole_set_and_the_minibatch_one_is_at_most_log_b():
    model, n = separated(tiny()), 37
    x = sentences(n, seed=3)
    m = evaluate(model, x, batch_size=16, minibatch_mi=16, mi_samples=50, seed=2)
    # Far-apart posteriors: each z is its own sentence's, so the whole set's MI is log N (its terms
    # use one sampled z each: no Monte-Carlo noise left) ...
    assert math.isclose(m["mi_cap"], math.log(n), rel_tol=1e-12)
    assert math.isclose(m["mi"], math.log(n), abs_tol=1e-3)
    # ... and the minibatch estimator's at most log B. At the public code's default batch size 1 it
    # is 0 up to the noise of its closed-form entropy against a sampled log q(z|x), whatever the model.
    one = evaluate(model, x, batch_size=16, minibatch_mi=1, mi_samples=50, seed=2)
    assert one["mi_minibatch_cap"] == 0 and abs(one["mi_minibatch"]) < 0.1
    assert math.isclose(one["mi"], m["mi"], rel_tol=1e-12)  # the whole set's MI does not depend on B
    assert math.isclose(m["mi_minibatch_cap"], math.log(16), rel_tol=1e-12)
    assert m["mi_minibatch"] <= math.log(16) + 1e-9 and m["mi"] - m["mi_minibatch"] > 0.9
    # The same draws (same seed): the noise cancels, leaving log of each sentence's minibatch size
    # (16, 16, 5: 16 does not divide 37) averaged over sentences — the sentences counted, not a
    # (ids, mask, labels) tuple's 3 entries per minibatch, whose weights would make it the plain
    # mean over minibatches, pulled down by the last short one.
    by_sentence = (32 * math.log(16) + 5 * math.log(5)) / n
    by_minibatch = (2 * math.log(16) + math.log(5)) / 3
    assert math.isclose(m["mi_minibatch"] - one["mi_minibatch"], by_sentence, abs_tol=1e-3)
    assert by_sentence - by_minibatch > 0.2


def test_sentences_are_counted_whatever_the_batch_size(measured):
    model, x, m, _, _ = measured
    for b in (5, 37, 64):  # neither divides 37 but 37 itself; 64 > N
        other = evaluate(model, x, batch_size=b, iw_samples=0, minibatch_mi=8, seed=5)
        assert other["n"] == 37
        for key in ("tokens", "tokens_no_eos", "kl", "nll_own_mean", "nll_other_mean", "active_units",
                    "active_units_public", "mi", "mi_minibatch"):
            assert math.isclose(other[key], m[key], rel_tol=1e-5, abs_tol=1e-9), (b, key)
    # A (ids, mask, labels) tuple is refused, never taken for 3 sentences.
    with pytest.raises(ArgumentError) as err:
        evaluate(model, (x, x.ne(PAD).long(), x), batch_size=16)
    assert err.value.argument == "ids"


def test_metrics_are_deterministic_by_seed(measured):
    model, x, m, _, _ = measured
    again = evaluate(model, x, batch_size=16, iw_samples=12, samples_per_chunk=5, minibatch_mi=8, seed=5)
    assert again == m
    other = evaluate(model, x, batch_size=16, iw_samples=12, samples_per_chunk=5, minibatch_mi=8, seed=6)
    assert other["ppl_elbo_no_eos"] != m["ppl_elbo_no_eos"]
    assert np.isclose(other["kl"], m["kl"])  # the KL is closed form: no draw


# ---------------------------------------------------------------- the study's report and results.json
def _run_metrics(seed: int, new: bool = True) -> dict:
    from vaetransfer.studies import t5_vae as study

    m = {"ppl_iw": 30.0 + seed, "ppl_elbo": 40.0 + seed, "reconstruction": 50.0, "kl": 5.0 + seed,
         "neg_elbo": 55.0 + seed, "log_px": -52.0, "mi": 3.0, "mi_minibatch": 2.0, "active_units": 7,
         "latent_use": 1.0, "tokens": 10.0, "collapsed": False, "mi_cap": math.log(100),
         "mi_minibatch_cap": math.log(32)}
    if new:
        m.update(ppl_iw_no_eos=44.0 + seed, ppl_elbo_no_eos=60.0 + seed, active_units_public=6 + seed,
                 tokens_no_eos=9.0)
    for a in study.ATTRIBUTES:
        m[f"probe_{a}"], m[f"probe_{a}_chance"] = 0.6, 0.4
    return m


def test_the_study_reports_each_metric_in_both_conventions():
    from vaetransfer.config import config_to_dict
    from vaetransfer.studies import t5_vae as study

    results = {v: [{"seed": s, "settings": study.settings(v), "metrics": _run_metrics(s), "examples": {}}
                   for s in (0, 1)] for v in ("two-phase", "mean-pool")}
    # A run measured before the public code's convention existed: its cells are empty, not wrong.
    results["plain"] = [{"seed": 0, "settings": study.settings("plain"), "metrics": _run_metrics(0, new=False),
                         "examples": {}}]
    a = study.analysis.summarise(results)
    row = a["summary"]["two-phase"]
    assert row["ppl_elbo_no_eos"] == {"mean": 60.5, "se": 0.5, "n": 2}
    assert row["ppl_iw_no_eos"]["mean"] == 44.5 and row["active_units_public"]["mean"] == 6.5
    assert row["active_units"]["mean"] == 7 and row["ppl_elbo"]["mean"] == 40.5
    assert a["summary"]["plain"]["ppl_elbo_no_eos"]["mean"] is None
    # The definitions travel with the numbers (results.json holds the analysis), each naming its keys.
    conv = a["metric_conventions"]
    assert set(conv) == {"PPL (ELBO)", "PPL (IW)", "−ELBO", "MI", "AU"}
    assert (conv["PPL (ELBO)"]["ours_key"], conv["PPL (ELBO)"]["public_code_key"]) == ("ppl_elbo", "ppl_elbo_no_eos")
    assert (conv["AU"]["ours_key"], conv["AU"]["public_code_key"]) == ("active_units", "active_units_public")
    assert (conv["MI"]["ours_key"], conv["MI"]["public_code_key"]) == ("mi", "mi_minibatch")
    assert conv["−ELBO"]["public_code_key"] is None and "rec − KL" in conv["−ELBO"]["public_code"]
    for d in conv.values():
        for side in ("ours_key", "public_code_key"):
            assert d[side] is None or d[side] in study.METRICS
    # The report: the conventions table and every variant's values, each column labelled.
    r = {"config": {**config_to_dict(study.Config()), "variants": list(results), "seeds": [0, 1]},
         "analysis": {**a, "t5_folder": "t5", "pretrain": None}, "figures": []}
    text = study.report.render_report(r)
    assert "## Conventions" in text and "| metric | ours | the paper's public code |" in text
    table = text[text.index("| metric | ours"):].split("\n\n")[0].splitlines()
    assert len(table) == 2 + len(conv) and all(line.count("|") == 4 for line in table)  # 3 cells a row
    header = next(line for line in text.splitlines() if line.startswith("| variant | PPL (IW), ours"))
    for label in ("PPL (IW), ours: eos counted", "PPL (IW), public code: no eos", "PPL (ELBO), ours: eos counted",
                  "PPL (ELBO), public code: no eos", "−ELBO = rec + KL", "MI, ours: whole set",
                  "MI, public code: per minibatch", "AU, ours: unbiased > 0.01", "AU, public code: biased ≥ 0.01"):
        assert label in header
    two_phase = next(line for line in text.splitlines() if line.startswith("| two-phase | 30.500"))
    assert "60.500 ± 0.500" in two_phase and "44.500 ± 0.500" in two_phase and "6.500 ± 0.500" in two_phase
    plain = next(line for line in text.splitlines() if line.startswith("| plain | 30.000"))
    assert plain.count("—") == 3  # no public-code perplexities nor AU for the older run
    d = {"name": "x", "changes": {"phase2_epochs": 3}, "analysis": a, "findings": []}
    assert "AU, public code: biased ≥ 0.01" in study.diagnostic_report(d)


def test_the_smoke_study_measures_and_reports_both_conventions(study_smoke):
    """End to end (the smoke preset, shared with tests/test_t5_vae_study.py in one session)."""
    from vaetransfer.studies import t5_vae as study

    out, r = study_smoke("t5_vae")
    a = r["analysis"]
    assert a["metric_conventions"] == study.METRIC_CONVENTIONS
    for variant, row in a["summary"].items():
        n = row["runs"]
        for ours, public in (("ppl_elbo", "ppl_elbo_no_eos"), ("ppl_iw", "ppl_iw_no_eos")):
            assert row[public]["n"] == n and row[public]["mean"] > row[ours]["mean"], (variant, public)
        assert row["active_units_public"]["n"] == n
        assert 0 < row["tokens_no_eos"]["mean"] == pytest.approx(row["tokens"]["mean"] - 1, abs=1e-4)
    text = (out / "index.md").read_text()
    assert "## Conventions" in text and "AU, public code: biased ≥ 0.01" in text
