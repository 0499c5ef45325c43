"""Models with named layers (C++ core: ``csrc/vaetransfer/nn``), one interface for every family.

Families (``ModelConfig.architecture``; :func:`architectures` lists them with their parameters):

* VAEs — ``conv`` (Locatello et al. 2019, C×64×64; ``kernel_sizes=(4, 4, 2, 2)`` is
  disentanglement_lib's code), ``fc`` (Locatello fully connected), ``mlp`` and ``cnn`` (Bozkurt et
  al. 2021, "Rate-Regularization and Generalization in VAEs" §4). Layers ``input, enc1…, mean,
  logvar, sampled, dec1…`` (``decM`` is the reconstruction logits); q(z|x) = N(mean, diag
  exp(logvar)), ``sampled`` = mean + exp(logvar/2)·ε.
* Classifiers — ``conv4`` (the 4-block net of "Similarity of Pre-trained and Fine-tuned
  Representations": 4 × [Conv 3×3 → BatchNorm → ReLU → MaxPool] → FC), ``conv-classifier`` (the
  Locatello encoder trunk with a linear head; trunk names equal the ``conv`` VAE's) and
  ``mlp-classifier`` (Linear → [BatchNorm] → ReLU/tanh layers). Layers ``input, …, logits``.

Every model has ordered named layers in parts (``input``, ``encoder``, ``latent``, ``decoder``,
``head``), parameters and buffers by name (``state_dict`` holds both: BatchNorm statistics
included), train/eval modes, and freezing / re-initialisation by group: ``"all"``, a part, a
layer, a parameter name or any dotted prefix (``"block1.bn"``).
"""
from __future__ import annotations

import importlib
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Sequence

import torch

from . import _C
from ._checks import (check_device, human_bytes, memory_limit_bytes, check_flag, check_int, check_number, check_seed, check_str, check_tensor, is_int,
                      type_error, value_error)
from .export import to_torch

__all__ = ["ModelConfig", "Model", "VAE", "Classifier", "build_model", "architectures"]


#: Families built in Python, by architecture: ``(build(config, seed, device) -> core model, entry)``
#: (``entry`` as :func:`architectures` lists it). :mod:`vaetransfer.modules` registers ``torch-module``.
PYTHON_FAMILIES: dict[str, tuple] = {}
#: The ``torch.nn.Module`` behind each core model a Python family built (weakly keyed by the core model).
EXTERNAL_MODULES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def architectures() -> list[dict]:
    """The registered model families: ``name, family, doc, params`` (each ``name, type, default, doc``),
    the core's and those built in Python (``torch-module``: your own module, :mod:`vaetransfer.modules`)."""
    return list(_C.nn.registered()) + [entry for _, entry in PYTHON_FAMILIES.values()]


