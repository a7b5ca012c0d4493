"""Compare models on the same prompts: ``nbagent.compare(prompts_or_session, models=[...])``.

Each model gets a fresh :class:`~nbagent.Agent` (same ``system``, ``tools`` and
options) and answers the prompts in order in one conversation, so it sees its
own earlier answers. The result is one DataFrame with a row per (prompt,
model); its numbers come from the usage ledger through the same column
definitions as ``usage_df()``. A model that fails (no key, not installed, a
server error) gets rows with the error and never stops the others; after an
``auth``, ``config`` or ``context_length`` error its remaining prompts are not
sent (their rows repeat the error).

``prompts_or_session`` is a prompt, a list of prompts, a saved session (a
``Path``, or a ``str`` naming an existing ``.json`` file) or a
``Conversation``: a session's user prompts are replayed in order, and its
system prompt is used unless ``system=`` is given. Models are model strings
(``"demo"``, ``"local"``, ``"openai:gpt-4.1-mini"``) or Provider objects.
"""

from __future__ import annotations

import dataclasses

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

from .core.errors import ConfigError
from .core.ledger import TurnRecord
from .core.steps import FinishReason, TurnStatus
from .analysis.columns import USAGE, Column, Kind, column_table
from .analysis.tables import Table
from .analysis.frames import build_frame, require_pandas
from .core.conversation_state import plumbing_of

__all__ = ["compare", "compare_async", "COMPARE_COLUMNS"]

STOP_KINDS = frozenset({"auth", "config", "context_length"})  # errors that would repeat on every prompt
_FROM_USAGE = ("status", "error", "model_calls", "tool_calls", "input_tokens", "cached_tokens", "output_tokens",
               "thinking_tokens", "ttft_s", "output_tokens_per_s", "duration_s", "cost_usd", "http_code")


@dataclass
class Run:
    """One model's answer to one prompt, with its turn record."""

    prompt_index: int
    prompt: str
    model: str  # the label: the model string as given, or "provider:model"
    answer: str
    record: TurnRecord


def _records(table: Table) -> Table:
    return table.cached("records", lambda: Table([r.record for r in table.objs], table.pricing))


def _from_usage(column: Column) -> Column:
    return dataclasses.replace(column, extract=lambda t: column.extract(_records(t)))


INDEX = Column("row", Kind.INT, lambda t: list(range(len(t))), "row number")
COLUMNS = (
    Column("prompt_index", Kind.INT, lambda t: [r.prompt_index for r in t.objs], "position of the prompt"),
    Column("prompt", Kind.TEXT, lambda t: [r.prompt for r in t.objs], "the prompt sent"),
    Column("model", Kind.CATEGORY, lambda t: [r.model for r in t.objs], "the model as given (categories in order)"),
    Column("answer", Kind.TEXT, lambda t: [r.answer or None for r in t.objs], "the final answer text; NA if none"),
    *(_from_usage(c) for name in _FROM_USAGE for c in USAGE if c.name == name),
)
COMPARE_COLUMNS = tuple(c.name for c in COLUMNS)

__doc__ = (__doc__ or "") + f"\ncompare\n\n{column_table(INDEX, COLUMNS)}\n"


def _label(model: Any) -> str:
    if isinstance(model, str):
        return model.strip()
    name, inner = getattr(model, "name", ""), getattr(model, "model", "")
    return f"{name}:{inner}" if name and inner else type(model).__name__


def _labels(models: Sequence[Any]) -> list[str]:
    out: list[str] = []
    for m in models:
        label, n = _label(m), 2
        while label in out:
            label, n = f"{_label(m)} #{n}", n + 1
        out.append(label)
    return out


def _session_prompts(source: Any) -> tuple[list[str], str | None]:
    """The user prompts of a saved session or a Conversation, and its system prompt."""
    from .conversation import Conversation
    from .core.session_file import read_session

    state = plumbing_of(source).to_state() if isinstance(source, Conversation) else read_session(source)
    system = state.chat_session.system if state.chat_session is not None else None
    return [t.prompt for t in state.turns if t.prompt], system or None


