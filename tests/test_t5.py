"""T5 of the core against Hugging Face's transformers with the same weights, Hugging Face folders
in and out, generation, span corruption and the T5 objectives."""
from __future__ import annotations

import json
import math

import pytest
import torch

import vaetransfer as vt
from vaetransfer.text import T5, T5Config, pad_pair, relative_position_bucket, span_corrupt

transformers = pytest.importorskip("transformers")
from transformers.models.t5 import modeling_t5  # noqa: E402

VOCAB = 64


def tiny(ff="relu", tie=True, **kw) -> T5Config:
    base = dict(vocab_size=VOCAB, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=3, feed_forward_proj=ff,
                tie_word_embeddings=tie, relative_attention_num_buckets=8, relative_attention_max_distance=12,
                dropout_rate=0.1)
    base.update(kw)
    return T5Config(**base)


def hf_twin(model: T5, folder) -> "transformers.T5ForConditionalGeneration":
    """Hugging Face's model loaded from what we save (eager attention: no fused kernels)."""
    model.save_pretrained(folder)
    hf = transformers.T5ForConditionalGeneration.from_pretrained(folder, attn_implementation="eager")
    return hf.eval()


def batch(seed=0, b=4, s=13, t=9):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (b, s), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0   # padding in the batch
    mask[2, 4:] = 0
    ids = ids * mask  # pad id 0 under the mask
    labels = torch.randint(3, VOCAB, (b, t), generator=g)
    labels[1, 6:] = -100
    labels[3, 2:] = -100
    return ids, mask, labels


CASES = [("relu", True), ("relu", False), ("gated-gelu", True), ("gated-gelu", False)]


@pytest.mark.parametrize("ff,tie", CASES)
def test_float32_parity_with_transformers(tmp_path, ff, tie):
    model = T5(tiny(ff, tie), seed=3).eval()
    hf = hf_twin(model, tmp_path)
    assert (hf.lm_head.weight is hf.shared.weight) == tie  # the twin really is tied / untied
    ids, mask, labels = batch()
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False)
    torch.testing.assert_close(model.encode(ids, mask), out.encoder_last_hidden_state, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model(ids, mask, labels=labels), out.logits, rtol=1e-5, atol=1e-5)
    assert abs(model.loss(ids, labels, mask).item() - out.loss.item()) < 1e-5


def _hf_rms_norm_in_own_dtype(self, h):
    # Hugging Face takes the mean square in float32 whatever the dtype; the float64 comparison
    # needs the same formula carried out in float64.
    return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


@pytest.mark.parametrize("ff,tie", CASES)
def test_float64_parity_with_transformers(tmp_path, monkeypatch, ff, tie):
    model = T5(tiny(ff, tie), seed=5).eval().to_dtype(torch.float64)
    hf = hf_twin(model, tmp_path).double()
    with torch.no_grad():  # the saved file is float32: give the twin the float64 weights themselves
        for name, p in hf.named_parameters():
            p.copy_(model.named_parameters()["shared.weight" if name.endswith("embed_tokens.weight") or
                                              (tie and name == "lm_head.weight") else name])
    ids, mask, labels = batch(1)
    with torch.no_grad():
        unpatched = hf(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False).logits
    monkeypatch.setattr(modeling_t5.T5LayerNorm, "forward", _hf_rms_norm_in_own_dtype)
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False)
    ours = model(ids, mask, labels=labels)
    assert ours.dtype == torch.float64
    assert (ours - out.logits).abs().max().item() < 1e-10
    assert (model.encode(ids, mask) - out.encoder_last_hidden_state).abs().max().item() < 1e-10
    assert abs(model.loss(ids, labels, mask).item() - out.loss.item()) < 1e-10
    # The float32 mean square is the only difference, and it is visible at float64 precision.
    assert (ours - unpatched).abs().max().item() > 1e-10


def test_relative_position_buckets_equal_transformers():
    rel = torch.arange(-300, 301).view(1, -1)
    for bidirectional in (True, False):
        for buckets, distance in ((32, 128), (8, 12), (6, 20)):
            theirs = modeling_t5.T5Attention._relative_position_bucket(rel, bidirectional, buckets, distance)
            ours = relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=buckets, max_distance=distance)
            assert torch.equal(ours, theirs), (bidirectional, buckets, distance)


