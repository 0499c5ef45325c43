"""Layer activations of any model on n examples, as ``(n, p)`` matrices for the similarity measures.

* Core models (:class:`vaetransfer.nn.Model`: VAEs, classifiers): any named layer; the model's
  own forward runs in C++. Stochastic layers (a VAE's ``sampled`` and the decoder it feeds) use
  **one** noise draw for all n examples from ``seed`` (``use_mean=True``: none), sliced per
  chunk, so the values do not depend on ``batch_size``.
* Any ``torch.nn.Module``: forward hooks on named submodules (``"input"`` is the input itself).
* Any object with ``activations(x, layers=None, **kwargs) -> OrderedDict``.

Models run under ``torch.no_grad()`` in their current train/eval mode (trained runs load in eval
mode). Activations are stored flattened after the example axis, as ``dtype`` (float16/bfloat16
halve the memory of n = 5,000 conv activations), in an :class:`Activations` mapping whose
``parts`` say which part of the model each layer is in (core models declare them; the similarity
quadrants read them).
"""
from __future__ import annotations

import inspect
from collections import OrderedDict
from typing import Callable, Iterable, Mapping, Sequence

import torch

from ._C import ArgumentError, ArgumentTypeError
from ._checks import argument_error as _error
from ._checks import check_device, check_flag, check_seed
from .nn import Model

__all__ = ["Activations", "activations"]

