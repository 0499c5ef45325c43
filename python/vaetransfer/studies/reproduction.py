"""The reproduction page (``vaetransfer findings --markdown``): every finding of every study, per
preset, with its numbers, figures and diagnosis, rendered from study outputs."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from .._C import ArgumentError
from .._checks import value_error
from ..io import inside
from .kit.markdown import VERDICTS, markdown_table
from .registry import get_study
from .report import load_output

__all__ = ["STUDY_ORDER", "PRESET_ORDER", "SYMBOLS", "DEFAULT_TITLE", "key_numbers", "reproduction_page", "run_time"]


# ---------------------------------------------------------------------------------- the reproduction page
#: The studies in the order of the papers they test (others follow, alphabetically).
STUDY_ORDER = ("transfer", "rate_distortion", "t5_pretrain", "t5_vae", "finetune_similarity", "rr_pretraining",
               "quickstart")
#: The presets from the smallest to the largest (others follow, alphabetically, and count as larger).
PRESET_ORDER = ("smoke", "small", "medium", "paper")
SYMBOLS = {True: "✓", False: "✗", None: "–"}
KEY_NUMBERS = 12   #: entries of a finding's evidence shown on the page
LIST_ITEMS = 6     #: numbers of a list shown

DEFAULT_TITLE = "Reproducing the papers' findings"


def _sig(v: float, digits: int = 3) -> str:
    """``v`` to ``digits`` significant digits: plain between 1e-4 and 1e6, else in e-notation."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    e = math.floor(math.log10(abs(v)))
    if not -4 <= e < 6:
        return f"{v:.{digits - 1}e}"
    places = digits - 1 - e
    r = round(v, places)
    if r != 0 and math.floor(math.log10(abs(r))) > e:  # rounding carried into the next power of ten
        places -= 1
    return f"{r:.{max(places, 0)}f}"


def _scalar(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return str(v) if abs(v) < 10 ** 6 else _sig(float(v))
    if isinstance(v, float):
        return _sig(v)
    text = str(v)
    return text if len(text) <= 60 else text[:59] + "…"


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float))


def _is_summary(v: Any) -> bool:
    return isinstance(v, Mapping) and set(v) == {"mean", "se"} and all(_is_scalar(x) for x in v.values())


def _value(v: Any) -> str:
    """One evidence value: a number to 3 significant digits, a ``{mean, se}`` summary as
    ``mean ± se``, a list of numbers (at most :data:`LIST_ITEMS` of them shown)."""
    if _is_summary(v):
        return f"{_scalar(v['mean'])} ± {_scalar(v['se'])}"
    if isinstance(v, (list, tuple)) and all(_is_scalar(x) for x in v):
        more = len(v) - LIST_ITEMS
        return "[" + ", ".join(_scalar(x) for x in v[:LIST_ITEMS]) + (f", … ({more} more)" if more > 0 else "") + "]"
    if isinstance(v, (list, tuple, Mapping)):
        return _scalar(json.dumps(v, separators=(",", ":")))
    return _scalar(v)


def _flatten(evidence: Mapping, prefix: str = "") -> list[tuple[str, Any]]:
    items = []
    for k, v in evidence.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v and not _is_summary(v):
            items += _flatten(v, key + ".")
        else:
            items.append((key, v))
    return items


def _code(text: str) -> str:
    return "`" + text.replace("`", "'").replace("\n", " ") + "`"


def _cell(text: str) -> str:
    return text.replace("\n", " ").replace("|", "\\|")


def key_numbers(evidence: Mapping, limit: int = KEY_NUMBERS) -> str:
    """A compact rendering of a finding's ``evidence``: nested dicts flattened to dotted keys,
    numbers to 3 significant digits, lists of numbers cut to :data:`LIST_ITEMS`, at most ``limit``
    entries (then ``… (N more)``); ``—`` when there is none."""
    items = _flatten(evidence or {})
    if not items:
        return "—"
    shown = [_code(f"{k}={_value(v)}") for k, v in items[:limit]]
    more = len(items) - limit
    return "; ".join(shown) + (f"; … ({more} more)" if more > 0 else "")


def _preset_key(preset: str | None) -> tuple:
    if preset in PRESET_ORDER:
        return (PRESET_ORDER.index(preset), "")
    return (len(PRESET_ORDER) + 1, "") if preset is None else (len(PRESET_ORDER), preset)


def _study_key(study: str) -> tuple:
    return (STUDY_ORDER.index(study), "") if study in STUDY_ORDER else (len(STUDY_ORDER), study)