def test_only_the_first_block_of_each_stack_has_a_bias_table_and_attention_is_unscaled():
    model = T5(tiny(), seed=0)
    tables = [n for n in model.parameter_names if "relative_attention_bias" in n]
    assert tables == ["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                      "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
    # Scaling q by c multiplies the attention logits by c (no hidden 1/sqrt(d_kv) constant to cancel):
    # with k = 0 the logits are the position bias alone, so the output does not depend on q.
    ids, mask, _ = batch()
    state = model.state_dict()
    state = {k: (torch.zeros_like(v) if k.endswith("SelfAttention.k.weight") else v) for k, v in state.items()}
    model.load_state_dict(state)
    model.eval()
    a = model.encode(ids, mask)
    state = {k: (v * 7 if k.endswith("SelfAttention.q.weight") else v) for k, v in state.items()}
    model.load_state_dict(state)
    torch.testing.assert_close(model.encode(ids, mask), a, rtol=0, atol=1e-6)


def test_padding_does_not_change_the_real_tokens(tmp_path):
    model = T5(tiny("gated-gelu", False), seed=2).eval()
    ids, mask, labels = batch()
    row = ids[2:3, :4]  # the third sentence without its padding
    alone = model(row, None, labels=labels[2:3])
    together = model(ids, mask, labels=labels)[2:3]
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ff,tie", [("relu", True), ("gated-gelu", False)])
def test_greedy_generation_equals_transformers(tmp_path, ff, tie):
    model = T5(tiny(ff, tie, initializer_factor=3.0), seed=7).eval()
    hf = hf_twin(model, tmp_path)
    ids, mask, _ = batch(2)
    ours = model.generate(ids, mask, max_new_tokens=15)
    theirs = hf.generate(input_ids=ids, attention_mask=mask, max_new_tokens=15, do_sample=False, num_beams=1)
    assert torch.equal(ours, theirs)
    # The key/value cache gives the teacher-forced logits.
    logits = model(ids, mask, decoder_input_ids=ours[:, :-1])
    live = torch.cumsum(ours[:, :-1].eq(1).long(), 1).eq(0)  # positions up to each sequence's first eos
    assert bool(live.any())
    assert torch.equal(logits.argmax(-1)[live], ours[:, 1:][live])


def test_generation_stops_at_eos_and_pads_after_it(tmp_path):
    model = T5(tiny("relu", False), seed=1).eval()
    state = dict(model.state_dict())
    # The decoder's output keeps one coordinate h0; lm_head maps h0 > 0 to eos (1) and h0 < 0 to
    # token 2, so sequences end at different steps.
    norm = torch.zeros(16)
    norm[0] = 1.0
    head = torch.zeros(VOCAB, 16)
    head[1, 0], head[2, 0] = 5.0, -5.0
    state["decoder.final_layer_norm.weight"], state["lm_head.weight"] = norm, head
    model.load_state_dict(state)
    ids, mask, _ = batch(4, b=8)
    out = model.generate(ids, mask, max_new_tokens=12)
    ended = [row.index(1, 1) for row in out.tolist() if 1 in row[1:]]
    assert ended, "no sequence produced eos: the test would not test anything"
    for row in out.tolist():
        if 1 in row[1:]:
            assert all(t == 0 for t in row[row.index(1, 1) + 1:])
    assert out.shape[1] == (max(ended) + 1 if len(ended) == 8 else 13)
    theirs = hf_twin(model, tmp_path).generate(input_ids=ids, attention_mask=mask, max_new_tokens=12, do_sample=False)
    assert torch.equal(out, theirs)


def test_sampling_follows_the_softmax_and_is_seeded():
    model = T5(tiny(initializer_factor=2.0), seed=4).eval()
    ids = torch.randint(3, VOCAB, (1, 8), generator=torch.Generator().manual_seed(0))
    many = ids.expand(4000, 8).contiguous()
    a = model.generate(many, max_new_tokens=1, do_sample=True, seed=11)
    b = model.generate(many, max_new_tokens=1, do_sample=True, seed=11)
    c = model.generate(many, max_new_tokens=1, do_sample=True, seed=12)
    assert torch.equal(a, b) and not torch.equal(a, c)
    probs = torch.softmax(model(ids, decoder_input_ids=torch.zeros(1, 1, dtype=torch.long))[0, 0].double(), -1)
    freq = torch.bincount(a[:, 1], minlength=VOCAB).double() / 4000
    # Each frequency within 5 standard errors of its probability.
    assert bool(((freq - probs).abs() <= 5 * (probs * (1 - probs) / 4000).sqrt() + 1e-3).all())
    top = model.generate(many[:200], max_new_tokens=1, do_sample=True, top_k=3, seed=1)[:, 1]
    assert set(top.tolist()) <= set(probs.topk(3).indices.tolist())
    cold = model.generate(ids, max_new_tokens=5, do_sample=True, temperature=1e-6, seed=3)
    assert torch.equal(cold, model.generate(ids, max_new_tokens=5))


# ------------------------------------------------------------------ folders

def test_round_trip_through_our_loader_is_bit_exact(tmp_path):
    for i, (ff, tie) in enumerate(CASES):
        model = T5(tiny(ff, tie, num_decoder_layers=3), seed=i)
        folder = model.save_pretrained(tmp_path / str(i))
        back = T5.from_pretrained(folder)
        assert back.t5_config == model.t5_config
        assert back.parameter_names == model.parameter_names
        for k, v in model.state_dict().items():
            assert torch.equal(back.state_dict()[k], v), k


def test_transformers_folder_loads_into_ours(tmp_path):
    for ff, tie in CASES:
        cfg = transformers.T5Config(vocab_size=VOCAB, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=2,
                                    feed_forward_proj=ff, tie_word_embeddings=tie, decoder_start_token_id=0)
        torch.manual_seed(0)
        hf = transformers.T5ForConditionalGeneration(cfg).eval()
        if not tie:  # transformers 5 ties at construction; untie as a v1.1 checkpoint is
            hf.lm_head.weight = torch.nn.Parameter(torch.randn(VOCAB, 16))
        folder = tmp_path / f"{ff}-{tie}"
        hf.save_pretrained(folder)
        ours = T5.from_pretrained(folder).eval()
        assert ours.t5_config.tie_word_embeddings == tie and ours.t5_config.scale_decoder_outputs == tie
        ids, mask, labels = batch(3)
        with torch.no_grad():
            theirs = hf(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False).logits
        torch.testing.assert_close(ours(ids, mask, labels=labels), theirs, rtol=1e-5, atol=1e-5)


def test_pytorch_model_bin_with_tied_copies_loads(tmp_path):
    model = T5(tiny(), seed=9)
    state = dict(model.state_dict())
    for k in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"):
        state[k] = state["shared.weight"]
    torch.save(state, tmp_path / "pytorch_model.bin")
    (tmp_path / "config.json").write_text(json.dumps(model.t5_config.to_hf()))
    back = T5.from_pretrained(tmp_path)
    assert all(torch.equal(back.state_dict()[k], v) for k, v in model.state_dict().items())


def _folder(tmp_path, **changes):
    model = T5(tiny(), seed=0)
    model.save_pretrained(tmp_path)
    from safetensors.torch import load_file, save_file

    state = load_file(tmp_path / "model.safetensors")
    for k, v in changes.items():
        if v is None:
            state.pop(k)
        else:
            state[k] = v
    save_file(state, tmp_path / "model.safetensors")
    return tmp_path


def test_bad_folders_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such directory"):
        T5.from_pretrained(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        T5.from_pretrained(tmp_path / "empty")
    name = "encoder.block.1.layer.1.DenseReluDense.wo.weight"
    with pytest.raises(ValueError, match=f"missing tensors: \\['{name}'\\]"):
        T5.from_pretrained(_folder(tmp_path / "missing", **{name: None}))
    with pytest.raises(ValueError, match="unexpected tensors: \\['encoder.block.7.extra'\\]"):
        T5.from_pretrained(_folder(tmp_path / "extra", **{"encoder.block.7.extra": torch.zeros(2)}))
    with pytest.raises(ValueError, match=f"'{name}' has shape \\(16, 25\\)"):
        T5.from_pretrained(_folder(tmp_path / "shape", **{name: torch.zeros(16, 25)}))
    corrupt = _folder(tmp_path / "corrupt")
    data = (corrupt / "model.safetensors").read_bytes()
    (corrupt / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        T5.from_pretrained(corrupt)
    (corrupt / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        T5.from_pretrained(corrupt)
    gated = _folder(tmp_path / "silu")
    cfg = json.loads((gated / "config.json").read_text())
    cfg["feed_forward_proj"] = "gated-silu"
    (gated / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="gated-silu"):
        T5.from_pretrained(gated)


def test_bad_inputs_are_clear_errors():
    model = T5(tiny(), seed=0)
    with pytest.raises(ValueError, match="input_ids.*token ids in \\[0, 64\\)"):
        model.encode(torch.tensor([[1, 64]]))
    with pytest.raises(TypeError, match="input_ids"):
        model.encode(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="attention_mask"):
        model.encode(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 4))
    with pytest.raises(ValueError, match="feed_forward_proj"):
        T5(tiny("gated-silu"))
    with pytest.raises(ValueError, match="max_new_tokens"):
        model.generate(torch.ones(1, 3, dtype=torch.long), max_new_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        model.generate(torch.ones(1, 3, dtype=torch.long), do_sample=True, temperature=0.0)


# ------------------------------------------------------------------ layers and the model interface

def test_named_layers_and_pooled_activations(tmp_path):
    model = T5(tiny(num_decoder_layers=3), seed=0).eval()
    assert model.layer_names == ["encoder.embeddings", "encoder.block.0", "encoder.block.1", "encoder.final_layer_norm",
                                 "decoder.embeddings", "decoder.block.0", "decoder.block.1", "decoder.block.2",
                                 "decoder.final_layer_norm", "logits"]
    hf = hf_twin(model, tmp_path)
    ids, mask, labels = batch()
    dec = model.shift_right(labels)
    acts = model.activations(pad_pair(ids, dec), flatten=False, chunk_size=3)
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, output_hidden_states=True, use_cache=False)
    # Hugging Face's hidden states: the embeddings, then each block's output (the last one after the final norm).
    torch.testing.assert_close(acts["encoder.embeddings"][:, :13], out.encoder_hidden_states[0])
    torch.testing.assert_close(acts["encoder.block.0"][:, :13], out.encoder_hidden_states[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(acts["encoder.final_layer_norm"][:, :13], out.encoder_last_hidden_state, rtol=1e-5,
                               atol=1e-5)
    torch.testing.assert_close(acts["decoder.block.1"][:, :9], out.decoder_hidden_states[2], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(acts["logits"][:, :9], out.logits, rtol=1e-5, atol=1e-5)
    pooled = model.pooled_activations(ids, dec)
    m = mask.unsqueeze(-1).float()
    expected = (acts["encoder.block.1"][:, :13] * m).sum(1) / m.sum(1)
    torch.testing.assert_close(pooled["encoder.block.1"], expected, rtol=1e-5, atol=1e-6)
    assert pooled["logits"].shape == (4, VOCAB)


def test_groups_freeze_and_reinitialise_by_hugging_face_prefixes():
    model = T5(tiny(tie=False), seed=0)
    assert all(n.startswith("decoder.") for n in model.group("decoder"))
    assert model.group("decoder.block.1") == [n for n in model.parameter_names if n.startswith("decoder.block.1.")]
    before = model.state_dict()
    model.reinitialize("encoder.block.1", seed=5)
    after = model.state_dict()
    for k in before:
        assert torch.equal(before[k], after[k]) != k.startswith("encoder.block.1.") or "layer_norm" in k, k
    # T5's initialisation: N(0, 1) embeddings, N(0, 1/d_model) keys.
    big = T5(T5Config(vocab_size=512, d_model=64, d_kv=16, d_ff=128, num_layers=1, num_heads=4), seed=1)
    p = big.named_parameters()
    assert abs(p["shared.weight"].std().item() - 1.0) < 0.02
    assert abs(p["encoder.block.0.layer.0.SelfAttention.k.weight"].std().item() - 64 ** -0.5) < 0.01
    assert abs(p["encoder.block.0.layer.0.SelfAttention.q.weight"].std().item() - (64 * 16) ** -0.5) < 0.003


# ------------------------------------------------------------------ span corruption and training

def _spans(inp, tgt):
    """The target's spans by sentinel, and the input rebuilt from them."""
    spans, current = {}, None
    for t in tgt[:-1]:
        if t >= 100:
            current = t
            spans[current] = []
        else:
            spans[current].append(t)
    rebuilt = []
    for t in inp[:-1]:
        rebuilt += spans[t] if t >= 100 else [t]
    return spans, rebuilt


@pytest.mark.parametrize("roll", [False, True])
def test_span_corruption_reassembles_the_text_and_follows_t5s_rule(roll):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, 50, (64, 40), generator=g)
    lengths = torch.randint(1, 41, (64,), generator=g)
    for i, n in enumerate(lengths.tolist()):
        tokens[i, n:] = 0
    tokens[5, 39] = 1  # a trailing eos is dropped before corrupting
    inputs, mask, labels = span_corrupt(tokens, vocab_size=200, random_roll=roll, seed=3)
    again = span_corrupt(tokens, vocab_size=200, random_roll=roll, seed=3)
    assert all(torch.equal(a, b) for a, b in zip((inputs, mask, labels), again))
    assert not torch.equal(inputs, span_corrupt(tokens, vocab_size=200, random_roll=roll, seed=4)[0])
    for i in range(64):
        row = tokens[i][tokens[i] != 0].tolist()
        if row and row[-1] == 1:
            row = row[:-1]
        inp = inputs[i][mask[i].bool()].tolist()
        tgt = labels[i][labels[i] != -100].tolist()
        assert inp[-1] == 1 and tgt[-1] == 1
        spans, rebuilt = _spans(inp, tgt)
        assert rebuilt == row  # each sentinel stands for the tokens after it in the target
        n = len(row)
        if n >= 2:
            noise = sum(len(v) for v in spans.values())
            assert noise == min(max(round(n * 0.15), 1), n - 1)  # round half to even, as T5's np.round
            assert list(spans) == [199 - k for k in range(len(spans))]  # <extra_id_0> = vocab - 1, descending
            assert all(len(v) >= 1 for v in spans.values())
            if not roll:
                assert inp[0] < 100  # runs start with kept tokens
    long = torch.randint(3, 50, (2000, 100), generator=g)
    _, _, lab = span_corrupt(long, vocab_size=200, mean_span_length=3.0, random_roll=False, seed=0)
    spans_per_row = ((lab >= 100) & (lab != -100)).sum(1).double()
    assert abs(15 / spans_per_row.mean().item() - 3.0) < 0.05  # 15 noise tokens per row, spans of mean 3


def test_random_roll_moves_a_single_span_off_the_end():
    # 12-token sentences: 2 noise tokens in round(2 / 3) = 1 span. Without the roll it is always the
    # last two tokens; with it, every position is cut equally often (two spans when it wraps).
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(3, 50, (3000, 12), generator=g)
    for roll in (False, True):
        inputs, mask, labels = span_corrupt(tokens, vocab_size=200, random_roll=roll, seed=2)
        cut = torch.zeros(12)
        for i in range(3000):
            inp = inputs[i][mask[i].bool()].tolist()
            tgt = labels[i][labels[i] != -100].tolist()
            spans, rebuilt = _spans(inp, tgt)
            assert rebuilt == tokens[i].tolist()
            position = 0
            for t in inp[:-1]:
                if t >= 100:
                    cut[position:position + len(spans[t])] += 1
                    position += len(spans[t])
                else:
                    position += 1
        rate = cut / 3000
        if not roll:
            assert torch.equal(rate, torch.tensor([0.0] * 10 + [1.0, 1.0]))
        else:
            assert bool(((rate - 2 / 12).abs() < 0.03).all()), rate


def test_span_corruption_pretraining_lowers_the_loss_and_resumes_exactly(tmp_path):
    from vaetransfer.objectives import TaskConfig
    from vaetransfer.train import OptimizerConfig, TrainConfig, train

    g = torch.Generator().manual_seed(0)
    # A learnable "language": each sentence counts up from a random start.
    start = torch.randint(3, 40, (512, 1), generator=g)
    ids = (start + torch.arange(14)).clamp_max(VOCAB - 1)
    cfg = tiny(vocab_size=VOCAB + 20, dropout_rate=0.1)  # dropout masks must repeat on resume too
    tc = TrainConfig(model=cfg.model_config(), objective=TaskConfig("span-corruption", extra_ids=20),
                     optimizer=OptimizerConfig(name="adamw", lr=3e-3), steps=120, batch_size=32, snapshot_every=60,
                     eval_every=60, seed=1)
    run = train(tc, ids, tmp_path / "a", eval_data=ids[:64], progress=False)
    evals = [json.loads(l) for l in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    ce = run.history["cross_entropy"]
    assert sum(ce[-20:]) / 20 < 0.75 * sum(ce[:20]) / 20  # measured: 0.62
    assert evals[-1]["eval_cross_entropy"] < evals[0]["eval_cross_entropy"]
    # Stop at 60, resume: the same trajectory (the corruptions come from the saved noise stream).
    half = TrainConfig.from_dict({**tc.to_dict(), "steps": 60})
    train(half, ids, tmp_path / "b", eval_data=ids[:64], progress=False)
    import shutil

    shutil.copytree(tmp_path / "b", tmp_path / "c")
    (tmp_path / "c" / "config.json").write_text(json.dumps(tc.to_dict()))
    resumed = train(tc, ids, tmp_path / "c", eval_data=ids[:64], progress=False)
    assert torch.equal(torch.as_tensor(resumed.history["loss"]), torch.as_tensor(run.history["loss"]))


def test_seq2seq_objective_trains_a_copy_task(tmp_path):
    from vaetransfer.objectives import TaskConfig
    from vaetransfer.train import OptimizerConfig, TrainConfig, train

    g = torch.Generator().manual_seed(1)
    x = torch.randint(3, 20, (512, 6), generator=g)
    y = torch.cat([x, torch.ones(512, 1, dtype=torch.long)], 1)  # copy the sentence, then eos
    tc = TrainConfig(model=tiny(dropout_rate=0.0).model_config(), objective=TaskConfig("seq2seq"),
                     optimizer=OptimizerConfig(name="adamw", lr=1e-2), steps=300, batch_size=64, seed=0)
    run = train(tc, (x, y), tmp_path, progress=False)
    assert run.history["accuracy"][-1] > 0.9
    model = run.model().eval()
    assert isinstance(model, T5)
    out = model.generate(x[:64], max_new_tokens=7)
    assert (out[:, 1:] == y[:64]).float().mean().item() > 0.9
    with pytest.raises(ValueError, match="labels"):
        train(tc, (x, torch.full((512, 7), -5)), tmp_path / "bad", progress=False)


def test_dropout_keeps_1_minus_p_scales_and_repeats_from_its_seed():
    from vaetransfer import _C

    x = torch.ones(400_000, requires_grad=True)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    y = _C.nn.dropout(x, 0.3, 5)
    assert torch.equal(torch.get_rng_state(), state)  # the global stream is not used
    kept = y.detach() != 0
    assert abs(kept.double().mean().item() - 0.7) < 4 * math.sqrt(0.21 / 400_000)
    assert torch.allclose(y.detach()[kept], torch.full((int(kept.sum()),), 1 / 0.7))
    assert torch.equal(_C.nn.dropout(x, 0.3, 5), y) and not torch.equal(_C.nn.dropout(x, 0.3, 6), y)
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # the gradient is the same mask
    # Neighbouring elements are independent: the pair (kept i, kept i+1) has probability 0.49.
    both = (kept[:-1] & kept[1:]).double().mean().item()
    assert abs(both - 0.49) < 0.01
    assert torch.equal(_C.nn.dropout(x, 0.0, 1), x)
    with pytest.raises(ValueError, match="dropout_rate"):
        _C.nn.dropout(x, 1.0, 1)


def test_training_mode_dropout_changes_outputs_and_eval_does_not():
    model = T5(tiny(dropout_rate=0.2), seed=0)
    ids, mask, labels = batch()
    model.train()
    torch.manual_seed(1)
    a = model(ids, mask, labels=labels)
    torch.manual_seed(1)
    b = model(ids, mask, labels=labels)
    c = model(ids, mask, labels=labels)
    assert torch.equal(a, b) and not torch.equal(a, c)
    model.eval()
    assert torch.equal(model(ids, mask, labels=labels), model(ids, mask, labels=labels))


def test_similarity_measures_run_on_t5_layers():
    from vaetransfer import similarity as sim

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, VOCAB, (40, 10), generator=g)
    ids[::3, 7:] = 0
    a = T5(tiny(), seed=0).eval().pooled_activations(ids)
    b = T5(tiny(), seed=1).eval().pooled_activations(ids)
    same = sim.similarity_matrix(a, a, "cka")
    other = sim.similarity_matrix(a, b, "cka")
    values = torch.as_tensor(same.values)
    assert values.shape == (9, 9)  # 2 + 2 blocks: 9 named layers
    torch.testing.assert_close(torch.diagonal(values), torch.ones(9, dtype=values.dtype), rtol=0, atol=1e-6)
    # Different seeds: the embeddings are independent random tables, so their CKA is far from 1.
    assert torch.as_tensor(other.values)[0, 0].item() < 0.9
