"""Conversation: the stateful session a user holds.

It wraps a connection (which runs turns and emits ``Step`` updates) and keeps
the step history, turn boundaries, compaction indices, per-turn and total
usage, and a never-trimmed ledger of turns. State is guarded by a lock so the
widget and the notebook can read it while a turn streams.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from .errors import NbagentError
from .ledger import TurnRecord
from .steps import (
    ChatResponse,
    FinishReason,
    Step,
    StepSource,
    StepStatus,
    StepTarget,
    StepType,
    Text,
    Thought,
    ToolCall,
    UsageMetadata,
)

DEFAULT_MAX_HISTORY = 10_000
SESSION_FORMAT = "nbagent.session"
SESSION_VERSION = 1

Chunk = Thought | Text | ToolCall
Listener = Callable[[str, Any], None]


class Conversation:
    """Step history, turns, usage and chunk filtering over a connection."""

    def __init__(self, connection: Any = None, max_history_size: int | None = None) -> None:
        if max_history_size is not None and max_history_size < 0:
            raise NbagentError("max_history_size must be >= 0", kind="config")
        self._connection = connection
        self._max = DEFAULT_MAX_HISTORY if max_history_size is None else max_history_size
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._loaded_id = ""
        self._loaded_session = None  # the ChatSession of a read-only loaded conversation
        self._widget = None
        self._interrupt_requested = False
        self._reset_state()

    def _reset_state(self) -> None:
        self._steps: list[Step] = []
        self._trimmed = 0  # steps drained from the front so far
        self._turn_positions: dict[int, int] = {}  # step_index -> absolute position, this turn
        self._turn_starts: list[int] = []
        self._compactions: list[int] = []
        self._total = UsageMetadata()
        self._turn_usage: UsageMetadata | None = None
        self._counted: dict[int, UsageMetadata] = {}  # step_index -> usage counted, this turn
        self._cache_writes: dict[int, int] = {}
        self._ledger: list[TurnRecord] = []
        self._seen_call_ids: set[str] = set()
        self._model_steps: set[int] = set()
        self._last_response = ""
        self._turn_open = False

    # --- listeners (the widget subscribes here) ---------------------------------

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(event, payload)`` on "turn_started", "step", "turn_finished", "cleared"."""
        with self._lock:
            if fn not in self._listeners:
                self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def _emit(self, event: str, payload: Any) -> None:
        for fn in list(self._listeners):
            try:
                fn(event, payload)
            except Exception as exc:  # a broken view must not break the turn
                import warnings

                warnings.warn(f"nbagent listener failed on {event}: {exc!r}", RuntimeWarning, 2)

    # --- chatting -----------------------------------------------------------------

    async def chat(self, prompt: str) -> AsyncIterator[Chunk]:
        """Send ``prompt`` and yield Thought / Text / ToolCall chunks as they stream."""
        await self.send(prompt)
        chunks = self.receive_chunks()
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()

    async def chat_to_completion(self, prompt: str) -> ChatResponse:
        """Send ``prompt`` and wait for the whole turn."""
        await self.send(prompt)
        async for _ in self.receive_steps():
            pass
        return self._response_for_last_turn()

    def ask(self, prompt: str) -> ChatResponse:
        """Blocking ``chat_to_completion``; works in scripts and inside a running loop."""
        from .blocking import run_sync

        return run_sync(self.chat_to_completion(prompt), on_cancel=self.interrupt)

    async def send(self, prompt: str) -> None:
        """Send a prompt and open a turn (records the turn boundary)."""
        conn = self._require_connection()
        for _ in range(20):  # let a turn whose stream was abandoned (break) wind down
            if self.is_idle():
                break
            await asyncio.sleep(0)
        else:
            raise NbagentError("a turn is already running; wait for it or interrupt() it first",
                               kind="config")
        with self._lock:
            self._turn_starts.append(len(self._steps))
            self._turn_positions = {}
            self._counted = {}
            self._cache_writes = {}
            self._seen_call_ids = set()
            self._model_steps = set()
            self._turn_usage = UsageMetadata()
            self._interrupt_requested = False
            record = TurnRecord(
                turn=len(self._ledger),
                prompt=prompt,
                model=str(getattr(conn, "model_name", "") or ""),
                provider=str(getattr(conn, "provider_name", "") or ""),
                started_at=time.time(),
            )
            self._ledger.append(record)
            self._turn_open = True
        self._emit("turn_started", record)
        try:
            await conn.send(prompt)
        except BaseException as exc:
            self._close_turn(error=exc)
            raise

    async def receive_steps(self) -> AsyncIterator[Step]:
        """Yield raw step updates of the current turn, recording each in history."""
        conn = self._require_connection()
        steps = conn.receive_steps()
        try:
            async for step in steps:
                self._ingest(step)
                yield step
        except GeneratorExit:  # the caller stopped listening: stop the turn too
            conn.interrupt()
            try:
                await steps.aclose()
            except Exception:
                pass
            self._settle_active(StepStatus.CANCELED)
            self._close_turn(error=asyncio.CancelledError())
            raise
        except (asyncio.CancelledError, KeyboardInterrupt) as exc:
            self._settle_active(StepStatus.CANCELED)
            self._close_turn(error=exc)
            raise
        except BaseException as exc:
            self._settle_active(StepStatus.ERROR, str(exc), getattr(exc, "http_code", None) or 0)
            self._close_turn(error=exc)
            raise
        if self._interrupt_requested:
            self._settle_active(StepStatus.CANCELED)
        self._close_turn()

    def _settle_active(self, status: StepStatus, error: str = "", http_code: int = 0) -> None:
        """Give steps the turn left ACTIVE their final status (partial content kept)."""
        now = time.time()
        settled = []
        with self._lock:
            start = self._turn_starts[-1] if self._turn_starts else 0
            for i in range(start, len(self._steps)):
                step = self._steps[i]
                if step.status != StepStatus.ACTIVE:
                    continue
                done = step.copy(status=status, finished_at=step.finished_at or now,
                                 content_delta="", thinking_delta="")
                if status == StepStatus.ERROR and not done.error:
                    done.error, done.http_code = error, done.http_code or http_code
                self._steps[i] = done
                settled.append(done)
        for step in settled:
            self._emit("step", step)

    async def receive_chunks(self) -> AsyncIterator[Chunk]:
        """``receive_steps()`` filtered into Thought / Text / ToolCall chunks."""
        steps = self.receive_steps()
        try:
            async for step in steps:
                for chunk in self._chunks_of(step):
                    yield chunk
        finally:
            await steps.aclose()

    def _chunks_of(self, step: Step) -> list[Chunk]:
        with self._lock:
            return chunks_of(step, self._seen_call_ids)

    # --- tool decisions (forwarded to the connection) -------------------------------

    def approve(self, call_id: str) -> None:
        """Let a tool call waiting for approval run."""
        self._require_connection().approve(call_id)

    def deny(self, call_id: str, reason: str | None = None) -> None:
        """Refuse a tool call waiting for approval; the model is told why."""
        self._require_connection().deny(call_id, reason)

    def add_tool_result(self, call_id: str, result: Any, *, is_error: bool = False) -> None:
        """Give the result of a tool call the turn stopped at (manual mode)."""
        conn = self._require_connection()
        text = conn.add_tool_result(call_id, result, is_error=is_error)
        with self._lock:
            for step in reversed(self._steps):
                if (
                    step.target == StepTarget.ENVIRONMENT
                    and step.status == StepStatus.WAITING_FOR_USER
                    and any(c.id == call_id for c in step.tool_calls)
                ):
                    updated = step.copy(
                        status=StepStatus.ERROR if is_error else StepStatus.DONE,
                        content=text if isinstance(text, str) else str(result),
                        error=(text if is_error and isinstance(text, str) else ""),
                        finished_at=time.time(),
                        content_delta="",
                        thinking_delta="",
                    )
                    updated.metadata = {**step.metadata, "approval": "manual"}
                    self._steps[self._steps.index(step)] = updated
                    self._emit("step", updated)
                    break

    # --- ingestion ----------------------------------------------------------------

    def _ingest(self, step: Step) -> None:
        with self._lock:
            if step.turn < 0 and self._ledger:
                step.turn = self._ledger[-1].turn
            pos = self._turn_positions.get(step.step_index)
            if pos is not None and pos >= self._trimmed:
                self._steps[pos - self._trimmed] = step
            else:
                self._turn_positions[step.step_index] = self._trimmed + len(self._steps)
                self._steps.append(step)
                if step.type == StepType.COMPACTION:
                    self._compactions.append(len(self._steps) - 1)
            self._count_usage(step)
            self._update_ledger(step)
            if (
                step.source == StepSource.MODEL
                and step.target == StepTarget.USER
                and step.content
                and step.status in (StepStatus.DONE, StepStatus.CANCELED)
            ):
                self._last_response = step.content
            self._trim()
        self._emit("step", step)

    def _count_usage(self, step: Step) -> None:
        if self._turn_usage is None:
            self._turn_usage = UsageMetadata()
        new = step.usage_metadata
        old = self._counted.get(step.step_index)
        if new is None and old is None:
            return
        new = new or UsageMetadata()
        delta = new - old if old is not None else new
        self._counted[step.step_index] = new
        self._turn_usage = self._turn_usage + delta
        self._total = self._total + delta
        writes = int(step.metadata.get("cache_write_tokens") or 0)
        self._cache_writes[step.step_index] = writes
        if self._ledger:
            self._ledger[-1].usage = self._turn_usage
            self._ledger[-1].cache_write_tokens = sum(self._cache_writes.values())

    def _update_ledger(self, step: Step) -> None:
        if not self._ledger:
            return
        rec = self._ledger[-1]
        if step.source == StepSource.MODEL:
            if step.step_index not in self._model_steps:
                self._model_steps.add(step.step_index)
                rec.model_calls += 1
            if rec.first_token_at is None and (
                step.content_delta or step.thinking_delta or step.tool_calls or step.content
            ):
                rec.first_token_at = time.time()
            if step.metadata.get("model"):
                rec.model = step.metadata["model"]
        if step.target == StepTarget.ENVIRONMENT and step.type == StepType.TOOL_CALL:
            rec.tool_calls = len(
                {c.id or id(c) for s in self._turn_steps() for c in s.tool_calls
                 if s.target == StepTarget.ENVIRONMENT}
            )
        if step.type == StepType.FINISH:
            reason = step.metadata.get("finish_reason")
            rec.finish_reason = reason
            if reason == FinishReason.INTERRUPTED.value:
                rec.status = "interrupted"
            elif reason == FinishReason.ERROR.value or step.status == StepStatus.ERROR:
                rec.status = "error"
            elif step.status == StepStatus.WAITING_FOR_USER:
                rec.status = "waiting"
            else:
                rec.status = "done"
        if step.error and step.status in (StepStatus.ERROR, StepStatus.TERMINAL_ERROR):
            if step.target != StepTarget.ENVIRONMENT:  # tool errors do not fail the turn
                rec.error = step.error
                rec.http_code = step.http_code or rec.http_code

    def _turn_steps(self) -> list[Step]:
        start = self._turn_starts[-1] if self._turn_starts else 0
        return self._steps[max(start, 0):]

    def _trim(self) -> None:
        if not self._max or len(self._steps) <= self._max:
            return
        drop = len(self._steps) - self._max
        del self._steps[:drop]
        self._trimmed += drop
        self._turn_starts = [i - drop for i in self._turn_starts if i - drop >= 0]
        self._compactions = [i - drop for i in self._compactions if i - drop >= 0]

    def _close_turn(self, error: BaseException | None = None) -> None:
        with self._lock:
            if not self._turn_open or not self._ledger:
                return
            self._turn_open = False
            rec = self._ledger[-1]
            rec.finished_at = time.time()
            if error is not None:
                if isinstance(error, (asyncio.CancelledError, KeyboardInterrupt)):
                    rec.status = "interrupted"
                    rec.finish_reason = rec.finish_reason or FinishReason.INTERRUPTED.value
                else:
                    rec.status = "error"
                    rec.finish_reason = FinishReason.ERROR.value
                    rec.error = rec.error or str(error)
                    rec.http_code = getattr(error, "http_code", None) or rec.http_code
            elif rec.status == "running" and self._interrupt_requested:
                rec.status = "interrupted"
                rec.finish_reason = rec.finish_reason or FinishReason.INTERRUPTED.value
            elif rec.status == "running":
                rec.status = "done"
                if rec.finish_reason is None:
                    rec.finish_reason = FinishReason.STOP.value
        self._emit("turn_finished", rec)

    # --- state --------------------------------------------------------------------

    @property
    def history(self) -> list[Step]:
        with self._lock:
            return list(self._steps)

    @property
    def turn_count(self) -> int:
        with self._lock:
            return len(self._ledger)

    @property
    def turn_start_indices(self) -> list[int]:
        with self._lock:
            return list(self._turn_starts)

    @property
    def compaction_indices(self) -> list[int]:
        with self._lock:
            return list(self._compactions)

    @property
    def last_response(self) -> str:
        with self._lock:
            return self._last_response

    @property
    def total_usage(self) -> UsageMetadata:
        with self._lock:
            return UsageMetadata(**self._total.to_dict())

    @property
    def last_turn_usage(self) -> UsageMetadata | None:
        with self._lock:
            if not self._ledger:
                return None
            return UsageMetadata(**self._ledger[-1].usage.to_dict())

    @property
    def turns(self) -> list[TurnRecord]:
        """The usage ledger: one record per turn, never trimmed."""
        with self._lock:
            return list(self._ledger)

    def clear_history(self) -> None:
        """Forget every step, turn, compaction and usage count."""
        with self._lock:
            self._reset_state()
        self._emit("cleared", None)

    def _response_for_last_turn(self) -> ChatResponse:
        with self._lock:
            steps = self._turn_steps()
            rec = self._ledger[-1] if self._ledger else None
        texts = [
            s.content
            for s in steps
            if s.source == StepSource.MODEL and s.target == StepTarget.USER and s.content
        ]
        thinking = "".join(
            s.thinking for s in steps if s.source == StepSource.MODEL and s.thinking
        )
        structured = next(
            (s.structured_output for s in reversed(steps) if s.structured_output is not None),
            None,
        )
        reason = FinishReason.STOP
        if rec is not None and rec.finish_reason:
            try:
                reason = FinishReason(rec.finish_reason)
            except ValueError:
                reason = FinishReason.OTHER
        return ChatResponse(
            text="\n\n".join(texts),
            thinking=thinking,
            steps=steps,
            usage_metadata=rec.usage if rec else UsageMetadata(),
            finish_reason=reason,
            structured_output=structured,
        )

    # --- connection -----------------------------------------------------------------

    @property
    def connection(self) -> Any:
        return self._connection

    @property
    def conversation_id(self) -> str:
        if self._connection is not None:
            return str(getattr(self._connection, "conversation_id", ""))
        return self._loaded_id

    def is_idle(self) -> bool:
        if self._connection is None:
            return True
        return bool(self._connection.is_idle())

    def interrupt(self) -> None:
        """Stop the running turn (thread-safe). The turn ends INTERRUPTED."""
        if self._connection is not None and not self._connection.is_idle():
            self._interrupt_requested = True
            self._connection.interrupt()

    async def disconnect(self) -> None:
        if self._connection is not None:
            await self._connection.disconnect()

    def _require_connection(self) -> Any:
        if self._connection is None:
            raise NbagentError(
                "this conversation was loaded without a connection and is read-only; "
                "pass connection= to Conversation.load or use Agent(resume=path)",
                kind="config",
            )
        return self._connection

    # --- analysis and display -----------------------------------------------------------

    def history_df(self):
        """One row per step (pandas)."""
        from ..analysis.frames import history_frame

        return history_frame(self.history)

    def usage_df(self, pricing: dict | None = None):
        """One row per turn from the never-trimmed ledger (pandas)."""
        from ..analysis.frames import usage_frame

        return usage_frame(self.turns, pricing=pricing)

    def tool_calls_df(self):
        """One row per tool call (pandas)."""
        from ..analysis.frames import tool_calls_frame

        return tool_calls_frame(self.history)

    def usage_summary(self, pricing: dict | None = None):
        from ..analysis.report import usage_summary

        return usage_summary(self.turns, pricing=pricing)

    def plot_usage(self, pricing: dict | None = None):
        from ..analysis.report import plot_usage

        return plot_usage(self.turns, pricing=pricing)

    def widget(self, **kwargs):
        """The ChatWidget bound to this conversation (one per conversation; kwargs make a new one)."""
        from ..notebook.widget import ChatWidget

        if kwargs or self._widget is None or getattr(self._widget, "comm", None) is None:
            widget = ChatWidget(self, **kwargs)
            if kwargs:
                return widget
            self._widget = widget
        return self._widget

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            return self.widget()._repr_mimebundle_(include=include, exclude=exclude)
        except ImportError:
            from ..notebook.transcript import transcript_markdown

            return {"text/markdown": transcript_markdown(self.history), "text/plain": repr(self)}

    def __repr__(self) -> str:
        u = self.total_usage
        return (
            f"<Conversation {self.conversation_id[:8] or '-'}: {self.turn_count} turns, "
            f"{len(self.history)} steps, {u.total_token_count} tokens>"
        )

    # --- persistence --------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write steps, the turn ledger and the ChatSession to one JSON file (atomic)."""
        from .session_file import save_conversation

        return save_conversation(self, path)

    @classmethod
    def load(cls, path: str | Path, connection: Any = None) -> "Conversation":
        """Bring a saved conversation back; read-only without a connection."""
        from .session_file import load_conversation

        return load_conversation(cls, path, connection)


def chunks_of(step: Step, seen_call_ids: set[str]) -> list[Chunk]:
    """The chunks one step update yields; ``seen_call_ids`` dedups tool calls by id."""
    if step.target == StepTarget.ENVIRONMENT:
        return []
    out: list[Chunk] = []
    if step.source == StepSource.MODEL and step.target == StepTarget.USER:
        if step.thinking_delta:
            out.append(Thought(step.step_index, step.thinking_delta))
        if step.content_delta:
            out.append(Text(step.step_index, step.content_delta))
    for call in step.tool_calls:
        if call.id:
            if call.id in seen_call_ids:
                continue
            seen_call_ids.add(call.id)
        out.append(call)
    return out
