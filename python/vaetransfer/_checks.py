"""Raising the compiled core's argument errors from Python, so both languages
report bad input the same way (the class, the message form and ``.argument``),
and the checks that public entry points share (devices, counts, seeds, numbers,
tensors), each raising a named error."""
from __future__ import annotations

import math
import os
import numbers
import operator
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from ._C import ArgumentError, ArgumentTypeError


def argument_error(cls, argument: str, message: str):
    """``cls`` (ArgumentError/ArgumentTypeError or a subclass) with the message form and ``.argument``."""
    exc = cls(f"argument '{argument}': {message}")
    exc.argument = argument
    return exc


def value_error(argument: str, message: str) -> ArgumentError:
    return argument_error(ArgumentError, argument, message)


def type_error(argument: str, message: str) -> ArgumentTypeError:
    return argument_error(ArgumentTypeError, argument, message)


def bare_message(exc: str | Exception) -> str:
    """An argument error's message without its ``argument '...': `` prefix (to say it again under
    another argument)."""
    text = str(exc)
    argument = getattr(exc, "argument", None)
    return text.removeprefix(f"argument '{argument}': ") if argument is not None else text


def renamed(exc: Exception, names: dict, default: str | None = None) -> Exception:
    """The core's argument error ``exc`` naming the caller's argument instead: its ``.argument``
    looked up in ``names`` (core name → public name; ``default`` for names not in it, None to
    keep them). Other exceptions are returned as they are."""
    core = getattr(exc, "argument", None)
    if not isinstance(exc, (ArgumentError, ArgumentTypeError)) or core is None:
        return exc
    public = names.get(core, default if default is not None else core)
    if public == core:
        return exc
    message = bare_message(exc)
    for inner, outer in names.items():  # the core's other names quoted in the message
        message = message.replace(f"'{inner}'", f"'{outer}'")
    return argument_error(type(exc), public, message)


# ---------------------------------------------------------------- devices
def check_device(device, argument: str = "device") -> torch.device:
    """``device`` (a name such as ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` or a
    :class:`torch.device`) as a :class:`torch.device` that this process can use. A malformed or
    unknown name, CUDA without a usable CUDA device, a CUDA index beyond the device count and MPS
    without MPS raise :class:`ArgumentError` naming ``argument``; another type
    :class:`ArgumentTypeError`."""
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError, TypeError):
            raise value_error(argument, f"expected a device such as 'cpu', 'cuda' or 'cuda:1', got {device!r}") from None
    else:
        raise type_error(argument, f"expected a device name (str) or a torch.device, got {type(device).__name__}")
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = "this PyTorch is built without CUDA" if torch.version.cuda is None else "no CUDA device is visible"
            raise value_error(argument, f"expected a usable device, got {device!r}, but CUDA is not available "
                                        f"({why}); use 'cpu'")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise value_error(argument, f"expected a CUDA device index in [0, {count}), got {device!r}")
        return dev
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise value_error(argument, f"expected a usable device, got {device!r}, but MPS is not available; use 'cpu'")
        return dev
    raise value_error(argument, f"expected a 'cpu', 'cuda' or 'mps' device, got {device!r}")


