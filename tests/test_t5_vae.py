"""The T5-VAE bottleneck of the core against a plain-PyTorch twin built on transformers' T5 with
the same weights, and the properties the paper's model needs (and the public code broke)."""
from __future__ import annotations

import pytest
import torch

from vaetransfer.text import T5, T5Config, T5VAE, T5VAEConfig, pad_pair

transformers = pytest.importorskip("transformers")

VOCAB = 64


def t5_config(**kw) -> T5Config:
    base = dict(vocab_size=VOCAB, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=3, dropout_rate=0.0,
                feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    base.update(kw)
    return T5Config(**base)


def vae(pooling="mean", injection="cross-attention", pool_layers="all", seed=1, **kw) -> T5VAE:
    return T5VAE(T5VAEConfig(t5_config(**kw), latent_dim=5, pooling=pooling, pool_layers=pool_layers,
                             injection=injection), seed=seed).eval()


def batch(b=4, s=9, t=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (b, s), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    mask[3, 2:] = 0
    dec = torch.randint(3, VOCAB, (b, t), generator=g)
    dec[:, 0] = 0
    return ids * mask, mask, dec


class _Fixed(torch.nn.Module):
    """Stands in for a cross-attention key/value projection: returns the latent memory."""

    def __init__(self, t):
        super().__init__()
        self.t = t

    def forward(self, _):
        return self.t


def twin(model: T5VAE, ids, mask, dec, z, tmp_path, pool_layers="all"):
    """The paper's T5-VAE written on transformers' T5 with our weights: μ, log σ and the logits."""
    sd = model.state_dict()
    t5 = T5(model.t5_config, seed=0)
    t5.load_state_dict({k: v for k, v in sd.items() if k in t5.parameter_names})
    t5.save_pretrained(tmp_path)
    hf = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path, attn_implementation="eager").eval()
    with torch.no_grad():
        enc = hf.encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        states = torch.stack(enc.hidden_states[1:] if pool_layers == "all" else enc.hidden_states[-1:])
        w = mask.view(1, *mask.shape, 1).to(states.dtype)
        if model._impl.pooling == "mean":
            h = (states * w).sum((0, 2)) / (w.sum((0, 2)) * states.shape[0])
        else:
            h = states.masked_fill(w == 0, -float("inf")).amax((0, 2))
        mean = h @ sd["bottleneck.mean.weight"].T + sd["bottleneck.mean.bias"]
        log_sigma = h @ sd["bottleneck.log_sigma.weight"].T + sd["bottleneck.log_sigma.bias"]
        c = model.t5_config
        memory = (z @ sd["memory_projection.weight"].T + sd["memory_projection.bias"]).view(
            len(z), c.num_decoder_layers, c.num_heads * c.d_kv)
        for l, block in enumerate(hf.decoder.block):  # Eq. 5: K = V = z W_proj, block l's slice
            block.layer[1].EncDecAttention.k = _Fixed(memory[:, l:l + 1])
            block.layer[1].EncDecAttention.v = _Fixed(memory[:, l:l + 1])
        out = hf.decoder(input_ids=dec, encoder_hidden_states=torch.zeros(len(z), 1, c.d_model),
                         encoder_attention_mask=torch.ones(len(z), 1), use_cache=False)
        logits = hf.lm_head(out.last_hidden_state)
    return mean, log_sigma, logits


@pytest.mark.parametrize("pooling,pool_layers", [("mean", "all"), ("max", "all"), ("mean", "last")])
def test_bottleneck_equals_a_transformers_twin(tmp_path, pooling, pool_layers):
    model = vae(pooling, pool_layers=pool_layers)
    ids, mask, dec = batch()
    mean, log_sigma = model.posterior(ids, mask)
    eps = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    z = mean + log_sigma.exp() * eps
    t_mean, t_log_sigma, t_logits = twin(model, ids, mask, dec, z, tmp_path, pool_layers)
    torch.testing.assert_close(mean, t_mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(log_sigma, t_log_sigma, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.decode_latent(dec, z), t_logits, rtol=1e-5, atol=1e-5)
    # The generic layer pass gives the same with the same noise.
    acts = model.activations(pad_pair(ids, dec), ["sampled", "logits"], flatten=False, seed=0)
    noise = model.noise(4, seed=0)
    torch.testing.assert_close(acts["sampled"], mean + log_sigma.exp() * noise, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_pooling_ignores_padding(pooling):
    model = vae(pooling)
    ids, mask, _ = batch()
    mean, log_sigma = model.posterior(ids, mask)
    # More padding (with any token ids under it) changes nothing.
    longer = torch.cat([ids, torch.randint(3, VOCAB, (4, 5))], 1)
    longer_mask = torch.cat([mask, torch.zeros(4, 5, dtype=torch.long)], 1)
    m2, s2 = model.posterior(longer, longer_mask)
    torch.testing.assert_close(m2, mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(s2, log_sigma, rtol=1e-5, atol=1e-6)
    # ... while the tokens under the mask of the original batch are ignored too.
    scrambled = ids.masked_fill(mask == 0, 7)
    torch.testing.assert_close(model.posterior(scrambled, mask)[0], mean, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("injection", ["cross-attention", "prefix"])
def test_reconstruction_does_not_depend_on_the_batch(injection):
    model = vae("max", injection)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, VOCAB, (8, 7), generator=g)
    dec = torch.cat([torch.zeros(8, 1, dtype=torch.long), ids[:, :-1]], 1)
    mean, _ = model.posterior(ids)
    together = model.decode_latent(dec, mean)
    for i in range(8):
        alone = model.decode_latent(dec[i:i + 1], mean[i:i + 1])
        torch.testing.assert_close(together[i:i + 1], alone, rtol=1e-5, atol=1e-5)
    # ... and the latent really is the memory: another sentence's z changes the logits.
    assert not torch.allclose(model.decode_latent(dec[:1], mean[1:2]), together[:1])


@pytest.mark.parametrize("injection", ["cross-attention", "prefix"])
def test_cached_generation_equals_teacher_forcing(injection):
    model = vae("mean", injection, initializer_factor=3.0)
    z = torch.randn(3, 5, generator=torch.Generator().manual_seed(2)) * 3
    out = model.generate_latent(z, max_new_tokens=8)
    logits = model.decode_latent(out[:, :-1], z)
    live = torch.cumsum(out[:, :-1].eq(1).long(), 1).eq(0)
    assert torch.equal(logits.argmax(-1)[live], out[:, 1:][live])


def test_prefix_injection_is_a_first_self_attention_position():
    # With the prefix, the cross-attention weights are unused; with cross-attention they are used.
    for injection, used in (("prefix", False), ("cross-attention", True)):
        model = vae("mean", injection)
        ids, mask, dec = batch()
        z = model.posterior(ids, mask)[0]
        before = model.decode_latent(dec, z)
        state = model.state_dict()
        state = {k: (v * 2 if "EncDecAttention.o" in k else v) for k, v in state.items()}
        model.load_state_dict(state)
        assert torch.allclose(model.decode_latent(dec, z), before) != used


def test_from_t5_keeps_the_pretrained_weights_and_groups_cover_the_bottleneck(tmp_path):
    t5 = T5(t5_config(), seed=4)
    model = T5VAE.from_t5(t5, latent_dim=7, pooling="max", seed=2)
    assert model.latent_dim == 7
    for k, v in t5.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    assert model.group("bottleneck") == ["bottleneck.mean.weight", "bottleneck.mean.bias",
                                         "bottleneck.log_sigma.weight", "bottleneck.log_sigma.bias"]
    assert model.group("memory_projection") == ["memory_projection.weight", "memory_projection.bias"]
    # The posterior starts at unit variance whatever the pooled states' scale (log σ = 0).
    assert not model.named_parameters()["bottleneck.log_sigma.weight"].any()
    assert not model.named_parameters()["bottleneck.log_sigma.bias"].any()
    x = torch.randint(3, 40, (5, 9))
    assert not model.posterior(x, torch.ones_like(x))[1].any()
    # Two seeds: two bottlenecks.
    other = T5VAE.from_t5(t5, latent_dim=7, pooling="max", seed=3)
    assert not torch.equal(other.named_parameters()["bottleneck.mean.weight"],
                           model.named_parameters()["bottleneck.mean.weight"])
    t5.save_pretrained(tmp_path)
    from_folder = T5VAE.from_t5(tmp_path, latent_dim=7, pooling="max", seed=2)
    assert all(torch.equal(from_folder.state_dict()[k], v) for k, v in model.state_dict().items())


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="pooling"):
        vae("median")
    with pytest.raises(ValueError, match="injection"):
        vae("mean", "memory")
    with pytest.raises(ValueError, match="pool_layers"):
        vae("mean", pool_layers="first")
    model = vae()
    with pytest.raises(ValueError, match="z"):
        model.generate_latent(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="z"):
        model.decode_latent(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4))
