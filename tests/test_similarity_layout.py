"""Encoder / decoder layers from the parts every core model declares (vaetransfer.similarity.layout):
the same lists as the former name rule for every built-in family, parts carried from the
activations into SimilarityMatrix and its quadrants, the name rule kept for undeclared layers, the
one table of display names, and the package's module structure (no cycles, no private imports)."""
from __future__ import annotations

import ast
import pathlib
import pickle
from collections import OrderedDict

import pytest
import torch

import vaetransfer as vt
from vaetransfer import similarity as sim
from vaetransfer.activations import Activations, activations
from vaetransfer.similarity import layout

PACKAGE = pathlib.Path(sim.__file__).parent


def old_encoder_layers(names):
    """The name rule of vaetransfer.similarity before the parts (a verbatim copy, as the oracle)."""
    if "sampled" in names:
        return [n for n in names[:names.index("sampled")] if n != "input"]
    return [n for n in names if str(n).startswith("enc")]


def old_decoder_layers(names):
    if "sampled" in names:
        start = names.index("sampled") + 1
    else:
        start = next((i for i, n in enumerate(names) if str(n).startswith("dec")), None)
    return [] if start is None else names[start:]


def _t5_params(**kw):
    from vaetransfer.text import T5Config

    return T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=2,
                    relative_attention_num_buckets=8, relative_attention_max_distance=12).model_config().params()


# One small configuration of every registered architecture (the test fails when one is added
# without a row here). Trunk names the old rule missed: conv4's block*, mlp-classifier's fc*.
CONFIGS = {
    "conv": dict(input_shape=(1, 64, 64), latent_dim=3),
    "fc": dict(input_shape=(1, 64, 64), latent_dim=3),
    "mlp": dict(input_shape=(12,), hidden=(8, 6), latent_dim=3),
    "cnn": dict(input_shape=(1, 32, 32), latent_dim=3, depth=2, width=8),
    "conv4": dict(input_shape=(3, 32, 32), num_classes=5, channels=8, blocks=3),
    "conv-classifier": dict(input_shape=(1, 64, 64), num_classes=3),
    "mlp-classifier": dict(input_shape=(12,), num_classes=3, hidden=(10, 7)),
    "t5": "t5",
    "t5-vae": "t5-vae",
    # your own module (tests/user_models.py): its leaf layers take the parts of where they run
    "torch-module": dict(factory="user_models:SmallVAE", kind="vae", input_shape=[1, 8, 8]),
}
NAME_RULE_MISSES_TRUNK = {"conv4", "mlp-classifier"}


def _build(arch):
    params = CONFIGS[arch]
    if params == "t5":
        params = _t5_params()
    elif params == "t5-vae":
        params = dict(_t5_params(), latent_dim=4)
    return vt.build_model(vt.ModelConfig(arch, **params), seed=0)


def test_configs_cover_every_registered_architecture():
    assert sorted(CONFIGS) == sorted(e["name"] for e in vt.nn.architectures())


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_part_based_layers_equal_the_name_rule_for_every_family(arch):
    model = _build(arch)
    names = [n for n, _ in model.layers]
    parts = [p for _, p in model.layers]
    assert set(parts) <= set(layout.PARTS)
    enc, dec = sim.encoder_layers(names, parts), sim.decoder_layers(names, parts)
    if arch in NAME_RULE_MISSES_TRUNK:
        # The names found no encoder (no "enc*" layer); the declared trunk is the encoder part.
        assert old_encoder_layers(names) == []
        assert enc == [n for n, p in model.layers if p == "encoder"] and enc
    else:
        assert enc == old_encoder_layers(names) and enc
    assert dec == old_decoder_layers(names)
    # Never the input, the random draw or a classifier's head in the encoder quadrant.
    assert not {"input", "sampled", "logits"} & set(enc)
    start = sim.decoder_start(names, parts)
    assert (start is None) == (not dec)
    if model.family == "vae":
        assert names[start - 1] == "sampled" and enc[-2:] == ["mean", "logvar"]
    if model.family == "classifier":
        assert dec == [] and start is None
    # The mapping form of the parts gives the same lists.
    assert sim.encoder_layers(names, dict(model.layers)) == enc
    assert sim.decoder_layers(names, dict(model.layers)) == dec


