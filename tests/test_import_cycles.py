"""No import cycles between nbagent's modules, function-level imports included (a cycle hidden
inside a function is still a cycle: the two modules cannot be understood or tested apart)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nbagent"
KNOWN = [{"nbagent.loop.tool_process", "nbagent.loop.tools"}]  # #35 item 5, being broken on its own


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in modules else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in modules and m != name}


def cycles() -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_new_import_cycles():
    new = [sorted(c) for c in cycles() if c not in KNOWN]
    assert not new, f"import cycles: {new}"


def test_the_widget_modules_import_one_way():
    modules = _modules()
    for name in ("nbagent.notebook.widget", "nbagent.notebook.widget_sessions", "nbagent.notebook.protocol",
                 "nbagent.notebook.session_rows"):
        assert "nbagent.notebook.session_browser" not in _imports(name, modules[name], modules)
