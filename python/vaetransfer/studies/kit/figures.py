"""Figure helpers the studies share."""
from __future__ import annotations

from pathlib import Path


def pyplot():
    """matplotlib.pyplot, imported when a figure is drawn (studies import without it)."""
    import matplotlib.pyplot as plt
    return plt


def save(fig, out: Path, name: str) -> str:
    """Lays out and writes ``fig`` to ``out/name`` (closing it); returns ``name`` for the report."""
    from ... import plots  # matplotlib, loaded only when a figure is drawn
    fig.tight_layout()
    plots.save_figure(fig, Path(out) / name)
    return name
