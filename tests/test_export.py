"""Plain-PyTorch classifier twins: names, shapes, BatchNorm bookkeeping, block order and the
baseline training loop. Self-consistency only (nothing here depends on the C++ classifiers)."""
import math
import pytest
import torch
import torch.nn.functional as F

from reference_torch import train_python_classifier
from vaetransfer.export import ReferenceConv4Classifier, ReferenceConvClassifier, ReferenceMLPClassifier, ReferenceVAE

BN_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def _bn_state(model):
    return {k: v.clone() for k, v in model.state_dict().items() if k.rsplit(".", 1)[-1] in BN_BUFFERS}


# ---------------------------------------------------------------- 4-block conv net
def test_conv4_names_and_shapes():
    model = ReferenceConv4Classifier()
    expected = []
    for i in range(1, 5):
        expected += [f"block{i}.conv.weight", f"block{i}.conv.bias", f"block{i}.bn.weight", f"block{i}.bn.bias"]
        expected += [f"block{i}.bn.{b}" for b in BN_BUFFERS]
    expected += ["logits.weight", "logits.bias"]
    assert list(model.state_dict()) == expected
    assert [n for n, _ in model.named_parameters()] == [k for k in expected if k.rsplit(".", 1)[-1] not in BN_BUFFERS]
    sd = model.state_dict()
    assert sd["block1.conv.weight"].shape == (64, 3, 3, 3) and sd["block2.conv.weight"].shape == (64, 64, 3, 3)
    assert sd["block4.bn.running_var"].shape == (64,)
    assert sd["logits.weight"].shape == (10, 64 * 2 * 2)  # 32 → 16 → 8 → 4 → 2
    bn = model.block1.bn
    assert (bn.eps, bn.momentum) == (1e-5, 0.1)
    conv = model.block3.conv
    assert (conv.kernel_size, conv.padding, conv.stride, conv.bias is not None) == ((3, 3), (1, 1), (1, 1), True)

    model.eval()
    x = torch.randn(5, 3, 32, 32)
    acts = model.activations(x)
    assert list(acts) == ["input", "block1", "block2", "block3", "block4", "logits"]
    assert [a.shape[1] for a in acts.values()] == [3 * 32 * 32, 64 * 16 * 16, 64 * 8 * 8, 64 * 4 * 4, 64 * 2 * 2, 10]
    assert all(a.shape[0] == 5 for a in acts.values())
    assert torch.equal(acts["logits"], model(x))
    assert acts["block4"].min() >= 0  # after ReLU and pooling

    odd = ReferenceConv4Classifier((1, 28, 28), num_classes=3, channels=8, blocks=3)  # 28 → 14 → 7 → 3
    assert odd.state_dict()["logits.weight"].shape == (3, 8 * 3 * 3)
    assert "block4.conv.weight" not in odd.state_dict() and odd(torch.randn(2, 1, 28, 28)).shape == (2, 3)


def test_conv4_rejects_bad_arguments():
    with pytest.raises(ValueError, match="block_order"):
        ReferenceConv4Classifier(block_order="conv-pool-bn-relu")
    with pytest.raises(ValueError, match="too small"):
        ReferenceConv4Classifier((3, 8, 8))


@pytest.mark.parametrize("make", [
    lambda: ReferenceConv4Classifier((3, 16, 16), num_classes=4, channels=8),
    lambda: ReferenceMLPClassifier((3, 4, 4), 4, hidden=(16, 8), batch_norm=True),
])
def test_batchnorm_buffers_update_in_train_mode_only(make):
    model = make()
    x = torch.randn(6, 3, 16, 16) if isinstance(model, ReferenceConv4Classifier) else torch.randn(6, 3, 4, 4)
    before = _bn_state(model)
    assert before and all(int(v) == 0 for k, v in before.items() if k.endswith("num_batches_tracked"))
    model.eval()
    model(x)
    model.activations(x)
    for k, v in _bn_state(model).items():
        assert torch.equal(v, before[k]), k
    model.train()
    model(x)
    after = _bn_state(model)
    for k, v in after.items():
        if k.endswith("num_batches_tracked"):
            assert int(v) == 1, k
        else:
            assert not torch.equal(v, before[k]), k


