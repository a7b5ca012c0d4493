"""Sphinx configuration of nbagent's documentation site (built by scripts/docs.sh).

Pages are MyST Markdown; pages whose examples run are MyST-NB text notebooks, and the example notebooks of
notebooks/ are copied into docs/notebooks/ and executed at every build (a failing cell fails the build). The
reference's tables and entries are generated from the code by docs/_ext/nbagent_reference.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]
# the kernels that run the examples import this checkout's nbagent, too
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
# examples never call out: no key reaches a kernel, and the default model is the deterministic demo model
for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
    os.environ.pop(variable, None)
os.environ["NBAGENT_MODEL"] = "demo"
os.environ.setdefault("MPLBACKEND", "Agg")

import nbagent  # noqa: E402

project = "nbagent"
author = "the nbagent authors"
copyright = "the nbagent authors (MIT licence)"
release = version = nbagent.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "nbagent_reference",
]
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints"]

# every cross-reference must resolve (-n), and a warning is an error (-W, scripts/docs.sh)
nitpicky = True
# types of the libraries nbagent uses: no intersphinx (the build is offline), so their names stay plain text
nitpick_ignore_regex = [
    ("py:.*", r"(pandas|pd|numpy|np|pyarrow|pa|httpx|IPython|ipywidgets|anywidget|traitlets|matplotlib|mcp|"
              r"opentelemetry|asyncio|collections|typing|types|datetime|pathlib|os|enum|concurrent|"
              r"contextlib|threading|duckdb|pydantic|argparse|re|io|json)\..*"),
    ("py:class", r"(Path|PathLike|Enum|Any|Callable|Mapping|Sequence|Iterable|Iterator|AsyncIterator|"
                 r"Awaitable|Coroutine|datetime|DataFrame|Series|Literal|Self|TypeVar|T|ndarray|Axes|"
                 r"Figure|NoneType|ellipsis|Exception|ValueError|BaseException)"),
    # the types a public name's signature mentions by their module (nbagent.core.autosave.AutosaveStatus):
    # plain text when they are not public themselves (a public one links to its entry: nbagent_reference.py)
    ("py:.*", r"nbagent(\.[a-z_0-9]+)+\.[A-Za-z_]\w*(\.\w+)*"),
    # ... and by the short name their own module's docstrings use
    ("py:.*", r"SessionBrowser|OtelExport|LiveTrace|UsageSummary|CodeCell|TurnPolicy|parquet_schema|t\.Any"),
    ("py:class", r"dict\[str"),  # autodoc splits "dict[str, Any]" of a dataclass field with a default factory
]

# quotes and ellipses typeset, but "--" stays two hyphens (the magics' and the CLI's options)
smartquotes_action = "qe"

# the API reference: autodoc reads the docstrings. They are reStructuredText prose, the package's one style
# (``code``, examples as >>> blocks), so there is no napoleon: it would read a property's "What: more" as a type
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autodoc_inherit_docstrings = True
add_module_names = False
maximum_signature_line_length = 100  # a longer signature shows one parameter a line

# MyST and MyST-NB
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3
# every build runs every example, so a change to nbagent that breaks one fails the build (scripts/docs.sh's
# CACHE=1 passes -D nb_execution_mode=cache: a notebook unchanged since the last build keeps its outputs)
nb_execution_mode = "force"
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = 180
nb_execution_raise_on_error = True  # a cell that fails (without the raises-exception tag) fails the build
nb_execution_show_tb = True
nb_execution_in_temp = True  # the examples write sessions and exports: into a temporary folder, not docs/
nb_execution_excludepatterns = [
    # providers.ipynb calls real APIs when a key is set and starts the local model when it is installed:
    # shown as written, not run (the docs build never calls out or starts the 135M model)
    "notebooks/providers.ipynb",
]
nb_merge_streams = True
# a static page has no kernel for the live widget: its saved transcript (the output's text/html) shows instead
nb_mime_priority_overrides = [("*", "application/vnd.jupyter.widget-view+json", None)]

html_theme = "pydata_sphinx_theme"
html_title = f"nbagent {version}"
html_static_path = ["_static"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_sidebars = {"index": []}


def copy_notebooks() -> None:
    """notebooks/*.ipynb -> docs/notebooks/ (generated, not committed): the site renders the same files
    the repository ships, executed."""
    target = DOCS / "notebooks"
    for old in target.glob("*.ipynb"):
        if not (ROOT / "notebooks" / old.name).exists():
            old.unlink()
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        copy = target / notebook.name
        if not copy.exists() or copy.read_bytes() != notebook.read_bytes():
            shutil.copyfile(notebook, copy)


copy_notebooks()


KERNEL_FILES = tempfile.TemporaryDirectory(prefix="nbagent-docs-")  # removed when the build ends


def kernel_knows_its_notebook(app, docname: str, source: list[str]) -> None:
    """As Jupyter Server does, the kernel that runs a notebook is told its file (``JPY_SESSION_NAME``), here a
    copy in a temporary folder: fix_the_error.ipynb's agent edits its own notebook's cells. MyST-NB runs each
    notebook while reading it, one at a time, so the variable is set just before."""
    notebook = DOCS / f"{docname}.ipynb"
    os.environ.pop("JPY_SESSION_NAME", None)
    if notebook.is_file():
        copy = Path(KERNEL_FILES.name) / notebook.name
        shutil.copyfile(notebook, copy)
        os.environ["JPY_SESSION_NAME"] = str(copy)


def setup(app) -> None:
    app.connect("source-read", kernel_knows_its_notebook)
    app.connect("build-finished", lambda app, exc: KERNEL_FILES.cleanup())
