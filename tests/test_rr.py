"""The RR reverse pass, its loss and the SRIP baseline ("Reviving Autoencoder Pretraining"
pass", §2, App. A.3, App. B.1) against plain-PyTorch twins written here."""
import math

import pytest
import torch
import torch.nn.functional as F

import vaetransfer as vt
from vaetransfer import rr


# ---------------------------------------------------------------------------------- the twin
def _act(name, x):
    return {"relu": torch.relu, "tanh": torch.tanh, "none": lambda t: t}[name](x)


def _units(model):
    """The model's units as plain dicts from its parameters (mlp-classifier or conv4)."""
    p = {**model.named_parameters(), **model.named_buffers()}
    params = model.params
    units = []
    if model.architecture == "mlp-classifier":
        hidden = list(params["hidden"]) or [params["width"]] * params["depth"]
        widths = [math.prod(params["input_shape"])] + hidden
        for i in range(len(hidden)):
            n = f"fc{i + 1}"
            units.append(dict(kind="linear", w=p[f"{n}.linear.weight"], b=p[f"{n}.linear.bias"],
                              bn=(p[f"{n}.bn.weight"], p[f"{n}.bn.bias"], p[f"{n}.bn.running_mean"],
                                  p[f"{n}.bn.running_var"]) if params["batch_norm"] else None,
                              act=params["activation"], norm_first=True, pool=False,
                              residual=params.get("residual", False) and widths[i] == widths[i + 1]))
    else:
        for i in range(params["blocks"]):
            n = f"block{i + 1}"
            units.append(dict(kind="conv", w=p[f"{n}.conv.weight"], b=p[f"{n}.conv.bias"],
                              bn=(p[f"{n}.bn.weight"], p[f"{n}.bn.bias"], p[f"{n}.bn.running_mean"],
                                  p[f"{n}.bn.running_var"]),
                              act="relu", norm_first=params["block_order"] == "conv-bn-relu-pool", pool=True,
                              residual=False))
    units.append(dict(kind="linear", w=p["logits.weight"], b=p["logits.bias"], bn=None, act="none", norm_first=True,
                      pool=False, residual=False))
    return units


def _twin_forward(units, x, training):
    """Per unit: (input, BN input, output before pooling), as the paper's d_m."""
    traces, h = [], x
    for u in units:
        inp = h.flatten(1) if u["kind"] == "linear" else h
        z = F.linear(inp, u["w"], u["b"]) if u["kind"] == "linear" else F.conv2d(inp, u["w"], u["b"], padding=1)
        norm_in = None
        if u["bn"] is not None:
            g, b, rm, rv = u["bn"]
            bn = lambda t: F.batch_norm(t, rm.clone(), rv.clone(), g, b, training, 0.1, 1e-5)  # noqa: E731
            if u["norm_first"]:
                norm_in, a = z, _act(u["act"], bn(z))
            else:
                norm_in = _act(u["act"], z)
                a = bn(norm_in)
        else:
            a = _act(u["act"], z)
        traces.append((inp, norm_in, a))
        h = a + inp if u["residual"] else F.max_pool2d(a, 2) if u["pool"] else a
    return traces


def _twin_norm(u, trace, v, training):
    g, b, rm, rv = u["bn"]
    dims = [0] + list(range(2, v.dim()))
    shape = [1, -1] + [1] * (v.dim() - 2)
    if training:
        mean, var = trace[1].mean(dims), trace[1].var(dims, unbiased=False)
    else:
        mean, var = rm, rv
    return (v - mean.view(shape)) / torch.sqrt(var.view(shape) + 1e-5) * g.view(shape) + b.view(shape)


def _twin_reverse_unit(units, traces, m, v, training, out_act="none"):
    u = units[m]
    if u["kind"] == "linear":
        r = (v - u["b"]) @ u["w"]
    else:
        inp = traces[m][0]
        r = F.conv_transpose2d(v - u["b"].view(1, -1, 1, 1), u["w"], padding=1)
        assert r.shape[2:] == inp.shape[2:]
    if m == 0:
        return _act(out_act, r.reshape(traces[0][0].shape))
    prev, pt = units[m - 1], traces[m - 1]
    if prev["residual"]:  # the unit's input is a sum (skip + branch): compared as it is
        return r.reshape(traces[m][0].shape)
    shape = list(pt[2].shape)
    if prev["pool"]:
        shape[2] //= 2
        shape[3] //= 2
    r = r.reshape(shape)
    if prev["pool"]:  # the twin up-samples first: the C++ applies BN and activation first (they commute)
        r = F.interpolate(r, size=pt[2].shape[2:], mode="nearest")
    if prev["bn"] is not None:
        r = (_act(prev["act"], _twin_norm(prev, pt, r, training)) if prev["norm_first"]
             else _twin_norm(prev, pt, _act(prev["act"], r), training))
    else:
        r = _act(prev["act"], r)
    return r


