"""The package's three rings point one way: ``cli → {studies, plan} → {sweep, studies/kit} → library → _C``.

Read from the source (every import statement, those inside functions included):

* **the ring direction** — the library (every module outside ``studies``, ``sweep`` and ``cli``)
  imports no study, no kit, no sweep and no command line; the sweep layer imports neither studies nor
  the kit; the kit imports no study and nothing of the studies' runner; a study package imports no
  other study and, of the studies ring, only the runner (``studies.pipeline``: diagnostics beside a
  study); beside its own package it imports the kit, the sweep layer and the library; the transfer
  plans (``plan``: runs over the sweep layer, like a study) import the sweep layer and the library;
* **no private reach** — no file imports another file's ``_private`` name;
* **no circle** — no import cycle between modules, a package's ``__init__`` and its own submodules
  included (an ``__init__`` that imports a submodule which imports the ``__init__`` back is a cycle).
"""
import ast
import subprocess
import sys
from pathlib import Path

import vaetransfer

ROOT = Path(vaetransfer.__file__).parent
PACKAGE = "vaetransfer"
COMPILED = "vaetransfer._C"  # the compiled core: a leaf, not a Python file


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path | None]:
    found: dict[str, Path | None] = {_module_name(p): p for p in ROOT.rglob("*.py")}
    found[COMPILED] = None
    return found


def _imports(path: Path, name: str, modules) -> list[tuple[str, str | None]]:
    """``(module, imported name or None)`` for every package import in ``path``: the deepest
    existing module each statement names, and the name it takes from it (``from m import x`` where
    ``m.x`` is no module)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[tuple[str, str | None]] = []
        if isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names if a.name.split(".")[0] == PACKAGE]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                full = f"{module}.{alias.name}"
                targets.append((full, None) if full in modules else (module, alias.name))
        for module, imported in targets:
            while module not in modules and "." in module:  # `import a.b.c` runs a, a.b: keep the deepest
                module = module.rsplit(".", 1)[0]
            if module != name:
                found.append((module, imported))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {m for m, _ in _imports(path, name, modules)} for name, path in modules.items() if path is not None}


def ring(name: str) -> str:
    """``cli``, ``studies`` (the runner, registry, report), ``study:<name>``, ``kit``, ``sweep``, ``plan``,
    ``library``."""
    if name in ("vaetransfer.cli", "vaetransfer.__main__"):
        return "cli"
    if name == "vaetransfer.studies.kit" or name.startswith("vaetransfer.studies.kit."):
        return "kit"
    if name == "vaetransfer.sweep" or name.startswith("vaetransfer.sweep."):
        return "sweep"
    if name == "vaetransfer.plan" or name.startswith("vaetransfer.plan."):
        return "plan"
    if name.startswith("vaetransfer.studies."):
        top = name.split(".")[2]
        if top in ("pipeline", "registry", "report", "reproduction", "published", "sweep_job"):
            return "studies"
        return f"study:{top}"
    if name == "vaetransfer.studies":
        return "studies"
    return "library"


def allowed(source: str, target: str) -> bool:
    """Whether module ``source`` may import module ``target`` under the ring rules."""
    a, b = ring(source), ring(target)
    if a == "cli":
        return True
    if a == "studies":
        return True
    if a.startswith("study:"):
        return b in ("kit", "sweep", "library") or b == a or target == "vaetransfer.studies.pipeline"
    if a == "kit":
        return b in ("kit", "library")
    if a == "sweep":
        return b in ("sweep", "library")
    if a == "plan":
        return b in ("plan", "sweep", "library")
    return b == "library"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_walk_sees_imports():
    graph = _graph()
    assert "vaetransfer.train" in graph["vaetransfer.studies.quickstart.stages"]
    assert "vaetransfer.nn" in graph["vaetransfer.text.t5"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert ring("vaetransfer.studies.transfer.analysis") == "study:transfer"
    assert ring("vaetransfer.studies.kit.trained") == "kit" and ring("vaetransfer.similarity.matrix") == "library"
    assert not allowed("vaetransfer.studies.quickstart.config", "vaetransfer.studies.rate_distortion.config")
    assert not allowed("vaetransfer.similarity", "vaetransfer.studies.kit.stats")
    assert allowed("vaetransfer.studies.transfer.findings", "vaetransfer.studies.kit.trained")


def test_no_import_cycle():
    """No cycle at all: a package and its own submodules are not exempt."""
    assert _cycle(_graph()) is None


def test_every_import_points_down_the_rings():
    wrong = sorted(f"{source} → {target}" for source, targets in _graph().items() for target in targets
                   if not allowed(source, target))
    assert not wrong, "imports against the ring direction:\n" + "\n".join(wrong)


def test_no_file_imports_another_files_private_name():
    modules = _modules()
    reach = sorted(f"{name} imports {imported} from {module}"
                   for name, path in modules.items() if path is not None
                   for module, imported in _imports(path, name, modules)
                   if imported and imported.startswith("_") and not imported.startswith("__"))
    assert not reach, "private names imported across files:\n" + "\n".join(reach)


def test_import_vaetransfer_stays_light():
    """``import vaetransfer`` loads neither matplotlib nor the text stack (until used)."""
    heavy = ("matplotlib", "vaetransfer.text", "transformers", "tokenizers", "sentencepiece", "vaetransfer.studies",
             "sklearn", "ray")
    code = ("import sys, vaetransfer; print(' '.join(m for m in %r if m in sys.modules))" % (heavy,))
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []
    # ...and what it defers still works on first use
    code = "import vaetransfer; vaetransfer.plots.save_figure; vaetransfer.text.T5Config; print('ok')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "ok"
