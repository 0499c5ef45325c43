"""The package's layers point one way: no import cycle between its modules (imports inside
functions included), and the sweep layer and the core modules import no study."""
import ast
from pathlib import Path

import vaetransfer

ROOT = Path(vaetransfer.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    """The package modules ``name`` (the module at ``path``) imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("vaetransfer")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("vaetransfer"):
                continue
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}  # `from . import data` names a module
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        # An import of a.b.c also runs a and a.b: count the deepest existing module only.
        graph[name] = {t for t in _imports(path, name) if t in paths and t != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt.startswith(node + ".") or node.startswith(nxt + "."):
                continue  # a package and its own submodules
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
    assert "vaetransfer.train" in graph["vaetransfer.studies.quickstart"]
    assert "vaetransfer.nn" in graph["vaetransfer.text.t5"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle():
    assert _cycle(_graph()) is None


def test_lower_layers_import_no_study():
    graph = _graph()
    for name, targets in graph.items():
        if name.startswith(("vaetransfer.studies", "vaetransfer.cli")) or name == "vaetransfer.__main__":
            continue
        assert not any(t.startswith("vaetransfer.studies") for t in targets), name
        if name.startswith("vaetransfer.sweep"):
            assert not any(t.startswith(("vaetransfer.cli",)) for t in targets), name
