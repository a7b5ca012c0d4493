"""The reference pages' generated parts: every table and entry here is read from the code at build time.

Directives (used in ``{eval-rst}`` blocks of docs/reference/*.md, since each writes reStructuredText):

``nbagent-api GROUP``     autodoc entries for one group of ``nbagent``'s public names (``API_GROUPS``); the
                          build fails when a public name is in no group, or in two
``nbagent-magics``        every ``%chat_*`` / ``%%chat`` magic, from its IPython ``magic_arguments`` parser
``nbagent-cli``           ``python -m nbagent`` and its subcommands, from ``nbagent.cli.parser()``
``nbagent-config``        the ``[policy]`` keys of ``nbagent.toml``, from ``CoursePolicy`` and its parser
``nbagent-columns FRAME`` a DataFrame's columns, from their ``Column`` declarations
``nbagent-errors``        every error kind and its class, from ``NbagentError``'s registry

A cross-reference to a public name by its defining module (``nbagent.core.steps.Step``, as type hints
write it) resolves to its entry under ``nbagent`` (``nbagent.Step``).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import inspect
import re
import typing

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

# nbagent's public names, grouped as users meet them; every name of nbagent._EXPORTS is in exactly one group
API_GROUPS: dict[str, tuple[str, ...]] = {
    "agent": ("Agent", "Conversation", "ChatResponse", "AgentSettings", "RequestEstimate"),
    # what the facade's accessors return (conv.budget, conv.notebook, agent.course, agent.autosave_status): not
    # importable from nbagent, documented under their modules (a dotted name)
    "accessors": ("nbagent.conversation_parts.ConversationBudget", "nbagent.conversation_parts.ConversationNotebook",
                  "nbagent.course.AgentCourse", "nbagent.core.autosave.AutosaveStatus"),
    "steps": ("Step", "StepType", "StepSource", "StepTarget", "StepStatus", "Text", "Thought", "ToolCall",
              "UsageMetadata", "FinishReason", "TurnStatus", "TurnRecord", "PrefixChange", "ConversationEvent"),
    "models": ("Provider", "ModelConnection", "MockConnection", "ChatSession", "Hooks"),
    "widget": ("ChatWidget", "class_view", "session_browser"),
    "tools": ("tool", "Tool", "ApprovalDecision", "notebook_tools", "mcp_tools", "serve", "provenance"),
    "sessions": ("load_sessions", "list_sessions", "to_parquet", "to_otel", "trace_live", "open_agent_log"),
    "analysis": ("agent_usage", "class_summary", "compare"),
    "errors": ("NbagentError", "ErrorKind", "AuthError", "RateLimited", "InvalidRequest", "ContextLengthExceeded",
               "ServerError", "NetworkError", "RequestTimeout", "ProtocolError", "ToolError", "StorageError",
               "ConfigError", "BudgetExceeded"),
}

def public_groups() -> list[str]:
    """The public names API_GROUPS lists (not the dotted ones), with repeats."""
    return [name for names in API_GROUPS.values() for name in names if "." not in name]


# each DataFrame with declared columns: (module, index column, columns, what makes it)
FRAMES: dict[str, tuple[str, str, str, str]] = {
    "history_df": ("nbagent.analysis.columns", "HISTORY_INDEX", "HISTORY",
                   "``conv.history_df()``: one row per step of the conversation"),
    "usage_df": ("nbagent.analysis.columns", "USAGE_INDEX", "USAGE",
                 "``conv.usage_df()``: one row per turn (``nbagent.load_sessions`` has these columns too, after "
                 "``session_id``, ``path`` and ``user``)"),
    "tool_calls_df": ("nbagent.analysis.columns", "TOOL_CALL_INDEX", "TOOL_CALLS",
                      "``conv.tool_calls_df()``: one row per tool call"),
    "approvals_df": ("nbagent.analysis.approvals", "INDEX", "COLUMNS",
                     "``conv.approvals_df()``: one row per approval decision"),
    "usage_by_tool": ("nbagent.analysis.attribution", "INDEX", "COLUMNS",
                      "``conv.usage_df(by=\"tool\")``: the tokens of each turn's input by what put them there"),
    "compare": ("nbagent.comparison", "INDEX", "COLUMNS", "``nbagent.compare(...)``: one row per prompt and model"),
    "class_summary": ("nbagent.analysis.class_summary", "", "CLASS_COLUMNS",
                      "``nbagent.class_summary(folder)``: one row per student"),
}


def _public_names() -> dict[str, str]:
    import nbagent

    return dict(nbagent._EXPORTS)


class _RstDirective(SphinxDirective):
    """A directive that writes reStructuredText and parses it in place."""

    def parse(self, lines: list[str]) -> list[nodes.Node]:
        node = nodes.section() if self.allows_sections else nodes.container()
        node.document = self.state.document
        source = self.get_source_info()[0]
        self.state.nested_parse(StringList(lines, source=source), self.content_offset, node, match_titles=True)
        return list(node.children)

    allows_sections = False


def _indent(text: str, by: str = "   ") -> list[str]:
    return [by + line if line else "" for line in inspect.cleandoc(text).splitlines()]


# --- the API -------------------------------------------------------------------------------------------------


class ApiGroup(_RstDirective):
    """``.. nbagent-api:: agent``: the autodoc entries of one group of public names."""

    required_arguments = 1
    allows_sections = True

    def run(self) -> list[nodes.Node]:
        import nbagent

        group = self.arguments[0]
        if group not in API_GROUPS:
            raise self.error(f"no API group {group!r} (groups: {', '.join(API_GROUPS)})")
        lines: list[str] = []
        documented = self.env.domaindata.setdefault("nbagent", {}).setdefault("api", {})
        for name in API_GROUPS[group]:
            if "." in name:  # a type the public names hand out, by its module
                module, _, attr = name.rpartition(".")
                entry = _autodoc(name, getattr(importlib.import_module(module), attr))
                entry[0] += "()"  # made by nbagent, never by the user: no constructor signature
                lines += entry + [""]
                continue
            documented.setdefault(name, []).append(self.env.docname)
            lines += _autodoc(f"nbagent.{name}", getattr(nbagent, name)) + [""]
        return self.parse(lines)


def _autodoc(target: str, obj: object) -> list[str]:
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        own = [m for m, v in vars(obj).items() if not m.startswith("_") and callable(v)]
        return [f".. autoexception:: {target}", *([f"   :members: {', '.join(own)}"] if own else [])]
    if inspect.isclass(obj) and issubclass(obj, enum.Enum):
        return [f".. autoclass:: {target}", "   :members:", "   :undoc-members:", "   :member-order: bysource"]
    if inspect.isclass(obj):
        return [f".. autoclass:: {target}", "   :members:", "   :member-order: bysource"]
    return [f".. autofunction:: {target}"]


def check_api_complete(app: Sphinx, env) -> None:
    """Every public name is documented in exactly one group (a warning, so an error under -W)."""
    grouped = public_groups()
    for name in sorted(set(_public_names()) - set(grouped)):
        logger.warning(f"nbagent.{name} is in no API group (docs/_ext/nbagent_reference.py API_GROUPS)")
    for name in sorted({n for n in grouped if grouped.count(n) > 1} | (set(grouped) - set(_public_names()))):
        logger.warning(f"API_GROUPS lists nbagent.{name} twice, or it is not public")
    documented = env.domaindata.get("nbagent", {}).get("api", {})
    if documented:  # a full build (a partial one reads only the changed pages)
        for name in sorted(set(_public_names()) - set(documented)):
            logger.warning(f"nbagent.{name} is on no reference page (no nbagent-api directive shows its group)")


def purge_api(app: Sphinx, env, docname: str) -> None:
    documented = env.domaindata.get("nbagent", {}).get("api", {})
    for name in list(documented):
        documented[name] = [d for d in documented[name] if d != docname]
        if not documented[name]:
            del documented[name]


def resolve_public_alias(app: Sphinx, env, node, contnode):
    """``nbagent.core.steps.Step`` (a type hint) -> ``nbagent.Step`` (its entry), for the public names."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    head, _, name = target.rpartition(".")
    attr = ""
    if name not in _public_names() and "." in head:  # a member: nbagent.core.steps.Step.content
        head, _, owner = head.rpartition(".")
        name, attr = owner, "." + name
    if not head.startswith("nbagent") or name not in _public_names() or head == "nbagent":
        return None
    module = _public_names()[name]
    if head != module and not head.startswith(module):
        return None
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], f"nbagent.{name}{attr}",
                               node, contnode)