def test_block_order_changes_the_output():
    paper = ReferenceConv4Classifier((3, 16, 16), num_classes=5, channels=8)
    follow_up = ReferenceConv4Classifier((3, 16, 16), num_classes=5, channels=8, block_order="conv-relu-bn-pool")
    assert list(paper.state_dict()) == list(follow_up.state_dict())  # same names: weights load across orders
    with torch.no_grad():  # non-trivial BN affine parameters and running statistics
        for m in (paper.block1.bn, paper.block2.bn, paper.block3.bn, paper.block4.bn):
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.5, 0.5)
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 2.0)
    follow_up.load_state_dict(paper.state_dict())
    x = torch.randn(4, 3, 16, 16)
    for mode in ("eval", "train"):
        getattr(paper, mode)()
        getattr(follow_up, mode)()
        assert not torch.allclose(paper(x), follow_up(x), atol=1e-4), mode
    # In the paper's order BN sees the raw convolution, in the follow-up's the ReLU output.
    a = ReferenceConv4Classifier((3, 16, 16), channels=8)
    b = ReferenceConv4Classifier((3, 16, 16), channels=8, block_order="conv-relu-bn-pool")
    b.load_state_dict(a.state_dict())
    a.train(), b.train()
    a(x), b(x)
    assert (b.block1.bn.running_mean >= 0).all() and (a.block1.bn.running_mean < 0).any()
    # Train-mode output of the paper's block 1 by hand.
    blk = a.block1
    h = F.conv2d(x, blk.conv.weight, blk.conv.bias, padding=1)
    h = F.batch_norm(h, None, None, blk.bn.weight, blk.bn.bias, training=True, eps=1e-5)
    torch.testing.assert_close(a.activations(x)["block1"], F.max_pool2d(F.relu(h), 2).flatten(1))


# ---------------------------------------------------------------- conv trunk classifier
def test_conv_classifier_names_shapes_and_vae_trunk():
    model = ReferenceConvClassifier((1, 64, 64), 3)
    expected = [f"enc{i}.{p}" for i in range(1, 6) for p in ("weight", "bias")] + ["logits.weight", "logits.bias"]
    assert list(model.state_dict()) == expected
    sd = model.state_dict()
    assert [sd[f"enc{i}.weight"].shape[0] for i in range(1, 5)] == [32, 32, 64, 64]
    assert sd["enc1.weight"].shape == (32, 1, 4, 4) and sd["enc5.weight"].shape == (256, 64 * 4 * 4)
    assert sd["logits.weight"].shape == (3, 256)
    assert [model.enc1.stride, model.enc1.padding] == [(2, 2), (1, 1)]
    x = torch.rand(4, 1, 64, 64)
    acts = model.activations(x)
    assert list(acts) == ["input", "enc1", "enc2", "enc3", "enc4", "enc5", "logits"]
    assert [a.shape[1] for a in acts.values()] == [4096, 32 * 32 * 32, 32 * 16 * 16, 64 * 8 * 8, 64 * 4 * 4, 256, 3]
    assert torch.equal(acts["logits"], model(x))

    public = ReferenceConvClassifier((3, 64, 64), 5, kernel_sizes=(4, 4, 2, 2))  # disentanglement_lib's kernels
    assert public.state_dict()["enc3.weight"].shape == (64, 32, 2, 2) and public.enc3.padding == (0, 0)
    assert public.state_dict()["enc5.weight"].shape == (256, 1024) and public(torch.rand(2, 3, 64, 64)).shape == (2, 5)
    with pytest.raises(TypeError, match="num_classes"):
        ReferenceConvClassifier((1, 64, 64))

    # The trunk has the VAE encoder's names: a VAE's weights load and give the same activations.
    vae = ReferenceVAE("conv", (1, 64, 64))
    result = model.load_state_dict(vae.state_dict(), strict=False)
    assert sorted(result.missing_keys) == ["logits.bias", "logits.weight"]
    assert all(k.split(".")[0] in ("mean", "logvar") or k.startswith("dec") for k in result.unexpected_keys)
    vae_acts = vae.activations(x, torch.zeros(4, 10))
    acts = model.activations(x)
    for name in ("input", "enc1", "enc2", "enc3", "enc4", "enc5"):
        assert torch.equal(acts[name], vae_acts[name]), name


