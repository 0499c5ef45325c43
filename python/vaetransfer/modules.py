"""Your own ``torch.nn.Module`` as a model of the package: trained by the core's C++ loop (every
objective, freezing and re-initialising by layer or part, ``init_from``, checksummed snapshots, exact
resume, interrupts), with named layers in parts for the similarity heatmaps.

The contract (checked when the model is built, each breach a named error):

* **Rebuilding.** The model is described by a *factory* — a class or function importable as
  ``"package.module:Name"`` — and its keyword arguments; a run rebuilds the module from them (on
  resume, in sweep workers, for :meth:`vaetransfer.Run.model`). The initial weights are whatever the
  factory draws under ``torch.manual_seed(seed)`` (the run's seed), so one seed gives one model.
  A factory defined in a notebook (``__main__``) works in that kernel only; put it in a ``.py`` file
  for sweeps and resumes from another process.
* **Outputs.** A VAE (``kind="vae"``): ``encode(x) -> (mean, logvar)``, each [N, latent], and
  ``decode(z) -> logits`` of the input's shape (method names configurable); the package draws
  z = mean + exp(logvar/2)·ε with its own ε, so the objectives, estimators and resume see one noise
  stream. A classifier (``kind="classifier"``): ``forward(x) -> logits`` [N, classes].
* **Layers and parts.** The layers are, by default, every leaf submodule holding parameters, in the
  order they run; ``layers=[...]`` names others (any submodule, e.g. a ``Sequential`` block). Their
  parts follow from where they run: ``encoder`` (inside ``encode``/``forward``), ``decoder`` (inside
  ``decode``); ``parts={"name or prefix": "latent", ...}`` overrides. The package adds ``input``,
  and for a VAE ``mean``, ``logvar``, ``sampled`` (part ``latent``) and ``reconstruction`` (the
  logits); for a classifier ``logits`` (part ``head``). A submodule whose output *is* one of those
  tensors (say ``fc_mu`` returning the mean) becomes that layer, so ``freeze=["latent"]`` freezes it.
  Parameters outside every layer are in the group ``"all"`` only.
* **Re-initialising** a group calls ``reset_parameters()`` of each submodule it covers, under
  ``torch.manual_seed``; a group covering part of a submodule's parameters is refused.
* **Randomness inside the module** (dropout) is drawn, during a training step, from a generator
  seeded from the run's seed and the step, so a resumed run replays it exactly.

Regularisers: those reading layers by name (e.g. ``l2-sp`` style penalties on parameters, activation
penalties) apply; the RR reverse pass needs the built-in unit families and refuses a module.

Example::

    cfg = vt.TrainConfig(model=vt.module_model("mymodels:SmallVAE", kind="vae", input_shape=(1, 28, 28),
                                               kwargs={"latent": 8}),
                         objective=vt.TaskConfig("beta-vae", beta=4.0), steps=2000)
    run = vt.train(cfg, x, "runs/small-vae")
    run.model().module          # your SmallVAE, trained
"""
from __future__ import annotations

import importlib
from collections import OrderedDict
from typing import Mapping, Sequence

import torch

from . import _C
from ._checks import type_error, value_error
from .nn import EXTERNAL_MODULES, PYTHON_FAMILIES, ModelConfig

__all__ = ["ARCHITECTURE", "KINDS", "PARTS", "module_model", "build", "module_of", "architecture_entry"]

ARCHITECTURE = "torch-module"     #: ModelConfig.architecture of a user's module
KINDS = ("vae", "classifier")
PARTS = ("encoder", "latent", "decoder", "head")
_ROLES = {"vae": ("mean", "logvar", "sampled", "reconstruction"), "classifier": ("logits",)}

_PARAMS = (  # (name, type, default, doc): listed with the core's architectures
    ("factory", "str", None, "the module's class or function as 'package.module:Name'"),
    ("kwargs", "dict", None, "keyword arguments of the factory (JSON values)"),
    ("kind", "str", None, "'vae' (encode → (mean, logvar), decode → logits) or 'classifier' (forward → logits)"),
    ("input_shape", "ints", None, "the shape of one example, e.g. [1, 28, 28]"),
    ("layers", "strs", None, "submodule names to use as layers (default: every leaf holding parameters)"),
    ("parts", "dict", None, "layer name or prefix → part (encoder, latent, decoder, head)"),
    ("encode", "str", "encode", "a VAE's encoding method"),
    ("decode", "str", "decode", "a VAE's decoding method"),
    ("forward", "str", "forward", "a classifier's forward method"),
)


def architecture_entry() -> dict:
    """This family as :func:`vaetransfer.nn.architectures` lists the core's."""
    return {"name": ARCHITECTURE, "family": "vae | classifier",
            "doc": "a torch.nn.Module of your own, rebuilt from an importable factory (vaetransfer.modules)",
            "params": [{"name": n, "type": t, "default": d, "doc": doc} for n, t, d, doc in _PARAMS]}