def _twin_pass(model, x, variant, out_act="none"):
    units = _units(model)
    training = model.training
    traces = _twin_forward(units, x, training)
    n = len(units)
    targets = [traces[0][0]] + [traces[m][0] if units[m - 1]["residual"] else traces[m - 1][2] for m in range(1, n)]
    recon = [None] * n
    if variant == "full":
        v = traces[-1][2]
        for m in reversed(range(n)):
            v = _twin_reverse_unit(units, traces, m, v, training, out_act)
            recon[m] = v
    else:
        for m in range(n):
            recon[m] = _twin_reverse_unit(units, traces, m, traces[m][2], training, out_act)
    return targets, recon


def _mlp(seed=0, residual=False, **kw):
    cfg = dict(input_shape=[12], hidden=[10, 7, 5], num_classes=3, batch_norm=True, activation="tanh")
    cfg.update(kw)
    if residual:
        cfg["residual"] = True  # any parameter the core declares for the architecture
    return vt.build_model(vt.ModelConfig("mlp-classifier", **cfg), seed=seed)


def _conv4(seed=0, size=8, **kw):
    cfg = dict(input_shape=[3, size, size], num_classes=4, channels=5, blocks=2)
    cfg.update(kw)
    return vt.build_model(vt.ModelConfig("conv4", **cfg), seed=seed)


def _assert_pass_matches(model, x, variant, out_act="none", atol=1e-5):
    ours = rr.reverse_pass(model, x, variant, out_act)
    targets, recon = _twin_pass(model, x, variant, out_act)
    assert len(ours.names) == len(targets)
    for name, a, b in zip(ours.names, ours.targets, targets):
        torch.testing.assert_close(a.reshape(b.shape), b, atol=atol, rtol=1e-4, msg=f"target {name}")
    for name, a, b in zip(ours.names, ours.reconstructions, recon):
        torch.testing.assert_close(a.reshape(b.shape), b, atol=atol, rtol=1e-4, msg=f"reconstruction {name}")
    return ours


# ---------------------------------------------------------------------------------- reverse of each layer type
@pytest.mark.parametrize("variant", ["full", "local"])
@pytest.mark.parametrize("training", [True, False])
def test_mlp_reverse_pass_matches_the_twin(variant, training):
    model = _mlp(seed=3)
    x = torch.rand(16, 12)
    if not training:  # running statistics away from their initial 0 / 1
        model.train()
        model._impl.forward(torch.rand(32, 12) * 3)
    model.train(training)
    ours = _assert_pass_matches(model, x, variant)
    assert ours.names == ["input", "fc1", "fc2", "fc3"]


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_mlp_without_batch_norm_and_output_activation(activation):
    model = _mlp(seed=1, batch_norm=False, activation=activation)
    _assert_pass_matches(model, torch.rand(8, 12), "full", out_act="relu")