_STORAGE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class Activations(OrderedDict):
    """``name → (n, p)`` activations in the network's order, with ``parts``: ``name → part``
    (``input``, ``encoder``, ``latent``, ``decoder``, ``head``) as the model declares them
    (:attr:`vaetransfer.nn.Model.layers`), or None when the model declares none (a plain
    ``torch.nn.Module``). An ordinary ``OrderedDict`` otherwise: a new mapping built from it (e.g.
    a dict comprehension) carries no parts."""

    def __init__(self, *args, parts: Mapping[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.parts = None if parts is None else dict(parts)


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            t = _first_tensor(o)
            if t is not None:
                return t
    if isinstance(out, Mapping):
        for o in out.values():
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


def _hooked_forward(model: torch.nn.Module, layers: Sequence[str] | None) -> Callable:
    modules = dict(model.named_modules())
    if layers is None:
        layers = ["input"] + [n for n, m in model.named_modules() if n and not any(True for _ in m.children())]
    for name in layers:
        if name != "input" and name not in modules:
            raise _error(ArgumentError, "layers", f"no submodule named {name!r} (known: {[n for n in modules if n]})")

    def forward(xb: torch.Tensor, **kwargs) -> "OrderedDict[str, torch.Tensor]":
        captured: dict[str, torch.Tensor] = {}
        handles = []
        try:
            for name in layers:
                if name == "input":
                    continue

                def hook(_m, _inp, out, _name=name):
                    t = _first_tensor(out)
                    if t is not None:
                        captured[_name] = t

                handles.append(modules[name].register_forward_hook(hook))
            model(xb, **kwargs)
        finally:
            for h in handles:
                h.remove()
        result = OrderedDict()
        for name in layers:
            if name == "input":
                result[name] = xb
            elif name not in captured:
                raise _error(ArgumentError, "layers", f"submodule {name!r} produced no tensor output in forward()")
            else:
                result[name] = captured[name]
        return result

    return forward


def _custom_forward(custom: Callable, layers: Sequence[str] | None) -> Callable:
    names = None if layers is None else list(layers)
    try:
        takes_layers = "layers" in inspect.signature(custom).parameters
    except (TypeError, ValueError):
        takes_layers = True

    def forward(xb, **kw):
        acts = custom(xb, layers=names, **kw) if takes_layers else custom(xb, **kw)
        if not isinstance(acts, Mapping):
            raise _error(ArgumentTypeError, "model", f"expected activations(x, layers) to return a mapping of layer name "
                                                     f"to tensor, got {type(acts).__name__}")
        if names is None:
            return acts
        missing = [k for k in names if k not in acts]
        if missing:
            raise _error(ArgumentError, "layers", f"unknown layers {missing} (known: {list(acts)})")
        parts = getattr(acts, "parts", None)
        return Activations(((k, acts[k]) for k in names), parts=parts if isinstance(parts, Mapping) else None)

    return forward


def activations(model, x: torch.Tensor, layers: Sequence[str] | str | None = None, *, batch_size: int = 256,
                seed: int = 0, use_mean: bool = False, dtype: torch.dtype = torch.float32,
                device: torch.device | str | None = "cpu", **model_kwargs) -> Activations:
    """Activations of ``model`` on the ``n`` examples ``x: (n, ...)``, in chunks of ``batch_size``.

    Returns ``OrderedDict[name, (n, p)]`` in the network's order, stored as ``dtype`` on ``device``:
    an :class:`Activations` whose ``parts`` are the layers' parts for a core model (None for a
    plain ``torch.nn.Module``; those of a custom ``activations`` result when it has them).
    ``layers``: names to keep (default: every named layer; for a plain ``torch.nn.Module``, ``"input"``
    and every leaf submodule). ``seed`` / ``use_mean``: the noise of a core model's stochastic layers
    (one draw for all n rows). ``model_kwargs`` go to a plain module's forward or a custom
    ``activations``; a tensor whose first dimension is ``n`` is treated as per-example and sliced
    per chunk. Hooks are always removed, even when forward raises.
    """
    if not isinstance(x, torch.Tensor):
        raise _error(ArgumentTypeError, "x", f"expected a tensor of examples, got {type(x).__name__}")
    if x.dim() < 1 or x.shape[0] < 1:
        raise _error(ArgumentError, "x", f"expected at least one example, got shape {tuple(x.shape)}")
    if dtype not in _STORAGE_DTYPES:
        raise _error(ArgumentTypeError, "dtype", f"expected one of {_STORAGE_DTYPES}, got {dtype}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise _error(ArgumentError, "batch_size", f"expected a positive int, got {batch_size!r}")
    if device is not None:
        device = check_device(device)
    seed, use_mean = check_seed(seed), check_flag(use_mean, "use_mean")
    if isinstance(layers, str):
        layers = [layers]
    elif layers is not None:
        if isinstance(layers, (bytes, Mapping)) or not isinstance(layers, Iterable):
            raise _error(ArgumentTypeError, "layers", f"expected a layer name or a sequence of layer names, got {layers!r}")
        layers = list(layers)
        if not all(isinstance(name, str) for name in layers):
            raise _error(ArgumentTypeError, "layers", f"expected layer names (str), got {layers!r}")
    n = x.shape[0]
    model_device = x.device
    if isinstance(model, Model):
        if model_kwargs:
            raise _error(ArgumentError, "model_kwargs", f"core models take no extra arguments, got {sorted(model_kwargs)}")
        model_device = torch.device(model.device)
        model_kwargs = {"noise": model.noise(n, seed=seed, use_mean=use_mean)}
        wanted = list(layers or [])

        def forward(xb, noise=None):
            return model._impl.activations(xb, wanted, xb.shape[0], noise, True)
    elif callable(getattr(model, "activations", None)):
        forward = _custom_forward(model.activations, layers)
    elif isinstance(model, torch.nn.Module):
        forward = _hooked_forward(model, layers)
        try:
            model_device = next(model.parameters()).device
        except StopIteration:
            pass
    else:
        raise _error(ArgumentTypeError, "model", "expected a vaetransfer model, a torch.nn.Module or an object with "
                                                 "activations(x, layers)")

    out: "OrderedDict[str, torch.Tensor]" = OrderedDict()
    declared = None
    with torch.no_grad():
        for start in range(0, n, batch_size):
            xb = x[start:start + batch_size].to(model_device)
            kw = {k: (v[start:start + batch_size].to(model_device)
                      if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == n else v)
                  for k, v in model_kwargs.items()}
            acts = forward(xb, **kw)
            if declared is None and isinstance(getattr(acts, "parts", None), Mapping):
                declared = acts.parts
            for name, a in acts.items():
                if not isinstance(a, torch.Tensor) or a.dim() < 1 or a.shape[0] != xb.shape[0]:
                    got = f"shape {list(a.shape)}" if isinstance(a, torch.Tensor) else type(a).__name__
                    raise _error(ArgumentError, "model", f"layer {name!r}: expected a tensor with one row per example "
                                                         f"({xb.shape[0]} in this chunk), got {got}")
                a = a.reshape(a.shape[0], -1)
                if name not in out:
                    out[name] = torch.empty((n, a.shape[1]), dtype=dtype, device=device or a.device)
                out[name][start:start + a.shape[0]].copy_(a)
    if isinstance(model, Model):  # the core returns a dict: restore the network's order
        order = model.layer_names
        out = OrderedDict(sorted(out.items(), key=lambda kv: order.index(kv[0])))
        declared = dict(model.layers)
    parts = None if declared is None else {k: declared[k] for k in out if k in declared}
    return Activations(out, parts=parts if parts is not None and len(parts) == len(out) else None)
