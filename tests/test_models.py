"""The model interface over every family: classifiers against their plain-PyTorch twins (train and
eval mode, BatchNorm statistics after an optimiser step), groups, re-initialisation, state with
buffers, the registry, and activations that do not depend on the chunk size."""
from __future__ import annotations

import pytest
import torch

import vaetransfer as vt
from vaetransfer import _C

CLASSIFIERS = [
    ("conv4", dict(input_shape=(3, 32, 32), num_classes=10)),
    ("conv4", dict(input_shape=(3, 32, 32), num_classes=5, channels=16, blocks=3, block_order="conv-relu-bn-pool")),
    ("conv-classifier", dict(input_shape=(1, 64, 64), num_classes=3)),
    ("conv-classifier", dict(input_shape=(3, 64, 64), num_classes=4, kernel_sizes=(4, 4, 2, 2))),
    ("mlp-classifier", dict(input_shape=(12,), num_classes=2, hidden=(10, 7), batch_norm=True, activation="tanh")),
    ("mlp-classifier", dict(input_shape=(1, 8, 8), num_classes=2, depth=1, width=16, batch_norm=True)),
    ("mlp-classifier", dict(input_shape=(6,), num_classes=3, hidden=(5,))),
]


def _classifier(arch, kw, seed=0):
    return vt.build_model(vt.ModelConfig(architecture=arch, **kw), seed=seed)


def _close(a, b, tol=1e-5):
    scale = max(1.0, float(b.abs().max())) if b.numel() else 1.0
    return float((a - b).abs().max()) <= tol * scale


@pytest.mark.parametrize("arch,kw", CLASSIFIERS, ids=[f"{a}-{i}" for i, (a, _) in enumerate(CLASSIFIERS)])
def test_classifier_matches_torch_twin_in_both_modes_and_after_a_step(arch, kw):
    m = _classifier(arch, kw)
    assert isinstance(m, vt.Classifier) and m.family == "classifier"
    twin = m.to_torch()
    assert [n for n, _ in twin.named_parameters()] == m.parameter_names
    assert sorted(n for n, _ in twin.named_buffers()) == sorted(m.buffer_names)
    g = torch.Generator().manual_seed(1)
    x = torch.rand(6, *m.input_shape, generator=g)
    y = torch.randint(0, m.num_classes, (6,), generator=g)
    # Train mode: batch statistics; one SGD-momentum step on both sides.
    m.train()
    twin.train()
    ours = _C.train.Optimizer(vt.OptimizerConfig(name="sgd", lr=0.05, momentum=0.9).to_spec(), m._impl)
    theirs = torch.optim.SGD(twin.parameters(), lr=0.05, momentum=0.9)
    # Conv families run channels-last (NHWC) in the core: equal up to float32 rounding, which
    # BatchNorm over 6 examples amplifies a little after a step.
    for _ in range(2):
        out, ref = m.forward(x), twin(x)
        assert out.shape == (6, m.num_classes) and _close(out.detach(), ref.detach(), 1e-4)
        ours.zero_grad()
        theirs.zero_grad()
        torch.nn.functional.cross_entropy(out, y).backward()
        torch.nn.functional.cross_entropy(ref, y).backward()
        for (name, p), (_, q) in zip(m.named_parameters().items(), twin.named_parameters()):
            assert _close(p.grad, q.grad, 1e-3), name
        ours.step()
        theirs.step()
    twin_buffers = dict(twin.named_buffers())
    for name, b in m.named_buffers().items():
        assert torch.allclose(b.double(), twin_buffers[name].double(), atol=1e-5), name
    # Eval mode: running statistics, which the forward leaves untouched.
    m.eval()
    twin.eval()
    before = m.state_dict()
    with torch.no_grad():
        assert _close(m.forward(x), twin(x), 1e-4)
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    # Layer activations equal the twin's.
    acts = m.activations(x)
    with torch.no_grad():
        expected = twin.activations(x)
    assert list(acts) == list(expected) == m.layer_names
    for name in acts:
        assert _close(acts[name], expected[name], 1e-4), name