class ModelConfig:
    """What to build: an ``architecture`` registered in the core (:func:`architectures`) and its
    parameters, e.g. ``ModelConfig("mlp-classifier", input_shape=[12], hidden=[10, 7], num_classes=3)``.

    The parameters and their defaults are declared once, in the core: a parameter reads like an
    attribute (an unset one gives the architecture's default, None where the core declares none), a
    parameter the architecture does not have is an error naming it when the model is built, and a
    new architecture needs no change here. ``None`` values are left unset."""

    def __init__(self, architecture: str = "conv", **params):
        self.architecture = architecture
        self._params = {k: _plain(v) for k, v in params.items() if v is not None}

    def params(self) -> dict:
        """The parameters handed to the core (the ones set)."""
        return dict(self._params)

    def replace(self, **changes) -> "ModelConfig":
        """A copy with ``changes`` set (None unsets a parameter)."""
        merged = {**self._params, **changes}
        return ModelConfig(self.architecture, **{k: v for k, v in merged.items() if v is not None})

    def __getattr__(self, key: str):
        if key.startswith("_"):
            raise AttributeError(key)
        if key in self._params:
            return self._params[key]
        entries = architectures()
        for e in entries:
            if e["name"] == self.architecture:
                for p in e["params"]:
                    if p["name"] == key:
                        return p["default"]
        if any(p["name"] == key for e in entries for p in e["params"]):
            return None  # a parameter of other architectures: this one does not have it
        raise AttributeError(f"no architecture has a parameter {key!r}")

    def to_dict(self) -> dict:
        return {"architecture": self.architecture, **self._params}

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        if not isinstance(d, dict):
            raise type_error("model", f"expected an object of model parameters, got {d!r}")
        d = dict(d)
        options = d.pop("options", None) or {}  # config.json of earlier releases: parameters without a field
        return cls(d.pop("architecture", "conv"), **d, **options)

    def __eq__(self, other) -> bool:
        return isinstance(other, ModelConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        args = ", ".join([repr(self.architecture)] + [f"{k}={v!r}" for k, v in self._params.items()])
        return f"ModelConfig({args})"


def _plain(v):
    """JSON-like parameter values: tuples as lists (one form for equality and saved configs)."""
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    return [_plain(x) for x in v] if isinstance(v, (tuple, list)) else v


def _build(config: ModelConfig, seed: int, device: str):
    if isinstance(config, torch.nn.Module):
        raise type_error("model", f"expected a ModelConfig; your own {type(config).__name__} trains through "
                                  f"vaetransfer.module_model({type(config).__name__}, kind='vae' or 'classifier', "
                                  "input_shape=..., kwargs=...): a factory the package can rebuild the module from on "
                                  "resume (see vaetransfer.modules)")
    if not isinstance(config, ModelConfig):
        raise type_error("config", f"expected a ModelConfig, got {type(config).__name__}")
    if not isinstance(config.architecture, str):
        raise type_error("architecture", f"expected a string, got {type(config.architecture).__name__}")
    if not is_int(seed) or not 0 <= seed < 2**63:
        raise value_error("seed", f"expected an int >= 0 (below 2^63), got {seed!r}")
    if config.architecture in PYTHON_FAMILIES:
        return PYTHON_FAMILIES[config.architecture][0](config, int(seed), _device_name(device))
    try:
        return _C.nn.make_model(config.architecture, config.params(), int(seed), _device_name(device))
    except (MemoryError, RuntimeError) as exc:  # the allocator refused a parameter (sizes in the config)
        if not isinstance(exc, MemoryError) and "can't allocate memory" not in str(exc):
            raise
        raise value_error("model", f"the {config.architecture!r} model of {config.params()} needs more memory than "
                                   f"this process may use ({human_bytes(memory_limit_bytes())}): "
                                   f"{str(exc).split(': ', 1)[-1][:200]}") from None


def _device_name(device) -> str:
    """The core's name of a checked device (:func:`vaetransfer._checks.check_device`)."""
    return str(check_device(device))


def _layer_names(layers, argument: str = "layers") -> list[str]:
    """None (all), one name or a sequence of names, as a list."""
    if layers is None:
        return []
    if isinstance(layers, str):
        return [layers]
    if isinstance(layers, (bytes, Mapping)) or not isinstance(layers, Iterable):
        raise type_error(argument, f"expected a layer name or a sequence of layer names, got {layers!r}")
    layers = list(layers)
    if not all(isinstance(n, str) for n in layers):
        raise type_error(argument, f"expected a layer name or a sequence of layer names, got {layers!r}")
    return layers


def _groups(groups, argument: str) -> list[str]:
    for g in groups:
        if not isinstance(g, str):
            raise type_error(argument, f"expected parameter group names (str), got {type(g).__name__} {g!r}")
    return list(groups)


def build_model(config: ModelConfig | None = None, seed: int = 0, device: str = "cpu") -> "Model":
    """The model ``config`` describes, initialised from ``seed``: a :class:`VAE` or a :class:`Classifier`."""
    config = config if config is not None else ModelConfig()
    impl = _build(config, seed, device)
    return wrapper(impl.family)._wrap(impl, config)


#: The Python wrapper of each model family of the core (``family`` → class). A subclass of
#: :class:`Model` that sets ``_family`` registers itself (the text package registers T5 and T5-VAE),
#: so this module needs to know no family but its own.
WRAPPERS: dict[str, type] = {}

#: The module that defines (and so registers) the wrapper of a family built elsewhere, imported by
#: name when such a model is first built: ``import vaetransfer`` does not load the text stack.
WRAPPER_MODULES: dict[str, str] = {"t5": "vaetransfer.text", "t5-vae": "vaetransfer.text"}


def wrapper(family: str) -> type:
    """The Python class of the core's model family ``family`` (:class:`Model` when none is
    registered), importing the module of :data:`WRAPPER_MODULES` that registers it on first use."""
    if family not in WRAPPERS and family in WRAPPER_MODULES:
        importlib.import_module(WRAPPER_MODULES[family])
    return WRAPPERS.get(family, Model)


class Model:
    """A model of the C++ core. Tensors in and out are torch tensors on ``device``."""

    _family: str | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_family") is not None:
            WRAPPERS.setdefault(cls._family, cls)

    def __init__(self, config: ModelConfig | None = None, seed: int = 0, device: str = "cpu"):
        self.config = config if config is not None else ModelConfig()
        self._impl = _build(self.config, seed, device)
        if self._family is not None and self._impl.family != self._family:
            raise value_error("config", f"the '{self.config.architecture}' architecture builds a {self._impl.family}, "
                                        f"not a {self._family}; use vaetransfer.nn.build_model")

    @classmethod
    def _wrap(cls, impl, config: ModelConfig) -> "Model":
        m = cls.__new__(cls)
        m.config, m._impl = config, impl
        return m

    # -- introspection
    @property
    def architecture(self) -> str:
        return self._impl.architecture

    @property
    def family(self) -> str:
        return self._impl.family

    @property
    def params(self) -> dict:
        """The resolved build parameters (defaults filled in)."""
        return dict(self._impl.params)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self._impl.input_shape)

    @property
    def layer_names(self) -> list[str]:
        return list(self._impl.layer_names)

    @property
    def layers(self) -> list[tuple[str, str]]:
        """``(name, part)`` of every layer, in order."""
        return [tuple(l) for l in self._impl.layers]

    @property
    def parameter_names(self) -> list[str]:
        return list(self._impl.parameter_names)

    @property
    def buffer_names(self) -> list[str]:
        return list(self._impl.named_buffers())

    @property
    def device(self) -> str:
        return self._impl.device

    @property
    def training(self) -> bool:
        return bool(self._impl.training)

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """The live parameters (autograd leaves; ``.grad`` after a backward pass)."""
        return self._impl.named_parameters()

    def named_buffers(self) -> dict[str, torch.Tensor]:
        """The live buffers (e.g. BatchNorm ``running_mean``, ``running_var``, ``num_batches_tracked``)."""
        return self._impl.named_buffers()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Parameters and buffers by name (copies)."""
        return self._impl.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Strict: every parameter and buffer with its shape, nothing else."""
        if not isinstance(state, Mapping):
            raise type_error("state", f"expected a mapping of name to tensor, got {type(state).__name__}")
        for k, v in state.items():
            if not isinstance(k, str) or not isinstance(v, torch.Tensor):
                raise type_error("state", f"expected a mapping of name (str) to tensor, got {k!r}: {type(v).__name__}")
        self._impl.load_state_dict(dict(state))

    # -- modes
    def train(self, mode: bool = True) -> "Model":
        """Training mode (BatchNorm uses and updates batch statistics)."""
        self._impl.train(check_flag(mode, "mode"))
        return self

    def eval(self) -> "Model":
        """Evaluation mode (BatchNorm uses its running statistics)."""
        return self.train(False)

    def to(self, device: str) -> "Model":
        self._impl.to(_device_name(device))
        return self

    # -- transfer
    def group(self, group: str) -> list[str]:
        """Parameter names of a group: ``"all"``, a part, a layer, a parameter name or a dotted prefix."""
        return list(self._impl.group(check_str(group, "group")))

    def freeze(self, *groups: str) -> None:
        """Stops training the parameters of ``groups`` (see :meth:`group`)."""
        self._impl.set_trainable(_groups(groups, "groups"), False)

    def unfreeze(self, *groups: str) -> None:
        self._impl.set_trainable(_groups(groups, "groups"), True)

    @property
    def frozen_parameters(self) -> list[str]:
        return list(self._impl.frozen_parameters())

    def reinitialize(self, group: str, seed: int = 0) -> None:
        """Draws fresh values for a group with PyTorch's default initialisation (BatchNorm layers
        covered entirely are reset, running statistics included)."""
        self._impl.reinitialize(check_str(group, "group"), check_seed(seed))

    # -- activations
    def activations(self, x: torch.Tensor, layers: Sequence[str] | str | None = None, *, chunk_size: int = 500,
                    seed: int = 0, use_mean: bool = False, flatten: bool = True) -> "OrderedDict[str, torch.Tensor]":
        """Ordered ``name → activation`` ([N, p] when ``flatten``) of ``layers`` (all by default), in the
        network's order, computed in chunks without autograd in the current train/eval mode.

        Stochastic layers (a VAE's ``sampled`` and the decoder fed by it) use one noise draw for
        all N examples from ``seed`` (or none when ``use_mean``), so the result does not depend on
        ``chunk_size``. :func:`vaetransfer.activations.activations` does the same for any model
        with reduced-precision storage.
        """
        layers = _layer_names(layers)
        check_tensor(x, "x")
        if x.dim() < 1:
            raise value_error("x", f"expected examples [N, ...], got shape {list(x.shape)}")
        chunk_size = check_int(chunk_size, "chunk_size", 1, what="a chunk size")
        noise = self.noise(x.shape[0], seed=seed, use_mean=use_mean)
        out = self._impl.activations(x, layers, chunk_size, noise, check_flag(flatten, "flatten"))
        order = self.layer_names
        return OrderedDict(sorted(out.items(), key=lambda kv: order.index(kv[0])))

    def noise(self, n: int, *, seed: int = 0, use_mean: bool = False) -> torch.Tensor | None:
        """The per-example noise of n examples (a VAE's ε [n, latent]; None for deterministic models)."""
        return self._impl.noise(check_int(n, "n", 0, what="a number of examples"), check_seed(seed),
                                check_flag(use_mean, "use_mean"))

    @property
    def module(self) -> torch.nn.Module | None:
        """Your own module (the live one the core trains) for a ``torch-module`` model; None otherwise."""
        return EXTERNAL_MODULES.get(self._impl)

    def to_torch(self) -> torch.nn.Module:
        """The plain-PyTorch twin (:func:`vaetransfer.export.to_torch`) with these weights and buffers, on the
        CPU; for your own module, a copy of it."""
        if self.module is not None:
            import copy

            return copy.deepcopy(self.module).cpu()
        return to_torch(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.architecture!r}, {len(self.parameter_names)} parameters, {self.device})"


