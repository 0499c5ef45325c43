"""Raising the compiled core's argument errors from Python, so both languages
report bad input the same way (the class, the message form and ``.argument``)."""
from __future__ import annotations

from ._C import ArgumentError, ArgumentTypeError


def _make(cls, argument: str, message: str):
    exc = cls(f"argument '{argument}': {message}")
    exc.argument = argument
    return exc


def value_error(argument: str, message: str) -> ArgumentError:
    return _make(ArgumentError, argument, message)


def type_error(argument: str, message: str) -> ArgumentTypeError:
    return _make(ArgumentTypeError, argument, message)
