"""One Markdown and number format for every study report."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["VERDICTS", "fmt", "verdict_text", "markdown_table"]

VERDICTS = {True: "reproduced", False: "not reproduced", None: "undecided"}


def fmt(v: Any, digits: int = 3) -> str:
    """One number format for every report: a ``{"mean", "se"}`` summary as ``mean ± se``, a number
    with ``digits`` significant decimals, None as an em dash."""
    if isinstance(v, Mapping) and "mean" in v:
        if v.get("mean") is None:
            return "—"
        return f"{v['mean']:.{digits}f} ± {(v.get('se') or 0):.{digits}f}"
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 1e5 else f"{v:.4g}"
    return str(v)


def verdict_text(reproduced: bool | None) -> str:
    return VERDICTS[reproduced]


def markdown_table(header: list[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    """A Markdown table (cells through :func:`fmt` unless they are strings)."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in row) + " |")
    return lines