# --- the magics ----------------------------------------------------------------------------------------------


class Magics(_RstDirective):
    """``.. nbagent-magics::``: each magic, its usage, text and options (from ``magic_arguments``)."""

    allows_sections = True

    def run(self) -> list[nodes.Node]:
        from nbagent.extension.magics import ChatMagics

        lines: list[str] = []
        for kind, prefix in (("cell", "%%"), ("line", "%")):
            for name in ChatMagics.magics[kind]:
                func = getattr(ChatMagics, name)
                title = f"``{prefix}{name}``"
                lines += [title, "-" * len(title), ""]
                parser = getattr(func, "parser", None)
                if parser is None:  # a magic without options: its docstring says all
                    lines += _indent(func.__doc__ or "", by="") + [""]
                    continue
                usage = parser.format_usage().replace("usage: ", "").strip()
                usage = re.sub(r"^%chat\b", "%%chat", usage) if kind == "cell" else usage
                lines += [".. code-block:: text", "", *_indent(usage), ""]
                lines += [*_indent(parser.description or "", by=""), ""]
                lines += option_rows(parser)
        return self.parse(lines)


def option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            spelled = ", ".join(f"``{o}{metavar}``" for o in action.option_strings)
        else:
            spelled = f"``{action.metavar or action.dest}``" + (" ..." if action.nargs in ("*", "+") else "")
        help_text = (action.help or "").replace("%%", "%")
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in help_text:
            help_text += f" (default: ``{action.default}``)"
        rows.append((spelled, help_text))
    if not rows:
        return []
    out = [".. list-table::", "   :widths: 30 70", ""]
    for spelled, help_text in rows:
        out += [f"   * - {spelled}", "     - " + (_escape(help_text) or "\\ ")]
    return out + [""]


