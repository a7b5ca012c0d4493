"""What run_python did to the kernel's variables: created, changed, deleted, with type and size,
from a cheap fingerprint (never a copy of the data); on the step, in the card's data and in
tool_calls_df()."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from nbagent import Agent, notebook_tools  # noqa: E402
from nbagent.core.steps import ChangeKind, Step, VariableChange  # noqa: E402
from nbagent.notebook.var_changes import changes, fingerprints  # noqa: E402
from nbagent.notebook.turn_codec import step_dict  # noqa: E402
from support.scripted import ScriptedProvider, text_call, tool_call  # noqa: E402


def agent_running(namespace, *codes):
    calls = [tool_call((f"c{i}", "run_python", {"code": code})) for i, code in enumerate(codes)]
    provider = ScriptedProvider([list(c) for c in calls] + [list(text_call("done"))])
    return Agent(model=provider, tools=notebook_tools(namespace, approve_code=False))


def test_run_python_reports_created_changed_and_deleted_variables():
    ns = {"sales": pd.DataFrame({"revenue": [1, 2, 3]}), "tmp": 5, "scores": [1, 2], "kept": "same"}
    conv = agent_running(ns, "by_month = sales.groupby('revenue').sum()\nsales = sales.head(2)\n"
                             "scores.append(3)\ndel tmp").conversation
    conv.ask("go")
    (step,) = [s for s in conv.history if s.is_tool_run]
    assert step.changes == [
        VariableChange("by_month", ChangeKind.CREATED, "DataFrame", "3 rows × 0 columns"),
        VariableChange("sales", ChangeKind.CHANGED, "DataFrame", "2 rows × 1 columns"),
        VariableChange("scores", ChangeKind.CHANGED, "list", "length 3"),  # in place, its length moved
        VariableChange("tmp", ChangeKind.DELETED, "int", "value 5"),
    ]
    assert "[variables] created by_month (DataFrame, 3 rows × 0 columns); changed sales" in step.content  # the model knows
    df = conv.tool_calls_df()
    assert df["variables_changed"].iloc[0].startswith("created by_month (DataFrame")
    assert "deleted tmp (int, value 5)" in df["variables_changed"].iloc[0]
    assert [c["name"] for c in step_dict(step)["changes"]] == ["by_month", "sales", "scores", "tmp"]  # to the card
    again = Step.from_dict(step.to_dict(compact=True))  # saved and loaded
    assert again.changes == step.changes


def test_code_that_changes_nothing_reports_nothing_and_a_failing_run_still_reports():
    ns = {"x": 1}
    conv = agent_running(ns, "x + 1", "y = 2\nraise ValueError('late')").conversation
    conv.ask("go")
    first, second = [s for s in conv.history if s.is_tool_run]
    assert first.changes == [] and "[variables]" not in first.content
    assert second.changes == [VariableChange("y", ChangeKind.CREATED, "int", "value 2")]  # before the error
    df = conv.tool_calls_df()
    assert pd.isna(df["variables_changed"].iloc[0]) and df["variables_changed"].iloc[1] == "created y (int, value 2)"


def test_the_fingerprint_never_copies_large_data():
    big = np.zeros((2_000, 2_000))  # 32 MB
    before = fingerprints({"big": big})
    assert before["big"] == (id(big), "ndarray", "shape 2000×2000, dtype float64")
    big[0, 0] = 1.0  # in place, same shape: not seen (documented)
    assert changes(before, fingerprints({"big": big})) == ()
    assert changes(before, fingerprints({"big": big[:10]}))[0].size == "shape 10×2000, dtype float64"


def test_a_numpy_scalar_reads_as_its_value_not_an_empty_shape():
    """#48 rough edges: ``total = df.revenue.sum()`` read "shape , dtype int64" on the card's variables line."""
    conv = agent_running({}, "import numpy as np\ntotal = np.int64(42)\nmean = np.float32(1.5)\n"
                             "grid = np.zeros((2, 3))").conversation
    conv.ask("go")
    (step,) = [s for s in conv.history if s.is_tool_run]
    sizes = {c.name: c.size for c in step.changes}
    assert sizes["total"] == "value 42, dtype int64"
    assert sizes["mean"] == "value 1.5, dtype float32"
    assert sizes["grid"] == "shape 2×3, dtype float64"  # arrays keep their shape
    assert not any(s.startswith("shape ,") for s in sizes.values())