def _factory_path(factory) -> str:
    if isinstance(factory, str):
        if ":" not in factory:
            raise value_error("factory", f"expected 'package.module:Name', got {factory!r}")
        return factory
    if not callable(factory):
        raise type_error("factory", f"expected a class or function (or 'package.module:Name'), got {factory!r}")
    path = f"{factory.__module__}:{factory.__qualname__}"
    if "<lambda>" in path or "<locals>" in path:
        raise value_error("factory", f"{path} cannot be imported again to rebuild the module; define it at the top "
                                     "level of a module")
    return path


def _resolve(path: str):
    module_name, _, qualname = path.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        where = (" (a notebook's __main__ is not importable from another process: put the class in a .py file)"
                 if module_name == "__main__" else "")
        raise value_error("factory", f"cannot import {module_name!r} to rebuild the module: {e}{where}") from e
    for attr in qualname.split("."):
        if not hasattr(obj, attr):
            hint = " (defined in the notebook? run that cell first, or put it in a .py file)" \
                if module_name == "__main__" else ""
            raise value_error("factory", f"{path}: {module_name!r} has no {qualname!r}{hint}")
        obj = getattr(obj, attr)
    if not callable(obj):
        raise type_error("factory", f"{path} is not callable")
    return obj


def module_model(factory, *, kind: str, input_shape: Sequence[int], kwargs: Mapping | None = None,
                 layers: Sequence[str] | None = None, parts: Mapping[str, str] | None = None,
                 encode: str = "encode", decode: str = "decode", forward: str = "forward"):
    """A :class:`~vaetransfer.nn.ModelConfig` for your own module (see this module's contract):
    ``factory`` a class/function or ``"package.module:Name"``, called with ``kwargs``."""
    if kind not in KINDS:
        raise value_error("kind", f"expected one of {list(KINDS)}, got {kind!r}")
    if isinstance(input_shape, (str, bytes)) or not all(isinstance(v, int) and v >= 1 for v in input_shape):
        raise value_error("input_shape", f"expected positive sizes such as (1, 28, 28), got {input_shape!r}")
    config = ModelConfig(ARCHITECTURE, factory=_factory_path(factory), kind=kind, input_shape=list(input_shape),
                         kwargs=dict(kwargs) if kwargs else None, layers=list(layers) if layers else None,
                         parts=dict(parts) if parts else None,
                         encode=encode if encode != "encode" else None, decode=decode if decode != "decode" else None,
                         forward=forward if forward != "forward" else None)
    _resolve(config.factory)  # fail now, not in a worker
    return config


# ---------------------------------------------------------------- the bridge the core calls

