"""The public surface: every exported name imports, imports stay light, secrets stay out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import nbagent
from nbagent.core.errors import NbagentError, redact

CONTRACT = ["Agent", "Conversation", "ChatSession", "ChatWidget", "Tool", "tool", "Step", "StepType",
            "StepSource", "StepTarget", "StepStatus", "ToolCall", "UsageMetadata", "Thought", "Text",
            "ChatResponse", "FinishReason", "MockConnection", "NbagentError"]


PLUMBING = ["AgentSettings", "ConversationEvent", "ErrorKind", "PrefixChange", "RequestEstimate", "TurnRecord"]


@pytest.mark.parametrize("name", nbagent.__all__ + PLUMBING)
def test_every_exported_name_imports(name):
    assert getattr(nbagent, name) is not None


def test_all_holds_what_a_user_needs_and_the_types_of_returned_values_stay_out():
    assert not set(PLUMBING) & set(nbagent.__all__)
    assert {"class_summary", "class_view", "provenance", "to_otel", "notebook_tools", "BudgetExceeded"} <= set(
        nbagent.__all__)


def test_contract_names_are_exported():
    assert set(CONTRACT) <= set(nbagent.__all__)
    ns: dict = {}
    exec("from nbagent import " + ", ".join(CONTRACT), ns)
    assert all(n in ns for n in CONTRACT)


def test_import_stays_light():
    code = ("import sys, nbagent; from nbagent import Agent, Conversation, tool;"
            "heavy = [m for m in ('pandas', 'IPython', 'anywidget', 'matplotlib', 'ipywidgets') if m in sys.modules];"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_step_is_constructible_by_keyword_with_defaults():
    s = nbagent.Step()
    assert s.status == nbagent.StepStatus.ACTIVE and s.type == nbagent.StepType.UNKNOWN
    assert s.content == "" and s.tool_calls == [] and s.usage_metadata is None
    assert nbagent.UsageMetadata(1, 2, 3, 4, 5) + nbagent.UsageMetadata(1, 1, 1, 1, 1) == nbagent.UsageMetadata(2, 3, 4, 5, 6)


def test_errors_are_typed_and_scrub_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefghijklmnop")
    err = NbagentError("bad key sk-live-abcdefghijklmnop rejected", kind="auth", http_code=401)
    assert "abcdefghijklmnop" not in str(err) and "abcdefghijklmnop" not in repr(err)
    assert err.kind == "auth" and err.http_code == 401 and not err.retryable
    assert "[redacted]" in redact("key=AIzaSyA1234567890abcdefghijklmnop")
    with pytest.raises(ValueError):
        NbagentError("x", kind="weird")


def test_api_key_never_in_reprs_or_saved_files(tmp_path, monkeypatch):
    secret = "sk-test-0123456789abcdef0123"
    agent = nbagent.Agent(model="openai:gpt-4.1-mini", api_key=secret)
    assert secret not in repr(agent) and secret not in repr(agent.provider)
    assert secret not in repr(agent.conversation) and secret not in repr(agent.conversation.connection)
    path = agent.conversation.save(tmp_path / "s.json")
    assert secret not in path.read_text()
    json.loads(path.read_text())


def test_type_checkers_see_every_public_name():
    """``py.typed`` ships, and each lazy export has a TYPE_CHECKING import of the same object, so
    mypy and pyright see ``nbagent.Agent`` as the class, not ``Any``."""
    import ast
    from pathlib import Path

    package = Path(nbagent.__file__).parent
    assert (package / "py.typed").exists()
    tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {}
    for node in guarded.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            assert alias.asname == alias.name  # an explicit re-export
            seen[alias.name] = "nbagent." + node.module
    assert seen == nbagent._EXPORTS


def test_each_error_kind_has_its_class_and_old_code_keeps_working():
    import pickle

    err = NbagentError("over", kind="budget")
    assert isinstance(err, nbagent.BudgetExceeded) and isinstance(err, NbagentError)
    assert err.kind == "budget" and err.kind is nbagent.ErrorKind.BUDGET and str(err) == "[budget] over"
    assert type(pickle.loads(pickle.dumps(err))) is nbagent.BudgetExceeded
    assert nbagent.ConfigError("bad").kind == "config"
    kinds = {cls.default_kind for cls in nbagent.NbagentError.__subclasses__()}
    assert kinds == set(nbagent.ErrorKind)
    with pytest.raises(ValueError):
        NbagentError("x", kind="nope")


def test_a_step_says_what_it_is():
    from nbagent.core.steps import StepKind

    S, T, Ty = nbagent.StepSource, nbagent.StepTarget, nbagent.StepType
    cases = {
        StepKind.PROMPT: nbagent.Step(type=Ty.TEXT_RESPONSE, source=S.USER, target=T.UNSPECIFIED),
        StepKind.MODEL_CALL: nbagent.Step(type=Ty.TOOL_CALL, source=S.MODEL, target=T.USER),
        StepKind.TOOL_RUN: nbagent.Step(type=Ty.TOOL_CALL, source=S.SYSTEM, target=T.ENVIRONMENT),
        StepKind.COMPACTION: nbagent.Step(type=Ty.COMPACTION, source=S.SYSTEM, target=T.ENVIRONMENT),
        StepKind.FINISH: nbagent.Step(type=Ty.FINISH, source=S.SYSTEM, target=T.USER),
        StepKind.OTHER: nbagent.Step(),
    }
    assert {kind: step.kind for kind, step in cases.items()} == {kind: kind for kind in cases}
    assert [k for k, s in cases.items() if s.is_tool_run] == [StepKind.TOOL_RUN]
    pytest.importorskip("anywidget")
    from nbagent.notebook.turn_codec import step_dict

    assert step_dict(cases[StepKind.TOOL_RUN])["kind"] == "tool_run"
