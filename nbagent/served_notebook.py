"""Outside agents on the live notebook: ``nbagent.serve()`` serves the notebook tools over MCP.

``serve(notebook=None, *, namespace=None, approve_code=True, port=0)`` starts an MCP server
(streamable HTTP, the official SDK; loop/mcp_server.py) on 127.0.0.1 with a random bearer token,
serving the tools ``notebook_tools()`` gives nbagent's own agent, with the same names and JSON
schemas. Each ``tools/call`` from an outside client (Claude Code, Codex, an IDE) runs as one turn of
an ``Agent`` whose "model" replays that call (providers/relay.py), so it takes the same path as
nbagent's own agent's calls: the course policy (``run_code = false`` serves no code tools), the
approval card with its diff, the stale refusal, Undo, provenance (the cell records the client as
``author``), autosave into the session folder in effect, ``tool_calls_df()`` / ``approvals_df()``.

Each client (its name and version from ``initialize``) gets a conversation of its own; its model
string is ``mcp:<name> <version>``. Displaying the returned ``ServedNotebook`` shows its chat widget,
where calls that need approval wait for Approve / Deny (a denial is an MCP tool error). Where no
live widget shows it, such a call fails at once with an MCP tool error that says so;
``approve_code=False`` runs everything without asking (scripts, tests).

One server per kernel: a second ``serve()`` raises ``ConfigError`` naming the first's URL. The
server stops with ``stop()``, ``%chat_serve --stop``, and when the process exits.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import shlex
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from .agent import Agent
from .conversation import Conversation
from .core.errors import ConfigError
from .core.steps import ApprovalDecision, Step, StepStatus, ToolCall
from .loop.mcp_server import TOKEN_VARIABLE, ClientInfo, McpHttpServer, ServedTool
from .providers.relay import RelayProvider
from .core.conversation_state import plumbing_of

NO_ONE_TO_APPROVE = ("needs the user's approval in the notebook, and no chat widget for outside agents is shown "
                     "there (run %chat_serve, or display the object nbagent.serve() returned, in the notebook), "
                     "so nobody can press Approve; nothing was changed")
INSTRUCTIONS = ("Tools of a live Jupyter notebook and its kernel. Call read_notebook before edit_cell; edits, "
                "inserts and code runs may wait for the user's approval in the notebook.")

_lock = threading.Lock()
_current: ServedNotebook | None = None


class ServedNotebook:
    """A running ``serve()``: ``url``, ``token`` (never in its repr), ``stop()``; displays its chat."""

    def __init__(self, agent: Agent, loop: asyncio.AbstractEventLoop, own_loop: bool, port: int) -> None:
        self.agent, self.loop, self.own_loop = agent, loop, own_loop
        self.provider: RelayProvider = agent.provider  # type: ignore[assignment]
        self.client = ""  # the label of the client whose conversation is the agent's active one
        self.busy = asyncio.Lock()  # one call at a time (a turn per call): made on first use in `loop`
        self.widgets: list[Any] = []
        agent.watch_conversations(self._watch)
        self.http = McpHttpServer(self._specs, self._call, port=port, instructions=INSTRUCTIONS)
        self.url, self.token = self.http.url, self.http.token

    # --- what the clients see ---------------------------------------------------------------

    def _specs(self) -> list[ServedTool]:  # read-only: what a course without code keeps (no runs_code)
        return [ServedTool(tool.spec, not getattr(tool, "runs_code", False)) for tool in self.agent.tools.values()]

    async def _call(self, client: ClientInfo, name: str, args: dict) -> tuple[str, bool]:
        """One ``tools/call``, run as a turn on the agent's loop (the kernel's in Jupyter)."""
        if name not in self.agent.tools:
            return f"no tool named {name!r} is served here", True
        future = asyncio.run_coroutine_threadsafe(self._turn(client.label, name, args), self.loop)
        return await asyncio.wrap_future(future)

    async def _turn(self, label: str, name: str, args: dict) -> tuple[str, bool]:
        from .notebook.provenance import acting_author

        async with self.busy:
            conv = self._conversation_for(label)
            call = ToolCall(f"mcp_{uuid.uuid4().hex[:16]}", name, args)
            self.provider.queue(call)
            token = acting_author.set(label)
            try:
                await conv.chat_to_completion(f"{label} calls {name}")
            except Exception as exc:  # a turn that could not run (course hours, budget): the client's error
                return f"{name} did not run: {exc}", True
            finally:
                acting_author.reset(token)
                self.provider.pending = None
            return _result(conv, call.id)

    def _conversation_for(self, label: str) -> Conversation:
        """The agent's conversation for this client: a new one when another client called last."""
        conv = self.agent.conversation
        if label != self.client:
            self.provider.model = label
            if self.client:  # the conversation belongs to an earlier client: start this one's
                conv = self.agent.new_conversation()
                for widget in self.widgets:
                    if getattr(widget, "comm", None) is not None and widget.conversation is not conv:
                        widget.rebind(conv)
            for tool in self.agent.tools.values():  # each card says "MCP · <client>" (Step.tool_server)
                tool.server = label
            for widget in self.widgets:  # the chat's footer names the client the calls come from
                widget.refresh_gauge()
            self.client = label
        return conv

    def _watch(self, conv: Conversation) -> None:
        conv.approval_wait = None  # a live view waits for the person; no view: _refuse answers at once
        plumbing_of(conv).add_listener(lambda event, payload: self._refuse(conv, event, payload))

    @staticmethod
    def _refuse(conv: Conversation, event: str, payload: Any) -> None:
        """A call waiting for approval where no live widget shows the conversation: denied now."""
        from .notebook import view_presence

        if event != "step" or not isinstance(payload, Step) or not payload.is_tool_run:
            return
        if payload.status != StepStatus.WAITING_FOR_USER or payload.approval != ApprovalDecision.PENDING:
            return
        if not view_presence.has_live_view(conv):
            for call in payload.tool_calls:
                conv.deny(call.id, reason=f"{call.name} {NO_ONE_TO_APPROVE}", by="nbagent.serve (no widget)")

    # --- the person's side ------------------------------------------------------------------

    def widget(self) -> Any:
        """The chat widget where outside agents' calls show as cards (Approve / Deny, diffs, Undo)."""
        widget = self.agent.widget()
        if widget not in self.widgets:
            self.widgets.append(widget)
        return widget

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget())

    @property
    def running(self) -> bool:
        return self.http.running

    def setup(self, name: str = "nbagent") -> str:
        """Ready-to-paste lines that add this server to Claude Code, Codex, VS Code, Cursor and any
        stdio-only client. None holds the token: they take it from its owner-only file or from
        ``$NBAGENT_MCP_TOKEN`` (so a saved notebook output never carries it)."""
        return setup_lines(self.url, str(self.http.token_path), name)

    def stop(self) -> None:
        """Stop serving: the port is free when this returns (idempotent)."""
        global _current
        self.http.stop()
        if self.own_loop and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
        with _lock:
            if _current is self:
                _current = None

    def __repr__(self) -> str:  # never the token
        state = "serving" if self.running else "stopped"
        return f"ServedNotebook(url={self.url!r}, {state}, tools={sorted(self.agent.tools)})"


