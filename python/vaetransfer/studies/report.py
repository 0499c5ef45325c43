"""Rendering study results: ``index.md`` from ``results.json``, one number format, and the findings
table over any number of study outputs (``vaetransfer findings``)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from .._checks import value_error
from ..io import read_json

__all__ = ["fmt", "verdict_text", "render_index", "findings_rows", "findings_table", "markdown_table"]

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


def _evidence_text(evidence: Mapping, limit: int = 400) -> str:
    text = json.dumps(evidence, separators=(", ", ": "))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def render_index(results: Mapping, study=None) -> str:
    """``index.md`` of a study, from its results (and the study's own sections, ``study.report``)."""
    r = results
    bi = r.get("build_info") or {}
    lines = [f"# {r['title']}", ""]
    if study is not None and study.description:
        lines += [study.description.strip(), ""]
    preset = f", preset `{r['preset']}`" if r.get("preset") else ""
    runs = "; ".join(f"{name}: {v['done']}/{v['runs']} runs ({v['seconds']:,} s)" for name, v in r["runs"].items())
    lines += [f"Study `{r['study']}`{preset}. This invocation took {r['seconds']:,} s (torch {bi.get('torch', '?')}, "
              f"{bi.get('num_threads', '?')} threads; executor {r['execution']['executor']}, "
              f"{r['execution']['workers']} worker(s)). Runs — {runs or 'none'}.", "",
              "Config: " + ", ".join(f"`{k}={json.dumps(v)}`" for k, v in r["config"].items()), ""]
    findings = r.get("findings") or []
    if findings:
        lines += ["## Findings", "", "Each claim is decided by its rule, fixed before the runs; `undecided` means this "
                  "run cannot decide it (the reason is given).", ""]
        lines += markdown_table(["finding", "claim", "source", "verdict"],
                                [[f"`{f['name']}`", f["claim"], f["source"], f"**{verdict_text(f['reproduced'])}**"]
                                 for f in findings])
        lines.append("")
        for f in findings:
            lines.append(f"- `{f['name']}` — rule: {f['rule']} Evidence: `{_evidence_text(f['evidence'])}`"
                         + (f" Undecided: {f['reason']}." if f["reproduced"] is None else ""))
        lines.append("")
    body = study.report(r) if study is not None and study.report else ""
    if body:
        lines += [body.rstrip(), ""]
    shown = [f for f in r.get("figures") or [] if f"({f})" not in body]
    if shown:
        lines += ["## Figures", ""] + [f"![{f}]({f})" for f in shown] + [""]
    return "\n".join(lines)


def _load(path: str | os.PathLike) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    results = read_json(p, "dirs", expect=dict)
    if not isinstance(results, dict) or not isinstance(results.get("findings"), list):
        raise value_error("dirs", f"{str(p)!r} holds no study results with findings")
    return results


def findings_rows(dirs: Iterable[str | os.PathLike]) -> list[dict]:
    """One row per finding of every study output in ``dirs`` (directories or results.json files):
    ``{dir, study, preset, name, claim, source, rule, reproduced, evidence, reason}``."""
    rows = []
    for d in dirs:
        r = _load(d)
        for f in r["findings"]:
            rows.append({"dir": str(d), "study": r.get("study"), "preset": r.get("preset"), **f})
    return rows


def findings_table(dirs: Iterable[str | os.PathLike]) -> str:
    """The findings of several study outputs as one text table, and a count per verdict."""
    rows = findings_rows(dirs)
    head = ("study", "preset", "finding", "verdict", "reason / claim")
    cells = [(r["study"] or "?", r["preset"] or "-", r["name"], verdict_text(r["reproduced"]),
              r["reason"] if r["reproduced"] is None else r["claim"]) for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(head[:-1])]
    fmt_row = lambda c: "  ".join(x.ljust(w) for x, w in zip(c[:-1], widths)) + "  " + c[-1]  # noqa: E731
    lines = [fmt_row(head), fmt_row(tuple("-" * w for w in widths) + ("-" * 16,))] + [fmt_row(c) for c in cells]
    counts = {v: sum(r["reproduced"] is k for r in rows) for k, v in VERDICTS.items()}
    lines.append(f"{len(rows)} findings: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return "\n".join(lines)