@pytest.mark.parametrize("order", ["conv-bn-relu-pool", "conv-relu-bn-pool"])
@pytest.mark.parametrize("size", [8, 10])  # 10: odd pooled sizes (5 → 2), up-sampled back to 5
def test_conv_reverse_pass_matches_the_twin(order, size):
    model = _conv4(seed=2, size=size, block_order=order)
    x = torch.rand(6, 3, size, size)
    ours = _assert_pass_matches(model, x, "local")
    assert ours.names == ["input", "block1", "block2"]
    # transposed convolutions restore the forward input sizes exactly
    assert ours.reconstructions[0].shape == x.shape
    assert ours.reconstructions[2].shape == ours.targets[2].shape == (6, 5, size // 2, size // 2)


def test_residual_units_reverse_locally_and_refuse_the_full_pass():
    """A residual unit's output is its input plus its branch (a = b + c): the next unit's term
    compares its own input (a sum) with M_mᵀ(v − b_m), with no BN or activation to reuse."""
    model = _mlp(seed=9, hidden=[12, 12, 6, 6], residual=True)
    x = torch.rand(16, 12)
    twin = model.to_torch()
    twin.train()
    torch.testing.assert_close(model._impl.forward(x), twin(x), atol=1e-5, rtol=1e-4)  # skips where widths agree
    ours = _assert_pass_matches(model, x, "local")
    assert ours.names == ["input", "fc1", "fc2", "fc3", "fc4"]
    with pytest.raises(vt.ArgumentError) as e:
        rr.reverse_pass(model, x, "full")
    assert e.value.argument == "variant" and "residual" in str(e.value)
    with pytest.raises(vt.ArgumentError) as e:
        _mlp(hidden=[10, 7], residual=True)
    assert e.value.argument == "residual"


def test_full_variant_refuses_max_pooling():
    with pytest.raises(vt.ArgumentError) as e:
        rr.reverse_pass(_conv4(), torch.rand(2, 3, 8, 8), "full")
    assert e.value.argument == "variant" and "local" in str(e.value)


def test_models_without_units_and_bad_options_are_refused():
    model = vt.build_model(vt.ModelConfig("conv-classifier", input_shape=[1, 64, 64], num_classes=3))
    with pytest.raises(vt.ArgumentError) as e:
        rr.reverse_pass(model, torch.rand(2, 1, 64, 64))
    assert e.value.argument == "model"
    with pytest.raises(vt.ArgumentError) as e:
        rr.reverse_pass(_mlp(), torch.rand(2, 12), variant="sideways")
    assert e.value.argument == "variant"
    with pytest.raises(vt.ArgumentError) as e:
        rr.reverse_pass(_mlp(), torch.rand(2, 12), output_activation="softplus")
    assert e.value.argument == "output_activation"


def test_full_and_local_differ_exactly_where_the_paper_says():
    """The reverse of the last unit starts from d_{n+1} in both (Eq. 8 with d'_{n+1} = d_{n+1});
    every earlier term differs, since full passes d'_{m+1} and local d_{m+1}."""
    model = _mlp(seed=4)
    x = torch.rand(16, 12)
    full = rr.reverse_pass(model, x, "full")
    local = rr.reverse_pass(model, x, "local")
    torch.testing.assert_close(full.reconstructions[-1], local.reconstructions[-1])
    for a, b in zip(full.reconstructions[:-1], local.reconstructions[:-1]):
        assert (a - b).abs().max() > 1e-3


def test_batch_norm_reuse_leaves_running_statistics_untouched():
    model = _mlp(seed=5)
    reference = _mlp(seed=5)
    x = torch.rand(16, 12)
    rr.reverse_pass(model, x, "full")  # one forward pass (updates the statistics once) + the reverse
    reference._impl.forward(x)         # one plain forward pass
    for k, v in reference.named_buffers().items():
        assert torch.equal(model.named_buffers()[k], v), k


def test_linear_layer_with_orthonormal_rows_reconstructs_its_row_space_exactly():
    model = _mlp(seed=0, hidden=[4], batch_norm=False, activation="none", input_shape=[8])
    q, _ = torch.linalg.qr(torch.randn(8, 4, dtype=torch.float64))
    state = model.state_dict()
    state["fc1.linear.weight"] = q.T.float().contiguous()  # 4 orthonormal rows
    state["fc1.linear.bias"] = torch.randn(4)
    model.load_state_dict(state)
    inside = torch.randn(5, 4) @ q.T.float()  # inputs in the row space
    p = rr.reverse_pass(model, inside, "local")
    torch.testing.assert_close(p.reconstructions[0], inside, atol=1e-5, rtol=0)
    assert p.errors()["input"] < 1e-9
    outside = torch.randn(5, 8)
    p = rr.reverse_pass(model, outside, "local")
    projection = outside @ q.float() @ q.T.float()
    torch.testing.assert_close(p.reconstructions[0], projection, atol=1e-5, rtol=0)
    assert p.errors()["input"] > 0.1


@pytest.mark.parametrize("variant,make,x_shape", [("full", lambda: _mlp(seed=6, hidden=[6, 5]), (8, 12)),
                                                  ("local", lambda: _conv4(seed=6, channels=3), (4, 3, 8, 8))])
def test_gradients_of_the_rr_loss_match_finite_differences_in_float64(variant, make, x_shape):
    model = make()
    model._impl.to_dtype(torch.float64)
    model.train()
    x = torch.rand(*x_shape, dtype=torch.float64)
    params = model.named_parameters()
    buffers = {k: v.clone() for k, v in model.named_buffers().items()}

    def loss():
        # A forward pass in training mode moves the running statistics; restore them first so
        # every evaluation sees the same model (the loss never reads them in training mode).
        with torch.no_grad():
            for k, v in model.named_buffers().items():
                v.copy_(buffers[k])
        p = rr.reverse_pass(model, x, variant)
        return sum(vt._C.rr.squared_error(t, r) for t, r in zip(p.targets, p.reconstructions))

    total = loss()
    names = list(params)
    grads = torch.autograd.grad(total, [params[n] for n in names])
    gen = torch.Generator().manual_seed(0)
    h = 1e-6
    for n, g in zip(names, grads):
        p = params[n]
        for _ in range(2):
            i = tuple(int(torch.randint(s, (1,), generator=gen)) for s in p.shape)  # conv kernels are channels-last
            with torch.no_grad():
                old = float(p[i])
                p[i] = old + h
                up = float(loss())
                p[i] = old - h
                down = float(loss())
                p[i] = old
            fd = (up - down) / (2 * h)
            assert math.isclose(float(g[i]), fd, rel_tol=1e-5, abs_tol=1e-7), (n, i, float(g[i]), fd)


# ---------------------------------------------------------------------------------- SRIP
def test_srip_spectral_norm_matches_torch():
    gen = torch.Generator().manual_seed(1)
    for shape in [(6, 20), (20, 6), (8, 3, 3, 3)]:
        w = torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.3
        a = rr.gram_residual(w)
        w2 = w.reshape(shape[0], -1)
        small = min(w2.shape)
        assert a.shape == (small, small)
        expected = (w2 @ w2.T if w2.shape[0] <= w2.shape[1] else w2.T @ w2) - torch.eye(small, dtype=torch.float64)
        torch.testing.assert_close(a, expected)
        sigma, _ = rr.spectral_norm(a, iterations=500)
        torch.testing.assert_close(sigma, torch.linalg.matrix_norm(a, 2), rtol=1e-6, atol=1e-9)
    # the kept vector: one step per call converges as many steps in one call do
    a = rr.gram_residual(torch.randn(10, 30, generator=gen, dtype=torch.float64))
    v = None
    for _ in range(300):
        sigma, v = rr.spectral_norm(a, iterations=1, v=v)
    torch.testing.assert_close(sigma, torch.linalg.matrix_norm(a, 2), rtol=1e-6, atol=1e-9)
    with pytest.raises(vt.ArgumentError):
        rr.spectral_norm(torch.zeros(3, 4))


# ---------------------------------------------------------------------------------- training
def _classification_data(n=64, d=12, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=gen)
    y = (x[:, 0] > 0.5).long() + (x[:, 1] > 0.5).long()
    return x, y


def _train_config(regs=(), steps=6, **kw):
    base = dict(model=vt.ModelConfig("mlp-classifier", input_shape=[12], hidden=[10, 7], num_classes=3,
                                     batch_norm=True, activation="tanh"),
                objective=vt.TaskConfig("classification"), optimizer=vt.OptimizerConfig("adam", lr=1e-2),
                steps=steps, batch_size=16, seed=0, regularizers=tuple(regs))
    base.update(kw)
    return vt.TrainConfig(**base)


def test_rr_regulariser_reports_each_term_and_matches_the_twin(tmp_path):
    x, y = _classification_data()
    run = vt.train(_train_config([rr.rr_regularizer(0.5, layer_weights=[1.0, 0.5, 2.0])], steps=1, batch_size=64),
                   (x, y), tmp_path / "rr", progress=False)
    h = run.history
    assert {"rr", "rr_input", "rr_fc1", "rr_fc2", "cross_entropy"} <= set(h)
    # the term is Σ λ_m e_m, the loss adds 0.5 × term
    term = h["rr_input"] * 1.0 + h["rr_fc1"] * 0.5 + h["rr_fc2"] * 2.0
    torch.testing.assert_close(h["rr"], term, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(h["loss"], h["cross_entropy"] + 0.5 * h["rr"], rtol=1e-5, atol=1e-6)
    # The first step's batch is all 64 rows (in some order; the terms and BatchNorm's batch
    # statistics do not depend on it): its terms equal the twin's from the initial weights.
    model = vt.build_model(_train_config().model, seed=0)
    model.train()
    targets, recon = _twin_pass(model, x, "full")
    twin = [float(((t - r) ** 2).sum().detach() / 64) for t, r in zip(targets, recon)]
    ours = [float(h[c][0]) for c in ("rr_input", "rr_fc1", "rr_fc2")]
    assert ours == pytest.approx(twin, rel=1e-5)


def test_lambda_zero_switches_rr_off_and_bn_statistics_match_std(tmp_path):
    x, y = _classification_data()
    std = vt.train(_train_config(steps=1), (x, y), tmp_path / "std", progress=False)
    off = vt.train(_train_config([rr.rr_regularizer(0.0)], steps=1), (x, y), tmp_path / "off", progress=False)
    on = vt.train(_train_config([rr.rr_regularizer(1.0)], steps=1), (x, y), tmp_path / "on", progress=False)
    s, o, n = std.model().state_dict(), off.model().state_dict(), on.model().state_dict()
    for k in s:
        assert torch.equal(s[k], o[k]), k  # λ = 0: exactly Std
        if "running" in k or "num_batches" in k:
            assert torch.equal(s[k], n[k]), k  # the reverse pass never touches BatchNorm statistics
    assert not torch.equal(s["fc1.linear.weight"], n["fc1.linear.weight"])
    assert float(on.history["rr"][0]) > 0


def test_rr_input_only_and_config_errors(tmp_path):
    x, y = _classification_data()
    run = vt.train(_train_config([rr.rr_regularizer(1.0, input_only=True)], steps=1), (x, y), tmp_path / "rr1",
                   progress=False)
    h = run.history
    torch.testing.assert_close(h["rr"], h["rr_input"])
    assert float(h["rr_fc1"][0]) > 0  # reported, not weighted
    with pytest.raises(vt.ArgumentError) as e:
        vt.train(_train_config([rr.rr_regularizer(1.0, layer_weights=[1, 2])]), (x, y), tmp_path / "bad1",
                 progress=False)
    assert e.value.argument == "layer_weights"
    with pytest.raises(vt.ArgumentError) as e:
        vt.train(_train_config([rr.rr_regularizer(1.0, input_only=True, layer_weights=[1, 1, 1])]), (x, y),
                 tmp_path / "bad2", progress=False)
    assert e.value.argument == "input_only"
    with pytest.raises(vt.ArgumentError) as e:
        vt.train(_train_config([rr.rr_regularizer(1.0, layer_weights=[1, -1, 1])]), (x, y), tmp_path / "bad3",
                 progress=False)
    assert e.value.argument == "layer_weights"


def test_rr_training_lowers_the_reconstruction_error(tmp_path):
    x, y = _classification_data(n=256)
    before = rr.reverse_pass(vt.build_model(_train_config().model, seed=0), x).errors()
    run = vt.train(_train_config([rr.rr_regularizer(1.0)], steps=150), (x, y), tmp_path / "rr", progress=False)
    after = rr.reverse_pass(run.model(), x).errors()
    assert sum(after.values()) < 0.5 * sum(before.values())


def test_srip_trains_resumes_exactly_and_keeps_its_vectors_in_snapshots(tmp_path):
    x, y = _classification_data()
    cfg = _train_config([rr.srip_regularizer(0.1)], steps=12, snapshot_every=4)
    full = vt.train(cfg, (x, y), tmp_path / "full", progress=False)
    assert "srip" in full.history and float(full.history["srip"][0]) > 0
    snap = torch.load(next(iter(sorted((tmp_path / "full" / "snapshots").glob("*.pt")))), weights_only=False)
    assert {"srip/fc1.linear.weight", "srip/fc2.linear.weight", "srip/logits.weight"} == set(snap["regularizers"])

    class Interrupt(Exception):
        pass

    def stop(model, report):
        if report["step"] == 10:
            raise Interrupt
        return {}

    with pytest.raises(Interrupt):
        vt.train(_train_config([rr.srip_regularizer(0.1)], steps=12, snapshot_every=4, metrics_every=1), (x, y),
                 tmp_path / "cut", progress=False, metrics_hook=stop)
    resumed = vt.train(_train_config([rr.srip_regularizer(0.1)], steps=12, snapshot_every=4, metrics_every=1),
                       (x, y), tmp_path / "cut", progress=False, metrics_hook=lambda m, r: {})
    assert torch.equal(full.history["srip"], resumed.history["srip"])
    for k, v in full.model().state_dict().items():
        assert torch.equal(resumed.model().state_dict()[k], v), k


def test_greedy_pretraining_trains_one_layer_at_a_time(tmp_path):
    x, _ = _classification_data(n=128)
    model = vt.ModelConfig("mlp-classifier", input_shape=[12], hidden=[10, 7], num_classes=3, batch_norm=True,
                           activation="tanh")
    last = rr.greedy_pretraining(model, x, tmp_path / "pre", steps_per_layer=40, batch_size=32,
                                 optimizer=vt.OptimizerConfig("adam", lr=1e-2))
    assert last.name == "layer2"
    init = vt.build_model(model, seed=0).state_dict()
    one = vt.load_run(tmp_path / "pre" / "layer1").model().state_dict()
    two = vt.load_run(last).model().state_dict()
    changed = lambda a, b: {k.split(".")[0] for k in a if "running" not in k and "num_batches" not in k  # noqa: E731
                            and not torch.equal(a[k], b[k])}
    assert changed(init, one) == {"fc1"}
    assert changed(one, two) == {"fc2"}
    h1 = vt.load_run(tmp_path / "pre" / "layer1").history
    assert float(h1["rr_input"][-5:].mean()) < 0.5 * float(h1["rr_input"][:5].mean())
    torch.testing.assert_close(h1["loss"], h1["rr"])  # the reconstruction is the whole loss


def test_svd_vectors_and_pattern_match():
    model = _mlp(seed=0, hidden=[2], input_shape=[1, 4, 4], batch_norm=False)
    patterns = torch.zeros(2, 1, 4, 4)
    patterns[0, 0, 0, 0] = patterns[1, 0, 3, 3] = 1.0
    state = model.state_dict()
    state["fc1.linear.weight"] = torch.stack([patterns[0].flatten() * 3, -patterns[1].flatten()])
    model.load_state_dict(state)
    vectors, s = rr.right_singular_vectors(model)
    assert vectors.shape == (2, 1, 4, 4) and s[0] >= s[1]
    m = rr.pattern_match(vectors, patterns)
    assert m.score > 0.999 and m.distance < 1e-3  # orthogonal rows: the singular vectors are ± the patterns
    noise = torch.randn(2, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    assert rr.pattern_match(noise, patterns).score < m.score
    with pytest.raises(vt.ArgumentError):
        rr.pattern_match(vectors, torch.zeros(2, 9))


def test_public_lambda_conversion():
    assert rr.public_lambda_to_ours(1e-6, 100) == pytest.approx(5e-5)
    assert rr.public_lambda_to_ours(1e-6, 100, input_term=True) == pytest.approx(5e-5 * 255 ** 2)


@pytest.mark.parametrize("variant,make,x_shape", [("full", lambda: _mlp(seed=8), (10, 12)),
                                                  ("local", lambda: _conv4(seed=8, size=10), (5, 3, 10, 10)),
                                                  ("local", lambda: _mlp(seed=8, hidden=[12, 8, 8], residual=True),
                                                   (10, 12))])
def test_the_benchmark_reference_reverse_pass_matches_ours(variant, make, x_shape):
    """reference_torch.rr_reverse_pass (the Python baseline of benchmarks/bench_rr.py) computes the
    same pass as the core."""
    from reference_torch import rr_reverse_pass
    model = make()
    x = torch.rand(*x_shape)
    twin = model.to_torch()
    _, targets, recon = rr_reverse_pass(twin, x, variant, "relu")
    ours = rr.reverse_pass(model, x, variant, "relu")
    for a, b in zip(ours.reconstructions + ours.targets, recon + targets):
        torch.testing.assert_close(a.detach().reshape(b.shape), b.detach(), atol=1e-5, rtol=1e-4)
