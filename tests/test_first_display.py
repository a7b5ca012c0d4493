"""A chat's first display imports nothing the first prompt does not need (issue #32).

Each case builds an ``Agent``, makes its widget and the widget's state and display data in a fresh
interpreter, then lists what of :data:`DEFERRED` got imported: the HTTP client (and the click and rich
its CLI brings) comes with the first request, pandas with the first DataFrame, the
price and token estimate with the first turn, the transcript renderer with the first steps, the
course budget and TOML parser with a course policy, the replay and MCP modules with their use.
A new import at the top of a module on the first display's path fails here, naming the module.
``bench/bench_first_display.py`` measures what the remaining imports cost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbagent.providers.local import local_runtime_available

pytest.importorskip("anywidget")

REPO = Path(__file__).resolve().parents[1]

#: imported by none of the first displays below
DEFERRED = ("httpx", "httpcore", "click", "rich", "pandas", "numpy", "tomllib",
            "nbagent.analysis.course_budget", "nbagent.analysis.class_summary", "nbagent.analysis.session_list",
            "nbagent.providers.replay", "nbagent.loop.mcp", "nbagent.notebook.transcript",
            "nbagent.notebook.cell_refs", "nbagent.notebook.variables")
#: imported too by a model that declares no context window (the gauge reads it from the price data)
ESTIMATE = ("nbagent.analysis.estimate", "nbagent.analysis.pricing")

SHOW = """
import json, sys
from nbagent import Agent
before = set(sys.modules)
agent = Agent(model={model!r}{key})
assert agent.model.startswith({prefix!r}), agent.model
agent.provider.prestart = None  # a local server's start, in its own thread, imports httpx by design
widget = agent.widget()
state = widget.get_state()
bundle = widget._repr_mimebundle_()
assert state["gauge"]["model"] and "application/vnd.jupyter.widget-view+json" in bundle[0]
print(json.dumps(sorted(m for m in {deferred!r} if m in sys.modules)))
"""


def first_display_imports(tmp_path: Path, model: str, deferred: tuple[str, ...], key: str = "") -> list[str]:
    """What of ``deferred`` a fresh interpreter imported to show an Agent of ``model`` (in ``tmp_path``,
    away from any course policy)."""
    code = SHOW.format(model=model, key=f", api_key={key!r}" if key else "", prefix=model.partition(":")[0],
                       deferred=deferred)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_demo_chat_shows_without_the_http_client_pandas_or_the_estimate(tmp_path):
    assert first_display_imports(tmp_path, "demo", DEFERRED + ESTIMATE) == []


@pytest.mark.skipif(not local_runtime_available(), reason="needs the local model (python -m nbagent install-model)")
def test_the_local_chat_shows_without_the_http_client_pandas_or_the_estimate(tmp_path):
    # the provider is built (its server not started): the model declares its window, so no price data
    assert first_display_imports(tmp_path, "local", DEFERRED + ESTIMATE) == []


def test_an_openai_chat_shows_without_the_http_client_or_pandas(tmp_path):
    assert first_display_imports(tmp_path, "openai:gpt-4.1-mini", DEFERRED, key="sk-test-not-sent") == []


def test_the_check_sees_an_import_that_comes_back(tmp_path):
    # the same check, with a module the first display does import: listed, so the tests above can fail
    assert first_display_imports(tmp_path, "demo", ("anywidget", "nbagent.notebook.protocol")) == [
        "anywidget", "nbagent.notebook.protocol"]
