"""Where the tokens go: each turn's tokens by contributor (each tool's results, thinking, the prompt).

``conv.usage_df(by="tool")`` is ``tool_tokens_frame(conv.history, conv.turns)``:
one row per (turn, contributor), so ::

    conv.usage_df(by="tool").groupby("tool", observed=True).tokens.sum()

answers "which tool bloats my context". Contributors (the ``tool`` column):

- a tool's name: the results of its calls in the turn, as sent to the model
  (denials and errors included), *estimated* with OpenAI's ``o200k_base``
  (bpe-openai, offline, or tiktoken, downloaded once: the same counts) when
  the ``tokens`` extra is installed, else about four characters a token;
  ``counted_by`` says which;
- ``"(prompt)"``: the user's prompt, estimated the same way;
- ``"(thinking)"``: the reasoning tokens the provider reported for the turn
  (output; some providers send it back within a tool loop).

``share`` is ``tokens`` over the turn's ``input_tokens`` (every model call's
input, as billed): how much of what the turn paid for input this contributor
is. Tool results come from the history, so a trimmed history leaves its
oldest turns' tools out; the prompt and thinking come from the never-trimmed
ledger. ``tool_calls_with_tokens`` adds ``result_tokens`` to
``tool_calls_frame``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

from ..core.compression import ApproxTokenizer, exact_tokenizer
from ..core.errors import NbagentError
from ..core.ledger import TurnRecord
from ..core.steps import Step
from .columns import Column, Kind, column_table
from .frames import build_frame, require_pandas, tool_calls_frame, tool_call_rows
from .tables import Table

__all__ = ["tool_tokens_frame", "tool_calls_with_tokens", "estimator", "TOOL_TOKEN_COLUMNS", "PROMPT", "THINKING"]

PROMPT, THINKING = "(prompt)", "(thinking)"
TIKTOKEN, CHARS, PROVIDER = "tiktoken o200k_base", "chars/4", "provider"  # counted_by values

_estimator: tuple[Any, str] | None = None


def estimator() -> tuple[Any, str]:
    """The tokenizer for result text and its ``counted_by`` label, chosen once per process."""
    global _estimator
    if _estimator is None:
        try:
            _estimator = (exact_tokenizer("o200k_base"), TIKTOKEN)
        except NbagentError:  # not installed, or tiktoken alone cannot download the encoding (offline)
            _estimator = (ApproxTokenizer(), CHARS)
    return _estimator


@dataclass
class TokenRow:
    """One contributor's tokens in one turn."""

    turn: int
    tool: str
    calls: int | None  # tool executions (None for the prompt and thinking)
    tokens: int
    turn_input: int  # the turn's input tokens (0: unknown)
    counted_by: str


def _floats(values: Any) -> Any:
    import numpy as np

    return np.fromiter((np.nan if v is None else v for v in values), dtype=np.float64)


def _share(table: Table) -> Any:
    import numpy as np

    tokens = np.fromiter((r.tokens for r in table.objs), dtype=np.float64, count=len(table))
    total = np.fromiter((r.turn_input for r in table.objs), dtype=np.float64, count=len(table))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, tokens / total, np.nan)


INDEX = Column("row", Kind.INT, lambda t: list(range(len(t))), "row number")
COLUMNS = (
    Column("turn", Kind.INT, lambda t: [r.turn for r in t.objs], "0-based turn number"),
    Column("tool", Kind.CATEGORY, lambda t: [r.tool for r in t.objs],
           f"tool name, \"{PROMPT}\" or \"{THINKING}\"", (PROMPT, THINKING)),
    Column("calls", Kind.COUNT, lambda t: _floats(r.calls for r in t.objs), "tool executions; NA for prompt/thinking"),
    Column("tokens", Kind.COUNT, lambda t: _floats(r.tokens for r in t.objs),
           "tokens of the results (estimated), the prompt (estimated) or thinking (reported)"),
    Column("share", Kind.FLOAT, _share, "tokens / the turn's input_tokens; NaN when unknown"),
    Column("counted_by", Kind.CATEGORY, lambda t: [r.counted_by for r in t.objs],
           "how tokens were counted", (TIKTOKEN, CHARS, PROVIDER)),
)
TOOL_TOKEN_COLUMNS = tuple(c.name for c in COLUMNS)

__doc__ = (__doc__ or "") + f"\ntool_tokens_frame\n\n{column_table(INDEX, COLUMNS)}\n"


def token_rows(steps: Sequence[Step], turns: Sequence[TurnRecord], tokenizer: Any = None) -> list[TokenRow]:
    """The rows of :func:`tool_tokens_frame`, turn by turn: prompt, tools (first use first), thinking."""
    tok, label = (tokenizer, type(tokenizer).__name__) if tokenizer is not None else estimator()
    tools: dict[int, dict[str, list[int]]] = {}  # turn -> tool -> [calls, tokens]
    for s in steps:
        if s.is_tool_run and s.tool_calls:
            slot = tools.setdefault(s.turn, {}).setdefault(s.tool_calls[0].name, [0, 0])
            slot[0] += 1
            slot[1] += tok.count(s.content)
    records = {r.turn: r for r in turns}
    rows: list[TokenRow] = []
    for turn in sorted(set(records) | set(tools)):
        rec = records.get(turn)
        paid = rec.usage.prompt_token_count if rec is not None else 0
        if rec is not None and rec.prompt:
            rows.append(TokenRow(turn, PROMPT, None, tok.count(rec.prompt), paid, label))
        for name, (calls, tokens) in tools.get(turn, {}).items():
            rows.append(TokenRow(turn, name, calls, tokens, paid, label))
        if rec is not None and rec.usage.thoughts_token_count:
            rows.append(TokenRow(turn, THINKING, None, rec.usage.thoughts_token_count, paid, PROVIDER))
    return rows


def tool_tokens_frame(steps: Sequence[Step], turns: Sequence[TurnRecord], tokenizer: Any = None):
    """One row per (turn, contributor); ``tokenizer`` (anything with ``count(text)``) overrides the estimate."""
    pd = require_pandas()
    rows = token_rows(steps, turns, tokenizer)
    frame = build_frame(Table(rows), INDEX, COLUMNS)
    frame.index = pd.RangeIndex(len(rows), name="row")
    return frame


def tool_calls_with_tokens(steps: Sequence[Step], tokenizer: Any = None):
    """``tool_calls_frame(steps)`` plus ``result_tokens``: each result's estimated tokens (NA: pending)."""
    pd = require_pandas()
    tok = tokenizer if tokenizer is not None else estimator()[0]
    frame = tool_calls_frame(steps)
    counts = [None if r.execution is None else tok.count(r.execution.content) for r in tool_call_rows(steps)]
    frame["result_tokens"] = pd.array(counts, dtype="Int64")
    return frame
