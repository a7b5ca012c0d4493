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
from typing import Any, AsyncIterator

from .budget import Budgeted
from .chunks import Chunk, chunks_of, response_of
from .connection import Connection
from .conversation_views import ConversationViews
from .conversation_state import DEFAULT_MAX_HISTORY, ConversationEvent, ConversationState, Listener
from .errors import NbagentError
from .ledger import TurnRecord, TurnTally
from .text import clean_text
from .steps import ApprovalDecision, ChatResponse, Step, StepSource, StepStatus, StepTarget, StepType, UsageMetadata


class Conversation(ConversationViews, Budgeted):
    """Step history, turns, usage and chunk filtering over a connection; ``budget_usd`` (see core/budget.py)."""

    def __init__(self, connection: Connection | None = None, max_history_size: int | None = None) -> None:
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
        self._ledger: list[TurnRecord] = []
        self._tally: TurnTally | None = None
        self._seen_call_ids: set[str] = set()
        self._last_response = ""
        self._turn_open = False

    # --- listeners (the widget subscribes here) ---------------------------------

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(event, payload)`` for each :class:`ConversationEvent`."""
        with self._lock:
            if fn not in self._listeners:
                self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def _emit(self, event: ConversationEvent, payload: Any) -> None:
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
        prompt = clean_text(prompt)
        for _ in range(20):  # let a turn whose stream was abandoned (break) wind down
            if self.is_idle():
                break
            await asyncio.sleep(0)
        else:
            raise NbagentError("a turn is already running; wait for it or interrupt() it first",
                               kind="config")
        self._check_budget(prompt)  # over budget: raises before any request and before the turn opens
        with self._lock:
            self._turn_starts.append(len(self._steps))
            self._turn_positions = {}
            self._seen_call_ids = set()
            self._interrupt_requested = False
            record = TurnRecord(
                turn=len(self._ledger),
                prompt=prompt,
                model=str(getattr(conn, "model_name", "") or ""),
                provider=str(getattr(conn, "provider_name", "") or ""),
                started_at=time.time(),
                context_window=getattr(conn, "context_window", None),
            )
            self._ledger.append(record)
            self._tally = TurnTally(record)
            self._turn_open = True
        self._emit(ConversationEvent.TURN_STARTED, record)
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
            self._emit(ConversationEvent.STEP, step)

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

    def approve(self, call_id: str, *, by: str = "user") -> None:
        """Let a tool call waiting for approval run; ``by`` names who decided (``approvals_df``)."""
        conn = self._require_connection()  # connections written before ``by`` take no such argument
        conn.approve(call_id) if by == "user" else conn.approve(call_id, by=by)

    def deny(self, call_id: str, reason: str | None = None, *, by: str = "user") -> None:
        """Refuse a tool call waiting for approval; the model is told why."""
        conn = self._require_connection()
        conn.deny(call_id, reason) if by == "user" else conn.deny(call_id, reason, by=by)

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
                    now = time.time()
                    updated = step.copy(
                        status=StepStatus.ERROR if is_error else StepStatus.DONE,
                        content=text if isinstance(text, str) else str(result),
                        error=(text if is_error and isinstance(text, str) else ""), finished_at=now,
                        content_delta="", thinking_delta="", approval=ApprovalDecision.MANUAL,
                        decided_at=step.decided_at or now, decided_by=step.decided_by or "caller",
                    )
                    self._steps[self._steps.index(step)] = updated
                    self._emit(ConversationEvent.STEP, updated)
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
            if self._tally is not None:
                added = self._tally.observe(step, time.time())
                if added is not None:
                    self._total = self._total + added
                stop = self._watch_budget(step, self._turn_steps())
                if stop and not self._interrupt_requested:  # the tool loop crossed the budget
                    self._tally.record.error = stop
                    self.interrupt()
            if (
                step.source == StepSource.MODEL
                and step.target == StepTarget.USER
                and step.content
                and step.status in (StepStatus.DONE, StepStatus.CANCELED)
            ):
                self._last_response = step.content
            self._trim()
        self._emit(ConversationEvent.STEP, step)

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
            if not self._turn_open or self._tally is None:
                return
            self._turn_open = False
            self._tally.close(time.time(), error=error,
                              canceled=isinstance(error, (asyncio.CancelledError, KeyboardInterrupt)),
                              interrupted=self._interrupt_requested)
            rec = self._tally.record
        self._emit(ConversationEvent.TURN_FINISHED, rec)

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
        """Forget every step, turn, compaction and usage count kept here (the model's context,
        ``connection.chat_session``, stays: ``%chat_reset`` starts the model afresh too)."""
        with self._lock:
            self._reset_state()
        self._emit(ConversationEvent.CLEARED, None)

    def _response_for_last_turn(self) -> ChatResponse:
        with self._lock:
            steps = self._turn_steps()
            rec = self._ledger[-1] if self._ledger else None
        return response_of(steps, rec)

    # --- connection -----------------------------------------------------------------

    @property
    def connection(self) -> Connection | None:
        return self._connection

    @property
    def conversation_id(self) -> str:
        if self._connection is not None:
            return str(self._connection.conversation_id)
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

    def _require_connection(self) -> Connection:
        if self._connection is None:
            raise NbagentError(
                "this conversation was loaded without a connection and is read-only; "
                "pass connection= to Conversation.load or use Agent(resume=path)",
                kind="config",
            )
        return self._connection

    def __repr__(self) -> str:
        u = self.total_usage
        return (
            f"<Conversation {self.conversation_id[:8] or '-'}: {self.turn_count} turns, "
            f"{len(self.history)} steps, {u.total_token_count} tokens>"
        )

    # --- state boundary and persistence ---------------------------------------------------

    def to_state(self) -> ConversationState:
        """A consistent copy of everything this conversation holds (for saving)."""
        with self._lock:
            session = self._connection.chat_session if self._connection is not None else None
            return ConversationState(
                conversation_id=self.conversation_id,
                max_history_size=self._max,
                steps=list(self._steps),
                trimmed=self._trimmed,
                turn_starts=list(self._turn_starts),
                compactions=list(self._compactions),
                turns=list(self._ledger),
                total_usage=UsageMetadata(**self._total.to_dict()),
                last_response=self._last_response,
                chat_session=session if session is not None else self._loaded_session,
            )

    @classmethod
    def from_state(cls, state: ConversationState, connection: Connection | None = None,
                   max_history_size: int | None = None) -> "Conversation":
        """A conversation holding ``state``; with a connection it continues where it stopped."""
        if connection is not None:
            next_index = max((s.step_index for s in state.steps), default=-1) + 1
            connection.resume(state.chat_session, next_index)
        conv = cls(connection, max_history_size=state.max_history_size if max_history_size is None
                   else max_history_size)
        with conv._lock:
            conv._steps = list(state.steps)
            conv._trimmed = state.trimmed
            conv._ledger = list(state.turns)
            conv._turn_starts = list(state.turn_starts)
            conv._compactions = list(state.compactions)
            conv._total = state.total_usage
            conv._last_response = state.last_response
            conv._loaded_id = state.conversation_id
            conv._loaded_session = state.chat_session
        return conv

    def save(self, path: str | Path, *, frames: bool = False) -> Path:
        """Write steps, the turn ledger and the ChatSession to one JSON file (atomic).

        ``frames=True`` also embeds the DataFrames as JSON rows, for readers
        without nbagent (they are derived: ``load_sessions`` does not need them).
        """
        from .session_file import save_conversation

        state = self.to_state()
        return save_conversation(state, path, frames=self.export_frames(state) if frames else None)

    @classmethod
    def load(cls, path: str | Path, connection: Connection | None = None,
             max_history_size: int | None = None) -> "Conversation":
        """Bring a saved conversation back; read-only without a connection."""
        from .session_file import read_session

        return cls.from_state(read_session(path), connection, max_history_size)
