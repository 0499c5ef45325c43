"""Evaluation in one place: each objective's per-example terms from the core (against brute force
from the models' own pieces), decoding given latents, and the importance-weighted log p(x) with the
core model as its decoder (against the callback estimator with the same draws)."""
import pytest
import torch

import vaetransfer
from vaetransfer import data, estimators, nn, objectives
from vaetransfer.text import T5Config, T5VAE, T5VAEConfig


@pytest.fixture(scope="module")
def vae_and_data():
    model = nn.build_model(nn.ModelConfig(), seed=0)
    ds = data.dsprites(range(0, data.DSPRITES_COUNT, 9000))  # 82 images
    x = ds.images.float() * ds.scale  # [N, 1, 64, 64]
    return model, ds, x


def test_vae_terms_are_the_objective_terms(vae_and_data):
    model, ds, x = vae_and_data
    ev = objectives.evaluate(model, objectives.TaskConfig("beta-vae", beta=4.0), ds, batch_size=16, seed=3)
    assert set(ev) == {"distortion", "rate", "neg_elbo", "mean", "logvar", "z"}
    assert ev["distortion"].shape == (82,) and ev["mean"].shape == (82, model.latent_dim)
    with torch.no_grad():
        mean, logvar = model.encode(x)
    torch.testing.assert_close(ev["mean"], mean)
    torch.testing.assert_close(ev["rate"], objectives.gaussian_kl(mean, logvar).sum(1))
    torch.testing.assert_close(ev["neg_elbo"], ev["distortion"] + ev["rate"])
    # The same seed gives the same draws; another seed other draws; the batch size does not matter
    # for the terms that do not sample.
    again = objectives.evaluate(model, "beta-vae", ds, batch_size=16, seed=3)
    torch.testing.assert_close(again["distortion"], ev["distortion"])
    other = objectives.evaluate(model, "beta-vae", ds, batch_size=16, seed=4)
    assert not torch.equal(other["distortion"], ev["distortion"])
    torch.testing.assert_close(objectives.evaluate(model, "beta-vae", ds, batch_size=50)["rate"], ev["rate"])
    # Given latents: the decoder only, −log p(x|z) by the Bernoulli likelihood.
    given = objectives.evaluate(model, "beta-vae", ds, z=mean)
    assert set(given) == {"distortion"}
    with torch.no_grad():
        logits = model.decode(mean)
    brute = torch.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="none").flatten(1).sum(1)
    torch.testing.assert_close(given["distortion"], brute, rtol=1e-5, atol=1e-3)
    assert not torch.allclose(ev["distortion"], given["distortion"])  # a sampled z is not the mean
    # The sampled distortion is the likelihood at the z it drew, a draw of q(z|x).
    torch.testing.assert_close(objectives.evaluate(model, "beta-vae", ds, z=ev["z"])["distortion"], ev["distortion"])
    standardised = (ev["z"] - mean) / (0.5 * logvar).exp()
    assert abs(float(standardised.mean())) < 0.2 and 0.8 < float(standardised.std()) < 1.2


def test_gaussian_likelihood_follows_the_objective(vae_and_data):
    model, ds, x = vae_and_data
    z = torch.zeros(len(x), model.latent_dim)
    ev = objectives.evaluate(model, objectives.TaskConfig("beta-vae", likelihood="gaussian", gaussian_std=0.5), ds, z=z)
    with torch.no_grad():
        means = model.decode(z)
    brute = (0.5 * ((x - means) / 0.5) ** 2 + torch.log(torch.tensor(0.5)) + 0.5 * torch.log(torch.tensor(2 * torch.pi)))
    torch.testing.assert_close(ev["distortion"], brute.flatten(1).sum(1), rtol=1e-5, atol=1e-2)


def test_classification_terms(tmp_path):
    model = nn.build_model(nn.ModelConfig("mlp-classifier", input_shape=[6], hidden=[5], num_classes=3), seed=1)
    x = torch.randn(40, 6)
    y = torch.randint(0, 3, (40,))
    ev = objectives.evaluate(model, "classification", (x, y), batch_size=7)
    logits = model.activations(x, ["logits"])["logits"]
    torch.testing.assert_close(ev["cross_entropy"], torch.nn.functional.cross_entropy(logits, y, reduction="none"))
    torch.testing.assert_close(ev["correct"], (logits.argmax(1) == y).float())
    with pytest.raises(vaetransfer.ArgumentError) as info:
        objectives.evaluate(model, "classification", x)
    assert info.value.argument in ("labels", "data")