@pytest.mark.parametrize("arch", ["mlp", "mlp-classifier"])
def test_activations_carry_parts_into_matrices_and_quadrants(arch):
    model = _build(arch).eval()
    x = torch.randn(24, 12, generator=torch.Generator().manual_seed(0))
    other = vt.build_model(model.config, seed=1).eval()
    acts_a, acts_b = activations(model, x), activations(other, x)
    assert isinstance(acts_a, Activations) and isinstance(acts_a, OrderedDict)
    assert acts_a.parts == dict(model.layers)
    m = sim.similarity_matrix(acts_a, acts_b, "cka")
    assert m.row_parts == m.col_parts == [p for _, p in model.layers]
    avg = sim.cka_avg([acts_a, acts_b], [acts_b, acts_a], "cka")
    assert avg.row_parts == avg.col_parts == m.row_parts
    mb = sim.minibatch_cka([acts_a], [acts_b])
    assert mb.row_parts == m.row_parts
    # The same numbers without parts: the name rule.
    plain = sim.SimilarityMatrix(m.values, m.rows, m.cols, "cka", n=m.n)
    assert plain.row_parts is None
    q, q_names = m.quadrants(), plain.quadrants()
    if arch in NAME_RULE_MISSES_TRUNK:
        assert q_names["encoder_mean"] is None and q["encoder_mean"] is not None
        trunk = [m.rows.index(n) for n in m.rows if dict(model.layers)[n] == "encoder"]
        assert q["encoder_mean"] == pytest.approx(float(m.values[trunk][:, trunk].mean()))
        assert q["decoder_mean"] is None
    else:
        assert q == q_names
    # Parts given explicitly (studies building matrices from stored numbers).
    explicit = sim.SimilarityMatrix(m.values, m.rows, m.cols, "cka", n=m.n, row_parts=dict(model.layers),
                                    col_parts=m.col_parts)
    assert explicit.row_parts == m.row_parts and explicit.quadrants() == q


def test_subset_and_plain_mappings():
    model = _build("mlp").eval()
    x = torch.randn(10, 12, generator=torch.Generator().manual_seed(1))
    sub = activations(model, x, layers=["dec1", "mean", "enc1"])
    assert list(sub) == ["enc1", "mean", "dec1"] and sub.parts == {"enc1": "encoder", "mean": "latent",
                                                                       "dec1": "decoder"}
    assert layout.layer_parts(sub) == ["encoder", "latent", "decoder"]
    # A mapping built from it (or by hand) declares nothing: the name rule.
    plain = OrderedDict((k, v.double()) for k, v in sub.items())
    assert layout.layer_parts(plain) is None
    assert sim.similarity_matrix(plain, plain).row_parts is None
    # Parts survive pickling (an OrderedDict subclass with an attribute).
    back = pickle.loads(pickle.dumps(sub))
    assert back.parts == sub.parts and list(back) == list(sub)
    # A plain torch module declares no parts.
    net = torch.nn.Sequential(torch.nn.Linear(12, 4), torch.nn.ReLU())
    assert activations(net, x).parts is None


def test_part_rule_on_hand_made_layouts():
    names = ["x", "a", "b", "z", "eps", "c", "out"]
    parts = ["input", "encoder", "latent", "latent", "latent", "decoder", "head"]
    assert sim.encoder_layers(names, parts) == ["a", "b", "z", "eps"]
    assert sim.decoder_layers(names, parts) == ["c", "out"] and sim.decoder_start(names, parts) == 5
    parts_sampled = ["input", "encoder", "latent", "latent", "latent", "decoder", "head"]
    names_sampled = ["x", "a", "mean", "logvar", "sampled", "c", "out"]
    assert sim.encoder_layers(names_sampled, parts_sampled) == ["a", "mean", "logvar"]
    # The name rule stays for names without parts.
    assert sim.encoder_layers(["input", "enc1", "enc2", "logits"]) == ["enc1", "enc2"]
    assert sim.decoder_start(["input", "enc1", "mean", "logvar", "sampled", "dec1"]) == 5
    with pytest.raises(vt.ArgumentError, match="parts"):
        sim.encoder_layers(names, parts[:-1])
    with pytest.raises(vt.ArgumentError, match="parts"):
        sim.decoder_start(names, {"x": "input"})
    with pytest.raises(vt.ArgumentTypeError, match="parts"):
        sim.decoder_layers(names, "encoder")
    with pytest.raises(vt.ArgumentError, match="row_parts"):
        sim.SimilarityMatrix(torch.zeros(2, 2), ["a", "b"], ["a", "b"], "cka", row_parts=["encoder"])


