"""Committing study outputs (:func:`publish`, into ``docs/reproduction/<study>-<preset>/``) and
which outputs a study's notebook shows (:func:`shown_outputs`: the committed ones of a larger
preset, else its own run)."""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .._checks import value_error
from ..io import inside
from .kit.markdown import effect_text, inert, markdown_table, verdict_text
from .report import load_output
from .reproduction import PRESET_ORDER, run_time

__all__ = ["PUBLISHED_FILES", "publish", "COMMITTED_DIR", "committed_root", "Shown", "shown_outputs"]


# ---------------------------------------------------------------------------------- committing outputs
#: What :func:`publish` copies of a study output besides its figures.
PUBLISHED_FILES = ("results.json", "index.md")
#: A plain name: what a study or preset may be called when it names a folder.
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def _plain_name(value, what: str, argument: str, source) -> str:
    """``value`` read from ``source`` as one path component of ours, or an ArgumentError: no separator,
    no ``..``, no leading dot or dash, nothing absolute — it cannot name a folder outside the root."""
    if not (isinstance(value, str) and _PLAIN.fullmatch(value) and ".." not in value):
        raise value_error(argument, f"{str(source)!r} gives the {what} {value!r}; expected a plain name (letters, "
                                    "digits, '_', '-', '.'; no path)")
    return value


def _ours(folder: Path) -> bool:
    """Whether ``folder`` holds exactly a published output (what :func:`publish` writes: its
    results.json, index.md and the figures that results.json lists, nothing else): only such a folder is
    replaced; anything else under the root is never removed."""
    results = folder / "results.json"
    if not results.is_file():
        return False
    try:
        _, saved = load_output(folder, "root")
    except (ValueError, TypeError):
        return False
    listed = set(PUBLISHED_FILES) | set(saved.get("figures", [])) | {
        x for f in saved.get("findings", []) if isinstance(f, dict) for x in f.get("figures", [])}
    files = {str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir()}
    return files <= listed


def publish(path: str | os.PathLike, root: str | os.PathLike, *, argument: str = "path") -> Path:
    """Copies the parts of a finished study output ``path`` (a directory or its results.json) that
    the reproduction page and the notebooks read — :data:`PUBLISHED_FILES` and every figure its
    results list (the study's and each finding's) — into ``root/<study>-<preset>/``, and nothing
    else (no runs, snapshots, steps or activations). The folder is replaced whole: written beside it
    and renamed into place, so a reader never sees half of it. A figure the results list but the
    output lacks is an ArgumentError naming it (and ``argument``). Returns the folder."""
    folder, results = load_output(path, argument)
    study, preset = results.get("study"), results.get("preset")
    if not (isinstance(study, str) and study and isinstance(preset, str) and preset):
        raise value_error(argument, f"{str(folder)!r} names no study and preset in its results.json")
    source = Path(folder) / "results.json"
    study, preset = _plain_name(study, "study", argument, source), _plain_name(preset, "preset", argument, source)
    figures = list(dict.fromkeys([*results.get("figures", []), *(x for f in results["findings"] for x in f["figures"])]))
    names = [n for n in PUBLISHED_FILES if (Path(folder) / n).is_file()] + figures
    sources = [Path(inside(folder, n, argument, Path(folder) / "results.json")) for n in names]
    missing = [n for n, src in zip(names, sources) if not src.is_file()]
    if missing:
        raise value_error(argument, f"{str(folder)!r} lacks figures its results list: {', '.join(missing)}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{study}-{preset}"
    if target.resolve().parent != root.resolve():   # a link planted at the name: never followed
        raise value_error(argument, f"{str(target)!r} leads outside {str(root)!r}; remove it first")
    if target.exists() and (target.is_symlink() or not target.is_dir() or not _ours(target)):
        raise value_error(argument, f"{str(target)!r} exists and is not a published study output; publishing "
                                    "replaces only its own folders (move it away first)")
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

    def summary(self) -> str:
        """What reproduced in these outputs, as Markdown rendered from their results.json (never
        written by hand, so a notebook cannot state a verdict its results do not): the preset and
        config, then per finding its claim, verdict, effect and, when not reproduced, why."""
        r = inert(self.results)
        config = ", ".join(f"`{k}={json.dumps(v)}`" for k, v in sorted(r.get("config", {}).items())
                           if k in ("seeds", "steps", "n", "pairs", "batch_size", "similarity_n", "betas"))
        lines = [f"**What reproduced at the `{r.get('preset')}` preset** ({run_time(self.results)}"
                 + (f"; {config}" if config else "") + "):", ""]
        findings = [f for f in r.get("findings", []) if f.get("kind", "finding") == "finding"]
        lines += markdown_table(["finding", "claim", "verdict", "effect", "why"],
                                [[f"`{f['name']}`", f["claim"], f"**{verdict_text(f)}**", effect_text(f.get("effect")),
                                  f.get("reason") or "—"] for f in findings])
        return "\n".join(lines)

    def note(self) -> str:
        """One Markdown sentence: which outputs the figures and numbers below come from."""
        if self.committed:
            return (f"The figures and numbers below are the committed **`{self.preset}`** outputs "
                    f"(`{self.dir.as_posix()}`: {run_time(self.results)}), not this notebook's "
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
                _, results = load_output(folder, "committed")
                if results.get("study") != study or results.get("preset") != p:
                    raise value_error("committed", f"{str(folder)!r} holds study {results.get('study')!r} at preset "
                                                   f"{results.get('preset')!r}, not {study!r} at {p!r}")
                return Shown(folder, p, True, results)
    folder, results = load_output(run_dir, "run_dir")
    return Shown(Path(folder), preset, False, results)