def setup_lines(url: str, token_file: str, name: str = "nbagent") -> str:
    """The clients' configuration for the server at ``url`` (see ``ServedNotebook.setup``)."""
    var = TOKEN_VARIABLE
    vscode = {"servers": {name: {"type": "http", "url": url, "headers": {"Authorization": f"Bearer ${{env:{var}}}"}}}}
    cursor = {"mcpServers": {name: {"url": url, "headers": {"Authorization": f"Bearer ${{env:{var}}}"}}}}
    return "\n".join([
        f"nbagent serves this notebook's tools at {url}",
        f"(its token is in {token_file}, readable by you only, and gone when the server stops)",
        "",
        "# first, in the shell you start your agent from:",
        f'export {var}="$(cat {shlex.quote(token_file)})"',
        "",
        "# Claude Code:",
        f'claude mcp add --transport http {name} {url} --header "Authorization: Bearer ${var}"',
        "",
        "# Codex (~/.codex/config.toml), or: codex mcp add " + name + f" --url {url} --bearer-token-env-var {var}",
        f"[mcp_servers.{name}]",
        f'url = "{url}"',
        f'bearer_token_env_var = "{var}"',
        'default_tools_approval_mode = "approve"  # the notebook asks, with the diff (else Codex asks first)',
        "",
        "# VS Code (.vscode/mcp.json):",
        json.dumps(vscode, indent=2),
        "",
        "# Cursor (~/.cursor/mcp.json or .cursor/mcp.json):",
        json.dumps(cursor, indent=2),
        "",
        "# a client that speaks stdio only (the token: $" + var + ", else the token file):",
        f"{shlex.quote(sys.executable)} -m nbagent mcp --connect {url}",
    ])