def test_conv4_names_parts_and_block_order():
    m = _classifier("conv4", {})
    assert m.layer_names == ["input", "block1", "block2", "block3", "block4", "logits"]
    assert [p for _, p in m.layers] == ["input", "encoder", "encoder", "encoder", "encoder", "head"]
    assert m.state_dict()["block1.conv.weight"].shape == (64, 3, 3, 3)
    assert m.state_dict()["logits.weight"].shape == (10, 64 * 2 * 2)
    assert set(m.group("block2.bn")) == {"block2.bn.weight", "block2.bn.bias"}
    assert set(m.group("head")) == {"logits.weight", "logits.bias"}
    other = _classifier("conv4", {"block_order": "conv-relu-bn-pool"})
    other.load_state_dict(m.state_dict())
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    assert not torch.allclose(m.forward(x), other.forward(x))  # the order matters
    with pytest.raises(vt.ArgumentError) as e:
        _classifier("conv4", {"block_order": "bn-first"})
    assert e.value.argument == "block_order"


def test_conv_classifier_shares_the_vae_trunk():
    vae = vt.VAE(vt.ModelConfig(architecture="conv"), seed=3)
    clf = _classifier("conv-classifier", {"num_classes": 3}, seed=4)
    trunk = {k: v for k, v in vae.state_dict().items() if k.startswith("enc")}
    assert set(trunk) == set(clf.group("encoder"))
    clf.load_state_dict({**clf.state_dict(), **trunk})
    x = torch.rand(5, 1, 64, 64, generator=torch.Generator().manual_seed(0))
    a, b = vae.activations(x, ["enc5"]), clf.activations(x, ["enc5"])
    assert torch.equal(a["enc5"], b["enc5"])


def test_reinitialize_resets_batch_norm_and_state_includes_buffers():
    m = _classifier("mlp-classifier", {"input_shape": (4,), "hidden": (3,), "batch_norm": True, "num_classes": 2})
    with torch.no_grad():
        m.named_buffers()["fc1.bn.running_mean"].fill_(2.0)
        m.named_parameters()["fc1.bn.weight"].fill_(5.0)
    state = m.state_dict()
    assert {"fc1.bn.running_mean", "fc1.bn.running_var", "fc1.bn.num_batches_tracked"} <= set(state)
    m.reinitialize("fc1.bn", seed=1)
    assert torch.equal(m.named_buffers()["fc1.bn.running_mean"], torch.zeros(3))
    assert torch.equal(m.named_parameters()["fc1.bn.weight"], torch.ones(3))
    m.load_state_dict(state)  # buffers come back with the state
    assert torch.equal(m.named_buffers()["fc1.bn.running_mean"], torch.full((3,), 2.0))
    with pytest.raises(vt.ArgumentError) as e:
        m.load_state_dict({k: v for k, v in state.items() if k != "fc1.bn.running_var"})
    assert e.value.argument == "state" and "fc1.bn.running_var" in str(e.value)


def test_registry_lists_every_family_and_rejects_foreign_parameters():
    names = {e["name"]: e for e in vt.nn.architectures()}
    assert {"conv", "fc", "mlp", "cnn", "conv4", "conv-classifier", "mlp-classifier"} <= set(names)
    assert {p["name"] for p in names["conv4"]["params"]} >= {"channels", "blocks", "block_order", "num_classes"}
    with pytest.raises(vt.ArgumentError) as e:
        vt.build_model(vt.ModelConfig(architecture="conv4", latent_dim=10))
    assert e.value.argument == "latent_dim"
    with pytest.raises(vt.ArgumentTypeError) as e:
        vt.build_model(vt.ModelConfig(architecture="conv4", channels=6.5))
    assert e.value.argument == "channels"
    with pytest.raises(vt.ArgumentError) as e:
        vt.VAE(vt.ModelConfig(architecture="conv4"))
    assert e.value.argument == "config"