# ---------------------------------------------------------------- MLP classifier
def test_mlp_names_shapes_and_activations():
    plain = ReferenceMLPClassifier((3, 4, 4), 7, hidden=(32, 16))
    assert list(plain.state_dict()) == ["fc1.linear.weight", "fc1.linear.bias", "fc2.linear.weight",
                                        "fc2.linear.bias", "logits.weight", "logits.bias"]
    assert plain.state_dict()["fc1.linear.weight"].shape == (32, 48)
    assert plain.state_dict()["logits.weight"].shape == (7, 16)
    bn = ReferenceMLPClassifier((3, 4, 4), 7, hidden=(32, 16), batch_norm=True)
    expected = []
    for i in (1, 2):
        expected += [f"fc{i}.linear.weight", f"fc{i}.linear.bias", f"fc{i}.bn.weight", f"fc{i}.bn.bias"]
        expected += [f"fc{i}.bn.{b}" for b in BN_BUFFERS]
    assert list(bn.state_dict()) == expected + ["logits.weight", "logits.bias"]
    assert isinstance(bn.fc1.bn, torch.nn.BatchNorm1d) and (bn.fc1.bn.eps, bn.fc1.bn.momentum) == (1e-5, 0.1)

    x = torch.randn(5, 3, 4, 4)
    acts = plain.activations(x)
    assert list(acts) == ["input", "fc1", "fc2", "logits"]
    assert [a.shape for a in acts.values()] == [(5, 48), (5, 32), (5, 16), (5, 7)]
    assert torch.equal(acts["input"], x.flatten(1)) and torch.equal(acts["logits"], plain(x))
    assert acts["fc1"].min() >= 0
    manual = F.relu(F.linear(x.flatten(1), plain.fc1.linear.weight, plain.fc1.linear.bias))
    torch.testing.assert_close(acts["fc1"], manual)

    tanh = ReferenceMLPClassifier((3, 4, 4), 7, hidden=(32, 16), activation="tanh")
    tanh.load_state_dict(plain.state_dict())
    t_acts = tanh.activations(x)
    torch.testing.assert_close(t_acts["fc1"], torch.tanh(F.linear(x.flatten(1), plain.fc1.linear.weight,
                                                                    plain.fc1.linear.bias)))
    assert t_acts["fc1"].min() < 0 and not torch.allclose(tanh(x), plain(x))

    bn.eval()  # BN sits between the linear map and the activation
    layer = bn.fc1
    with torch.no_grad():
        layer.bn.running_mean.uniform_(-1, 1)
        layer.bn.running_var.uniform_(0.5, 2)
    h = F.batch_norm(layer.linear(x.flatten(1)), layer.bn.running_mean, layer.bn.running_var, layer.bn.weight,
                     layer.bn.bias, training=False)
    torch.testing.assert_close(bn.activations(x)["fc1"], F.relu(h))

    linear = ReferenceMLPClassifier((6,), 2, hidden=())
    assert list(linear.state_dict()) == ["logits.weight", "logits.bias"]
    assert list(linear.activations(torch.randn(2, 6))) == ["input", "logits"]
    with pytest.raises(ValueError, match="activation"):
        ReferenceMLPClassifier((6,), 2, activation="gelu")


# ---------------------------------------------------------------- training loop
def _blobs(n=256):
    """Two separable classes: 4×4 single-channel images, bright left half (0) or right half (1)."""
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(n) % 2
    images = torch.rand(n, 1, 4, 4, generator=g) * 0.3
    images[labels == 0, :, :, :2] += 0.7
    images[labels == 1, :, :, 2:] += 0.7
    return images, labels


@pytest.mark.parametrize("make, lr", [
    (lambda: ReferenceMLPClassifier((1, 4, 4), 2, hidden=(16,)), 0.05),
    (lambda: ReferenceMLPClassifier((1, 4, 4), 2, hidden=(16,), batch_norm=True, activation="tanh"), 0.05),
    (lambda: ReferenceConv4Classifier((1, 4, 4), 2, channels=8, blocks=2), 0.05),
])
def test_train_python_classifier_learns_a_separable_problem(make, lr):
    images, labels = _blobs()
    torch.manual_seed(1)
    model = make()
    losses = train_python_classifier(model, images, labels, steps=150, batch_size=32, lr=lr, seed=2)
    assert len(losses) == 150 and all(l == l for l in losses)
    first, last = losses[0], sum(losses[-10:]) / 10
    assert first > 0.4 and last < 0.25 * first, (first, last)  # from about log 2
    model.eval()
    accuracy = (model(images).argmax(1) == labels).float().mean()
    assert accuracy > 0.95
    # Same initial weights and seed: the same losses.
    torch.manual_seed(1)
    again = train_python_classifier(make(), images, labels, steps=150, batch_size=32, lr=lr, seed=2)
    assert again == losses


