"""The usage ledger: one record per turn, never trimmed."""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import Any
from collections.abc import Mapping

from .steps import (FinishReason, PrefixChange, Step, StepKind, StepStatus, StepTarget, TurnStatus,
                    UsageMetadata, enum_member)
from .usage import count


@dataclass(frozen=True)
class ColumnRule:
    """What a ``TurnRecord`` field's type does not say of its column (``core/turn_columns.py``)."""

    if_missing: Any = None  # what a ledger without the field means (None: the field's None or zero)
    distinct: bool = False  # a text whose values rarely repeat across turns (each prompt)

    def of(self, f: Field) -> ColumnRule:
        """The rule ``f`` declares (this one when it declares none)."""
        return f.metadata.get(ColumnRule, self)


def _ruled(default: Any, rule: ColumnRule) -> Any:
    return field(default=default, metadata={ColumnRule: rule})


@dataclass
class TurnRecord:
    """What one turn cost and how it went. Each field is a column of the decoded ledgers
    (``core/turn_columns.py``), read by its type and its ``ColumnRule``."""

    turn: int
    prompt: str = _ruled("", ColumnRule(distinct=True))
    model: str = ""
    provider: str = ""
    started_at: float = 0.0
    finished_at: float | None = None
    first_token_at: float | None = None
    usage: UsageMetadata = field(default_factory=UsageMetadata)
    model_calls: int = 0
    tool_calls: int = 0
    finish_reason: FinishReason | None = None
    status: TurnStatus = _ruled(TurnStatus.RUNNING, ColumnRule(if_missing=TurnStatus.DONE))  # saved: it ended
    error: str = ""
    http_code: int = 0
    prefix_change: PrefixChange | None = None  # what changed in the request prefix at the turn's first call
    context_tokens: int = 0  # tokens in context after the turn: the last model call's input + output
    context_window: int | None = None  # the model's window as its provider reported it (None: unknown)

    def __post_init__(self) -> None:
        # records built by hand may give the enums' values ("STOP", "done"): keep the fields typed
        if self.finish_reason is not None and not isinstance(self.finish_reason, FinishReason):
            self.finish_reason = FinishReason(self.finish_reason)
        if not isinstance(self.status, TurnStatus):
            self.status = TurnStatus(self.status)
        if self.prefix_change is not None and not isinstance(self.prefix_change, PrefixChange):
            self.prefix_change = PrefixChange(self.prefix_change)

    @property
    def cache_write_tokens(self) -> int:
        """Input tokens written to a prompt cache (``usage.cache_write_token_count``)."""
        return self.usage.cache_write_token_count

    @property
    def duration(self) -> float | None:
        """Seconds from the prompt to the turn's end (None while it runs)."""
        if self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    @property
    def time_to_first_token(self) -> float | None:
        """Seconds from the prompt to the first token (None before it)."""
        if self.first_token_at is None:
            return None
        return self.first_token_at - self.started_at

    @property
    def output_tokens_per_s(self) -> float | None:
        """Generated tokens per second after the first token arrived."""
        return tokens_per_second(self.usage.generated_token_count, self.first_token_at, self.finished_at)

    def to_dict(self, *, compact: bool = False) -> dict:
        """A JSON-ready dict; ``compact`` leaves out None and the fields whose default is empty
        ("", 0, no usage): ``from_dict`` restores them."""
        d = {
            "turn": self.turn,
            "prompt": self.prompt,
            "model": self.model,
            "provider": self.provider,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "first_token_at": self.first_token_at,
            "usage": self.usage.to_dict(),
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "finish_reason": None if self.finish_reason is None else self.finish_reason.value,
            "status": self.status.value,
            "error": self.error,
            "http_code": self.http_code,
            "prefix_change": None if self.prefix_change is None else self.prefix_change.value,
            "context_tokens": self.context_tokens,
            "context_window": self.context_window,
        }
        if compact:
            d["usage"] = self.usage.to_dict(compact=True)
            empty = ("prompt", "model", "provider", "started_at", "usage", "model_calls", "tool_calls", "error",
                     "http_code", "context_tokens")
            return {k: v for k, v in d.items() if v or (v is not None and k not in empty)}
        return d

    @classmethod
    def from_dict(cls, d: Any) -> TurnRecord:
        """The inverse of ``to_dict``, checking every type (TypeError / ValueError / KeyError)."""

        if type(d) is not dict and not isinstance(d, Mapping):
            raise TypeError(f"a turn record must be an object, got {type(d).__name__}")
        get = d.get
        reason, status, change = get("finish_reason"), get("status"), get("prefix_change")
        window = get("context_window")
        return cls(
            turn=count(d["turn"], "turn"),
            prompt=str(get("prompt") or ""),
            model=str(get("model") or ""),
            provider=str(get("provider") or ""),
            started_at=float(get("started_at") or 0.0),
            finished_at=_opt_float(get("finished_at")),
            first_token_at=_opt_float(get("first_token_at")),
            usage=UsageMetadata.from_dict(get("usage")) or UsageMetadata(),
            model_calls=count(get("model_calls"), "model_calls"),
            tool_calls=count(get("tool_calls"), "tool_calls"),
            finish_reason=None if reason is None else enum_member(FinishReason, reason),
            status=enum_member(TurnStatus, status) if status else _IF_MISSING["status"],
            error=str(get("error") or ""),
            http_code=count(get("http_code"), "http_code"),
            prefix_change=None if change is None else enum_member(PrefixChange, change),
            context_tokens=count(get("context_tokens"), "context_tokens"),
            context_window=None if window is None else count(window, "context_window"),
        )


