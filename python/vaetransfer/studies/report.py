"""Rendering study results: ``index.md`` from ``results.json`` and the findings table over any
number of study outputs (``vaetransfer findings``). The reproduction page is
:mod:`.reproduction`; committed outputs and what a notebook shows, :mod:`.published`."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Mapping

from .._checks import value_error
from ..io import read_json
from .kit.markdown import (VERDICTS, effect_text, fmt, markdown_table, power_text, printable, rst_to_markdown,
                           verdict_of, verdict_text)

__all__ = ["fmt", "verdict_text", "markdown_table", "render_index", "findings_rows", "findings_table", "load_output",
           "record_problem"]


def _evidence_text(evidence: Mapping, limit: int = 400) -> str:
    text = json.dumps(evidence, separators=(", ", ": "))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def render_index(results: Mapping, study=None) -> str:
    """``index.md`` of a study, from its results (and the study's own sections, ``study.report``)."""
    r = results
    bi = r.get("build_info") or {}
    lines = [f"# {r['title']}", ""]
    if study is not None and study.description:
        lines += [rst_to_markdown(study.description.strip()), ""]
    preset = f", preset `{r['preset']}`" if r.get("preset") else ""
    runs = "; ".join(f"{name}: {v['done']}/{v['runs']} runs ({v['seconds']:,} s)" for name, v in r["runs"].items())
    lines += [f"Study `{r['study']}`{preset}. This invocation took {r['seconds']:,} s (torch {bi.get('torch', '?')}, "
              f"{bi.get('num_threads', '?')} threads; executor {r['execution']['executor']}, "
              f"{r['execution']['workers']} worker(s)). Runs — {runs or 'none'}.", "",
              "Config: " + ", ".join(f"`{k}={json.dumps(v)}`" for k, v in r["config"].items()), ""]
    findings = [f for f in r.get("findings") or [] if f.get("kind", "finding") == "finding"]
    sanity = [f for f in r.get("findings") or [] if f.get("kind") == "sanity"]
    if findings:
        lines += ["## Findings", "", "Each claim's effect is decided by one procedure over the units that vary "
                  "(seeds, seed pairs), by a rule fixed before the runs: reproduced (the interval beyond the margin "
                  "in the paper's direction), contradicted (wholly on the other side), absent (excludes the stated "
                  "size, not zero) or undecided (the reason is given).", ""]
        lines += markdown_table(["finding", "claim", "source", "effect", "power", "verdict"],
                                [[f"`{f['name']}`", f["claim"], f["source"], effect_text(f.get("effect")),
                                  power_text(f.get("effect")), f"**{verdict_text(f)}**"] for f in findings])
        lines.append("")
    if sanity:
        lines += ["## Sanity checks", "", "Checks that the setup works; they could not tell a paper's claim from its "
                  "negation, so they are not findings and are not counted as such.", ""]
        lines += markdown_table(["check", "what", "verdict"],
                                [[f"`{f['name']}`", f["claim"], f"**{verdict_text(f)}**"] for f in sanity])
        lines.append("")
    if findings or sanity:
        for f in findings + sanity:
            diagnosis = f.get("diagnosis")
            lines.append(f"- `{f['name']}` — rule: {f['rule']} Evidence: `{_evidence_text(f['evidence'])}`"
                         + (f" {verdict_of(f).capitalize()}: {f['reason']}." if f.get("reason") else "")
                         + (f" Diagnosis ({diagnosis['kind']}): {diagnosis['text']}" if diagnosis else ""))
        lines.append("")
    body = study.report(r) if study is not None and study.report else ""
    if body:
        lines += [body.rstrip(), ""]
    shown = [f for f in r.get("figures") or [] if f"({f})" not in body]
    if shown:
        lines += ["## Figures", ""] + [f"![{f}]({f})" for f in shown] + [""]
    return "\n".join(lines)


def _load(path: str | os.PathLike) -> dict:
    return load_output(path)[1]


def load_output(path: str | os.PathLike, argument: str = "dirs") -> tuple[Path, dict]:
    """A study output's directory (as given) and its results; each finding record is checked and
    gets the keys that older results lack (``figures``: [], ``diagnosis``: None). Errors name
    ``argument``."""
    p = Path(path)
    folder = p
    if p.is_dir():
        p = p / "results.json"
    else:
        folder = p.parent
    results = read_json(p, argument, expect=dict)
    if not isinstance(results.get("findings"), list):
        raise value_error(argument, f"{str(p)!r} holds no study results with findings")
    for i, f in enumerate(results["findings"]):
        problem = record_problem(f)
        if problem:
            raise value_error(argument, f"{str(p)!r} is corrupt: finding {i} {problem}")
        f.setdefault("reproduced", None)
        f.setdefault("kind", "finding")
        f.setdefault("effect", None)
        f["verdict"] = verdict_of(f)
        f.setdefault("claim", "")
        f.setdefault("source", "")
        f.setdefault("rule", "")
        f.setdefault("evidence", {})
        f.setdefault("reason", None)
        f.setdefault("figures", [])
        f.setdefault("diagnosis", None)
    return folder, results


def record_problem(f) -> str | None:
    if not isinstance(f, dict):
        return f"is {type(f).__name__}, not a finding record"
    if not isinstance(f.get("name"), str) or not f["name"]:
        return "has no name"
    if not (f.get("reproduced") is None or isinstance(f.get("reproduced"), bool)):
        return f"({f['name']!r}) has a verdict {f.get('reproduced')!r}, not true, false or null"
    if "verdict" in f and f["verdict"] not in VERDICTS:
        return f"({f['name']!r}) has a verdict {f['verdict']!r}, not one of {', '.join(VERDICTS)}"
    if f.get("kind", "finding") not in ("finding", "sanity"):
        return f"({f['name']!r}) has a kind {f.get('kind')!r}, not finding or sanity"
    if not (f.get("effect") is None or isinstance(f.get("effect"), dict)):
        return f"({f['name']!r}) has an effect that is not an object"
    if not isinstance(f.get("evidence", {}), dict):
        return f"({f['name']!r}) has evidence that is not an object"
    figures = f.get("figures", [])
    if not isinstance(figures, list) or not all(isinstance(x, str) and x for x in figures):
        return f"({f['name']!r}) has figures that are not a list of file names"
    d = f.get("diagnosis")
    if d is not None and not (isinstance(d, dict) and isinstance(d.get("kind"), str)
                              and isinstance(d.get("text"), str) and isinstance(d.get("evidence", {}), dict)):
        return f"({f['name']!r}) has a diagnosis that is not {{kind, text, evidence}}"
    return None


def findings_rows(dirs: Iterable[str | os.PathLike]) -> list[dict]:
    """One row per finding of every study output in ``dirs`` (directories or results.json files):
    ``{dir, study, preset, name, kind, claim, source, rule, verdict, reproduced, effect, evidence, reason}``."""
    rows = []
    for d in dirs:
        r = _load(d)
        for f in r["findings"]:
            rows.append({"dir": str(d), "study": r.get("study"), "preset": r.get("preset"), **f})
    return rows


def findings_table(dirs: Iterable[str | os.PathLike]) -> str:
    """The findings of several study outputs as one text table (sanity checks marked), and a count per
    verdict of the findings (sanity checks counted apart)."""
    rows = findings_rows(dirs)
    head = ("study", "preset", "finding", "verdict", "effect / reason / claim")
    cells = [tuple(printable(x) for x in (  # text from files: no control characters reach the terminal
        r["study"] or "?", r["preset"] or "-", r["name"] + (" (sanity)" if r["kind"] == "sanity" else ""),
        verdict_of(r), (effect_text(r["effect"]) + (f" — {r['reason']}" if r["reason"] else "")) if r["effect"]
        else (r["reason"] or r["claim"]))) for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(head[:-1])]
    fmt_row = lambda c: "  ".join(x.ljust(w) for x, w in zip(c[:-1], widths)) + "  " + c[-1]  # noqa: E731
    lines = [fmt_row(head), fmt_row(tuple("-" * w for w in widths) + ("-" * 16,))] + [fmt_row(c) for c in cells]
    for kind, label in (("finding", "findings"), ("sanity", "sanity checks")):
        of_kind = [r for r in rows if r["kind"] == kind]
        if of_kind or kind == "finding":
            counts = {v: sum(verdict_of(r) == v for r in of_kind) for v in VERDICTS}
            lines.append(f"{len(of_kind)} {label}: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
                         if of_kind else f"0 {label}")
    return "\n".join(lines)