def _label(preset: str | None) -> str:
    return preset if preset else "-"


def _link(path: Path, link_base: str | os.PathLike | None) -> str:
    target = os.path.relpath(os.path.abspath(path), os.path.abspath(link_base)) if link_base is not None \
        else os.fspath(path)
    target = Path(target).as_posix()
    return f"<{target}>" if any(c in target for c in " ()<>") else target


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _seconds(v: Any) -> str:
    return f"{v:,.1f} s" if _number(v) else "? s"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return _seconds(seconds)
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def run_time(r: dict) -> str:
    """What an output cost: its runs' time summed over runs (what a study spends, whichever
    invocation trained them) and how long its last invocation took (a re-run reuses finished runs)."""
    runs = r.get("runs")
    stages = [v for v in runs.values() if isinstance(v, dict)] if isinstance(runs, dict) else []
    last = f"last invocation {_seconds(r.get('seconds'))}"
    if not stages:
        return last
    done = sum(v["done"] for v in stages if _number(v.get("done")))
    total = sum(v["seconds"] for v in stages if _number(v.get("seconds")))
    return f"{done:,} runs, {_duration(total)} of run time summed over runs; {last}"


def reproduction_page(dirs: Iterable[str | os.PathLike], *, title: str = DEFAULT_TITLE,
                      link_base: str | os.PathLike | None = None, expected: Iterable[str] = ()) -> str:
    """The reproduction page (Markdown) of the study outputs ``dirs`` (directories or results.json
    files; at most one per study and preset): a summary table (study × finding × verdict per preset,
    ✓ reproduced, ✗ not reproduced, – undecided, blank not run; totals per preset), then per study
    (in the papers' order, :data:`STUDY_ORDER`) the outputs used and one block per finding: claim,
    source, rule, a table of preset, verdict and key numbers (:func:`key_numbers`), its figures (of
    the largest preset whose output holds them; links relative to ``link_base`` if given, else as
    given) and the diagnosis of the largest preset that has one (else why it is undecided).
    ``expected``: studies (registered names) whose findings the page lists even without an output —
    blank in the summary, and their claims in a closing section — so that a page of some studies
    says what it does not yet cover. Unreadable results are an ArgumentError naming ``dirs`` and
    the path; an unknown study in ``expected``, one naming ``expected``."""
    outputs = []
    for d in dirs:
        folder, results = load_output(d)
        outputs.append({"path": d, "dir": folder, "results": results, "study": str(results.get("study") or "?"),
                        "preset": results.get("preset") if isinstance(results.get("preset"), str) else None})
    if not outputs:
        raise value_error("dirs", "expected at least one study output")
    studies: dict[str, list[dict]] = {}
    for o in outputs:
        same = [x for x in studies.get(o["study"], []) if x["preset"] == o["preset"]]
        if same:
            raise value_error("dirs", f"{str(same[0]['path'])!r} and {str(o['path'])!r} are both study "
                                      f"{o['study']!r} at preset {_label(o['preset'])!r}; the page takes one "
                                      f"output per study and preset")
        studies.setdefault(o["study"], []).append(o)
    order = sorted(studies, key=_study_key)
    for name in order:
        studies[name].sort(key=lambda o: _preset_key(o["preset"]))
    presets = sorted({o["preset"] for o in outputs}, key=_preset_key)
    not_run = sorted((n for n in dict.fromkeys(expected) if n not in studies), key=_study_key)
    declared = {n: _declared(n) for n in not_run}

    def records(outs):  # finding name → {preset: record}, in the order the names appear
        found: dict[str, dict] = {}
        for o in outs:
            for f in o["results"]["findings"]:
                found.setdefault(f["name"], {})[o["preset"]] = (o, f)
        return found

    lines = [f"# {title}", "",
             f"Generated by `vaetransfer findings --markdown` from the `results.json` of {len(outputs)} study "
             f"output(s); regenerate it rather than edit it. Each finding is decided by a rule fixed before the "
             f"runs, separately at each preset: ✓ reproduced, ✗ not reproduced, – undecided (this run cannot "
             f"decide it), blank: not run at that preset. A diagnosis says why a verdict is what it is: "
             f"`reproduced`, `scale` (does not show at this size; shows, or is expected to, at a larger one), "
             f"`setting` (depends on a setting), `data` (a property of the stand-in data), `defect` (a fault of "
             f"our code, fixed) or `open` (not yet separated).", "", "## Summary", ""]
    rows, totals = [], {p: {True: 0, False: 0, None: 0} for p in presets}
    for name in order:
        for finding, by_preset in records(studies[name]).items():
            cells = []
            for p in presets:
                if p in by_preset:
                    verdict = by_preset[p][1]["reproduced"]
                    totals[p][verdict] += 1
                    cells.append(SYMBOLS[verdict])
                else:
                    cells.append("")
            rows.append([f"`{name}`", f"`{finding}`"] + cells)
    for name in not_run:
        rows += [[f"`{name}`", f"`{f.name}`"] + [""] * len(presets) for f in declared[name].findings]
    rows.append(["**total**", ""] + [" · ".join(f"{totals[p][v]} {SYMBOLS[v]}" for v in (True, False, None))
                                     for p in presets])
    lines += markdown_table(["study", "finding"] + [f"`{_label(p)}`" for p in presets], rows) + [""]

    for name in order:
        outs = studies[name]
        title_of = next((o["results"].get("title") for o in reversed(outs) if o["results"].get("title")), name)
        lines += [f"## {title_of}", "", f"Study `{name}`, from:", ""]
        for o in outs:
            r = o["results"]
            extra = []
            bi = r.get("build_info") if isinstance(r.get("build_info"), dict) else {}
            if bi.get("torch"):
                extra.append(f"torch {bi['torch']}")
            ex = r.get("execution") if isinstance(r.get("execution"), dict) else {}
            if ex.get("device") not in (None, "cpu"):
                extra.append(f"device {ex['device']}")
            lines.append(f"- `{_label(o['preset'])}`: `{Path(o['path']).as_posix()}` — {run_time(r)}"
                         + "".join(f", {e}" for e in extra))
        lines.append("")
        for finding, by_preset in records(outs).items():
            ordered = sorted(by_preset.items(), key=lambda kv: _preset_key(kv[0]))
            last = ordered[-1][1][1]
            lines += [f"### `{finding}`", "",
                      f"- **Claim:** {last['claim'] or '—'}",
                      f"- **Source:** {last['source'] or '—'}",
                      f"- **Rule:** {last['rule'] or '—'}", ""]
            lines += markdown_table(["preset", "verdict", "key numbers"],
                                    [[f"`{_label(p)}`", f"{SYMBOLS[f['reproduced']]} {VERDICTS[f['reproduced']]}",
                                      _cell(key_numbers(f["evidence"]))] for p, (o, f) in ordered]) + [""]
            figures = list(dict.fromkeys(x for _, (o, f) in ordered for x in f["figures"]))
            for fig in figures:
                listed = [(p, o) for p, (o, f) in ordered if fig in f["figures"]]
                found = [(p, o) for p, o in listed
                         if Path(inside(o["dir"], fig, "dirs", o["dir"] / "results.json")).is_file()]
                if found:
                    p, o = found[-1]
                    lines += [f"![{fig} ({_label(p)})]({_link(Path(o['dir']) / fig, link_base)})", "",
                              f"*`{fig}`, preset `{_label(p)}`.*", ""]
                else:
                    where = ", ".join(f"`{Path(o['dir'], fig).as_posix()}`" for _, o in listed)
                    lines += [f"*Missing figure:* `{fig}` (not found: {where}).", ""]
            diagnosed = [(p, f["diagnosis"]) for p, (o, f) in ordered if f["diagnosis"]]
            undecided = [(p, f["reason"]) for p, (o, f) in ordered if f["reproduced"] is None and f["reason"]]
            if diagnosed:
                p, d = diagnosed[-1]
                evidence = key_numbers(d.get("evidence") or {})
                lines += [f"**Diagnosis ({d['kind']}):** {d['text'].strip()} *(preset `{_label(p)}`"
                          + (f"; {evidence}" if evidence != "—" else "") + ")*", ""]
            elif undecided:
                p, reason = undecided[-1]
                lines += [f"**Undecided at `{_label(p)}`:** {reason}", ""]
    if not_run:
        lines += ["## Not run yet", "", "Studies with no output on this page; their findings, undecided until they run:", ""]
        for name in not_run:
            decl = declared[name]
            lines += [f"### {decl.title} (`{name}`)", ""]
            lines += [f"- `{f.name}` — {f.claim} *({f.source})*" for f in decl.findings] or ["- (no findings declared)"]
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _declared(name: str):
    """The :class:`Study` declaration of a study the page expects (ArgumentError naming ``expected``)."""
    try:
        return get_study(name)
    except ArgumentError as exc:
        raise value_error("expected", f"{name!r} is not a study: {exc}") from None
