"""Rendering study results: ``index.md`` from ``results.json``, one number format, the findings
table over any number of study outputs (``vaetransfer findings``), the reproduction page
(``vaetransfer findings --markdown``: every finding of every study, per preset, with its numbers,
figures and diagnosis) and which outputs a study's notebook shows (the committed ones of a
larger preset, else its own run)."""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .._C import ArgumentError
from .._checks import value_error
from ..io import inside, read_json

__all__ = ["fmt", "verdict_text", "render_index", "findings_rows", "findings_table", "markdown_table",
           "key_numbers", "reproduction_page", "STUDY_ORDER", "PRESET_ORDER", "committed_root", "shown_outputs",
           "Shown", "COMMITTED_DIR", "publish"]

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
            diagnosis = f.get("diagnosis")
            lines.append(f"- `{f['name']}` — rule: {f['rule']} Evidence: `{_evidence_text(f['evidence'])}`"
                         + (f" Undecided: {f['reason']}." if f["reproduced"] is None else "")
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
    return _load_output(path)[1]


def _load_output(path: str | os.PathLike, argument: str = "dirs") -> tuple[Path, dict]:
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
        problem = _record_problem(f)
        if problem:
            raise value_error(argument, f"{str(p)!r} is corrupt: finding {i} {problem}")
        f.setdefault("reproduced", None)
        f.setdefault("claim", "")
        f.setdefault("source", "")
        f.setdefault("rule", "")
        f.setdefault("evidence", {})
        f.setdefault("reason", None)
        f.setdefault("figures", [])
        f.setdefault("diagnosis", None)
    return folder, results


def _record_problem(f) -> str | None:
    if not isinstance(f, dict):
        return f"is {type(f).__name__}, not a finding record"
    if not isinstance(f.get("name"), str) or not f["name"]:
        return "has no name"
    if not (f.get("reproduced") is None or isinstance(f.get("reproduced"), bool)):
        return f"({f['name']!r}) has a verdict {f.get('reproduced')!r}, not true, false or null"
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


def _run_time(r: dict) -> str:
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
        folder, results = _load_output(d)
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
            lines.append(f"- `{_label(o['preset'])}`: `{Path(o['path']).as_posix()}` — {_run_time(r)}"
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
    from . import get_study

    try:
        return get_study(name)
    except ArgumentError as exc:
        raise value_error("expected", f"{name!r} is not a study: {exc}") from None


# ---------------------------------------------------------------------------------- committing outputs
#: What :func:`publish` copies of a study output besides its figures.
PUBLISHED_FILES = ("results.json", "index.md")


def publish(path: str | os.PathLike, root: str | os.PathLike, *, argument: str = "path") -> Path:
    """Copies the parts of a finished study output ``path`` (a directory or its results.json) that
    the reproduction page and the notebooks read — :data:`PUBLISHED_FILES` and every figure its
    results list (the study's and each finding's) — into ``root/<study>-<preset>/``, and nothing
    else (no runs, snapshots, steps or activations). The folder is replaced whole: written beside it
    and renamed into place, so a reader never sees half of it. A figure the results list but the
    output lacks is an ArgumentError naming it (and ``argument``). Returns the folder."""
    folder, results = _load_output(path, argument)
    study, preset = results.get("study"), results.get("preset")
    if not (isinstance(study, str) and study and isinstance(preset, str) and preset):
        raise value_error(argument, f"{str(folder)!r} names no study and preset in its results.json")
    figures = list(dict.fromkeys([*results.get("figures", []), *(x for f in results["findings"] for x in f["figures"])]))
    names = [n for n in PUBLISHED_FILES if (Path(folder) / n).is_file()] + figures
    sources = [Path(inside(folder, n, argument, Path(folder) / "results.json")) for n in names]
    missing = [n for n, src in zip(names, sources) if not src.is_file()]
    if missing:
        raise value_error(argument, f"{str(folder)!r} lacks figures its results list: {', '.join(missing)}")
    target = Path(root) / f"{study}-{preset}"
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        for name, src in zip(names, sources):
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, staging / name)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            os.replace(target, old / target.name)
        os.replace(staging, target)
        if old is not None:
            shutil.rmtree(old)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


# ---------------------------------------------------------------------------------- what a notebook shows
#: Where the repository keeps the committed study outputs the reproduction page reads
#: (``<study>-<preset>/``: results.json, index.md, figures), relative to its root.
COMMITTED_DIR = Path("docs") / "reproduction"
#: Environment: where the committed outputs are (overrides the search), and what a notebook shows
#: (``auto``: the largest committed preset above the notebook's, else its own run; ``run``: its own run).
COMMITTED_ENV, SHOW_ENV = "VAETRANSFER_REPRODUCTION", "VAETRANSFER_SHOW"


def committed_root() -> Path | None:
    """The folder of committed study outputs: ``$VAETRANSFER_REPRODUCTION`` when set, else the
    first :data:`COMMITTED_DIR` above the working directory or above this package's source (an
    editable install or a checkout); None when there is none (an installed wheel ships none)."""
    env = os.environ.get(COMMITTED_ENV)
    if env:
        return Path(env)
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for folder in (start, *start.parents):
            if (folder / COMMITTED_DIR).is_dir():
                return folder / COMMITTED_DIR
    return None


@dataclass(frozen=True)
class Shown:
    """The outputs a study's notebook shows (:func:`shown_outputs`): ``dir`` (figures are files in
    it), ``preset``, ``committed`` (True: the repository's committed run, False: the notebook's
    own) and ``results`` (its results.json; ``analysis``, ``findings`` and ``figures`` its parts).
    ``shown / "name.png"`` is a figure's path."""

    dir: Path
    preset: str
    committed: bool
    results: dict = field(repr=False)

    def __truediv__(self, name: str) -> Path:
        return self.dir / name

    @property
    def analysis(self) -> dict:
        return self.results["analysis"]

    @property
    def findings(self) -> list[dict]:
        return self.results["findings"]

    @property
    def figures(self) -> list[str]:
        return self.results.get("figures", [])

    def note(self) -> str:
        """One Markdown sentence: which outputs the figures and numbers below come from."""
        if self.committed:
            return (f"The figures and numbers below are the committed **`{self.preset}`** outputs "
                    f"(`{self.dir.as_posix()}`: {_run_time(self.results)}), not this notebook's "
                    f"run; set `{SHOW_ENV}=run` to show this notebook's own.")
        return f"The figures and numbers below are this notebook's own **`{self.preset}`** run (`{self.dir.as_posix()}`)."


def shown_outputs(study: str, run_dir: str | os.PathLike, preset: str, *, committed: str | os.PathLike | None = None,
                  show: str | None = None) -> Shown:
    """What a study's notebook shows after running ``study`` at ``preset`` into ``run_dir``: the
    committed outputs (``committed``, default :func:`committed_root`; ``<study>-<p>/results.json``)
    of the largest preset in :data:`PRESET_ORDER` above ``preset`` — ``medium`` before ``small`` —
    when there are any, else the notebook's own run. ``show`` (default ``$VAETRANSFER_SHOW``, else
    ``auto``): ``auto`` as above, ``run`` always the own run. Committed results that cannot be read
    are an ArgumentError naming the path."""
    show = show if show is not None else os.environ.get(SHOW_ENV, "auto")
    if show not in ("auto", "run"):
        raise value_error("show", f"expected 'auto' or 'run' (also through ${SHOW_ENV}), got {show!r}")
    if preset not in PRESET_ORDER:
        raise value_error("preset", f"expected one of {', '.join(PRESET_ORDER)}, got {preset!r}")
    root = Path(committed) if committed is not None else committed_root()
    if show == "auto" and root is not None:
        for p in reversed(PRESET_ORDER[PRESET_ORDER.index(preset) + 1:]):
            folder = root / f"{study}-{p}"
            if (folder / "results.json").is_file():
                _, results = _load_output(folder, "committed")
                if results.get("study") != study or results.get("preset") != p:
                    raise value_error("committed", f"{str(folder)!r} holds study {results.get('study')!r} at preset "
                                                   f"{results.get('preset')!r}, not {study!r} at {p!r}")
                return Shown(folder, p, True, results)
    folder, results = _load_output(run_dir, "run_dir")
    return Shown(Path(folder), preset, False, results)