# ---------------------------------------------------------------- numbers
def is_int(value) -> bool:
    """An integer — Python, NumPy or a 0-d integer tensor, what ``operator.index`` takes — but not a
    bool, and not a one-element tensor (torch indexes those too, but they are sequences)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_" or getattr(value, "dtype", None) == torch.bool:
        return False
    if isinstance(value, torch.Tensor) and value.dim() != 0:
        return False
    try:
        operator.index(value)
    except (TypeError, ValueError, RuntimeError):
        return False
    return True


def sequence(values, argument: str, what: str) -> list:
    """A one-dimensional sequence — list, tuple, range, NumPy array or tensor — as a list (a str or
    a mapping is not one)."""
    if isinstance(values, (torch.Tensor, np.ndarray)):
        if values.ndim != 1:
            raise value_error(argument, f"expected {what} (one-dimensional), got shape {tuple(values.shape)}")
        return values.tolist()
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (Sequence, range)):
        raise type_error(argument, f"expected {what}, got {type(values).__name__}")
    return list(values)


def check_int(value, argument: str, minimum: int | None = None, maximum: int | None = None, *,
              what: str = "an int") -> int:
    """``value`` as an int in [minimum, maximum]: ArgumentTypeError for a non-integer (bools and
    floats included), ArgumentError outside the range."""
    if not is_int(value):
        raise type_error(argument, f"expected {what}, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum or maximum is not None and value > maximum:
        bounds = (f">= {minimum}" if maximum is None else f"<= {maximum}" if minimum is None
                  else f"in [{minimum}, {maximum}]")
        raise value_error(argument, f"expected {what} {bounds}, got {value}")
    return value


def check_seed(seed, argument: str = "seed") -> int:
    """A seed: an int in [0, 2^63)."""
    if is_int(seed) and not 0 <= seed < 2**63:
        raise value_error(argument, f"expected a seed in [0, 2^63), got {int(seed)}")
    return check_int(seed, argument, what="a seed")


def check_number(value, argument: str, *, minimum: float | None = None, maximum: float | None = None,
                 exclusive: bool = False, finite: bool = True) -> float:
    """``value`` as a float: ArgumentTypeError for a non-number (bools included), ArgumentError
    for NaN (and ±inf when ``finite``) or outside [minimum, maximum] (open with ``exclusive``)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_" or not isinstance(value, numbers.Real):
        raise type_error(argument, f"expected a number, got {type(value).__name__} {value!r}")
    x = float(value)
    if math.isnan(x) or finite and math.isinf(x):
        raise value_error(argument, f"expected a {'finite ' if finite else ''}number, got {value!r}")
    low = minimum is not None and (x <= minimum if exclusive else x < minimum)
    high = maximum is not None and (x >= maximum if exclusive else x > maximum)
    if low or high:
        lo, hi = ("(", ")") if exclusive else ("[", "]")
        bounds = (f"in {lo}{minimum}, {maximum}{hi}" if minimum is not None and maximum is not None
                  else f"{'>' if exclusive else '>='} {minimum}" if minimum is not None
                  else f"{'<' if exclusive else '<='} {maximum}")
        raise value_error(argument, f"expected a number {bounds}, got {value!r}")
    return x


def check_flag(value, argument: str) -> bool:
    """A bool (Python or NumPy)."""
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise type_error(argument, f"expected a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def check_str(value, argument: str, choices=None) -> str:
    """A str, one of ``choices`` when given."""
    if not isinstance(value, str):
        what = f"one of {list(choices)}" if choices is not None else "a str"
        raise type_error(argument, f"expected {what}, got {type(value).__name__} {value!r}")
    if choices is not None and value not in choices:
        raise value_error(argument, f"expected one of {list(choices)}, got {value!r}")
    return value


def check_tensor(value, argument: str, *, optional: bool = False) -> torch.Tensor | None:
    """A tensor (None too when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, torch.Tensor):
        raise type_error(argument, f"expected a tensor, got {type(value).__name__}")
    if value.is_meta:
        raise type_error(argument, "expected a tensor holding values, got a meta tensor (a shape without data)")
    return value


# ---------------------------------------------------------------- sizes against memory

#: The largest count a size argument may take (steps, batches, resamples…): far beyond any run, and
#: within int64 and float64's exact integers, so no step arithmetic or progress fraction overflows.
MAX_COUNT = 2**53


def memory_limit_bytes() -> int:
    """The memory this process may use: the smallest of physical memory, the address-space and data
    limits (``ulimit -v``/``-d``) and the cgroup's limit (containers). Read at each call, so a limit
    set later (a test, a job scheduler) counts."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        pass
    try:
        import resource

        for which in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
            soft, _ = resource.getrlimit(which)
            if soft != resource.RLIM_INFINITY and soft > 0:
                limits.append(int(soft))
    except (ImportError, ValueError, OSError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read(64).strip()
            if text.isdigit() and int(text) < 2**60:
                limits.append(int(text))
        except OSError:
            pass
    return min(limits) if limits else 2**63 - 1


def human_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} EiB"


def check_fits(nbytes: int | float, argument: str, what: str, budget: int | None = None,
               budget_name: str = "this process's memory limit") -> None:
    """ArgumentError naming ``argument`` when ``nbytes`` (the size ``what`` needs, a lower bound) is over
    ``budget`` (default: :func:`memory_limit_bytes`) — said before anything is allocated."""
    limit = memory_limit_bytes() if budget is None else int(budget)
    if nbytes > limit:
        raise value_error(argument, f"{what} needs at least {human_bytes(nbytes)}, more than {budget_name} "
                                    f"({human_bytes(limit)})")
