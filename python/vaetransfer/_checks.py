"""Raising the compiled core's argument errors from Python, so both languages
report bad input the same way (the class, the message form and ``.argument``)."""
from __future__ import annotations

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