def test_errors_are_named_and_the_mode_is_restored(vae_and_data):
    model, ds, _ = vae_and_data
    model.train()
    with pytest.raises(vaetransfer.ArgumentError) as info:
        objectives.evaluate(model, "forward-only", ds)
    assert info.value.argument == "objective"
    with pytest.raises(vaetransfer.ArgumentError) as info:
        objectives.evaluate(model, "beta-vae", ds, z=torch.zeros(3, model.latent_dim))
    assert info.value.argument == "z"
    with pytest.raises(vaetransfer.ArgumentError) as info:
        objectives.evaluate(model, "beta-vae", ds, batch_size=0)
    assert info.value.argument == "batch_size"
    with pytest.raises(vaetransfer.ArgumentError) as info:
        objectives.evaluate(model, "classification", ds)
    assert info.value.argument == "objective"  # a classification task on a VAE
    objectives.evaluate(model, "beta-vae", ds)
    assert model.training  # evaluation ran in eval mode and put the model back


def test_iw_log_likelihood_uses_the_core_decoder(vae_and_data):
    model, ds, x = vae_and_data
    ev = objectives.evaluate(model, "beta-vae", ds)
    mean, logvar = ev["mean"].double(), ev["logvar"].double()
    ours = objectives.importance_weighted_log_likelihood(model, "beta-vae", ds, mean=mean, logvar=logvar,
                                                         num_samples=30, samples_per_chunk=7, batch_size=100, seed=5)
    ref = estimators.importance_weighted_log_likelihood(x, mean, logvar, decoder=lambda z: model.decode(z.float()),
                                                        num_samples=30, samples_per_chunk=7, seed=5)
    torch.testing.assert_close(ours.log_px, ref.log_px, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours.elbo, ref.elbo, rtol=1e-6, atol=1e-6)
    assert bool((ours.log_px >= ours.elbo - 1e-9).all())


def _t5_vae():
    cfg = T5VAEConfig(T5Config(vocab_size=40, d_model=16, d_kv=4, d_ff=24, num_layers=1, num_heads=2,
                               dropout_rate=0.0), latent_dim=4)
    model = T5VAE(cfg, seed=0)
    g = torch.Generator().manual_seed(0)
    ids = torch.zeros(12, 9, dtype=torch.long)
    for i, n in enumerate(torch.randint(3, 8, (12,), generator=g).tolist()):
        ids[i, :n] = torch.randint(3, 40, (n,), generator=g)
        ids[i, n] = 1  # eos
    return model, ids


def test_t5_vae_terms_against_the_model_in_python():
    model, ids = _t5_vae()
    model.eval()
    ev = objectives.evaluate(model, "t5-vae", ids, batch_size=5, seed=0)
    assert set(ev) == {"reconstruction", "kl", "neg_elbo", "tokens", "mean", "logvar", "z"}
    mask = ids.ne(0)
    with torch.no_grad():
        mean, log_sigma = model.posterior(ids, mask)
    torch.testing.assert_close(ev["mean"], mean)
    torch.testing.assert_close(ev["logvar"], 2 * log_sigma)
    kl = 0.5 * (mean ** 2 + (2 * log_sigma).exp() - 1 - 2 * log_sigma)
    torch.testing.assert_close(ev["kl"], kl.sum(1))
    torch.testing.assert_close(ev["tokens"].float(), mask.sum(1).float())

    def nll(z):
        with torch.no_grad():
            logits = model.decode_latent(model.shift_right(ids.masked_fill(~mask, -100)), z)
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2).double(), ids, reduction="none")
        return (ce * mask).sum(1)

    given = objectives.evaluate(model, "t5-vae", ids, batch_size=5, z=mean)
    assert set(given) == {"reconstruction", "tokens"}
    torch.testing.assert_close(given["reconstruction"].double(), nll(mean), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ev["reconstruction"].double(), nll(ev["z"]), rtol=1e-6, atol=1e-6)
    iw = objectives.importance_weighted_log_likelihood(model, "t5-vae", ids, mean=mean.double(),
                                                       logvar=2 * log_sigma.double(), num_samples=8,
                                                       samples_per_chunk=3, batch_size=5, seed=1)
    assert iw.log_px.shape == (12,) and bool((iw.log_px >= iw.elbo - 1e-9).all())
    assert bool((iw.log_px < 0).all())