def test_heatmap_split_follows_the_parts():
    pytest.importorskip("matplotlib")
    from vaetransfer import plots

    names = ["x", "h1", "h2", "g1", "g2"]
    parts = ["input", "encoder", "latent", "decoder", "decoder"]
    m = sim.SimilarityMatrix(torch.eye(5, dtype=torch.float64), names, names, "cka", row_parts=parts,
                             col_parts=parts)
    ax = plots.similarity_heatmap(m)
    ys = [line.get_ydata()[0] for line in ax.lines if line.get_ydata()[0] == line.get_ydata()[-1]]
    assert 2.5 in ys  # the boundary before g1, which no name rule would find
    ax_plain = plots.similarity_heatmap(sim.SimilarityMatrix(m.values, names, names, "cka"))
    assert not ax_plain.lines
    plots.plt.close("all")


def test_display_names():
    assert sim.display_name("cka") == "CKA"
    assert sim.display_name("linear_cka") == "CKA"  # an alias
    assert sim.display_name("procrustes") == "Procrustes similarity"
    assert sim.display_name("procrustes", short=True) == "Procrustes"
    assert sim.display_name("min") == "min(CKA, Procrustes)"
    assert sim.display_name("not a measure") == "not a measure"
    for name in sim.MEASURES + ("cka_minibatch",):
        assert sim.display_name(name) != name, name
    with pytest.raises(vt.ArgumentTypeError, match="measure"):
        sim.display_name(3)


def _imports(path: pathlib.Path):
    """(module, imported names, inside a function?) of every relative import of a module."""
    tree = ast.parse(path.read_text())
    inner = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            yield node.level, node.module, [a.name for a in node.names], id(node) in inner


def test_package_structure_no_private_imports_no_cycles():
    modules = {p.stem: p for p in PACKAGE.glob("*.py")}
    graph = {}
    for stem, path in modules.items():
        deps = set()
        for level, module, names, _inner in _imports(path):
            # A private name of another module; `from .. import _C` (the compiled core) is no name.
            private = [n for n in names if n.startswith("_") and not n.startswith("__")
                       and not (module is None and n == "_C")]
            assert not private, f"{stem} imports private names {private} from {module}"
            if level == 1 and module in modules:
                deps.add(module)
            assert not (level == 2 and module and module.startswith("plots")), stem
        assert "matplotlib" not in path.read_text(), stem
        graph[stem] = deps

    state = {}

    def visit(node, stack):
        state[node] = "open"
        for dep in graph[node]:
            assert state.get(dep) != "open", f"import cycle: {' -> '.join(stack + [dep])}"
            if dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [node])


def test_every_former_public_name_is_exported():
    former = ["LayerFit", "MEASURES", "MinibatchCKA", "NULLS", "PROCRUSTES_FORMS", "RESAMPLINGS", "minibatch_cka",
              "registered", "SimilarityMatrix", "SanityStudy", "activations", "cka", "cka_avg", "decoder_layers",
              "decoder_start", "encoder_layers", "fit_layers", "procrustes", "sanity_matrices", "sanity_study",
              "similarity", "similarity_matrices", "similarity_matrix", "Measure", "ProcrustesForm"]
    for name in former:
        assert hasattr(sim, name), name
    assert set(sim.__all__) <= set(dir(sim))
    assert callable(sim.activations) and sim.activations is activations
