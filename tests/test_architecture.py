"""The package's structure rules, checked on the source with ``ast``.

- no module imports another module's underscore names (private modules
  included), so every module's private parts can change freely;
- ``Step.metadata`` is gone: nothing reads a string key from a step's
  metadata (what crosses layers travels in typed fields);
- no function over 60 lines, except one whose body starts with a comment
  saying why it is long (module size is a review hint, not a test: ruff's
  complexity gate, C901 <= 15, runs from scripts/test.sh);
- every import goes to the module's own layer or one below it (``LAYERS``,
  the map docs/explanation/architecture.md's Layout states), imports inside functions included;
- no import cycles between modules, imports inside functions included (those
  hide a cycle from Python, not from a reader): each is reported with its path;
- the course policy stays behind its seam: no module imports its modules
  (``COURSE_MODULES``) but the code that builds or shows it (``COURSE_BUILDERS``);
  the rest talk to ``core/turn_policy.py``'s ``TurnPolicy``.
"""

from __future__ import annotations

import ast
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[1] / "nbagent"
SOURCES = sorted(p for p in PACKAGE.rglob("*.py"))
MAX_FUNCTION_LINES = 60
LONG_FUNCTION_MARK = "# long because:"


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _rel(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(path: Path) -> list[str]:
    """Imports of another module's underscore names (or of an underscore module)."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if any(_private(part) for part in module.split(".") if part):
                found.append(f"{_rel(path)}:{node.lineno}: from {'.' * node.level}{module}")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{_rel(path)}:{node.lineno}: {alias.name} from {'.' * node.level}{module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(_private(part) for part in alias.name.split(".")):
                    found.append(f"{_rel(path)}:{node.lineno}: import {alias.name}")
    return found


def metadata_reads(path: Path) -> list[str]:
    """Reads like ``step.metadata["key"]`` / ``.metadata.get("key")`` of any object's ``metadata``."""
    found = []
    for node in ast.walk(_tree(path)):
        target = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            target = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant)):
            target = node.func.value
        if isinstance(target, ast.Attribute) and target.attr == "metadata":
            found.append(f"{_rel(path)}:{node.lineno}")
    return found