def prompts_of(source: Any) -> tuple[list[str], str | None]:
    """(prompts, the session's system prompt or None) from what ``compare`` accepts."""
    from .conversation import Conversation

    if isinstance(source, (Conversation, os.PathLike)):
        return _session_prompts(source)
    if isinstance(source, str):
        if source.endswith(".json") and Path(source).expanduser().is_file():
            return _session_prompts(Path(source).expanduser())
        return [source], None
    if isinstance(source, Sequence) and all(isinstance(p, str) for p in source):
        return list(source), None
    raise ConfigError("compare() takes a prompt, a list of prompts, a saved session path or a Conversation, "
                      f"not {type(source).__name__}")


def _failed(index: int, prompt: str, label: str, error: BaseException) -> Run:
    record = TurnRecord(turn=index, prompt=prompt, status=TurnStatus.ERROR, finish_reason=FinishReason.ERROR,
                        error=str(error), http_code=getattr(error, "http_code", None) or 0)
    return Run(index, prompt, label, "", record)


async def _run_model(model: Any, label: str, prompts: list[str], agent_options: dict) -> list[Run]:
    """One model's answers to every prompt, in one conversation; failures become rows."""
    from .agent import Agent

    try:
        agent = Agent(model=model, **agent_options)
    except Exception as exc:  # unknown model, missing install: every prompt gets the error
        return [_failed(i, p, label, exc) for i, p in enumerate(prompts)]
    conv, runs = agent.conversation, []
    stop: BaseException | None = None
    try:
        for i, prompt in enumerate(prompts):
            if stop is not None:
                runs.append(_failed(i, prompt, label, stop))
                continue
            answer, opened = "", len(conv.turns)
            try:
                answer = (await conv.chat_to_completion(prompt)).text
            except Exception as exc:
                if getattr(exc, "kind", "") in STOP_KINDS:
                    stop = exc
                if len(conv.turns) == opened:  # the turn never opened
                    runs.append(_failed(i, prompt, label, exc))
                    continue
            runs.append(Run(i, prompt, label, answer, conv.turns[-1]))
    finally:
        try:
            await agent.disconnect()
        except Exception:
            pass
    return runs


async def compare_async(prompts_or_session: Any, models: Sequence[Any], *, system: str | None = None,
                        tools: Any = (), pricing: Mapping | None = None, **agent_options: Any):
    """The awaitable form of :func:`compare`."""
    require_pandas()
    prompts, session_system = prompts_of(prompts_or_session)
    if isinstance(models, (str, os.PathLike)) or not isinstance(models, Sequence):
        models = [models]
    if not models:
        raise ConfigError("compare() needs at least one model")
    if not prompts:
        raise ConfigError("compare() found no prompt to send")
    options = dict(agent_options, system=system if system is not None else session_system, tools=tools,
                   pricing=pricing)  # the agents' budgets and estimates use the same prices
    runs: list[Run] = []
    for model, label in zip(models, _labels(models)):  # one at a time: timings are not shared
        runs.extend(await _run_model(model, label, prompts, options))
    frame = build_frame(Table(runs, pricing), INDEX, COLUMNS)
    frame["model"] = frame["model"].cat.set_categories(_labels(models))
    return frame


def compare(prompts_or_session: Any, models: Sequence[Any], *, system: str | None = None, tools: Any = (),
            pricing: Mapping | None = None, **agent_options: Any):
    """One DataFrame row per (prompt, model): answer, status, tokens, ttft_s, tokens/s, duration, cost.

    Blocks until every model has answered (works inside a notebook's running loop);
    ``agent_options`` go to each ``Agent`` (``max_tokens=``, ``policy=``, ``budget_usd=``, ...),
    and ``pricing`` prices both the frame and each Agent's budget.
    """
    from .core.blocking import run_sync

    return run_sync(compare_async(prompts_or_session, models, system=system, tools=tools, pricing=pricing,
                                  **agent_options))
