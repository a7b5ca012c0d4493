"""What a release ships: the wheel and sdist as built by `python -m build`, their licences and metadata."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import nbagent

ROOT = Path(__file__).resolve().parent.parent
NOTICES = ROOT / "nbagent" / "notebook" / "static" / "THIRD_PARTY_NOTICES.md"
# what the widget bundle contains, by licence (the SPDX identifiers of each package.json)
BUNDLED = {"marked": "MIT", "highlight.js": "BSD-3-Clause", "temml": "MIT", "dompurify": "(MPL-2.0 OR Apache-2.0)"}

pytest.importorskip("build")
pytest.importorskip("hatchling")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the backend (hatchling, in the dev group) comes from this environment, offline
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    return out


def _wheel(dist: Path) -> zipfile.ZipFile:
    return zipfile.ZipFile(next(dist.glob("*.whl")))


def _sdist_names(dist: Path) -> list[str]:
    with tarfile.open(next(dist.glob("*.tar.gz"))) as tar:
        return [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]


@pytest.mark.wheel
def test_the_wheel_ships_the_licence_the_notices_and_its_types(dist):
    with _wheel(dist) as whl:
        names = whl.namelist()
        info = f"jupyter_nbagent-{nbagent.__version__}.dist-info"
        assert f"{info}/licenses/LICENSE" in names
        assert f"{info}/licenses/nbagent/notebook/static/THIRD_PARTY_NOTICES.md" in names
        assert "nbagent/notebook/static/THIRD_PARTY_NOTICES.md" in names and "nbagent/py.typed" in names
        assert b"MIT License" in whl.read(f"{info}/licenses/LICENSE")
        meta = Parser().parsestr(whl.read(f"{info}/METADATA").decode())
    assert meta["Name"] == "jupyter-nbagent"  # "nbagent" on the package index is another project
    assert meta["Version"] == nbagent.__version__  # the version lives in nbagent/__init__.py only
    assert meta["License-Expression"] == "MIT" and meta["Author"] == "the nbagent authors"
    assert "Typing :: Typed" in meta.get_all("Classifier")
    extras = meta.get_all("Provides-Extra")
    assert "dev" not in extras and {"widget", "frames", "local", "html", "all"} <= set(extras)
    # "all" names the distribution itself (the build expands it): no requirement may name "nbagent",
    # which on the package index is another project
    requires = meta.get_all("Requires-Dist")
    assert not [r for r in requires if r.split(";")[0].strip().startswith("nbagent")]
    assert any(r.startswith("anywidget") and "extra == 'all'" in r for r in requires)


@pytest.mark.wheel
def test_the_sdist_ships_the_licences_and_no_test_files(dist):
    names = _sdist_names(dist)
    assert {"LICENSE", "README.md", "pyproject.toml", "nbagent/notebook/static/THIRD_PARTY_NOTICES.md",
            "js/build.mjs", "js/package-lock.json"} <= set(names)
    assert not [n for n in names if n.startswith("tests/")], "tests/ files (their READMEs) leaked into the sdist"


def test_dev_is_a_dependency_group_and_the_version_is_read_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "dev" not in project["project"]["optional-dependencies"]
    assert any(req.startswith("pytest") for req in project["dependency-groups"]["dev"])
    assert "version" in project["project"]["dynamic"] and "version" not in project["project"]
    assert project["tool"]["hatch"]["version"]["path"] == "nbagent/__init__.py"


def test_the_notices_name_every_bundled_package_at_its_locked_version():
    """THIRD_PARTY_NOTICES.md is written by js/build.mjs; stale notices (a package bumped in the lock
    file without a rebuild) fail here even without Node (scripts/check_bundle.sh compares bytes)."""
    text = NOTICES.read_text(encoding="utf-8")
    lock = json.loads((ROOT / "js" / "package-lock.json").read_text(encoding="utf-8"))["packages"]
    headings = re.findall(r"^## (\S+) (\S+)$", text, flags=re.M)
    assert {name for name, _ in headings} == set(BUNDLED)
    for name, version in headings:
        assert lock[f"node_modules/{name}"]["version"] == version
        section = text.split(f"## {name} {version}", 1)[1].split("\n## ", 1)[0]
        assert f"- Licence: {BUNDLED[name]}" in section
        assert "```text" in section  # the licence text itself, not only its name
    assert "Copyright (c) 2006, Ivan Sagalaev" in text  # highlight.js's BSD notice