def long_functions(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length <= MAX_FUNCTION_LINES:
                continue
            body = "\n".join(lines[node.lineno - 1:node.lineno + 12])
            if LONG_FUNCTION_MARK not in body:
                found.append(f"{_rel(path)}:{node.lineno}: {node.name} has {length} lines")
    return found


# The layer map, bottom up: a module may import its own layer and the ones listed for it.
# Top-level modules (agent.py, conversation.py, comparison.py) are the "facade" layer.
LAYERS: dict[str, set[str]] = {
    "core": set(),
    "providers": {"core"},
    "loop": {"core", "providers"},
    "analysis": {"core", "providers", "loop"},
    "notebook": {"core", "providers", "loop", "analysis"},
    "facade": {"core", "providers", "loop", "analysis", "notebook"},
    "extension": {"core", "providers", "loop", "analysis", "notebook", "facade"},
}


def layer_of(parts: tuple[str, ...]) -> str | None:
    """The layer of a module path inside the package (``("core", "steps")``); None: the package itself."""
    if not parts or parts == ("__init__",):
        return None
    return parts[0] if parts[0] in LAYERS else "facade"


def upward_imports(path: Path) -> list[str]:
    """Imports of nbagent modules from a layer this module's layer may not use."""
    rel = path.relative_to(PACKAGE).with_suffix("").parts
    own = layer_of(rel)
    if own is None:  # nbagent/__init__.py re-exports the public names of every layer
        return []
    package = ("nbagent", *rel[:-1])
    found = []
    for node in ast.walk(_tree(path)):
        targets: list[tuple[str, ...]] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = (*base, *(node.module.split(".") if node.module else ()))
            else:
                module = tuple((node.module or "").split("."))
            if module[0] != "nbagent":
                continue
            targets = [module[1:]] if node.module else [(*module[1:], a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [tuple(a.name.split("."))[1:] for a in node.names if a.name.split(".")[0] == "nbagent"]
        for target in targets:
            layer = layer_of(target)
            if layer is None or layer == own or layer in LAYERS[own]:
                continue
            found.append(f"{_rel(path)}:{node.lineno}: {own} imports {'.'.join(target)} ({layer})")
    return found


def test_layers_import_only_downward():
    found = [hit for path in SOURCES for hit in upward_imports(path)]
    assert not found, "imports against the layer map:\n" + "\n".join(found)


ARCHITECTURE = PACKAGE.parent / "docs" / "explanation" / "architecture.md"  # the Layout the docs explain


def test_the_architecture_page_states_the_layer_map():
    page = ARCHITECTURE.read_text(encoding="utf-8")
    for layer, allowed in LAYERS.items():
        line = f"- `{layer}` → " + (", ".join(f"`{a}`" for a in sorted(allowed)) or "nothing")
        assert line in page, f"docs/explanation/architecture.md's Layout does not state: {line}"


def test_sources_were_found():
    assert len(SOURCES) > 20 and PACKAGE / "core" / "steps.py" in SOURCES


def test_no_module_imports_another_modules_private_names():
    found = [hit for path in SOURCES for hit in private_imports(path)]
    assert not found, "imports of private names:\n" + "\n".join(found)


def test_no_step_metadata_side_channel():
    from nbagent import Step

    assert not hasattr(Step(), "metadata")
    found = [hit for path in SOURCES for hit in metadata_reads(path)]
    assert not found, "string-keyed metadata reads:\n" + "\n".join(found)


def test_function_size():
    found = [hit for path in SOURCES for hit in long_functions(path)]
    assert not found, (f"functions over {MAX_FUNCTION_LINES} lines without a "
                       f"'{LONG_FUNCTION_MARK}' comment:\n" + "\n".join(found))


def test_the_checks_catch_what_they_look_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from .frames import _pandas\nimport nbagent._sync\n"
                   "def g():\n    from ..notebook.widget import ChatWidget\n    import nbagent.agent\n"
                   "x = step.metadata['model']\ny = s.metadata.get('approval')\n"
                   "def f():\n" + "    pass\n" * 70)
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path
    try:
        assert len(private_imports(bad)) == 2
        assert len(metadata_reads(bad)) == 2
        assert len(long_functions(bad)) == 1
        core = tmp_path / "core"
        core.mkdir()
        (core / "bad.py").write_text(bad.read_text())
        assert [h.split(": ", 1)[1] for h in upward_imports(core / "bad.py")] == [
            "core imports _sync (facade)", "core imports notebook.widget (notebook)",
            "core imports agent (facade)"]
    finally:
        PACKAGE = saved


def test_the_architecture_page_names_every_module():
    page = ARCHITECTURE.read_text(encoding="utf-8")
    layout = page[page.index("## Layout"):]
    missing = []
    for path in SOURCES:
        rel = path.relative_to(PACKAGE)
        if path.name == "__init__.py" and rel.parent != Path("."):
            continue  # a layer's __init__ only holds its docstring (the registry's is named below)
        if path.name not in layout or (rel.parent != Path(".") and f"nbagent/{rel.parts[0]}/" not in layout):
            missing.append(str(rel))
    assert not missing, f"docs/explanation/architecture.md's Layout section does not name: {missing}"


# --- the course policy behind its seam ------------------------------------------------------------

# The course policy's implementation (the TurnPolicy that course.py's AgentCourse is).
COURSE_MODULES = {"core.course_policy", "core.course_rules", "analysis.course_budget", "course"}
# The only other modules that may import them, and which: the code that builds the policy or shows it
# whole. Everything else (the conversation, budget, tool loop, widget, MCP) consults the TurnPolicy.
COURSE_BUILDERS = {
    "agent": {"course"},  # Agent builds its AgentCourse (``agent.course``) and consults it as its TurnPolicy
    "extension.magics": {"course"},  # %chat_policy prints the policy in force
    "analysis.class_summary": {"core.course_policy"},  # the teacher's summary: the budget of the policy over a folder
}


def _package_of(path: Path, root: Path) -> list[str]:
    """The package a module at ``path`` sits in, as name parts relative to ``root``."""
    name = module_name(path, root)
    return [p for p in (name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]) if p]


def _from_module(node: ast.ImportFrom, package: list[str], root: Path) -> list[str] | None:
    """The package's module a ``from ... import`` names (parts relative to ``root``), None for another package's."""
    if node.level:
        base = package[:len(package) - node.level + 1] if node.level > 1 else package
        return [*base, *(node.module.split(".") if node.module else [])]
    if (node.module or "").split(".")[0] == root.name:
        return (node.module or "").split(".")[1:]
    return None


def imported_modules(path: Path, root: Path) -> list[tuple[str, int]]:
    """(module, line) of each import of the package at ``root`` by the module at ``path`` (names
    relative to it; ``from x import y`` gives ``x`` and ``x.y``), type-only and function imports included."""
    package = _package_of(path, root)
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            module = _from_module(node, package, root)
            if module is None:
                continue
            found += [(".".join(m), node.lineno) for m in (module, *([*module, a.name] for a in node.names))]
        elif isinstance(node, ast.Import):
            found += [(".".join(a.name.split(".")[1:]), node.lineno) for a in node.names
                      if a.name.split(".")[0] == root.name]
    return found


def course_imports(path: Path, root: Path) -> list[str]:
    """Imports of the course policy's modules by a module that is neither one of them nor a builder."""
    name = module_name(path, root)
    if name in COURSE_MODULES:
        return []
    allowed = COURSE_BUILDERS.get(name, set())
    return [f"{path.relative_to(root.parent)}:{line}: imports {module}" for module, line in imported_modules(path, root)
            if module in COURSE_MODULES and module not in allowed]


def test_only_the_policys_builders_import_the_course_policy():
    found = [hit for path in SOURCES for hit in course_imports(path, PACKAGE)]
    assert not found, ("modules naming the course policy instead of the TurnPolicy seam "
                       "(core/turn_policy.py):\n" + "\n".join(found))


def test_the_course_check_finds_every_kind_of_import(tmp_path):
    pkg = tmp_path / "nbagent"
    (pkg / "notebook").mkdir(parents=True)
    (pkg / "core").mkdir()
    for module in ("__init__", "course", "agent", "core/__init__", "core/course_policy", "notebook/__init__"):
        (pkg / f"{module}.py").write_text("")
    (pkg / "notebook" / "bad.py").write_text(
        "from ..core.course_policy import find_policy\nfrom ..core import course_policy\n"
        "if TYPE_CHECKING:\n    from ..course import AgentCourse\n"
        "def f():\n    import nbagent.course\n    from ..core.turn_policy import TurnPolicy\n")
    (pkg / "agent.py").write_text("from .course import AgentCourse\nfrom .core.course_policy import find_policy\n")
    assert [h.split(": ", 1)[1] for h in course_imports(pkg / "notebook" / "bad.py", pkg)] == [
        "imports core.course_policy", "imports core.course_policy", "imports course", "imports course"]
    assert [h.split(": ", 1)[1] for h in course_imports(pkg / "agent.py", pkg)] == ["imports core.course_policy"]
    assert course_imports(pkg / "course.py", pkg) == []


# --- import cycles ----------------------------------------------------------------------------

# Cycles still allowed, each a set of modules. Remove an entry once its cycle is broken.
ALLOWED_CYCLES: list[set[str]] = []  # none: a cycle is a layering defect to fix, not to list


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("").parts
    return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of import nodes under ``if TYPE_CHECKING:`` (never run, so no cycle)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            found |= {id(n) for child in node.body for n in ast.walk(child)}
    return found


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """Module -> {imported module: line}, for the modules of the package at ``root`` (names relative
    to it, ``""`` the package itself); a ``from x import y`` goes to ``x.y`` when that is a module."""
    paths = sorted(root.rglob("*.py"))
    modules = {module_name(p, root) for p in paths}
    graph: dict[str, dict[str, int]] = {}
    for path in paths:
        name = module_name(path, root)
        package = _package_of(path, root)
        tree = _tree(path)
        skip = _type_checking_only(tree)
        edges = graph.setdefault(name, {})
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets = []
            if isinstance(node, ast.ImportFrom):
                module = _from_module(node, package, root)
                if module is None:
                    continue
                for alias in node.names:
                    sub = ".".join([*module, alias.name])
                    targets.append(sub if sub in modules else ".".join(module))
            elif isinstance(node, ast.Import):
                targets = [".".join(a.name.split(".")[1:]) for a in node.names if a.name.split(".")[0] == root.name]
            for target in targets:
                if target in modules and target != name:
                    edges.setdefault(target, node.lineno)
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each as a path around the cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def describe_cycle(group: list[str], graph: dict[str, dict[str, int]]) -> str:
    """One path around the group: ``a (line) -> b (line) -> ... -> a``."""
    members, start = set(group), group[0]
    path, seen = [start], {start}
    while True:
        nxt = next((w for w in sorted(graph[path[-1]]) if w in members and (w == start or w not in seen)), None)
        if nxt is None or nxt == start:
            break
        path.append(nxt)
        seen.add(nxt)
    hops = [f"{a} (line {graph[a][b]})" for a, b in zip(path, [*path[1:], start]) if b in graph[a]]
    return " -> ".join(hops) + f" -> {start}"


def test_no_import_cycles():
    graph = import_graph(PACKAGE)
    cycles = [c for c in import_cycles(graph) if set(c) not in ALLOWED_CYCLES]
    assert not cycles, "import cycles (imports inside functions included):\n" + "\n".join(
        describe_cycle(c, graph) for c in cycles)


def test_the_cycle_check_finds_a_cycle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "nbagent"
    (pkg / "loop").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "loop" / "__init__.py").write_text("")
    (pkg / "loop" / "a.py").write_text("from .b import f\n")
    (pkg / "loop" / "b.py").write_text("def f():\n    from . import a\n    from nbagent.loop import c\n")
    (pkg / "loop" / "c.py").write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from .a import x\n")
    graph = import_graph(pkg)
    assert graph["loop.b"] == {"loop.a": 2, "loop.c": 3} and graph["loop.c"] == {}
    assert import_cycles(graph) == [["loop.a", "loop.b"]]
    assert describe_cycle(["loop.a", "loop.b"], graph) == "loop.a (line 1) -> loop.b (line 2) -> loop.a"