def test_building_a_model_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    a = torch.rand(3)
    torch.manual_seed(123)
    _classifier("conv4", {})
    assert torch.equal(torch.rand(3), a)


@pytest.mark.parametrize("use_mean", [False, True])
def test_vae_activations_do_not_depend_on_the_chunk_size(use_mean):
    m = vt.VAE(vt.ModelConfig(architecture="mlp", input_shape=(12,), hidden=(8,), latent_dim=3), seed=0)
    x = torch.rand(530, 12, generator=torch.Generator().manual_seed(0))
    layers = ["sampled", "dec2"]
    ref = vt.activations.activations(m, x, layers, batch_size=530, seed=7, use_mean=use_mean)
    # Same noise whatever the chunking; values agree to float32 rounding (BLAS blocks by row count).
    for bs in (1, 7, 256):
        got = vt.activations.activations(m, x, layers, batch_size=bs, seed=7, use_mean=use_mean)
        for k in layers:
            assert torch.allclose(got[k], ref[k], rtol=0, atol=1e-5), (bs, k)
    core = m.activations(x, layers, chunk_size=13, seed=7, use_mean=use_mean)
    for k in layers:
        assert torch.allclose(core[k], ref[k], rtol=0, atol=1e-5), k
    s = ref["sampled"]
    if use_mean:
        assert torch.equal(s, m.activations(x, ["mean"])["mean"])
    else:  # one noise stream: rows do not repeat every chunk (the bug this replaces)
        assert not torch.allclose(s[:256], s[256:512])
        other = vt.activations.activations(m, x, layers, batch_size=256, seed=8)
        assert not torch.equal(other["sampled"], s)


def test_activations_of_a_plain_module_by_hooks():
    twin = _classifier("conv4", {}).to_torch().eval()
    x = torch.rand(9, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    acts = vt.activations.activations(twin, x, ["input", "block2", "logits"], batch_size=4)
    assert list(acts) == ["input", "block2", "logits"] and acts["block2"].shape == (9, 64 * 8 * 8)
    assert vt.similarity.activations is vt.activations.activations


def test_model_configs_come_from_the_core_registry():
    """ModelConfig declares no parameter of its own: names, defaults and checks are the core's."""
    from vaetransfer import nn

    c = nn.ModelConfig("mlp-classifier", input_shape=(12,), hidden=[10, 7], num_classes=3)
    assert c.input_shape == [12] and c.hidden == [10, 7]          # set values, tuples as lists
    entry = next(e for e in nn.architectures() if e["name"] == "mlp-classifier")
    defaults = {p["name"]: p["default"] for p in entry["params"]}
    assert c.width == defaults["width"] and c.residual == defaults["residual"]  # unset: the core's default
    assert c.latent_dim is None                                    # another architecture's parameter
    with pytest.raises(AttributeError):
        c.no_such_parameter
    assert nn.ModelConfig.from_dict(c.to_dict()) == c
    assert c.to_dict() == {"architecture": "mlp-classifier", "input_shape": [12], "hidden": [10, 7], "num_classes": 3}
    legacy = {"architecture": "mlp-classifier", "input_shape": [12], "options": {"residual": True}}
    assert nn.ModelConfig.from_dict(legacy) == nn.ModelConfig("mlp-classifier", input_shape=[12], residual=True)
    assert c.replace(num_classes=None, width=4) == nn.ModelConfig("mlp-classifier", input_shape=[12], hidden=[10, 7],
                                                                   width=4)
    with pytest.raises(vt.ArgumentError) as info:
        nn.build_model(nn.ModelConfig("mlp-classifier", input_shape=[12], kernel_sizes=[3]))
    assert "kernel_sizes" in str(info.value)