def _result(conv: Conversation, call_id: str) -> tuple[str, bool]:
    """The text the tool call's step holds, and whether it failed (denied, refused, raised)."""
    for step in reversed(conv.history):
        if step.is_tool_run and any(c.id == call_id for c in step.tool_calls):
            failed = step.status == StepStatus.ERROR or bool(step.error) or step.approval in (
                ApprovalDecision.DENIED, ApprovalDecision.POLICY_DENIED)
            return (step.error or step.content or ("failed" if failed else "")), failed
    return "the call did not run (the turn ended before it)", True


def _agent_loop() -> tuple[asyncio.AbstractEventLoop, bool]:
    """The kernel's running loop (cells, widgets and tools share it), else a private one on a thread."""
    try:
        return asyncio.get_running_loop(), False
    except RuntimeError:
        pass
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="nbagent-serve-calls", daemon=True).start()
    return loop, True


def serving() -> ServedNotebook | None:
    """The server ``serve()`` started in this process, if it still runs."""
    with _lock:
        return _current if _current is not None and _current.running else None


def serve(notebook: str | os.PathLike | None = None, *, namespace: dict | None = None, approve_code: bool = True,
          port: int = 0, save_to: str | os.PathLike | None = None) -> ServedNotebook:
    """Serve this kernel's notebook tools to outside agents over MCP (see the module docstring).

    ``notebook``: an ``.ipynb`` path (file mode), else the live notebook, else the kernel's file;
    ``namespace``: the variables (None: the kernel's); ``save_to``: where the outside agents'
    conversations are saved (a course policy's folder wins)."""
    from .notebook.kernel_tools import notebook_tools

    global _current
    with _lock:
        if _current is not None and _current.running:
            raise ConfigError(f"this kernel already serves its notebook at {_current.url}; stop that server first "
                              "(%chat_serve --stop, or .stop() on the object serve() returned)")
    if notebook is not None:
        notebook = Path(notebook).expanduser()
    tools = notebook_tools(namespace, approve_code=approve_code, notebook=notebook)
    loop, own_loop = _agent_loop()
    future: concurrent.futures.Future = concurrent.futures.Future()

    def build() -> None:  # the Agent is made on its loop's thread (widgets and locks belong to it)
        try:
            future.set_result(Agent(model=RelayProvider(), tools=tools, save_to=save_to))
        except BaseException as exc:
            future.set_exception(exc)

    if own_loop:
        loop.call_soon_threadsafe(build)
    else:
        build()
    try:
        served = ServedNotebook(future.result(), loop, own_loop, port)
    except BaseException:
        if own_loop:
            loop.call_soon_threadsafe(loop.stop)
        raise
    with _lock:
        _current = served
    atexit.register(served.stop)
    return served