class _Bridge:
    """The module, its layer table and the callbacks of the core's external model."""

    def __init__(self, config, seed: int, device: str):
        p = config.params()
        self.kind = p.get("kind")
        if self.kind not in KINDS:
            raise value_error("kind", f"expected one of {list(KINDS)}, got {self.kind!r}")
        shape = p.get("input_shape")
        if not shape or not all(isinstance(v, int) and v >= 1 for v in shape):
            raise value_error("input_shape", f"expected positive sizes such as [1, 28, 28], got {shape!r}")
        self.input_shape = tuple(shape)
        factory = _resolve(_factory_path(p.get("factory") or ""))
        kwargs = p.get("kwargs") or {}
        if not isinstance(kwargs, Mapping):
            raise type_error("kwargs", f"expected a mapping of keyword arguments, got {kwargs!r}")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = factory(**kwargs)
        if not isinstance(module, torch.nn.Module):
            raise type_error("factory", f"{p['factory']} returned {type(module).__name__}, expected a torch.nn.Module")
        self.module = module
        self.methods = {k: p.get(k) or k for k in ("encode", "decode", "forward")}
        for role in (("encode", "decode") if self.kind == "vae" else ("forward",)):
            if not callable(getattr(module, self.methods[role], None)):
                raise value_error(role, f"{type(module).__name__} has no method {self.methods[role]!r} (a {self.kind} "
                                        f"needs {'encode(x) -> (mean, logvar) and decode(z) -> logits' if self.kind == 'vae' else 'forward(x) -> logits'})")
        self._to(device)
        self._capturing = False
        self._captured: dict[str, torch.Tensor] = {}
        self._table(p.get("layers"), p.get("parts") or {})

    # -- calling the module
    def _call(self, role: str, *args):
        if role == "forward" and self.methods["forward"] == "forward":
            return self.module(*args)
        return getattr(self.module, self.methods[role])(*args)

    def _encode(self, x):
        out = self._call("encode", x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
            raise value_error("encode", f"expected {self.methods['encode']}(x) to return (mean, logvar), got "
                                        f"{type(out).__name__}")
        mean, logvar = out
        if mean.dim() != 2 or mean.shape != logvar.shape or mean.shape[0] != x.shape[0]:
            raise value_error("encode", f"expected mean and logvar of shape [N, latent], got {list(mean.shape)} and "
                                        f"{list(logvar.shape)} for N = {x.shape[0]}")
        return mean, logvar

    def _decode(self, z):
        logits = self._call("decode", z)
        if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != (z.shape[0], *self.input_shape):
            got = list(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
            raise value_error("decode", f"expected {self.methods['decode']}(z) to return logits of shape "
                                        f"[N, {', '.join(map(str, self.input_shape))}], got {got}")
        return logits

    def _forward(self, x):
        logits = self._call("forward", x)
        if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[0] != x.shape[0]:
            got = list(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
            raise value_error("forward", f"expected forward(x) to return logits [N, classes], got {got}")
        return logits

    # -- the layer table, from one probe pass
    def _table(self, chosen, parts: Mapping[str, str]) -> None:
        named = dict(self.module.named_modules())
        named.pop("", None)
        runs: "OrderedDict[str, tuple[str, object]]" = OrderedDict()  # name → (phase, output), first call
        phase = ["encode"]

        def probe(name):
            def hook(_m, _inp, out):
                runs.setdefault(name, (phase[0], out))
            return hook

        handles = [m.register_forward_hook(probe(n)) for n, m in named.items()]
        was_training = self.module.training
        self.module.eval()
        x = torch.zeros((2, *self.input_shape), device=self.device)
        try:
            with torch.no_grad():
                if self.kind == "vae":
                    mean, logvar = self._encode(x)
                    phase[0] = "decode"
                    roles = {"mean": mean, "logvar": logvar, "reconstruction": self._decode(mean)}
                    self.latent_dim = int(mean.shape[1])
                else:
                    phase[0] = "forward"
                    roles = {"logits": self._forward(x)}
                    self.num_classes = int(roles["logits"].shape[1])
        finally:
            for h in handles:
                h.remove()
            self.module.train(was_training)
        if chosen is None:
            chosen = [n for n, (_, out) in runs.items() if not any(True for _ in named[n].children())
                      and any(True for _ in named[n].parameters(recurse=False)) and isinstance(out, torch.Tensor)]
        else:
            for n in chosen:
                if n not in named:
                    raise value_error("layers", f"{n!r} is not a submodule of {type(self.module).__name__}; "
                                                f"submodules: {sorted(named)}")
                if n not in runs:
                    raise value_error("layers", f"{n!r} does not run in the forward pass")
                if not isinstance(runs[n][1], torch.Tensor):
                    raise value_error("layers", f"{n!r} returns {type(runs[n][1]).__name__}, not a tensor")
        for key, part in parts.items():
            if part not in PARTS:
                raise value_error("parts", f"{key!r}: expected a part among {list(PARTS)}, got {part!r}")
            if not any(n == key or n.startswith(key + ".") for n in chosen):
                raise value_error("parts", f"{key!r} names no layer; layers: {chosen}")

        role_of = {}
        for n in chosen:
            for role, t in roles.items():
                if runs[n][1] is t:
                    role_of[n] = role
        modules = {role: [n for n in chosen if role_of.get(n) == role] for role in _ROLES[self.kind]}

        def part_of(n: str) -> str:
            for key in sorted(parts, key=len, reverse=True):
                if n == key or n.startswith(key + "."):
                    return parts[key]
            return "decoder" if runs[n][0] == "decode" else "encoder"

        plain = [(n, part_of(n), [n]) for n in chosen if n not in role_of]
        if self.kind == "vae":
            layers = [("input", "input", [])] + [l for l in plain if runs[l[0]][0] == "encode"]
            layers += [("mean", "latent", modules["mean"]), ("logvar", "latent", modules["logvar"]),
                       ("sampled", "latent", [])]
            layers += [l for l in plain if runs[l[0]][0] == "decode"]
            layers += [("reconstruction", "decoder", modules["reconstruction"])]
        else:
            layers = [("input", "input", [])] + plain + [("logits", "head", modules["logits"])]
        clash = {n for n, _, _ in plain} & set(_ROLES[self.kind] + ("input",))
        if clash:
            raise value_error("layers", f"submodule names {sorted(clash)} are the package's own layer names; rename "
                                        "them or leave them out of layers")
        self.layers = layers
        self._hooked = {n: named[n] for n in chosen}
        self._handles = [m.register_forward_hook(self._capture(n)) for n, m in self._hooked.items()]

    def _capture(self, name: str):
        def hook(_m, _inp, out):
            if self._capturing and name not in self._captured:
                self._captured[name] = out
        return hook

    # -- callbacks
    @property
    def device(self) -> torch.device:
        for t in self.module.parameters():
            return t.device
        return torch.device("cpu")

    def run(self, x, noise, stop_after: str, step_key):
        """Every layer's output in the table's order, up to ``stop_after`` (all when empty)."""
        if step_key is None:
            return self._run(x, noise, stop_after)
        with _seeded(step_key, self.device):
            return self._run(x, noise, stop_after)

    def _run(self, x, noise, stop_after: str):
        names = [l[0] for l in self.layers]
        stop = names.index(stop_after) if stop_after in names else len(names) - 1
        self._captured, self._capturing = {}, True
        try:
            values = {"input": x}
            if self.kind == "vae":
                values["mean"], values["logvar"] = self._encode(x)
                if stop > names.index("logvar"):
                    if noise is None:
                        raise value_error("noise", "the layer 'sampled' needs ε (a VAE's noise)")
                    values["sampled"] = values["mean"] + torch.exp(0.5 * values["logvar"]) * noise.to(values["mean"])
                    values["reconstruction"] = self._decode(values["sampled"])
            else:
                values["logits"] = self._forward(x)
        finally:
            self._capturing = False
        values.update(self._captured)
        self._captured = {}
        return [(n, values[n]) for n in names[:stop + 1]]

    def decode(self, z):
        return self._decode(z)

    def reinitialize(self, names: list[str], seed: int) -> None:
        wanted = set(names)
        reset = []   # the submodules to reset, all checked before any is
        for mname, m in self.module.named_modules():
            own = [f"{mname}.{k}" if mname else k for k, _ in m.named_parameters(recurse=False)]
            hit = [n for n in own if n in wanted]
            if not hit:
                continue
            if len(hit) != len(own):
                raise value_error("group", f"covers {sorted(hit)} but not all of {mname or 'the module'!r}'s parameters "
                                           f"({sorted(own)}): re-initialise whole submodules")
            if not callable(getattr(m, "reset_parameters", None)):
                raise value_error("group", f"{mname!r} ({type(m).__name__}) has no reset_parameters() to re-initialise "
                                           "it with")
            reset.append(m)
        with _seeded(seed, self.device):
            with torch.no_grad():
                for m in reset:
                    m.reset_parameters()

    def set_training(self, on: bool) -> None:
        self.module.train(on)

    def _to(self, device) -> None:
        # In place (tensor.data), so the core's handles on the same tensors follow.
        with torch.no_grad():
            for t in list(self.module.parameters()) + list(self.module.buffers()):
                t.data = t.data.to(device)

    def to_device(self, device: str) -> None:
        self._to(device)


class _seeded:
    """The default generator of ``device`` seeded with ``seed`` inside, restored after (what
    ``torch.random.fork_rng`` + ``torch.manual_seed`` do, for one generator: ~4 µs instead of ~300 µs,
    which matters once per training step)."""

    def __init__(self, seed: int, device: torch.device):
        if device.type == "cuda":
            self.gen = torch.cuda.default_generators[device.index if device.index is not None else
                                                     torch.cuda.current_device()]
        else:
            self.gen = torch.default_generator
        self.seed = int(seed) % 2**64

    def __enter__(self):
        self.state = self.gen.get_state()
        self.gen.manual_seed(self.seed)

    def __exit__(self, *exc):
        self.gen.set_state(self.state)
        return False


def build(config, seed: int, device: str):
    """The core's model over the module ``config`` describes (``ModelConfig("torch-module", ...)``)."""
    bridge = _Bridge(config, seed, device)
    module = bridge.module
    state = module.state_dict(keep_vars=True)
    params = [(n, t) for n, t in module.named_parameters()]
    buffers = [(n, t) for n, t in module.named_buffers() if n in state]
    p = config.params()
    core_params = {"factory": p["factory"], "input_shape": list(bridge.input_shape)}
    if bridge.kind == "classifier":
        core_params["num_classes"] = bridge.num_classes
    impl = _C.nn.make_external(bridge.kind, ARCHITECTURE, core_params, list(bridge.input_shape), bridge.layers, params,
                               buffers, getattr(bridge, "latent_dim", 0), bridge.run,
                               bridge.decode if bridge.kind == "vae" else None, bridge.reinitialize,
                               bridge.set_training, bridge.to_device)
    impl.train(module.training)
    EXTERNAL_MODULES[impl] = module   # the core's callbacks keep the bridge (and so the module) alive
    return impl


def module_of(impl) -> torch.nn.Module | None:
    """The user's module behind a core model (None for the built-in families)."""
    return EXTERNAL_MODULES.get(impl)


PYTHON_FAMILIES[ARCHITECTURE] = (build, architecture_entry())
