"""nbagent: chat with LLM agents inside a notebook.

Public names are imported lazily so that ``import nbagent`` stays light:
pandas, IPython and anywidget load only where they are used.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # as typing.TYPE_CHECKING (type checkers take it as True), without importing typing

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
    "ErrorKind": "nbagent.core.errors",
    "AuthError": "nbagent.core.errors",
    "RateLimited": "nbagent.core.errors",
    "InvalidRequest": "nbagent.core.errors",
    "ContextLengthExceeded": "nbagent.core.errors",
    "ServerError": "nbagent.core.errors",
    "NetworkError": "nbagent.core.errors",
    "RequestTimeout": "nbagent.core.errors",
    "ProtocolError": "nbagent.core.errors",
    "ToolError": "nbagent.core.errors",
    "StorageError": "nbagent.core.errors",
    "ConfigError": "nbagent.core.errors",
    "BudgetExceeded": "nbagent.core.errors",
    "load_sessions": "nbagent.analysis.sessions",
    "agent_usage": "nbagent.analysis.agent_usage",
    "open_agent_log": "nbagent.agent_sessions",
    "list_sessions": "nbagent.analysis.session_list",
    "session_browser": "nbagent.session_folder",
    "class_summary": "nbagent.analysis.class_summary",
    "class_view": "nbagent.notebook.class_view",
    "AgentSettings": "nbagent.core.session_settings",
    "compare": "nbagent.comparison",
    "to_parquet": "nbagent.analysis.parquet",
    "to_otel": "nbagent.analysis.otel",
    "trace_live": "nbagent.analysis.otel_live",
    "notebook_tools": "nbagent.notebook.kernel_tools",
    "provenance": "nbagent.notebook.provenance_frame",
    "TurnRecord": "nbagent.core.ledger",
    "ConversationEvent": "nbagent.core.conversation_state",
    "Hooks": "nbagent.loop.hooks",
    "Provider": "nbagent.providers.base",
    "RequestEstimate": "nbagent.analysis.estimate",
    "mcp_tools": "nbagent.loop.mcp",
}

if TYPE_CHECKING:  # the lazy names, as type checkers (and IDEs) see them
    from .agent import Agent as Agent
    from .analysis.class_summary import class_summary as class_summary
    from .analysis.estimate import RequestEstimate as RequestEstimate
    from .analysis.otel import to_otel as to_otel
    from .analysis.otel_live import trace_live as trace_live
    from .analysis.parquet import to_parquet as to_parquet
    from .analysis.session_list import list_sessions as list_sessions
    from .analysis.sessions import load_sessions as load_sessions
    from .analysis.agent_usage import agent_usage as agent_usage
    from .agent_sessions import open_agent_log as open_agent_log
    from .comparison import compare as compare
    from .conversation import Conversation as Conversation
    from .core.chat_session import ChatSession as ChatSession
    from .core.connection import MockConnection as MockConnection
    from .core.conversation_state import ConversationEvent as ConversationEvent
    from .core.errors import (
        AuthError as AuthError,
        BudgetExceeded as BudgetExceeded,
        ConfigError as ConfigError,
        ContextLengthExceeded as ContextLengthExceeded,
        ErrorKind as ErrorKind,
        InvalidRequest as InvalidRequest,
        NbagentError as NbagentError,
        NetworkError as NetworkError,
        ProtocolError as ProtocolError,
        RateLimited as RateLimited,
        RequestTimeout as RequestTimeout,
        ServerError as ServerError,
        StorageError as StorageError,
        ToolError as ToolError,
    )
    from .core.ledger import TurnRecord as TurnRecord
    from .core.session_settings import AgentSettings as AgentSettings
    from .core.steps import (
        ApprovalDecision as ApprovalDecision,
        ChatResponse as ChatResponse,
        FinishReason as FinishReason,
        PrefixChange as PrefixChange,
        Step as Step,
        StepSource as StepSource,
        StepStatus as StepStatus,
        StepTarget as StepTarget,
        StepType as StepType,
        Text as Text,
        Thought as Thought,
        ToolCall as ToolCall,
        TurnStatus as TurnStatus,
        UsageMetadata as UsageMetadata,
    )
    from .loop.hooks import Hooks as Hooks
    from .loop.mcp import mcp_tools as mcp_tools
    from .loop.model_connection import ModelConnection as ModelConnection
    from .loop.tools import Tool as Tool, tool as tool
    from .notebook.class_view import class_view as class_view
    from .notebook.kernel_tools import notebook_tools as notebook_tools
    from .notebook.provenance_frame import provenance as provenance
    from .notebook.widget import ChatWidget as ChatWidget
    from .providers.base import Provider as Provider
    from .session_folder import session_browser as session_browser

# what a user needs; the rest of _EXPORTS (types that values returned to users carry, for annotations)
# stays importable from nbagent and from its module, out of `from nbagent import *` and tab completion
_PLUMBING = {"AgentSettings", "ConversationEvent", "ErrorKind", "PrefixChange", "RequestEstimate", "TurnRecord"}
__all__ = sorted(set(_EXPORTS) - _PLUMBING)


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
