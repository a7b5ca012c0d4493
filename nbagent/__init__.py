"""nbagent: chat with LLM agents inside a notebook.

Public names are imported lazily so that ``import nbagent`` stays light:
pandas, IPython and anywidget load only where they are used.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Agent": "nbagent.agent",
    "Conversation": "nbagent.conversation",
    "ChatSession": "nbagent.core.chat_session",
    "ChatWidget": "nbagent.notebook.widget",
    "Tool": "nbagent.loop.tools",
    "tool": "nbagent.loop.tools",
    "Step": "nbagent.core.steps",
    "StepType": "nbagent.core.steps",
    "StepSource": "nbagent.core.steps",
    "StepTarget": "nbagent.core.steps",
    "StepStatus": "nbagent.core.steps",
    "ToolCall": "nbagent.core.steps",
    "UsageMetadata": "nbagent.core.steps",
    "Thought": "nbagent.core.steps",
    "Text": "nbagent.core.steps",
    "ChatResponse": "nbagent.core.steps",
    "FinishReason": "nbagent.core.steps",
    "ApprovalDecision": "nbagent.core.steps",
    "TurnStatus": "nbagent.core.steps",
    "PrefixChange": "nbagent.core.steps",
    "MockConnection": "nbagent.core.connection",
    "ModelConnection": "nbagent.loop.model_connection",
    "NbagentError": "nbagent.core.errors",
    "load_sessions": "nbagent.analysis.sessions",
    "list_sessions": "nbagent.analysis.session_list",
    "AgentSettings": "nbagent.core.session_settings",
    "compare": "nbagent.comparison",
    "to_parquet": "nbagent.analysis.parquet",
    "notebook_tools": "nbagent.notebook.kernel_tools",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'nbagent' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython):  # %load_ext nbagent
    from .extension.magics import load_ipython_extension as load

    load(ipython)