def _text(text: str) -> str:
    """A meaning the code declares (reStructuredText markup kept, as its docstrings use it) on one line."""
    return re.sub(r"([*|])", r"\\\1", " ".join(text.split()))


def _escape(text: str) -> str:
    """Plain text from a help string, safe in reStructuredText (``*``, backquotes, ``|`` as written)."""
    return re.sub(r"([*`|_\\])", r"\\\1", " ".join(text.split()))


# --- the CLI -------------------------------------------------------------------------------------------------


class Cli(_RstDirective):
    """``.. nbagent-cli::``: ``python -m nbagent`` and each subcommand, from the argparse parser."""

    allows_sections = True

    def run(self) -> list[nodes.Node]:
        from nbagent import cli

        return self.parse(cli_lines(cli.parser()))


def cli_lines(top: argparse.ArgumentParser) -> list[str]:
    """The command line's page: its usage, then a section per subcommand with its usage and options."""
    lines = [".. code-block:: text", "", *_indent(top.format_usage().replace("usage: ", "")), "",
             _escape(top.description or ""), ""]
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in subs._choices_actions}
    for name, sub in subs.choices.items():
        title = f"``{name}``"
        lines += [title, "-" * len(title), "", _escape(helps.get(name) or ""), "", ".. code-block:: text", "",
                  *_indent(sub.format_usage().replace("usage: ", "")), ""]
        if sub.description:
            lines += [_escape(sub.description), ""]
        lines += option_rows(sub)
    return lines


# --- nbagent.toml --------------------------------------------------------------------------------------------


class Config(_RstDirective):
    """``.. nbagent-config::``: the ``[policy]`` keys: type and default from ``CoursePolicy``, what each
    does from the commented example in course_policy.py's docstring (a key it lacks fails the build)."""

    def run(self) -> list[nodes.Node]:
        from nbagent.core import course_policy

        comments = policy_key_examples(course_policy.__doc__ or "")
        fields = {f.name: f for f in dataclasses.fields(course_policy.CoursePolicy)}
        hints = typing.get_type_hints(course_policy.CoursePolicy)
        rows = []
        for key in course_policy.KEYS:
            if key not in comments:
                logger.warning(f"nbagent.toml key {key!r} has no commented example line in "
                               "nbagent/core/course_policy.py's docstring", location=self.get_location())
                continue
            example, meaning = comments[key]
            default = fields[key].default if key in fields else None
            default_text = "none, not restricted" if default is None else f"``{_toml(default)}``"
            rows.append((f"``{key}``", f"``{example}``", _type_name(hints.get(key)), default_text, meaning))
        out = [".. list-table::", "   :header-rows: 1", "   :widths: 18 30 52", "",
               "   * - key", "     - example", "     - meaning"]
        for key, example, parsed, default, meaning in rows:
            out += [f"   * - {key}", f"     - {example}",
                    f"     - {_escape(meaning)} (parsed as {parsed}; default: {default})"]
        return self.parse(out + [""])


def policy_key_examples(doc: str) -> dict[str, tuple[str, str]]:
    """Each ``key = value  # meaning`` line of the docstring's example: key -> (value, meaning)."""
    found = {}
    for line in doc.splitlines():
        m = re.match(r"\s*(\w+)\s*=\s*(.+?)\s+#\s*(.+)$", line)
        if m:
            found[m[1]] = (m[2], m[3])
    return found


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return f'"{value.value}"'
    if isinstance(value, str):
        return f'"{value}"'
    if value == ():
        return "[]"
    return repr(value)