class VAE(Model):
    """A VAE of the core (``conv``, ``fc``, ``mlp``, ``cnn``)."""

    _family = "vae"

    @property
    def latent_dim(self) -> int:
        return int(self._impl.latent_dim)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x float [N, *input_shape] → (mean, logvar), each [N, latent]."""
        return self._impl.encode(check_tensor(x, "x"))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """z [N, latent] → reconstruction logits [N, *input_shape]."""
        return self._impl.decode(check_tensor(z, "z"))

    def forward(self, x: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(mean, logvar, z, logits) with z = mean + exp(logvar/2)·eps (differentiable)."""
        return self._impl.forward_with_noise(check_tensor(x, "x"), check_tensor(eps, "eps"))

    def reconstruct(self, x: torch.Tensor, *, sample: bool = False, seed: int = 0,
                    chunk_size: int = 1024) -> torch.Tensor:
        """sigmoid(decode(z)) with z the posterior mean (or a sample), [N, *input_shape]."""
        return self._impl.reconstruct(check_tensor(x, "x"), check_flag(sample, "sample"), check_seed(seed),
                                      check_int(chunk_size, "chunk_size", 1, what="a chunk size"))

    def sample(self, n: int, *, seed: int = 0) -> torch.Tensor:
        """sigmoid(decode(z)), z ~ N(0, I): [n, *input_shape]."""
        return self._impl.sample(check_int(n, "n", 0, what="a number of samples"), check_seed(seed))

    def traverse(self, x: torch.Tensor, values: torch.Tensor | Sequence[float] | None = None, *,
                 steps: int = 10, limit: float = 2.0) -> torch.Tensor:
        """Latent traversal of one example x [1, *input_shape]: [latent, len(values), *input_shape].

        Latent d of the example's posterior mean is set to each value (default
        ``linspace(-limit, limit, steps)``), the others kept.
        """
        check_tensor(x, "x")
        if values is None:
            steps = check_int(steps, "steps", 1, what="a number of steps")
            limit = check_number(limit, "limit", minimum=0.0)
            values = torch.linspace(-limit, limit, steps)
        else:
            if isinstance(values, (str, bytes)):
                raise type_error("values", f"expected a tensor or a sequence of numbers, got {type(values).__name__}")
            try:
                values = torch.as_tensor(values, dtype=torch.float32)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise type_error("values", f"expected a tensor or a sequence of numbers, got {type(values).__name__}") \
                    from exc
            if values.dim() == 1 and values.numel() == 0:
                raise value_error("values", "expected at least one value")
            if not bool(torch.isfinite(values).all()):
                raise value_error("values", "expected finite values, found NaN or inf")
        return self._impl.traverse(x, values)


class Classifier(Model):
    """A classifier of the core (``conv4``, ``conv-classifier``, ``mlp-classifier``)."""

    _family = "classifier"

    def __init__(self, config: ModelConfig | None = None, seed: int = 0, device: str = "cpu"):
        super().__init__(config if config is not None else ModelConfig(architecture="conv4"), seed, device)

    @property
    def num_classes(self) -> int:
        return int(self._impl.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits [N, num_classes] (differentiable; BatchNorm follows the train/eval mode)."""
        return self._impl.forward(check_tensor(x, "x"))

    def predict(self, x: torch.Tensor, *, chunk_size: int = 1024) -> torch.Tensor:
        """Predicted classes [N] (int64) in the current mode, without autograd."""
        check_tensor(x, "x")
        chunk_size = check_int(chunk_size, "chunk_size", 1, what="a chunk size")
        with torch.no_grad():
            if x.dim() >= 1 and x.shape[0] == 0:  # no examples: no predictions (the shape is checked all the same)
                return self.forward(x).argmax(1) if x.dim() > 1 else torch.empty(0, dtype=torch.long)
            return torch.cat([self.forward(x[s:s + chunk_size]).argmax(1) for s in range(0, x.shape[0], chunk_size)])
