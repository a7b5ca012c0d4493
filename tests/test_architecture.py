"""The package's structure rules, checked on the source with ``ast``.

- no module imports another module's underscore names (private modules
  included), so every module's private parts can change freely;
- ``Step.metadata`` is gone: nothing reads a string key from a step's
  metadata (what crosses layers travels in typed fields);
- no module over 450 lines and no function over 60 lines, except a
  function whose body starts with a comment saying why it is long.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nbagent"
SOURCES = sorted(p for p in PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 450
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


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_module_size(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_MODULE_LINES, f"{_rel(path)} has {n} lines (at most {MAX_MODULE_LINES})"


def test_function_size():
    found = [hit for path in SOURCES for hit in long_functions(path)]
    assert not found, (f"functions over {MAX_FUNCTION_LINES} lines without a "
                       f"'{LONG_FUNCTION_MARK}' comment:\n" + "\n".join(found))


def test_the_checks_catch_what_they_look_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from .frames import _pandas\nimport nbagent._sync\n"
                   "x = step.metadata['model']\ny = s.metadata.get('approval')\n"
                   "def f():\n" + "    pass\n" * 70)
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path
    try:
        assert len(private_imports(bad)) == 2
        assert len(metadata_reads(bad)) == 2
        assert len(long_functions(bad)) == 1
    finally:
        PACKAGE = saved


def test_readme_layout_names_every_module():
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout"):readme.index("## Benchmarks")]
    missing = []
    for path in SOURCES:
        rel = path.relative_to(PACKAGE)
        if path.name == "__init__.py" and rel.parent != Path("."):
            continue  # a layer's __init__ only holds its docstring (the registry's is named below)
        if path.name not in layout or (rel.parent != Path(".") and f"nbagent/{rel.parts[0]}/" not in layout):
            missing.append(str(rel))
    assert not missing, f"README's Layout section does not name: {missing}"
