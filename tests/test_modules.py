"""Your own torch.nn.Module through the core's trainer (vaetransfer.modules): the contract's named
errors, every objective, freezing and re-initialising exactly the named parameters, exact resume
(dropout included), agreement with a plain PyTorch loop, and layers with parts in the similarity
heatmaps."""
import copy

import pytest
import torch

import vaetransfer as vt
from vaetransfer import ArgumentError, ArgumentTypeError
from vaetransfer.similarity import similarity_matrix

import user_models

VAE_OBJECTIVES = [e["name"] for e in vt._C.objectives.registered() if e["family"] == "vae"]


def _vae(**kw):
    kwargs = {"latent": 4, **kw}
    return vt.module_model("user_models:SmallVAE", kind="vae", input_shape=(1, 8, 8), kwargs=kwargs)


def _net(**kw):
    return vt.module_model(user_models.SmallNet, kind="classifier", input_shape=(12,), **kw)


def _images(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    # two prototypes plus noise: something a small VAE can learn
    proto = (torch.rand(2, 1, 8, 8, generator=g) > 0.5).float()
    idx = torch.randint(0, 2, (n,), generator=g)
    flip = torch.rand(n, 1, 8, 8, generator=g) < 0.05
    return (proto[idx] != flip.float()).float()


def _labelled(n=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    return x, y


def _config(model, objective="beta-vae", steps=60, **kw):
    return vt.TrainConfig(model=model, objective=vt.TaskConfig(objective), steps=steps, batch_size=32,
                          optimizer=vt.OptimizerConfig(lr=1e-3), **kw)


# ---------------------------------------------------------------- the layer table

def test_layers_follow_the_forward_and_role_modules_become_the_role_layers():
    m = vt.build_model(_vae(), seed=0)
    assert m.layers == [("input", "input"), ("enc.1", "encoder"), ("mean", "latent"), ("logvar", "latent"),
                        ("sampled", "latent"), ("dec.0", "decoder"), ("dec.3", "decoder"),
                        ("reconstruction", "decoder")]
    assert m.group("latent") == ["fc_mu.weight", "fc_mu.bias", "fc_lv.weight", "fc_lv.bias"]
    assert m.group("mean") == ["fc_mu.weight", "fc_mu.bias"]
    assert m.group("decoder") == ["dec.0.weight", "dec.0.bias", "dec.3.weight", "dec.3.bias"]
    assert m.group("dec.3") == ["dec.3.weight", "dec.3.bias"]   # by module name (a dotted prefix)
    assert m.latent_dim == 4 and m.module is not None and type(m.module).__name__ == "SmallVAE"
    # chosen layers (a Sequential block) and a part override
    m = vt.build_model(vt.module_model("user_models:SmallVAE", kind="vae", input_shape=(1, 8, 8),
                                       layers=["enc", "fc_mu", "fc_lv", "dec"], parts={"enc": "latent"}), seed=0)
    assert m.layers[:2] == [("input", "input"), ("enc", "latent")] and m.layers[-2][0] == "dec"
    assert m.group("latent") == ["enc.1.weight", "enc.1.bias", "fc_mu.weight", "fc_mu.bias", "fc_lv.weight",
                                 "fc_lv.bias"]


def test_a_split_encoder_keeps_its_layer_and_the_roles_hold_no_parameters():
    m = vt.build_model(vt.module_model(user_models.SplitVAE, kind="vae", input_shape=(1, 8, 8)), seed=0)
    assert [n for n, _ in m.layers] == ["input", "body", "mean", "logvar", "sampled", "out", "reconstruction"]
    with pytest.raises(ArgumentError, match="latent"):
        m.group("latent")   # the role layers own no parameters here


def test_the_same_seed_builds_the_same_module_and_another_seed_another():
    a, b, c = (vt.build_model(_vae(), seed=s) for s in (3, 3, 4))
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    assert not torch.equal(a.state_dict()["fc_mu.weight"], c.state_dict()["fc_mu.weight"])


def test_activations_and_parts_reach_the_similarity_heatmap_and_its_quadrants():
    x = _images(64)
    acts = [vt.activations.activations(vt.build_model(_vae(), seed=s), x, use_mean=True) for s in (0, 1)]
    assert list(acts[0]) == [n for n, _ in vt.build_model(_vae(), seed=0).layers]
    sm = similarity_matrix(acts[0], acts[1], "cka")
    q = sm.quadrants()
    assert q["encoder_mean"] is not None and q["decoder_mean"] is not None
    parts = dict(zip(sm.rows, sm.row_parts))
    assert parts["mean"] == "latent" and parts["dec.0"] == "decoder"
    self_sim = similarity_matrix(acts[0], acts[0], "cka")
    assert float(self_sim.values.diagonal().min()) == pytest.approx(1.0, abs=1e-5)


# ---------------------------------------------------------------- training

@pytest.mark.parametrize("objective", VAE_OBJECTIVES)
def test_every_vae_objective_trains_a_user_vae(tmp_path, objective):
    x = _images()
    run = vt.train(_config(_vae(), objective, steps=150), x, tmp_path / objective, progress=False)
    loss = run.history["loss"]
    assert torch.isfinite(loss).all()
    assert loss[-20:].mean() < loss[:20].mean()  # it learns
    builtin = vt.ModelConfig("mlp", input_shape=[1, 8, 8], latent_dim=4, hidden=[32])
    ref = vt.train(_config(builtin, objective, steps=2), x, tmp_path / f"{objective}-builtin", progress=False)
    assert list(run.history) == list(ref.history)  # the same columns as a built-in VAE


@pytest.mark.parametrize("factory, optimizer", [(user_models.PlainNet, "adam"), (user_models.SmallNet, "sgd")])
def test_a_user_classifier_trains_like_the_plain_pytorch_loop(tmp_path, factory, optimizer):
    """Full-batch steps (the order of examples does not matter then, BatchNorm included): the core's
    loop and torch.optim on a copy of the same initial module agree. (Adam is compared on a net
    without a bias before BatchNorm: that bias's gradient is float noise, which Adam magnifies.)"""
    x, y = _labelled(128)
    opt_cfg = vt.OptimizerConfig(name=optimizer, lr=1e-2, momentum=0.9 if optimizer == "sgd" else 0.0)
    cfg = vt.TrainConfig(model=vt.module_model(factory, kind="classifier", input_shape=(12,)),
                         objective=vt.TaskConfig("classification"), steps=25, batch_size=128, optimizer=opt_cfg,
                         seed=5, data_scale=1.0)
    twin = copy.deepcopy(vt.build_model(cfg.model, seed=5).module)
    run = vt.train(cfg, (x, y), tmp_path / "core", progress=False)
    opt = (torch.optim.Adam(twin.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8) if optimizer == "adam" else
           torch.optim.SGD(twin.parameters(), lr=1e-2, momentum=0.9))
    losses = []
    for _ in range(25):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(twin(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.testing.assert_close(run.history["cross_entropy"].float(), torch.tensor(losses), rtol=1e-4, atol=1e-5)
    trained = run.model().module
    for (n, a), (_, b) in zip(trained.state_dict().items(), twin.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=n)
    assert losses[-1] < losses[0]


def test_freeze_and_reinit_touch_exactly_the_named_parameters(tmp_path):
    x = _images()
    base = vt.train(_config(_vae()), x, tmp_path / "base", progress=False)
    start = base.model().state_dict()
    frozen = vt.train(_config(_vae(), init_from=str(tmp_path / "base"), freeze=("latent", "dec.3")), x,
                      tmp_path / "frozen", progress=False).model().state_dict()
    fixed = set(vt.build_model(_vae()).group("latent")) | {"dec.3.weight", "dec.3.bias"}
    for name, value in frozen.items():
        assert torch.equal(value, start[name]) == (name in fixed), name
    reinit = vt.train(_config(_vae(), steps=1, init_from=str(tmp_path / "base"), reinit=("decoder",),
                              freeze=("encoder", "latent")), x, tmp_path / "reinit", progress=False)
    decoder = set(vt.build_model(_vae()).group("decoder"))
    after = reinit.model().state_dict()
    for name, value in after.items():
        assert torch.equal(value, start[name]) == (name not in decoder), name
    # the fresh values are the module's own reset_parameters() under the run's seed + 1, then one Adam
    # step (at most lr per entry)
    fresh = vt.build_model(_vae(), seed=0)
    fresh.load_state_dict(start)
    fresh.reinitialize("decoder", seed=1)
    assert not torch.equal(fresh.state_dict()["dec.0.weight"], start["dec.0.weight"])
    assert (after["dec.0.weight"] - fresh.state_dict()["dec.0.weight"]).abs().max() <= 1e-3 + 1e-6
    with pytest.raises(ArgumentError, match="nothing would train") as e:
        vt.train(_config(_vae(), steps=1, freeze=("all",)), x, tmp_path / "all", progress=False)
    assert e.value.argument == "freeze"


def test_a_killed_run_resumes_to_the_same_weights_dropout_included(tmp_path):
    torch.set_num_threads(1)
    x = _images()
    cfg = _config(_vae(dropout=0.3), steps=80, snapshot_every=20)

    def kill_at(step):
        def progress(reached):
            if reached >= step:
                raise KeyboardInterrupt
        return progress

    with pytest.raises(KeyboardInterrupt):
        vt.train(cfg, x, tmp_path / "killed", progress=kill_at(47))
    assert 40 <= vt.load_run(tmp_path / "killed").step < 80
    resumed = vt.train(cfg, x, tmp_path / "killed", progress=False).model().state_dict()
    whole = vt.train(cfg, x, tmp_path / "whole", progress=False).model().state_dict()
    assert all(torch.equal(resumed[k], whole[k]) for k in whole)
    # dropout is on: a run with another seed's step keys differs
    other = vt.train(_config(_vae(dropout=0.3), steps=80, seed=1), x, tmp_path / "other", progress=False)
    assert not torch.equal(other.model().state_dict()["fc_mu.weight"], whole["fc_mu.weight"])


def test_run_model_rebuilds_the_module_and_step_0_is_the_factorys_draw(tmp_path):
    x, y = _labelled()
    cfg = _config(vt.module_model(user_models.make_net, kind="classifier", input_shape=(12,), kwargs={"classes": 3}),
                  "classification", steps=20, seed=2)
    run = vt.train(cfg, (x, y), tmp_path / "r", progress=False)
    initial = run.model(0)
    assert all(torch.equal(initial.state_dict()[k], vt.build_model(cfg.model, seed=2).state_dict()[k])
               for k in initial.state_dict())
    trained = run.model()
    assert isinstance(trained.module, user_models.SmallNet) and trained.num_classes == 3
    # BatchNorm statistics are the module's buffers, saved and restored
    assert trained.state_dict()["body.1.num_batches_tracked"].item() == 20
    assert torch.equal(trained.module.body[1].running_mean, trained.state_dict()["body.1.running_mean"])
    torch.testing.assert_close(trained.predict(x), trained.module.eval()(x).argmax(1))
    assert isinstance(trained.to_torch(), user_models.SmallNet)


def test_parameter_regularisers_apply_and_the_reverse_pass_is_refused(tmp_path):
    x, y = _labelled()
    l2 = vt.RegularizerConfig("l2", weight=0.1, groups=["head"])
    run = vt.train(_config(_net(), "classification", steps=5, regularizers=(l2,)), (x, y), tmp_path / "l2",
                   progress=False)
    assert "l2" in run.history
    rr = vt.RegularizerConfig("rr")
    with pytest.raises(ArgumentError, match="reverse|unit"):
        vt.train(_config(_net(), "classification", steps=5, regularizers=(rr,)), (x, y), tmp_path / "rr",
                 progress=False)


# ---------------------------------------------------------------- the contract's named errors

def test_a_module_instance_in_the_config_is_named_with_the_way_to_train_it(tmp_path):
    with pytest.raises(ArgumentTypeError, match="module_model") as e:
        vt.train(vt.TrainConfig(model=user_models.SmallNet(), steps=1), _labelled(), tmp_path / "x", progress=False)
    assert e.value.argument == "model"


@pytest.mark.parametrize("make, argument", [
    (lambda: vt.module_model("user_models:Nope", kind="vae", input_shape=(1, 8, 8)), "factory"),
    (lambda: vt.module_model("no_such_package.models:X", kind="vae", input_shape=(1, 8, 8)), "factory"),
    (lambda: vt.module_model(lambda: None, kind="vae", input_shape=(1, 8, 8)), "factory"),
    (lambda: vt.module_model(user_models.SmallVAE, kind="gan", input_shape=(1, 8, 8)), "kind"),
    (lambda: vt.module_model(user_models.SmallVAE, kind="vae", input_shape=(1, 0, 8)), "input_shape"),
])
def test_configs_that_cannot_rebuild_are_named_when_made(make, argument):
    with pytest.raises((ArgumentError, ArgumentTypeError)) as e:
        make()
    assert e.value.argument == argument


@pytest.mark.parametrize("config, argument, text", [
    (vt.ModelConfig("torch-module", factory="user_models:SmallNet", kind="vae", input_shape=[12]), "encode",
     "encode"),
    (vt.ModelConfig("torch-module", factory="user_models:WrongDecoder", kind="vae", input_shape=[1, 8, 8]), "decode",
     "shape"),
    (vt.ModelConfig("torch-module", factory="user_models:SmallVAE", kind="vae", input_shape=[1, 8, 8],
                    parts={"fc_mu": "bottleneck"}), "parts", "bottleneck"),
    (vt.ModelConfig("torch-module", factory="user_models:SmallVAE", kind="vae", input_shape=[1, 8, 8],
                    parts={"nothing": "latent"}), "parts", "names no layer"),
    (vt.ModelConfig("torch-module", factory="user_models:SmallVAE", kind="vae", input_shape=[1, 8, 8],
                    layers=["enc", "missing"]), "layers", "not a submodule"),
    (vt.ModelConfig("torch-module", factory="user_models:SmallNet", kind="classifier", input_shape=[12],
                    kwargs={"nope": 1}), None, "unexpected keyword"),
    (vt.ModelConfig("torch-module", factory="user_models:SmallNet", kind="classifier", input_shape=[5]), None,
     "shapes cannot be multiplied"),
])
def test_breaches_of_the_contract_are_named_when_built(config, argument, text):
    with pytest.raises(Exception, match=text) as e:
        vt.build_model(config)
    if argument is not None:
        assert e.value.argument == argument


def test_partial_or_impossible_reinitialisation_is_named():
    m = vt.build_model(_vae())
    with pytest.raises(ArgumentError, match="whole submodules") as e:
        m.reinitialize("dec.0.bias")
    assert e.value.argument == "group"
    m = vt.build_model(vt.module_model(user_models.NoReset, kind="classifier", input_shape=(12,)))
    assert m.group("all") == ["scale", "head.weight", "head.bias"]
    with pytest.raises(ArgumentError, match="reset_parameters"):
        m.reinitialize("all")
    m.reinitialize("head")  # a whole submodule with reset_parameters is fine
