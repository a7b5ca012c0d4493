"""IPython extension: ``%load_ext nbagent`` adds ``%%chat`` and the ``%chat_*`` line magics.

    %%chat                       # talk to the notebook's agent (created on first use)
    What is 2 + 2?

    %%chat -a my_agent           # the Agent bound to the name my_agent
    %%chat -m demo --new         # a new agent with that model (stored as nbagent_agent)
    %%chat
    Summarise this table: {df}   # {name} puts a notebook variable in the prompt ({{ }} for braces)

    %%chat
    Plot revenue by month in @sales   # @name attaches describe_variable(name) to the prompt

The answer streams into the cell as plain text, then becomes the cell's result (``_``,
a ``str``) shown as markdown with the turn's thoughts, tool calls and usage (model text
escaped: see ``safe_markdown.py``). Interrupting the kernel stops the turn; the partial
answer is kept and is the result. A tool call that needs approval is denied with a note
(nobody can press Approve while the cell runs). ``--widget`` shows the chat
widget and streams there instead (in a kernel the turn then runs in the background, so
Stop / Approve / Deny work; ``_`` is not set). The line magics work on the same agent:
``%chat_model``, ``%chat_tools``, ``%chat_system``, ``%chat_usage``, ``%chat_history``,
``%chat_save``, ``%chat_load``, ``%chat_reset``, ``%chat_export``, ``%chat_policy`` (the course
policy in force: nbagent.toml), ``%chat_serve`` / ``%chat_serve --stop`` (outside agents over MCP: nbagent.serve), ``%chat_code`` (the code the
agent ran, in place of that cell, under a ``%%chat_run`` line: Run All skips it until the user
edits it, so agent code never runs twice unasked); ``%%chat?`` and
``%chat_model?`` show their options.

Errors show as one line (``NbagentError: [kind] ...``), never a traceback through the
magic machinery; a bad option gives IPython's usual ``UsageError``.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any
from collections.abc import Callable

from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..core.atomic_file import atomic_write_text
from ..core.errors import ConfigError, NbagentError
from ..notebook.provenance import CellAction, CellActionKind, code_hash, source_diff
from .chat_cell import ChatInterrupted, interpolate, run_turn, typed_text
from ..notebook.variables import attach_variables

DEFAULT_NAME = "nbagent_agent"
EXPORT_FORMATS = {".md": "to_markdown", ".markdown": "to_markdown", ".html": "to_html", ".htm": "to_html"}


def load_ipython_extension(ipython) -> None:
    ipython.register_magics(ChatMagics(ipython))


class MagicError(NbagentError):
    """An NbagentError that IPython shows as one line instead of a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[0;31mNbagentError\x1b[0m: {self}"]


def one_line_errors(fn: Callable) -> Callable:
    """Turn an NbagentError raised by a magic into a :class:`MagicError`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MagicError:
            raise
        except NbagentError as exc:
            raise MagicError(exc.message, kind=exc.kind, http_code=exc.http_code,
                             provider=exc.provider) from None

    return wrapper


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


@magics_class
class ChatMagics(Magics):
    """``%%chat`` and the ``%chat_*`` magics (see the module docstring)."""

    def __init__(self, shell) -> None:
        super().__init__(shell)
        self.background: set[asyncio.Task] = set()  # --widget turns running in a kernel

    # --- finding the agent -----------------------------------------------------------

    @property
    def ip(self) -> InteractiveShell:
        """The shell these magics were registered with."""
        if self.shell is None:
            raise ConfigError("the nbagent magics are not registered with an IPython shell")
        return self.shell

    @property
    def user_ns(self) -> dict[str, Any]:
        """The notebook's variables."""
        return self.ip.user_ns

    def agent(self, name: str | None, magic: str, create: bool = False, model: str | None = None,
              system: str | None = None):
        """The Agent bound to ``name`` (default ``nbagent_agent``), made when ``create``."""
        from ..agent import Agent

        key = name or DEFAULT_NAME
        found = self.user_ns.get(key)
        if found is not None and not isinstance(found, Agent):
            raise ConfigError(f"{magic}: {key!r} is a {type(found).__name__}, not an nbagent Agent")
        if found is None and (name or not create):
            hint = "run a %%chat cell first" if not name else "make one with Agent(...) or %%chat -a NAME --new"
            raise ConfigError(f"{magic}: no agent named {key!r} in the notebook ({hint})")
        if found is None:
            found = self.user_ns[key] = Agent(model=model, system=system)
        return found

    # --- %%chat ------------------------------------------------------------------------

    @magic_arguments(name="%chat")  # usage line: %%chat
    @argument("-a", "--agent", metavar="NAME", help="the notebook variable holding the Agent "
              f"(default: {DEFAULT_NAME}, made on first use)")
    @argument("-m", "--model", metavar="MODEL", help="the model: for a new agent, or switches "
              "the agent's model (e.g. demo, local, openai:gpt-4.1-mini)")
    @argument("--system", metavar="S", help="set the agent's system prompt (quote it: --system 'Be brief.')")
    @argument("--new", action="store_true", help="make a new agent (under NAME) instead of continuing")
    @argument("--widget", action="store_true", help="show the chat widget and stream into it")
    @cell_magic
    @one_line_errors
    def chat(self, line: str, cell: str):
        """Send the cell to the agent; the answer is the cell's result, shown as markdown.

        ``{name}`` in the cell puts the notebook variable ``name`` in the prompt (a
        DataFrame as a compact table); write ``{{`` and ``}}`` for literal braces.
        ``@name`` attaches the variable's description (``describe_variable``) to the prompt.
        """
        from ..agent import Agent

        args = parse_argstring(self.chat, line)
        args.system = None if args.system is None else _unquote(args.system)
        prompt = interpolate(cell or "", self.user_ns).strip()
        if not prompt.strip():
            raise ConfigError("%%chat: the cell is empty; write the prompt under the %%chat line")
        prompt, attached = attach_variables(prompt, self.user_ns, typed=typed_text(cell or ""))
        if attached:
            print(f"📎 attached: {', '.join('@' + n for n in attached)}")
        key = args.agent or DEFAULT_NAME
        if args.new or (args.agent is None and key not in self.user_ns):
            agent = self.user_ns[key] = Agent(model=args.model, system=args.system)
        else:
            agent = self.agent(args.agent, "%%chat")
            if args.model:
                agent.set_model(args.model)
            if args.system is not None:
                agent.system = args.system
        if args.widget:
            return self.chat_in_widget(agent, prompt)
        try:
            answer = run_turn(agent.conversation, prompt, in_kernel=self.in_kernel())
            if attached:  # the cell's result says what went with the prompt
                answer.markdown = f"*📎 attached: {', '.join(f'`@{n}`' for n in attached)}*\n\n{answer.markdown}"
            return answer
        except ChatInterrupted:
            raise
        except KeyboardInterrupt:
            raise ChatInterrupted() from None

    def in_kernel(self) -> bool:
        return getattr(self.shell, "kernel", None) is not None

    def chat_in_widget(self, agent, prompt: str) -> None:
        from IPython.display import display

        conv = agent.conversation
        display(agent.widget())  # the agent's widget: New chat / History with save_to
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # plain IPython: the turn completes before the cell returns
            conv.ask(prompt)
            return None
        if not conv.is_idle():
            raise ConfigError("%%chat: a turn is already running; press Stop first")
        task = loop.create_task(conv.chat_to_completion(prompt))
        self.background.add(task)  # the widget shows the answer (and any error)
        task.add_done_callback(self._finished)
        return None

    def _finished(self, task: asyncio.Task) -> None:
        self.background.discard(task)
        if not task.cancelled():
            task.exception()  # seen: the widget shows it; no "never retrieved" warning

    # --- the line magics -------------------------------------------------------------------

    @magic_arguments()
    @argument("model", metavar="MODEL", help="e.g. demo, local, local:/path/model.gguf, "
              "openai:gpt-4.1-mini, anthropic:..., gemini:...")
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_model(self, line: str):
        """Switch the agent's model; the conversation goes on with the new one (made if needed)."""
        args = parse_argstring(self.chat_model, line)
        agent = self.agent(args.agent, "%chat_model", create=True, model=args.model)
        agent.set_model(args.model)
        print(f"{args.agent or DEFAULT_NAME} now uses {agent.model}")

    @magic_arguments()
    @argument("names", nargs="*", metavar="FUNCTION", help="notebook functions (or @tool objects)")
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_tools(self, line: str):
        """Give the agent notebook functions as tools (type hints and docstrings describe
        them); with no names, list its tools."""
        from ..loop.tools import to_tools

        args = parse_argstring(self.chat_tools, line)
        agent = self.agent(args.agent, "%chat_tools", create=True)
        found = []
        for name in args.names:
            if name not in self.user_ns:
                raise ConfigError(f"%chat_tools: no function named {name!r} in the notebook")
            found.append(self.user_ns[name])
        agent.tools.update(to_tools(found))
        print(tools_line(args.agent or DEFAULT_NAME, agent))

    @magic_arguments()
    @argument("text", nargs="*", help="the system prompt (none: show the current one)")
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_system(self, line: str):
        """Set the agent's system prompt (it applies from the next turn)."""
        args = parse_argstring(self.chat_system, line)
        agent = self.agent(args.agent, "%chat_system", create=True)
        if args.text:
            agent.system = _unquote(" ".join(args.text))
        print(f"system prompt: {agent.system!r}")

    @magic_arguments()
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_usage(self, line: str):
        """The agent's usage, one row per turn (a DataFrame: tokens, timing, cost)."""
        args = parse_argstring(self.chat_usage, line)
        return self.agent(args.agent, "%chat_usage").conversation.usage_df()

    @magic_arguments()
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_history(self, line: str):
        """The agent's conversation, one row per step (a DataFrame)."""
        args = parse_argstring(self.chat_history, line)
        return self.agent(args.agent, "%chat_history").conversation.history_df()

    @magic_arguments()
    @argument("path", metavar="PATH", help="a .json file")
    @argument("--frames", action="store_true", help="also embed the DataFrames as JSON rows")
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_save(self, line: str):
        """Save the agent's conversation (load it back with %chat_load)."""
        args = parse_argstring(self.chat_save, line)
        agent = self.agent(args.agent, "%chat_save")
        conv = agent.conversation
        path = agent.save(_unquote(args.path), frames=args.frames)
        print(f"saved {_turns(conv)} to {path}")

    @magic_arguments()
    @argument("path", metavar="PATH", help="a file written by %%chat_save or Conversation.save")
    @argument("-m", "--model", metavar="MODEL", help="the model to continue with "
              "(default: the agent's, else the default model)")
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_load(self, line: str):
        """Continue a saved conversation with its saved settings (``Agent.load``); further turns
        save to the same file. The agent's tools, when it has some, are given again."""
        from ..agent import Agent

        args = parse_argstring(self.chat_load, line)
        key = args.agent or DEFAULT_NAME
        old = self.user_ns.get(key)
        tools = list(old.tools.values()) if isinstance(old, Agent) else []
        overrides: dict[str, Any] = {"model": args.model} if args.model else {}
        if not args.model and isinstance(old, Agent) and not _known_model(saved_model(_unquote(args.path))):
            overrides["model"] = old.provider  # the file names no model this kernel has: keep the agent's
        agent = Agent.load(_unquote(args.path), tools=tools, **overrides)
        self.user_ns[key] = agent
        print(f"{key} continues {_turns(agent.conversation)} from {_unquote(args.path)} with {agent.model}")

    @magic_arguments()
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_reset(self, line: str):
        """Start the conversation afresh, keeping the model, tools and system prompt."""
        args = parse_argstring(self.chat_reset, line)
        agent = self.agent(args.agent, "%chat_reset")
        if not agent.conversation.is_idle():
            raise ConfigError("%chat_reset: a turn is running; stop it first")
        agent.reset()
        print(f"{args.agent or DEFAULT_NAME}: new conversation")

    @magic_arguments()
    @argument("-n", type=int, default=1, metavar="N",
              help="how many of the last code cells the agent ran (default: 1, the last)")
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_code(self, line: str):
        """Put the code the agent ran (run_python) in place of this cell: the last one, or the N
        last, under a ``%%chat_run`` line, so that Run All never runs it again unasked (see
        ``chat_run``). The cell is replaced, as ``%load`` does: running it again adds no copy."""
        args = parse_argstring(self.chat_code, line)
        if args.n < 1:
            raise ConfigError("%chat_code: -n must be at least 1")
        conv = self.agent(args.agent, "%chat_code").conversation
        cells = conv.notebook.code_cells()
        if not cells:
            raise ConfigError("%chat_code: the agent has run no code yet (run_python)")
        chosen = cells[-args.n:]
        source = agent_code_cell(chosen)
        self.ip.set_next_input(source, replace=True)
        record_chat_code(self.ip, conv, chosen, source)
        pieces = f"{len(chosen)} piece{'s' if len(chosen) != 1 else ''}"
        print(f"this cell now holds {pieces} of code the agent ran (turn {chosen[-1].turn + 1}); "
              "Run All skips it until you edit it")

    @cell_magic
    def chat_run(self, line: str, cell: str):
        """Agent code put in a cell by ``%chat_code``: run only once the user has made it theirs.

        The line names the tool calls, the turn and a hash of the code under it. While the code is
        as the agent wrote it, running the cell (Run All, or by hand) prints a one-line note and
        runs nothing: the agent's code already ran once, with approval. Edit it (any change), or
        delete the ``%%chat_run`` line, and it runs as the user's own code.
        """
        recorded = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if recorded.get("sha", "") == code_hash(cell.strip())[:SHA_CHARS]:  # the magic gets a newline more
            print(f"⏸ not run: code the agent ran in turn {recorded.get('turn', '?')} "
                  f"({recorded.get('call', '?')}); edit it, or delete the %%chat_run line, to run it as yours")
            return None
        self.ip.run_cell(cell)  # the user's code now: its output and errors show as the cell's own
        return None

    @magic_arguments()
    @argument("path", metavar="PATH", help="a .md or .html file")
    @argument("-a", "--agent", metavar="NAME", help=f"the agent (default: {DEFAULT_NAME})")
    @line_magic
    @one_line_errors
    def chat_export(self, line: str):
        """Write the conversation as a readable transcript: markdown (.md) or one HTML page (.html)."""
        args = parse_argstring(self.chat_export, line)
        path = Path(_unquote(args.path)).expanduser()
        method = EXPORT_FORMATS.get(path.suffix.lower())
        if method is None:
            raise ConfigError(f"%chat_export: {path.name!r} is neither .md nor .html")
        conv = self.agent(args.agent, "%chat_export").conversation
        try:
            atomic_write_text(path, getattr(conv, method)())  # a full disk keeps the previous export
        except NbagentError as exc:
            raise NbagentError(f"%chat_export: {exc.message}", kind=exc.kind) from None
        print(f"exported {_turns(conv)} to {path}")

    @magic_arguments()
    @argument("-a", "--agent", metavar="NAME", help="an agent: the policy it was made under, with its live "
              "conversation's spend (default: the policy found from the working folder now)")
    @line_magic
    @one_line_errors
    def chat_policy(self, line: str):
        """Show the course policy in force (nbagent.toml): its file, allowed models, run_code, the
        budget left in the period and when it starts afresh, the lesson hours, the rules file."""
        from ..course import policy_report

        args = parse_argstring(self.chat_policy, line)
        agent = self.agent(args.agent, "%chat_policy") if args.agent else None
        if agent is None:
            print(policy_report())
            return
        conv = agent.conversation
        print(policy_report(agent.course, conv.turns, conv.conversation_id))

    @magic_arguments()
    @argument("notebook", nargs="?", metavar="PATH", help="an .ipynb to serve in file mode (default: the live "
              "notebook this kernel runs)")
    @argument("--stop", action="store_true", help="stop the server this kernel runs")
    @argument("--port", type=int, default=0, metavar="N", help="the loopback port (default: a free one)")
    @argument("--name", default="nbagent", metavar="NAME", help="the server's name in the printed setup lines")
    @line_magic
    @one_line_errors
    def chat_serve(self, line: str):
        """Serve this notebook's tools to outside agents (Claude Code, Codex, VS Code, Cursor) over
        MCP on loopback, print the lines that add it to each, and show the chat where their calls
        wait for Approve / Deny. ``--stop`` stops it."""
        from ..served_notebook import serve, serving

        args = parse_argstring(self.chat_serve, line)
        if args.stop:
            running = serving()
            if running is None:
                print("%chat_serve: no server runs in this kernel")
                return
            running.stop()
            print(f"stopped serving {running.url}")
            return
        notebook = Path(_unquote(args.notebook)).expanduser() if args.notebook else None
        served = serve(notebook, namespace=self.user_ns, port=args.port)
        print(served.setup(args.name))
        from IPython.display import display

        display(served.widget())


SHA_CHARS = 12  # hex digits of the code's SHA-256 on a %%chat_run line


def code_cell_source(cell) -> str:
    """A piece of the agent's code for the notebook: a comment saying where it came from (the turn
    as people count it, from 1: ``conv.turns`` and ``code_cells()`` count from 0), then the code."""
    how = "" if cell.status.value == "ok" else f", {cell.status.value}"
    return f"# run by the agent (turn {cell.turn + 1}, {cell.call_id}{how})\n{cell.code.rstrip()}"


def agent_code_cell(cells: list) -> str:
    """The cell ``%chat_code`` writes: a ``%%chat_run`` line (calls, turn from 1, hash), then the code."""
    body = "\n\n".join(code_cell_source(c) for c in cells)
    calls = ",".join(c.call_id for c in cells)
    return f"%%chat_run call={calls} turn={cells[-1].turn + 1} sha={code_hash(body.strip())[:SHA_CHARS]}\n{body}"


def record_chat_code(ip: Any, conv: Any, cells: list, source: str) -> None:
    """Write the ``inserted`` action into the cell's metadata through the live notebook, when a
    chat widget of this kernel shows in it (JupyterLab, Notebook 7); the ``%%chat_run`` line says
    the same where there is none."""
    from ..notebook.live_notebook import live_backends

    views = live_backends()  # each page applies it once (the newest widget's view may not have said so yet)
    parent: Any = getattr(getattr(ip, "kernel", None), "get_parent", lambda *a: {})()
    cell_id = ((parent or {}).get("metadata") or {}).get("cellId")
    if not views or not isinstance(cell_id, str):
        return
    record = next((r for r in conv.turns if r.turn == cells[-1].turn), None)
    action = CellAction(CellActionKind.INSERTED, session_id=str(conv.conversation_id), turn=cells[-1].turn,
                        model=str(getattr(record, "model", "") or ""), call_id=cells[-1].call_id,
                        approved_by="%chat_code", code_sha256=code_hash(source), diff=source_diff("", source))
    for live in views:
        try:
            live.notify("add_action", cell_id=cell_id, action=action.to_json())
        except Exception:  # a closed comm: the %%chat_run line still records it
            pass


def _turns(conv) -> str:
    n = conv.turn_count
    return f"{n} turn{'s' if n != 1 else ''}"


def saved_model(path: str) -> str:
    """The model a saved session names ("" when it names none)."""
    from ..core.session_file import read_session_head

    return read_session_head(path).model


def _known_model(model: str) -> bool:
    from ..providers import lookup

    return bool(model) and lookup(model.partition(":")[0]) is not None


def tools_line(name: str, agent: Any) -> str:
    """``%chat_tools``'s listing: each tool, MCP tools with their server, servers not started yet."""
    shown = [f"{t.name} (MCP {t.server})" if getattr(t, "server", "") else t.name for t in agent.tools.values()]
    listed = {getattr(t, "server", "") for t in agent.tools.values()}
    later = [s.name for s in getattr(agent, "mcp_servers", []) if s.name not in listed]
    text = f"tools of {name}: {', '.join(shown) or '(none)'}"
    if later:
        text += f"; MCP servers listed at the first turn: {', '.join(later)}"
    return text