def _type_name(hint: object) -> str:
    if isinstance(hint, type):
        return f"``{hint.__name__}``"
    text = str(hint).replace("typing.", "").replace("nbagent.core.course_policy.", "").replace("pathlib.", "")
    text = re.sub(r"<class '([\w.]+)'>", r"\1", text)
    return f"``{text}``"


# --- columns and errors --------------------------------------------------------------------------------------


class Columns(_RstDirective):
    """``.. nbagent-columns:: usage_df``: a DataFrame's columns, name, dtype and meaning, from the
    ``Column`` declarations the frame is built from."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        from nbagent.analysis.columns import column_table

        frame = self.arguments[0]
        if frame not in FRAMES:
            raise self.error(f"no frame {frame!r} (frames: {', '.join(FRAMES)})")
        module_name, index_name, columns_name, _ = FRAMES[frame]
        module = importlib.import_module(module_name)
        columns = getattr(module, columns_name)
        if index_name:
            table = column_table(getattr(module, index_name), columns)
        else:  # no index column: a table of the columns alone
            first, *rest = columns
            table = column_table(first, rest)
        lines = [line.replace("*", "\\*").replace("|", "\\|") for line in table.splitlines()]
        return self.parse(lines + [""])


class MadeColumns(_RstDirective):
    """``.. nbagent-made-columns:: load_sessions``: the columns of a frame assembled from several sources (no one
    declaration), read off the frame itself: a demo session is saved in a temporary folder and read back.
    Meanings come from the usage columns' declarations (``load_sessions``) or ``SessionRow``'s field comments
    (``list_sessions``)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        frame = self.arguments[0]
        if frame not in ("load_sessions", "list_sessions"):
            raise self.error(f"no assembled frame {frame!r} (load_sessions, list_sessions)")
        dtypes, meanings = made_frame_columns(frame)
        out = [".. list-table::", "   :header-rows: 1", "   :widths: 20 22 58", "",
               "   * - column", "     - dtype", "     - meaning"]
        for name, dtype in dtypes:
            out += [f"   * - ``{name}``", f"     - ``{dtype}``", "     - " + (_text(meanings.get(name, "")) or "\\ ")]
        return self.parse(out + [""])


def made_frame_columns(frame: str) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(column, dtype) of ``nbagent.load_sessions`` or ``nbagent.list_sessions`` over one saved demo session,
    and the meanings the code declares for them."""
    import tempfile

    import nbagent
    from nbagent.analysis import session_list
    from nbagent.analysis.columns import USAGE

    with tempfile.TemporaryDirectory() as folder:
        agent = nbagent.Agent(model="demo", save_to=folder, user="ana")
        agent.ask("Hello!")
        df = nbagent.load_sessions(folder) if frame == "load_sessions" else nbagent.list_sessions(folder)
    dtypes = [(str(name), str(dtype)) for name, dtype in df.dtypes.items()]
    if frame == "load_sessions":
        meanings = {c.name: c.doc for c in USAGE}
        meanings["turn"] = "0-based turn number within its session"
    else:
        source = inspect.getsource(session_list.SessionRow)
        meanings = dict(re.findall(r"^\s*(\w+):[^#\n]*#\s*(.+)$", source, flags=re.M))
    return dtypes, meanings


class Errors(_RstDirective):
    """``.. nbagent-errors::``: each ``ErrorKind`` with the class raised for it and what it means."""

    def run(self) -> list[nodes.Node]:
        from nbagent.core.errors import ErrorKind, NbagentError

        out = [".. list-table::", "   :header-rows: 1", "   :widths: 18 24 58", "",
               "   * - ``kind``", "     - class", "     - what went wrong"]
        for kind in ErrorKind:
            cls = NbagentError._by_kind.get(kind, NbagentError)
            first = inspect.getdoc(cls).split("\n\n")[0] if cls.__doc__ else ""
            out += [f'   * - ``"{kind.value}"``', f"     - :py:exc:`nbagent.{cls.__name__}`",
                    f"     - {' '.join(first.split())}"]
        return self.parse(out + [""])


def setup(app: Sphinx) -> dict:
    app.add_directive("nbagent-api", ApiGroup)
    app.add_directive("nbagent-magics", Magics)
    app.add_directive("nbagent-cli", Cli)
    app.add_directive("nbagent-config", Config)
    app.add_directive("nbagent-columns", Columns)
    app.add_directive("nbagent-errors", Errors)
    app.add_directive("nbagent-made-columns", MadeColumns)
    app.connect("env-check-consistency", check_api_complete)
    app.connect("env-purge-doc", purge_api)
    app.connect("missing-reference", resolve_public_alias)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True}
