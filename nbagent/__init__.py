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
    "ChatSession": "nbagent.session",
    "ChatWidget": "nbagent.widget",
    "Tool": "nbagent.tools",
    "tool": "nbagent.tools",
    "Step": "nbagent.steps",
    "StepType": "nbagent.steps",
    "StepSource": "nbagent.steps",
    "StepTarget": "nbagent.steps",
    "StepStatus": "nbagent.steps",
    "ToolCall": "nbagent.steps",
    "UsageMetadata": "nbagent.steps",
    "Thought": "nbagent.steps",
    "Text": "nbagent.steps",
    "ChatResponse": "nbagent.steps",
    "FinishReason": "nbagent.steps",
    "MockConnection": "nbagent.connection",
    "ModelConnection": "nbagent.model_connection",
    "NbagentError": "nbagent.errors",
    "load_sessions": "nbagent.sessions",
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
    from .magics import load_ipython_extension as load

    load(ipython)
