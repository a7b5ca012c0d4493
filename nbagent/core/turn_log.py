"""The turn log: what a conversation records as its turns stream.

``TurnLog`` keeps the step history (one entry per ``step_index``, upserted as
updates arrive), turn boundaries, compaction indices, the never-trimmed ledger
of turns with their usage, and the listeners told about each change. It runs
nothing: the user-facing ``nbagent.Conversation`` drives a connection and feeds
the log. State is guarded by a lock so a widget can read it while a turn streams.
"""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from typing import Any, overload
from collections.abc import Iterator, Sequence

from .chunks import Chunk, chunks_of, response_of
from .conversation_state import DEFAULT_MAX_HISTORY, ConversationEvent, ConversationState, Listener
from .errors import ConfigError
from .growing_list import GrowingList
from .ledger import TurnRecord, TurnTally
from .steps import ApprovalDecision, ChatResponse, Step, StepKind, StepStatus, UsageMetadata


class TurnLog:
    """Steps, turns, compactions and usage of one conversation, and its listeners."""

    def __init__(self, max_history_size: int | None = None) -> None:
        if max_history_size is not None and max_history_size < 0:
            raise ConfigError("max_history_size must be >= 0")
        self.max_history_size = DEFAULT_MAX_HISTORY if max_history_size is None else max_history_size
        self.lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._reset()

    def _reset(self) -> None:
        # growing lists: to_state (each autosave) takes O(1) snapshots of them, not copies; trimming
        # drops from the front with one memmove, never by building a new list
        self._steps: GrowingList[Step] = GrowingList()
        self._trimmed = 0  # steps drained from the front so far
        self._turn_positions: dict[int, int] = {}  # step_index -> absolute position, this turn
        # absolute positions (trimmed steps included), so a trim shifts nothing: see _relative
        self._turn_starts: GrowingList[int] = GrowingList()
        self._compactions: GrowingList[int] = GrowingList()
        self._total = UsageMetadata()
        self._ledger: GrowingList[TurnRecord] = GrowingList()  # grows only: snapshots cost O(1)
        self._tally: TurnTally | None = None
        self._seen_call_ids: set[str] = set()
        self._last_response = ""
        self._turn_open = False

    # --- listeners (the widget subscribes here) ---------------------------------

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(event, payload)`` for each :class:`ConversationEvent`."""
        with self.lock:
            if fn not in self._listeners:
                self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with self.lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def has_listener(self, fn: Listener) -> bool:
        with self.lock:
            return fn in self._listeners

    def emit(self, event: ConversationEvent, payload: Any) -> None:
        for fn in list(self._listeners):
            try:
                fn(event, payload)
            except Exception as exc:  # a broken view must not break the turn
                warnings.warn(f"nbagent listener failed on {event}: {exc!r}", RuntimeWarning, 2)

    # --- a turn's life ------------------------------------------------------------

    def open_turn(self, prompt: str, *, model: str, provider: str, context_window: int | None) -> TurnRecord:
        """Record the start of a turn: its boundary in the history and its ledger record."""
        with self.lock:
            self._turn_starts.append(self._trimmed + len(self._steps))
            self._turn_positions = {}
            self._seen_call_ids = set()
            record = TurnRecord(turn=len(self._ledger), prompt=prompt, model=model, provider=provider,
                                started_at=time.time(), context_window=context_window)
            self._ledger.append(record)
            self._tally = TurnTally(record)
            self._turn_open = True
        self.emit(ConversationEvent.TURN_STARTED, record)
        return record

    def ingest(self, step: Step) -> None:
        """Upsert one step update into the history and fold it into the turn's record."""
        with self.lock:
            if step.turn < 0 and self._ledger:
                step.turn = self._ledger[-1].turn
            pos = self._turn_positions.get(step.step_index)
            if pos is not None and pos >= self._trimmed:
                self._steps[pos - self._trimmed] = step
            else:
                self._turn_positions[step.step_index] = self._trimmed + len(self._steps)
                self._steps.append(step)
                if step.kind is StepKind.COMPACTION:
                    self._compactions.append(self._trimmed + len(self._steps) - 1)
            if self._tally is not None:
                added = self._tally.observe(step, time.time())
                if added is not None:
                    self._total = self._total + added
            if (
                step.kind is StepKind.MODEL_CALL
                and step.content
                and step.status in (StepStatus.DONE, StepStatus.CANCELED)
            ):
                self._last_response = step.content
            self._trim()
        self.emit(ConversationEvent.STEP, step)

    def chunks_of(self, step: Step) -> list[Chunk]:
        """The stream chunks of one step update (tool calls once per id within the turn)."""
        with self.lock:
            return chunks_of(step, self._seen_call_ids)

    def settle_active(self, status: StepStatus, error: str = "", http_code: int = 0) -> None:
        """Give steps the turn left ACTIVE their final status (partial content kept)."""
        now = time.time()
        settled = []
        with self.lock:
            for i in range(self._turn_start(), len(self._steps)):
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
            self.emit(ConversationEvent.STEP, step)

    def record_manual_result(self, call_id: str, text: str, *, is_error: bool) -> None:
        """Close the waiting tool step of ``call_id`` with the result the caller gave."""
        with self.lock:
            for i in range(len(self._steps) - 1, -1, -1):
                step = self._steps[i]
                if (step.is_tool_run and step.status == StepStatus.WAITING_FOR_USER
                        and any(c.id == call_id for c in step.tool_calls)):
                    now = time.time()
                    updated = step.copy(
                        status=StepStatus.ERROR if is_error else StepStatus.DONE, content=text,
                        error=text if is_error else "", finished_at=now,
                        content_delta="", thinking_delta="", approval=ApprovalDecision.MANUAL,
                        decided_at=step.decided_at or now, decided_by=step.decided_by or "caller",
                    )
                    self._steps[i] = updated
                    break
            else:
                return
        self.emit(ConversationEvent.STEP, updated)

    def close_turn(self, error: BaseException | None = None, *, interrupted: bool = False) -> None:
        """End the open turn; how it ended decides its record's status."""
        with self.lock:
            if not self._turn_open or self._tally is None:
                return
            self._turn_open = False
            self._tally.close(time.time(), error=error,
                              canceled=isinstance(error, (asyncio.CancelledError, KeyboardInterrupt)),
                              interrupted=interrupted)
            rec = self._tally.record
        self.emit(ConversationEvent.TURN_FINISHED, rec)

    def last_turn_response(self) -> ChatResponse:
        with self.lock:
            steps = self.turn_steps()
            rec = self._ledger[-1] if self._ledger else None
        return response_of(steps, rec)

    def turn_steps(self) -> list[Step]:
        """The steps of the current (or last) turn."""
        with self.lock:
            steps = self._steps  # the turn is at the end: index from there, not from the front
            return [steps[i] for i in range(self._turn_start(), len(steps))]

    def _turn_start(self) -> int:
        """Where the current (or last) turn starts in ``_steps`` (0: trimmed away, or no turn yet)."""
        return self._turn_starts[-1] - self._trimmed if self._turn_starts else 0

    def _relative(self, positions: Sequence[int]) -> list[int]:
        """Absolute positions as indices into the kept steps."""
        return [i - self._trimmed for i in positions]

    def _trim(self) -> None:
        if not self.max_history_size or len(self._steps) <= self.max_history_size:
            return
        excess = len(self._steps) - self.max_history_size
        del self._steps[:excess]
        self._trimmed += excess
        for positions in (self._turn_starts, self._compactions):
            gone = 0
            while gone < len(positions) and positions[gone] < self._trimmed:
                gone += 1
            if gone:
                del positions[:gone]

    def clear(self) -> None:
        with self.lock:
            self._reset()
        self.emit(ConversationEvent.CLEARED, None)

    # --- what it holds --------------------------------------------------------------

    @property
    def history(self) -> list[Step]:
        with self.lock:
            return list(self._steps)

    @property
    def turns(self) -> list[TurnRecord]:
        with self.lock:
            return list(self._ledger)

    @property
    def ledger(self) -> Sequence[TurnRecord]:
        """The turns as they are now, read-only, in O(1) (``turns`` is a copy): for the checks each
        turn makes (budget, course policy, estimates), which would otherwise copy the whole ledger."""
        with self.lock:
            return self._ledger.snapshot()

    @property
    def turn_start_indices(self) -> list[int]:
        with self.lock:
            return self._relative(self._turn_starts)

    @property
    def compaction_indices(self) -> list[int]:
        with self.lock:
            return self._relative(self._compactions)

    @property
    def last_response(self) -> str:
        with self.lock:
            return self._last_response

    @property
    def total_usage(self) -> UsageMetadata:
        with self.lock:
            return UsageMetadata(**self._total.to_dict())

    # --- state boundary ---------------------------------------------------------------

    def to_state(self, conversation_id: str, chat_session: Any) -> ConversationState:
        """Everything the log holds now, with the conversation's identity: its lists are read-only
        snapshots taken together under the lock, O(1) each (an autosave per turn copies nothing whole)."""
        with self.lock:
            return ConversationState(
                conversation_id=conversation_id, max_history_size=self.max_history_size,
                steps=self._steps.snapshot(), trimmed=self._trimmed,
                turn_starts=RelativePositions(self._turn_starts.snapshot(), self._trimmed),
                compactions=RelativePositions(self._compactions.snapshot(), self._trimmed),
                turns=self._ledger.snapshot(),
                total_usage=UsageMetadata(**self._total.to_dict()), last_response=self._last_response,
                chat_session=chat_session,
            )

    def restore(self, state: ConversationState) -> None:
        """Hold ``state``'s steps, turns and usage (a loaded conversation)."""
        with self.lock:
            self._steps = GrowingList(state.steps)
            self._trimmed = state.trimmed
            self._ledger = GrowingList(state.turns)
            self._turn_starts = GrowingList(i + state.trimmed for i in state.turn_starts)
            self._compactions = GrowingList(i + state.trimmed for i in state.compactions)
            self._total = state.total_usage
            self._last_response = state.last_response


class RelativePositions(Sequence[int]):
    """Absolute step positions (trimmed steps counted) as indices into the steps kept then, read-only."""

    __slots__ = ("_absolute", "_trimmed")

    def __init__(self, absolute: Sequence[int], trimmed: int) -> None:
        self._absolute, self._trimmed = absolute, trimmed

    def __len__(self) -> int:
        return len(self._absolute)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [i - self._trimmed for i in self._absolute[index]]
        return self._absolute[index] - self._trimmed

    def __iter__(self) -> Iterator[int]:
        trimmed = self._trimmed
        return (i - trimmed for i in self._absolute)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Sequence)) and not isinstance(other, str):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RelativePositions({list(self)!r})"