def test_train_python_classifier_scales_uint8_inputs_and_checks_lengths():
    images, labels = _blobs(64)
    u8 = (images * 255).round().to(torch.uint8)
    torch.manual_seed(0)
    a = ReferenceMLPClassifier((1, 4, 4), 2, hidden=(8,))
    b = ReferenceMLPClassifier((1, 4, 4), 2, hidden=(8,))
    b.load_state_dict(a.state_dict())
    la = train_python_classifier(a, u8, labels, steps=5, data_scale=1 / 255)
    lb = train_python_classifier(b, u8.float() / 255, labels, steps=5)
    assert la == pytest.approx(lb, rel=1e-5)
    with pytest.raises(ValueError, match="length"):
        train_python_classifier(a, images, labels[:10], steps=1)


# ---------------------------------------------------------------- β-TC-VAE (plain torch)
def test_reference_tc_equals_the_core_estimator_and_brute_force():
    """The cross-check's TC (transfer study) is independent code: it must equal the core's
    minibatch-weighted estimator, and a loop over the formula, on the same samples."""
    import math

    from vaetransfer import estimators
    from vaetransfer.studies.transfer.twin_training import beta_tc_vae_loss, kl_per_dim, minibatch_weighted_tc, reconstruction_loss

    g = torch.Generator().manual_seed(0)
    b, d, n = 12, 4, 5000
    mean = torch.randn(b, d, generator=g, dtype=torch.float64)
    logvar = 0.5 * torch.randn(b, d, generator=g, dtype=torch.float64)
    z = mean + (0.5 * logvar).exp() * torch.randn(b, d, generator=g, dtype=torch.float64)
    ours = minibatch_weighted_tc(z, mean, logvar, n)
    core = estimators.minibatch_total_correlation(z, mean, logvar, dataset_size=n, sampling="mws").tc
    assert float(ours) == pytest.approx(float(core), rel=1e-10)

    def log_normal(v, m, lv):
        return -0.5 * (math.log(2 * math.pi) + lv + (v - m) ** 2 / math.exp(lv))

    total = 0.0
    for i in range(b):
        joint = [sum(log_normal(float(z[i, j]), float(mean[k, j]), float(logvar[k, j])) for j in range(d))
                 for k in range(b)]
        log_qz = math.log(sum(math.exp(v) for v in joint)) - math.log(n * b)
        log_prod = sum(math.log(sum(math.exp(log_normal(float(z[i, j]), float(mean[k, j]), float(logvar[k, j])))
                                    for k in range(b))) - math.log(n * b) for j in range(d))
        total += log_qz - log_prod
    assert float(ours) == pytest.approx(total / b, rel=1e-10)
    x = torch.rand(b, 1, 4, 4, generator=g, dtype=torch.float64).round()
    logits = torch.randn(b, 1, 4, 4, generator=g, dtype=torch.float64)
    loss = beta_tc_vae_loss(x, logits, mean, logvar, z, 6.0, n)
    assert float(loss) == pytest.approx(float(reconstruction_loss(x, logits) + kl_per_dim(mean, logvar).sum() + 5 * ours))


def test_train_python_trains_a_beta_tc_vae_and_names_a_bad_objective():
    from vaetransfer.studies.transfer.twin_training import train_python

    torch.manual_seed(0)
    data = (torch.rand(256, 1, 64, 64) > 0.8).float()
    losses = train_python(ReferenceVAE("conv"), data, steps=20, batch_size=32, beta=6.0, lr=1e-3,
                          objective="beta-tc-vae")
    assert len(losses) == 20 and all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    with pytest.raises(ValueError, match="objective"):
        train_python(ReferenceVAE("conv"), data, steps=1, batch_size=8, objective="dip-vae")
