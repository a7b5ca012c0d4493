"""The test suite stands on its own: a fresh clone with nothing beside it passes.

- every recorded fixture lives in ``tests/fixtures`` (byte-for-byte, with its
  header and a NOTICE entry), and no test, helper or bench script reaches for
  a path outside the repository;
- helpers live in the ``tests/support`` package, used through public names;
  ``tests/`` itself holds only test modules and ``conftest.py``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
SOURCES = sorted([*TESTS.rglob("*.py"), *(REPO / "bench").glob("*.py")])

# Split so that this file does not match itself.
OUTSIDE_MARKERS = ["shared" + "/fixtures", ".." + "/shared", "NBAGENT_" + "FIXTURES", "/work" + "/shared"]


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def outside_references(text: str, rel: str) -> list[str]:
    """In the source ``text`` of the file at ``rel`` (from the repository root): strings naming the
    old outside fixtures, and ``Path`` climbs above the repository root.

    A file at ``<repo>/a/b.py`` may go up to ``parents[1]`` (or ``.parent.parent``), the root.
    """
    found = []
    for marker in OUTSIDE_MARKERS:
        for match in re.finditer(re.escape(marker), text):
            found.append(f"{rel}:{text.count(chr(10), 0, match.start()) + 1}: {marker!r}")
    highest = rel.count("/")  # parents[highest] is the repository root
    inside_a_chain = set()
    for node in ast.walk(ast.parse(text, filename=rel)):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "parents" and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, int) and node.slice.value > highest):
            found.append(f"{rel}:{node.lineno}: parents[{node.slice.value}] is outside the repository")
        if isinstance(node, ast.Attribute) and node.attr == "parent" and id(node) not in inside_a_chain:
            depth, inner = 1, node.value
            while isinstance(inner, ast.Attribute) and inner.attr == "parent":
                inside_a_chain.add(id(inner))
                depth, inner = depth + 1, inner.value
            if depth > highest + 1:
                found.append(f"{rel}:{node.lineno}: .parent x{depth} is outside the repository")
    return found


def test_no_test_or_helper_refers_outside_the_repository():
    assert any(p.parent.name == "support" for p in SOURCES)
    found = [hit for path in SOURCES for hit in outside_references(path.read_text(encoding="utf-8"), _rel(path))]
    assert not found, "paths outside the repository:\n" + "\n".join(found)


def test_the_outside_reference_check_catches_a_climb():
    source = ("from pathlib import Path\n"
              "A = Path(__file__).resolve().parents[3] / 'x'\n"
              "B = Path(__file__).parent.parent.parent.parent.parent\n"
              f"C = '{OUTSIDE_MARKERS[0]}'\n"
              "OK = Path(__file__).resolve().parents[2] / Path(__file__).parent.parent.parent.name\n")
    hits = outside_references(source, "tests/support/probe.py")
    assert sorted(h.split(":")[1] for h in hits) == ["2", "3", "4"], hits
    at_the_root = "P = Path(__file__).resolve().parents[2]\nQ = Path(__file__).parent.parent.parent\n"
    assert outside_references(at_the_root, "bench/deeper/probe.py") == []
    assert len(outside_references(at_the_root, "tests/probe.py")) == 2


# --- the recorded fixtures ----------------------------------------------------------------


HEADERS = sorted(p for p in FIXTURES.glob("*/*.json"))
BODIES = sorted(FIXTURES.glob("*/*.sse"))


def test_fixtures_are_in_the_repository():
    providers = {p.parent.name for p in BODIES}
    assert providers == {"anthropic", "gemini", "openai", "openai_compat", "openai_responses"}
    assert len(list((FIXTURES / "errors").glob("*.json"))) >= 1
    for doc in ("README.md", "PROTOCOL_NOTES.md", "ERRORS.md", "NOTICE.md"):
        assert (FIXTURES / doc).is_file(), doc
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    assert total < 4_000_000, f"tests/fixtures is {total:,} bytes"


@pytest.mark.parametrize("body", BODIES, ids=[p.relative_to(FIXTURES).as_posix() for p in BODIES])
def test_recorded_body_is_byte_for_byte(body):
    """The header's sha256 and size match: no checkout converted line endings (see .gitattributes)."""
    header = json.loads(body.with_suffix(".json").read_text(encoding="utf-8"))
    data = body.read_bytes()
    assert (len(data), hashlib.sha256(data).hexdigest()) == (header["sse_bytes"], header["sse_sha256"])


def test_every_fixture_says_where_it_comes_from():
    for path in HEADERS:
        header = json.loads(path.read_text(encoding="utf-8"))
        assert {"repo", "path", "commit", "url"} <= set(header["source"]), path.name
        assert header["license"] and header["provenance"], path.name


def test_notice_lists_every_recorded_file():
    spec = importlib.util.spec_from_file_location("make_notice", FIXTURES / "make_notice.py")
    make_notice = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_notice)
    assert len(make_notice.headers()) == len(HEADERS)
    assert (FIXTURES / "NOTICE.md").read_text(encoding="utf-8") == make_notice.notice(), (
        "NOTICE.md is stale: run python tests/fixtures/make_notice.py")


# --- where the helpers live -----------------------------------------------------------------


def test_tests_folder_holds_only_test_modules_and_conftest():
    stray = [p.name for p in TESTS.glob("*.py") if p.name != "conftest.py" and not p.name.startswith("test_")]
    assert not stray, f"helpers belong in tests/support/: {stray}"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_nothing_imports_private_names_from_the_helpers():
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "support":
                found += [f"{_rel(path)}:{node.lineno}: {a.name} from {node.module}"
                          for a in node.names if _private(a.name)]
    assert not found, "give these helper names public names:\n" + "\n".join(found)


# --- tiers --------------------------------------------------------------------------------


def test_a_test_that_sends_itself_ctrl_c_installs_the_handler_it_needs():
    """Started with SIGINT ignored (``nohup``, ``cmd &``), a test sending SIGINT would wait forever for a
    KeyboardInterrupt: every test naming ``signal.SIGINT`` asks for the ``ctrl_c`` fixture."""
    found, checked = [], 0
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        defs = [*tree.body, *(n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body)]
        for node in defs:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                if any(isinstance(n, ast.Attribute) and n.attr == "SIGINT" for n in ast.walk(node)):
                    checked += 1
                    if "ctrl_c" not in [a.arg for a in node.args.args]:
                        found.append(f"{_rel(path)}:{node.lineno}: {node.name}")
    assert checked >= 2 and not found, "these tests send SIGINT without the ctrl_c fixture:\n" + "\n".join(found)


def test_the_fast_tier_starts_no_browser_and_no_local_model():
    """A helper starting Chromium, Jupyter or the llama.cpp server fails a test not marked for its tier
    (this test is marked none), so the fast tier's selection is what the markers declare."""
    from nbagent.providers import local_server
    from support import tiers

    with pytest.raises(pytest.fail.Exception, match="not marked browser"):
        tiers.require("browser", "starts Chromium")
    with pytest.raises(pytest.fail.Exception, match="llama.cpp server but is not marked local_model"):
        local_server.start_server(None)
    assert set(tiers.SLOW_TIERS) <= {line.split(":")[0].strip(' "') for line in _pytest_markers()}


def _pytest_markers() -> list[str]:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]["markers"]