_IF_MISSING = {f.name: ColumnRule().of(f).if_missing for f in fields(TurnRecord)}


def tokens_per_second(tokens: Any, first_token_at: Any, finished_at: Any) -> Any:
    """Generated tokens per second between the first token and the end: the one definition.

    Works on numbers (None when unknown) and on numpy arrays (NaN when unknown), so the
    usage DataFrame computes whole columns with it.
    """
    if first_token_at is None or finished_at is None:
        return None
    span = finished_at - first_token_at
    if isinstance(span, (int, float)):
        return tokens / span if span > 0 and tokens > 0 else None
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((span > 0) & (tokens > 0), tokens / span, np.nan)


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


class TurnTally:
    """Keeps one turn's record up to date from the step updates it streams.

    A step's usage is counted once, from its last update: each update replaces
    what the same ``step_index`` counted before.
    """

    def __init__(self, record: TurnRecord) -> None:
        self.record = record
        self._counted: dict[int, UsageMetadata] = {}
        self._model_steps: set[int] = set()
        self._tool_call_ids: set[Any] = set()

    def observe(self, step: Step, now: float) -> UsageMetadata | None:
        """Fold one step update into the record; returns the usage it added (if any)."""
        rec = self.record
        added = self._count_usage(step)
        if step.kind is StepKind.MODEL_CALL:
            if step.step_index not in self._model_steps:
                self._model_steps.add(step.step_index)
                rec.model_calls += 1
            if rec.first_token_at is None and (
                step.content_delta or step.thinking_delta or step.tool_calls or step.content
            ):
                rec.first_token_at = now
            if step.model:
                rec.model = step.model
            if step.prefix_change is not None and len(self._model_steps) == 1:
                rec.prefix_change = step.prefix_change
            usage = step.usage_metadata
            if usage is not None and usage.prompt_token_count:
                rec.context_tokens = usage.prompt_token_count + usage.generated_token_count
        if step.is_tool_run:
            self._tool_call_ids.update(c.id or (step.step_index, i) for i, c in enumerate(step.tool_calls))
            rec.tool_calls = len(self._tool_call_ids)
        if step.kind is StepKind.FINISH:
            rec.finish_reason = step.finish_reason
            if step.finish_reason == FinishReason.INTERRUPTED:
                rec.status = TurnStatus.INTERRUPTED
            elif step.finish_reason == FinishReason.ERROR or step.status == StepStatus.ERROR:
                rec.status = TurnStatus.ERROR
            elif step.status == StepStatus.WAITING_FOR_USER:
                rec.status = TurnStatus.WAITING
            else:
                rec.status = TurnStatus.DONE
        if step.kind is StepKind.FINISH and step.error:  # why the loop ended the turn early (e.g. budget)
            rec.error = step.error
        elif step.error and step.status in (StepStatus.ERROR, StepStatus.TERMINAL_ERROR):
            if step.target != StepTarget.ENVIRONMENT:  # tool errors do not fail the turn
                rec.error = step.error
                rec.http_code = step.http_code or rec.http_code
        return added

    def _count_usage(self, step: Step) -> UsageMetadata | None:
        new = step.usage_metadata
        old = self._counted.get(step.step_index)
        if new is old:  # the same usage object rides on every update of a step: counted already
            return None
        new = new or UsageMetadata()
        delta = new - old if old is not None else new
        self._counted[step.step_index] = new
        self.record.usage = self.record.usage + delta
        return delta

    def close(self, now: float, *, error: BaseException | None = None, canceled: bool = False,
              interrupted: bool = False) -> None:
        """End the turn: how it ended decides its final status and finish reason."""
        rec = self.record
        rec.finished_at = now
        if canceled:
            rec.status = TurnStatus.INTERRUPTED
            rec.finish_reason = rec.finish_reason or FinishReason.INTERRUPTED
        elif error is not None:
            rec.status = TurnStatus.ERROR
            rec.finish_reason = FinishReason.ERROR
            rec.error = rec.error or str(error)
            rec.http_code = getattr(error, "http_code", None) or rec.http_code
        elif rec.status == TurnStatus.RUNNING and interrupted:
            rec.status = TurnStatus.INTERRUPTED
            rec.finish_reason = rec.finish_reason or FinishReason.INTERRUPTED
        elif rec.status == TurnStatus.RUNNING:
            rec.status = TurnStatus.DONE
            rec.finish_reason = rec.finish_reason or FinishReason.STOP
