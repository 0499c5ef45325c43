"""One Markdown and number format for every study report."""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

__all__ = ["VERDICTS", "SYMBOLS", "verdict_of", "fmt", "verdict_text", "part_text", "effect_text", "power_text",
           "markdown_table", "printable", "inline", "inert"]

#: Every verdict a record can hold, in the order counts are shown: a finding's four
#: (:data:`.decision.OUTCOMES`), a sanity check's, and ``not reproduced`` of results written before
#: findings were decided by one procedure (schema < 3: a rule's own False).
VERDICTS = ("reproduced", "contradicted", "absent", "undecided", "passed", "failed", "not reproduced")
SYMBOLS = {"reproduced": "✓", "contradicted": "✗", "absent": "∅", "undecided": "–", "passed": "✓", "failed": "✗",
           "not reproduced": "✗"}


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


def verdict_of(record: Mapping) -> str:
    """A finding record's verdict (one of :data:`VERDICTS`); older records have only ``reproduced``."""
    v = record.get("verdict")
    if isinstance(v, str) and v in VERDICTS:
        return v
    return {True: "reproduced", False: "not reproduced"}.get(record.get("reproduced"), "undecided")


def verdict_text(record: Mapping) -> str:
    """``✓ reproduced`` etc. of a finding record."""
    v = verdict_of(record)
    return f"{SYMBOLS[v]} {v}"


def markdown_table(header: list[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    """A Markdown table (cells through :func:`fmt` unless they are strings)."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in row) + " |")
    return lines


def _g(v: float) -> str:
    return f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"


def part_text(part: Mapping) -> str:
    """One decided part: ``mean [low, high] (n units, method)``, or why it was not decided."""
    if part.get("mean") is None:
        return part.get("reason") or "—"
    ci = f" [{_g(part['ci_low'])}, {_g(part['ci_high'])}]" if part.get("ci_low") is not None else ""
    units = f"{part['seeds']} seeds, {part['n']} pairs" if part.get("seeds") else f"{part['n']} units"
    return f"{_g(part['mean'])}{ci} ({units})"


def effect_text(effect: Mapping | None) -> str:
    """A decision record (:func:`.decision.decide`) in a line: each part's estimate and interval."""
    if not effect:
        return "—"
    parts = effect.get("parts") or {}
    if len(parts) == 1:
        return part_text(next(iter(parts.values())))
    return "; ".join(f"{name}: {part_text(p)}" for name, p in parts.items())


def power_text(effect: Mapping | None) -> str:
    """The power of a decision record (at its stated size), and the units that would decide it."""
    if not effect or effect.get("power") is None:
        need = (effect or {}).get("units_needed")
        return f"— (needs ≥ {need})" if need else "—"
    need = effect.get("units_needed")
    return f"{effect['power']:.2f}" + (f" (≈ {need} {'seeds' if 'seed' in effect.get('unit', '') else 'units'} "
                                        f"would decide)" if need else "")


# ---------------------------------------------------------------- docstrings as reader's text
#: A Sphinx role: ``:func:`~pkg.mod.name` `` (the tilde shows the last component) or ``:class:`x` ``.
_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|data|attr|obj|exc|ref|doc|const):`(~?)([^`<]*?)(?:\s*<[^>]*>)?`")


def rst_to_markdown(text: str) -> str:
    """A docstring's reStructuredText as Markdown a reader sees as text: Sphinx roles become code spans
    of their target (``~`` keeps the last component), double backticks single ones."""
    def role(m: re.Match) -> str:
        target = m.group(2).strip()
        return f"`{target.rsplit('.', 1)[-1] if m.group(1) else target}`"
    return _ROLE.sub(role, text).replace("``", "`")


# ---------------------------------------------------------------- text read from files
#: Control characters (C0 but tab and newline, DEL, C1): a terminal acts on them (ANSI escapes).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: Any) -> str:
    """``text`` for a terminal: control characters removed, line breaks and tabs as spaces."""
    return _CONTROL.sub("", str(text)).replace("\r", " ").replace("\n", " ").replace("\t", " ")


def inline(text: Any) -> str:
    """``text`` read from a file as inert inline Markdown: one line (no heading or block can start),
    HTML special characters as entities (no tag, no autolink), square brackets escaped (no link or
    image). Emphasis and code spans stay: they cannot carry markup."""
    t = printable(text)
    return (t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("[", "\\[")
            .replace("]", "\\]"))


def inert(value: Any) -> Any:
    """A copy of results read from a file with every string (keys included) made :func:`inline`: what
    a page renders of them is text, never markup."""
    if isinstance(value, str):
        return inline(value)
    if isinstance(value, Mapping):
        return {inert(k) if isinstance(k, str) else k: inert(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [inert(v) for v in value]
    return value
