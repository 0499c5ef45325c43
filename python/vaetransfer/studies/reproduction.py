"""The reproduction page (``vaetransfer findings --markdown``): every finding of every study, per
preset, with its numbers, figures and diagnosis, rendered from study outputs."""
from __future__ import annotations

import json
import math
import os
import urllib.parse
from pathlib import Path
from typing import Any, Iterable, Mapping

from .._C import ArgumentError
from .._checks import value_error
from ..io import inside
from .kit.markdown import SYMBOLS, effect_text, inert, markdown_table, power_text, verdict_of
from .registry import get_study
from .report import load_output

__all__ = ["STUDY_ORDER", "PRESET_ORDER", "DEFAULT_TITLE", "key_numbers", "reproduction_page", "run_time"]


# ---------------------------------------------------------------------------------- the reproduction page
#: The studies in the order of the papers they test (others follow, alphabetically).
STUDY_ORDER = ("transfer", "rate_distortion", "t5_pretrain", "t5_vae", "finetune_similarity", "rr_pretraining",
               "quickstart")
#: The presets from the smallest to the largest (others follow, alphabetically, and count as larger).
PRESET_ORDER = ("smoke", "small", "medium", "paper")
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
    return urllib.parse.quote(Path(target).as_posix(), safe="/._-~")


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
    files; at most one per study and preset): a summary table (study × finding × verdict per preset:
    ✓ reproduced, ✗ contradicted, ∅ absent, – undecided, blank not run; counts per preset), the sanity
    checks apart, then per study (in the papers' order, :data:`STUDY_ORDER`) the outputs used and one
    block per finding: claim, source, rule, what its effect is (statistic, unit, stated size, margin,
    control), a table of preset, verdict, effect with its interval, power and key numbers
    (:func:`key_numbers`), its figures (of the largest preset whose output holds them; links relative to
    ``link_base`` if given, else as given), the reason of the largest preset that gives one, and the
    diagnosis of the largest preset that has one. Results written before the one decision procedure
    (no ``verdict``) show ✗ not reproduced for a rule's own False.
    ``expected``: studies (registered names) whose findings the page lists even without an output —
    blank in the summary, and their claims in a closing section — so that a page of some studies
    says what it does not yet cover. Unreadable results are an ArgumentError naming ``dirs`` and
    the path; an unknown study in ``expected``, one naming ``expected``."""
    outputs = []
    for d in dirs:
        folder, results = load_output(d)
        results = inert(results)   # text from a file: rendered as text, never as markup
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

    def records(outs, kind):  # finding name → {preset: record}, in the order the names appear
        found: dict[str, dict] = {}
        for o in outs:
            for f in o["results"]["findings"]:
                if f["kind"] == kind:
                    found.setdefault(f["name"], {})[o["preset"]] = (o, f)
        return found

    lines = [f"# {title}", "",
             f"Generated by `vaetransfer findings --markdown` from the `results.json` of {len(outputs)} study "
             f"output(s); regenerate it rather than edit it. Each finding's rule, fixed before the runs, says what "
             f"its *effect* is: a signed statistic per unit that varies (a seed, a pair of models of different "
             f"seeds), positive in the paper's direction. One procedure decides every finding, separately at each "
             f"preset, from the interval (95 %) of the effect's mean over its units — a t interval over independent "
             f"units, a leave-one-seed-out jackknife when units share seeds, widened by the example-level error "
             f"where there is one: ✓ **reproduced** (the interval lies beyond the margin in the paper's direction), "
             f"✗ **contradicted** (wholly on the other side), ∅ **absent** (it excludes the stated size but not "
             f"zero), – **undecided** (the reason is given: too few seeds — then how many would decide at the "
             f"observed spread —, a model that did not train, not run); blank: not run at that preset. A claim "
             f"over several parts (layers, objectives) is reproduced when every part is, decided against when one "
             f"part is (Bonferroni over the parts); parts left out (a model that did not train) are named. "
             f"*Power* is the chance of reproducing an effect of the stated size at the preset's units (a lower "
             f"bound: at the 80 % upper bound of the observed spread). Sanity checks — that the setup works; they "
             f"could not tell a claim from its negation — are shown apart and not counted. A diagnosis says why a "
             f"verdict is what it is: `reproduced`, `scale` (does not show at this size; shows, or is expected to, "
             f"at a larger one), `setting` (depends on a setting), `data` (a property of the stand-in data), "
             f"`defect` (a fault of our code, fixed) or `open` (not yet separated).", "", "## Summary", ""]
    shown_verdicts = ("reproduced", "contradicted", "absent", "undecided", "not reproduced")
    rows, totals = [], {p: dict.fromkeys(shown_verdicts, 0) for p in presets}
    for name in order:
        for finding, by_preset in records(studies[name], "finding").items():
            cells = []
            for p in presets:
                if p in by_preset:
                    verdict = verdict_of(by_preset[p][1])
                    totals[p][verdict] += 1
                    cells.append(SYMBOLS[verdict])
                else:
                    cells.append("")
            rows.append([f"`{name}`", f"`{finding}`"] + cells)
    for name in not_run:
        rows += [[f"`{name}`", f"`{f.name}`"] + [""] * len(presets) for f in declared[name].findings
                 if f.kind == "finding"]
    rows.append(["**total**", ""] + [" · ".join([f"{totals[p][v]} {SYMBOLS[v]}" for v in shown_verdicts[:4]] +
                                                ([f"{totals[p]['not reproduced']} ✗ (own rule)"]
                                                 if totals[p]["not reproduced"] else [])) for p in presets])
    lines += markdown_table(["study", "finding"] + [f"`{_label(p)}`" for p in presets], rows) + [""]
    sanity_rows = []
    for name in order:
        for check, by_preset in records(studies[name], "sanity").items():
            sanity_rows.append([f"`{name}`", f"`{check}`"] + [SYMBOLS[verdict_of(by_preset[p][1])] if p in by_preset
                                                            else "" for p in presets])
    if sanity_rows:
        lines += ["Sanity checks (not findings: ✓ passed, ✗ failed, – undecided):", ""]
        lines += markdown_table(["study", "check"] + [f"`{_label(p)}`" for p in presets], sanity_rows) + [""]

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
            code = r.get("code") if isinstance(r.get("code"), dict) else {}
            if code.get("commit"):
                extra.append(f"code {code['commit'][:10]}" + (" with uncommitted changes" if code.get("dirty") else ""))
            lines.append(f"- `{_label(o['preset'])}`: `{Path(o['path']).as_posix()}` — {run_time(r)}"
                         + "".join(f", {e}" for e in extra))
        lines.append("")
        for kind in ("finding", "sanity"):
            for finding, by_preset in records(outs, kind).items():
                lines += _finding_block(finding, kind, sorted(by_preset.items(), key=lambda kv: _preset_key(kv[0])),
                                        link_base)
    if not_run:
        lines += ["## Not run yet", "", "Studies with no output on this page; their findings, undecided until they run:", ""]
        for name in not_run:
            decl = declared[name]
            lines += [f"### {decl.title} (`{name}`)", ""]
            lines += [f"- `{f.name}` — {f.claim} *({f.source})*" for f in decl.findings] or ["- (no findings declared)"]
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _finding_block(finding: str, kind: str, ordered: list, link_base) -> list[str]:
    """One finding's (or sanity check's) block: claim, source, rule, what its effect is, a table per
    preset (verdict, effect and interval, power, key numbers), its figures and its diagnosis."""
    last = ordered[-1][1][1]
    lines = [f"### `{finding}`" + (" (sanity check)" if kind == "sanity" else ""), "",
             f"- **Claim:** {last['claim'] or '—'}",
             f"- **Source:** {last['source'] or '—'}",
             f"- **Rule:** {last['rule'] or '—'}"]
    effect = next((f["effect"] for _, (o, f) in reversed(ordered) if f.get("effect")), None)
    if effect:
        lines.append(f"- **Effect:** {effect['statistic']} — per {effect['unit']}; stated size {_sig(effect['size'])} "
                     f"({effect['size_source']}); margin {_sig(effect['margin'])}")
        if effect.get("control"):
            lines.append(f"- **Control:** {effect['control']}")
    lines.append("")
    if kind == "finding":
        table = [[f"`{_label(p)}`", f"{SYMBOLS[verdict_of(f)]} {verdict_of(f)}", _cell(effect_text(f.get("effect"))),
                  _cell(power_text(f.get("effect"))), _cell(key_numbers(f["evidence"]))] for p, (o, f) in ordered]
        lines += markdown_table(["preset", "verdict", "effect [95 % interval] (units)", "power", "key numbers"],
                                table) + [""]
    else:
        lines += markdown_table(["preset", "verdict", "key numbers"],
                                [[f"`{_label(p)}`", f"{SYMBOLS[verdict_of(f)]} {verdict_of(f)}",
                                  _cell(key_numbers(f["evidence"]))] for p, (o, f) in ordered]) + [""]
    figures = list(dict.fromkeys(x for _, (o, f) in ordered for x in f["figures"]))
    for fig in figures:
        listed = [(p, o) for p, (o, f) in ordered if fig in f["figures"]]
        found = [(p, o) for p, o in listed if Path(inside(o["dir"], fig, "dirs", o["dir"] / "results.json")).is_file()]
        if found:
            p, o = found[-1]
            lines += [f"![{fig} ({_label(p)})]({_link(Path(o['dir']) / fig, link_base)})", "",
                      f"*`{fig}`, preset `{_label(p)}`.*", ""]
        else:
            where = ", ".join(f"`{Path(o['dir'], fig).as_posix()}`" for _, o in listed)
            lines += [f"*Missing figure:* `{fig}` (not found: {where}).", ""]
    reasons = [(p, verdict_of(f), f["reason"]) for p, (o, f) in ordered if f.get("reason")]
    if reasons:
        p, verdict, reason = reasons[-1]
        lines += [f"**{verdict.capitalize()} at `{_label(p)}`:** {reason}", ""]
    diagnosed = [(p, f["diagnosis"]) for p, (o, f) in ordered if f["diagnosis"]]
    if diagnosed:
        p, d = diagnosed[-1]
        evidence = key_numbers(d.get("evidence") or {})
        lines += [f"**Diagnosis ({d['kind']}):** {d['text'].strip()} *(preset `{_label(p)}`"
                  + (f"; {evidence}" if evidence != "—" else "") + ")*", ""]
    return lines


def _declared(name: str):
    """The :class:`Study` declaration of a study the page expects (ArgumentError naming ``expected``)."""
    try:
        return get_study(name)
    except ArgumentError as exc:
        raise value_error("expected", f"{name!r} is not a study: {exc}") from None
