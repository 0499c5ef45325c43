"""vaetransfer: transfer learning in (variational) autoencoders.

A C++/LibTorch core (``vaetransfer._C``) with a thin, typed Python API.
"""
from __future__ import annotations

import importlib

import torch  # noqa: F401  (loads libtorch before the compiled core)

try:
    from . import _C
except ImportError as e:  # typically an extension built against another torch (C++ ABI)
    raise ImportError(f"vaetransfer's compiled core does not load with torch {torch.__version__}: {e}. It must be "
                      "built against the torch installed now (>= 2.11): reinstall vaetransfer with "
                      "`pip install --no-build-isolation --no-deps -e .` (or `make build`)") from e
from ._C import ArgumentError, ArgumentTypeError
from . import data, estimators, io, similarity
from . import activations, nn, objectives, regularizers, schedules
from .nn import VAE, Classifier, Model, ModelConfig, build_model
from . import modules
from .modules import module_model
from .objectives import ObjectiveConfig, TaskConfig
from .regularizers import RegularizerConfig
from .schedules import ScheduleConfig
# `vaetransfer.train` is the function; the module stays importable as `vaetransfer.train` in
# `from vaetransfer.train import ...` statements.
from .train import OptimizerConfig, PhaseConfig, Run, TrainConfig, TrainingDivergedError, load_run, train
from . import rr  # noqa: E402  (after train: greedy_pretraining uses it)

try:  # the installed distribution's: 0.1.0+torch2.13.0.cpu names the torch the core was compiled against
    from importlib.metadata import PackageNotFoundError as _NotFound, version as _version
    __version__ = _version("vaetransfer")
except _NotFound:  # run from a source tree that was never installed
    __version__ = "unknown"
__all__ = ["ArgumentError", "ArgumentTypeError", "build_info", "activations", "data", "estimators", "nn", "objectives",
           "regularizers", "rr", "schedules", "similarity", "text", "Model", "VAE", "Classifier", "ModelConfig", "build_model",
           "modules", "module_model",
           "ObjectiveConfig", "TaskConfig", "RegularizerConfig", "ScheduleConfig", "OptimizerConfig", "PhaseConfig",
           "TrainConfig", "Run", "TrainingDivergedError", "train", "load_run", "__version__"]

# Loaded on first access (``vaetransfer.plots``, ``vaetransfer.text``), not by ``import vaetransfer``:
# plots needs matplotlib, text the text stack. vaetransfer.nn imports vaetransfer.text itself when a
# T5 or T5-VAE model is first built (nn.WRAPPER_MODULES).
_LAZY_SUBMODULES = ("plots", "text")


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # the import binds it here as well
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))


def build_info() -> dict:
    """What the compiled core was built with and runs with.

    Keys: ``torch`` (runtime version), ``torch_compiled`` (headers compiled against),
    ``torch_cuda`` (the CUDA of the torch running, None for a CPU build), ``torch_cuda_compiled``
    (that of the torch compiled against), ``cuda`` (CUDA sources compiled in),
    ``cuda_architectures`` and ``cuda_compiler`` (the TORCH_CUDA_ARCH_LIST and nvcc version of those
    sources; "" without CUDA), ``cuda_available`` (a CUDA device usable now),
    ``compiler``, ``build_type``, ``cplusplus``, ``num_threads`` (ATen/OpenMP
    intra-op threads), ``parallel_backend``, ``eigen``.
    """
    info = dict(_C.build_info())
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    info["cuda_available"] = bool(info["cuda"] and torch.cuda.is_available())
    return info
