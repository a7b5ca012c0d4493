"""Conversation: the stateful session a user holds.

It drives a connection (which runs turns and emits ``Step`` updates) and is made
of parts, each in its layer: a :class:`~nbagent.core.turn_log.TurnLog` records
the steps, turns, compactions and usage; a :class:`~nbagent.analysis.budget.Budget`
guards spending; a :class:`~nbagent.core.turn_policy.TurnPolicy` (``plumbing_of(conv).policy``) is
consulted before each turn and for each tool call; the analysis and notebook layers give the
DataFrames, reports, transcripts and the widget.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from collections.abc import AsyncGenerator, Mapping

from .analysis.budget import Budget
from .core.chunks import Chunk
from .core.connection import Connection
from .core.conversation_state import ConversationState
from .core.errors import ConfigError
from .core.ledger import TurnRecord
from .core.steps import ChatResponse, Step, StepStatus, UsageMetadata
from .core.text import clean_text
from .core.turn_log import TurnLog
from .conversation_parts import ConversationBudget, ConversationNotebook, ConversationPlumbing
from .loop.model_connection import ModelConnection

if TYPE_CHECKING:
    import pandas as pd

    from .analysis.estimate import RequestEstimate, RequestInputs
    from .analysis.report import UsageSummary
    from .notebook.widget import ChatWidget


class Conversation:
    """Step history, turns, usage and chunk filtering over a connection, with a budget and views.

    Beyond the contract's members its accessors group the rest (``conversation_parts.py``):
    ``conv.budget`` (dollars and tokens) and ``conv.notebook`` (code run, cell edits undone). What
    nbagent's own layers use (listeners, the state handed to saving) is not on it: ``plumbing_of(conv)``
    (``core/conversation_state.py``) gives it."""

    approval_wait: float | None = 30.0  # seconds a blocking ask() waits for an approval (approval_wait.py)

    def __init__(self, connection: Connection | None = None, max_history_size: int | None = None) -> None:
        self._log = TurnLog(max_history_size)
        self._connection = connection
        self._budget = Budget()
        self._loaded_id = ""
        self._loaded_session: Any = None  # the ChatSession of a read-only loaded conversation
        self._widget: ChatWidget | None = None
        self._interrupt_requested = False
        self._reader: _Reader | None = None  # the stream reading the running turn (None: none handed out)
        self._wound_down: list[asyncio.Future] = []  # sends waiting for a dropped stream's turn to end
        self._parts = (ConversationBudget(self, self._log, self._budget, self._request_inputs),
                       ConversationNotebook(self))
        self._plumbing = ConversationPlumbing(self, self._log, self._state)  # plumbing_of(conv)
        if connection is not None:
            connection.request_guard = self._stop_reason
            connection.tool_guard = self._tool_refusal

    # --- accessors (conversation_parts.py) -----------------------------------------

    @property
    def budget(self) -> ConversationBudget:
        """Dollars and tokens: ``budget.usd`` (settable), ``pricing``, ``spent_usd``,
        ``allow_over_once()``, ``context_window``."""
        return self._parts[0]

    @property
    def notebook(self) -> ConversationNotebook:
        """The code the agent ran (``notebook.code_cells()``) and ``notebook.undo_async(call_id)``."""
        return self._parts[1]

    # --- chatting -----------------------------------------------------------------

    def chat(self, prompt: str) -> AsyncGenerator[Chunk, None]:
        """Send ``prompt`` and yield Thought / Text / ToolCall chunks as they stream."""
        reader = _Reader()
        return reader.hand_out(self._chat(prompt, reader))

    async def _chat(self, prompt: str, reader: _Reader) -> AsyncGenerator[Chunk, None]:
        await self.send(prompt)
        chunks = self._chunks(reader)
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()

    async def chat_to_completion(self, prompt: str) -> ChatResponse:
        """Send ``prompt`` and wait for the whole turn.

        Where no live chat widget shows this conversation (a script; a kernel run by nbclient,
        papermill or ``nbconvert --execute``, which display the widget but draw no view of it), a
        call waiting for approval is announced on stderr at once, and after ``approval_wait``
        seconds (30; None waits forever) with no ``approve`` / ``deny`` the turn ends and
        ``ConfigError`` says why. A live view's buttons answer it otherwise."""
        from .approval_wait import NO_VIEW, NO_WIDGET, ApprovalWatch
        from .notebook import view_presence

        def answerable() -> bool:
            return view_presence.has_live_view(self)

        if answerable():
            return await self._complete(prompt)
        why = NO_VIEW if view_presence.has_widget(self) else NO_WIDGET
        with ApprovalWatch(self, self.approval_wait, why, answerable):
            return await self._complete(prompt)

    async def _complete(self, prompt: str) -> ChatResponse:
        await self.send(prompt)
        async for _ in self._steps(None):
            pass
        return self._log.last_turn_response()

    def ask(self, prompt: str) -> ChatResponse:
        """Blocking ``chat_to_completion``; works in scripts and inside a running loop.

        Nothing can press Approve while it blocks: a call waiting for approval is announced on
        stderr at once, and after ``approval_wait`` seconds (30; None waits forever) with no
        ``approve`` / ``deny`` from another thread the turn ends and ``ConfigError`` says why."""
        from .approval_wait import ApprovalWatch
        from .core.blocking import run_sync

        with ApprovalWatch(self, self.approval_wait):
            return run_sync(self._complete(prompt), on_cancel=self.interrupt)

    async def send(self, prompt: str) -> None:
        """Send a prompt and open a turn (records the turn boundary)."""
        conn = self._require_connection()
        prompt = clean_text(prompt)
        if not self.is_idle():
            await self._wind_down_dropped_stream()
        # refused by the policy (closed, over a period's budget) or over budget: raises before any request
        # and before the turn opens
        refusal = self._plumbing.refusal(prompt)
        if refusal is not None:
            raise refusal
        self._budget.check_prompt(prompt, self.estimate)
        self._interrupt_requested = False
        record = self._log.open_turn(prompt, model=str(conn.model_name or ""), provider=str(conn.provider_name or ""),
                                     context_window=conn.context_window)
        if isinstance(conn, ModelConnection):
            conn.turn = record.turn  # its steps (and the tools' ToolCallContext) carry the turn from the start
        try:
            await conn.send(prompt)
        except BaseException as exc:
            self._log.close_turn(exc)
            raise

    async def _wind_down_dropped_stream(self) -> None:
        """Wait until the running turn has stopped when its caller dropped the stream it was reading
        (``break`` out of ``async for``): the event loop then closes that stream, which ends the turn.
        A turn whose stream someone still holds, or that runs on another event loop (it may be
        blocked waiting for this one), is refused."""
        reader = self._reader
        busy = ConfigError("a turn is already running; wait for it or interrupt() it first")
        if reader is None or not reader.dropped() or reader.loop is not asyncio.get_running_loop():
            raise busy
        waiter = asyncio.get_running_loop().create_future()
        self._wound_down.append(waiter)
        await waiter
        if not self.is_idle():
            raise busy

    def receive_steps(self) -> AsyncGenerator[Step, None]:
        """Yield raw step updates of the current turn, recording each in history."""
        reader = _Reader()
        return reader.hand_out(self._steps(reader))

    async def _steps(self, reader: _Reader | None) -> AsyncGenerator[Step, None]:
        conn = self._require_connection()
        self._reader = reader
        if reader is not None:
            reader.loop = asyncio.get_running_loop()
        try:
            async with contextlib.aclosing(self._recorded_steps(conn)) as steps:
                async for step in steps:
                    yield step
        finally:
            self._reader = None
            waiters, self._wound_down = self._wound_down, []
            for waiter in waiters:  # on this loop: a dropped stream is only waited for on its own
                if not waiter.done():
                    waiter.set_result(None)

    async def _recorded_steps(self, conn: Connection) -> AsyncGenerator[Step, None]:
        log = self._log
        steps = conn.receive_steps()
        conversation_id = str(conn.conversation_id)
        try:
            async for step in steps:
                step.derive(conversation_id)
                log.ingest(step)
                yield step
        except GeneratorExit:  # the caller stopped listening: stop the turn too
            conn.interrupt()
            try:
                await steps.aclose()
            except Exception:
                pass
            log.settle_active(StepStatus.CANCELED)
            log.close_turn(asyncio.CancelledError())
            raise
        except (asyncio.CancelledError, KeyboardInterrupt) as exc:
            log.settle_active(StepStatus.CANCELED)
            log.close_turn(exc)
            raise
        except BaseException as exc:
            log.settle_active(StepStatus.ERROR, str(exc), getattr(exc, "http_code", None) or 0)
            log.close_turn(exc)
            raise
        if self._interrupt_requested:
            log.settle_active(StepStatus.CANCELED)
        log.close_turn(interrupted=self._interrupt_requested)

    def receive_chunks(self) -> AsyncGenerator[Chunk, None]:
        """``receive_steps()`` filtered into Thought / Text / ToolCall chunks."""
        reader = _Reader()
        return reader.hand_out(self._chunks(reader))

    async def _chunks(self, reader: _Reader) -> AsyncGenerator[Chunk, None]:
        steps = self._steps(reader)
        try:
            async for step in steps:
                for chunk in self._log.chunks_of(step):
                    yield chunk
        finally:
            await steps.aclose()

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
        text = self._require_connection().add_tool_result(call_id, result, is_error=is_error)
        self._log.record_manual_result(call_id, text if isinstance(text, str) else str(result), is_error=is_error)

    # --- state --------------------------------------------------------------------

    @property
    def history(self) -> list[Step]:
        """Every step of the conversation, in order: prompts, answers, tool calls and their results."""
        return self._log.history

    @property
    def turn_count(self) -> int:
        """How many turns the conversation has had."""
        return len(self._log.turns)

    @property
    def turn_start_indices(self) -> list[int]:
        """Where each turn starts in ``history`` (the index of its prompt step)."""
        return self._log.turn_start_indices

    @property
    def compaction_indices(self) -> list[int]:
        """Where the context was compacted in ``history`` (the indices of the compaction steps)."""
        return self._log.compaction_indices

    @property
    def last_response(self) -> str:
        """The text of the latest answer (``""`` before the first)."""
        return self._log.last_response

    @property
    def total_usage(self) -> UsageMetadata:
        """The token counts of every turn, added up."""
        return self._log.total_usage

    @property
    def last_turn_usage(self) -> UsageMetadata | None:
        """The token counts of the latest turn (None before the first)."""
        turns = self._log.turns
        return UsageMetadata(**turns[-1].usage.to_dict()) if turns else None

    @property
    def turns(self) -> list[TurnRecord]:
        """The usage ledger: one record per turn, never trimmed."""
        return self._log.turns

    def clear_history(self) -> None:
        """Forget every step, turn, compaction and usage count kept here (the model's context,
        ``connection.chat_session``, stays: ``%chat_reset`` starts the model afresh too)."""
        self._log.clear()

    # --- connection -----------------------------------------------------------------

    @property
    def max_history_size(self) -> int:
        """Steps kept in ``history`` (0: never trimmed); the ledger of turns is never trimmed."""
        return self._log.max_history_size

    @property
    def connection(self) -> Connection | None:
        """What runs the turns (a ``ModelConnection``, a ``MockConnection``); None when loaded read-only."""
        return self._connection

    @property
    def conversation_id(self) -> str:
        """The conversation's id: the same after saving and loading it."""
        if self._connection is not None:
            return str(self._connection.conversation_id)
        return self._loaded_id

    def is_idle(self) -> bool:
        """Whether no turn is running."""
        if self._connection is None:
            return True
        return bool(self._connection.is_idle())

    def interrupt(self) -> None:
        """Stop the running turn (thread-safe). The turn ends INTERRUPTED."""
        if self._connection is not None and not self._connection.is_idle():
            self._interrupt_requested = True
            self._connection.interrupt()

    async def disconnect(self) -> None:
        """Stop the running turn, if any, and close the connection."""
        if self._connection is not None:
            await self._connection.disconnect()

    def _require_connection(self) -> Connection:
        if self._connection is None:
            raise ConfigError(
                "this conversation was loaded without a connection and is read-only; "
                "pass connection= to Conversation.load or use Agent(resume=path)",
            )
        return self._connection

    def __repr__(self) -> str:
        u = self.total_usage
        return (
            f"<Conversation {self.conversation_id[:8] or '-'}: {self.turn_count} turns, "
            f"{len(self.history)} steps, {u.total_token_count} tokens>"
        )

    # --- budget and policy ----------------------------------------------------------------

    def _stop_reason(self) -> str:
        """The connection asks this before each further model call of a turn: the policy first."""
        return (self._plumbing.policy.stop_reason(self._log.ledger, self.conversation_id)
                or self._budget.stop_reason(self._log.ledger))

    def _tool_refusal(self, tool: Any) -> str:
        """The connection asks this before a tool runs: what the model is told instead ("" runs it)."""
        return self._plumbing.policy.tool_refusal(tool)

    # --- views: frames, reports, transcripts, the widget --------------------------------

    def _request_inputs(self, pricing: Mapping[str, Any] | None = None) -> RequestInputs:
        """What the next request would carry, for estimates (nothing is sent)."""
        from .analysis.estimate import RequestInputs
        from .core.compression import ApproxTokenizer

        conn = self._connection
        turns = self._log.ledger  # a read-only snapshot: no copy of the whole ledger each turn
        chat_session = conn.chat_session if conn else self._loaded_session
        return RequestInputs(
            turns=turns, model=str(conn.model_name or "") if conn else "",
            provider=str(conn.provider_name or "") if conn else "",
            tokenizer=conn.tokenizer if conn else ApproxTokenizer(),
            tools=conn.tool_descriptions() if conn else [],
            chat_session=chat_session,
            history=self.history if chat_session is None else [],  # the steps count only without one
            declared_window=conn.context_window if conn else None,
            budget_usd=self._budget.usd, pricing=self._prices(pricing),
            ledger=self._budget.ledger if pricing is None else None,  # kept for the conversation's own prices
        )

    def _prices(self, pricing: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """The price overrides of one call, else the conversation's own (``conv.budget.pricing``)."""
        return pricing if pricing is not None else self._budget.pricing

    def estimate(self, prompt: str, pricing: Mapping[str, Any] | None = None) -> RequestEstimate:
        """Tokens and cost of the next request if ``prompt`` were sent now (nothing is sent)."""
        from .analysis.estimate import estimate_request

        return estimate_request(self._request_inputs(pricing), prompt)

    def history_df(self) -> pd.DataFrame:
        """One row per step (pandas)."""
        from .analysis.frames import history_frame

        return history_frame(self.history)

    def usage_df(self, pricing: Mapping[str, Any] | None = None, by: Literal["tool"] | None = None) -> pd.DataFrame:
        """One row per turn from the never-trimmed ledger (pandas).

        ``by="tool"``: one row per turn and token contributor (each tool's results,
        thinking), so ``usage_df(by="tool").groupby("tool")`` shows where the tokens go::

            >>> conv = Agent(model="demo").conversation
            >>> _ = conv.ask("Hello!")
            >>> conv.usage_df()[["prompt", "model", "output_tokens"]]
                  prompt model  output_tokens
            turn
            0     Hello!  demo            117
        """
        if by == "tool":
            from .analysis.attribution import tool_tokens_frame

            return tool_tokens_frame(self.history, self.turns)
        if by is not None:
            raise ConfigError(f"usage_df(by=...) takes None or 'tool', not {by!r}")
        from .analysis.frames import usage_frame

        return usage_frame(self.turns, pricing=self._prices(pricing))

    def tool_calls_df(self) -> pd.DataFrame:
        """One row per tool call (pandas)."""
        from .analysis.frames import tool_calls_frame

        return tool_calls_frame(self.history)

    def approvals_df(self) -> pd.DataFrame:
        """One row per approval decision on a tool call: who or what decided, and when (pandas)."""
        from .analysis.approvals import approvals_frame

        return approvals_frame(self.history)

    def usage_summary(self, pricing: Mapping[str, Any] | None = None) -> UsageSummary:
        """The turns' tokens and cost in one summary (``pricing`` overrides the prices)."""
        from .analysis.report import usage_summary

        return usage_summary(self.turns, pricing=self._prices(pricing))

    def plot_usage(self, pricing: Mapping[str, Any] | None = None) -> Any:
        """A chart of each turn's tokens and cost (matplotlib: the ``plot`` extra)."""
        from .analysis.report import plot_usage

        return plot_usage(self.turns, pricing=self._prices(pricing))

    def undo(self, call_id: str) -> str:
        """Revert an applied ``edit_cell`` (the previous source back) or ``insert_cell`` (the cell
        deleted), only while the cell still holds what the agent wrote; blocking. What was done."""
        from .core.blocking import run_sync

        return run_sync(self.notebook.undo_async(call_id))

    def to_markdown(self) -> str:
        """The conversation as a markdown document: prompts, thoughts, answers, tool calls
        with their arguments and results, errors, each turn's usage. Model and tool text is
        escaped (raw HTML shows as text, images become links, only safe links remain)."""
        from .notebook.transcript import conversation_markdown

        return conversation_markdown(self.history, self.turns, self.conversation_id)

    def to_html(self) -> str:
        """The conversation as one self-contained HTML page (inline CSS; no scripts, no
        remote fetches), everything from the model and the tools escaped."""
        from .notebook.transcript import conversation_html

        return conversation_html(self.history, self.turns, self.conversation_id)

    def widget(self, **kwargs: Any) -> ChatWidget:
        """The ChatWidget bound to this conversation (one per conversation; kwargs make a new one)."""
        from .notebook.widget import ChatWidget

        if kwargs or self._widget is None or getattr(self._widget, "comm", None) is None:
            widget = ChatWidget(self, **kwargs)
            if kwargs:
                return widget
            self._widget = widget
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        try:
            return self.widget()._repr_mimebundle_(include=include, exclude=exclude)
        except ImportError:
            from .notebook.transcript import transcript_markdown

            return {"text/markdown": transcript_markdown(self.history), "text/plain": repr(self)}

    def _ipython_display_(self) -> None:
        """The chat widget as display data (see ChatWidget._ipython_display_); without anywidget,
        the markdown transcript."""
        try:
            widget = self.widget()
        except ImportError:
            from IPython.display import display

            display(self._repr_mimebundle_(), raw=True)
            return
        widget._ipython_display_()

    # --- state boundary and persistence ---------------------------------------------------

    def _state(self) -> ConversationState:
        """A consistent copy of everything this conversation holds (``plumbing_of(conv).to_state()``)."""
        session = self._connection.chat_session if self._connection is not None else None
        return self._log.to_state(self.conversation_id, session if session is not None else self._loaded_session)

    @classmethod
    def _from_state(cls, state: ConversationState, connection: Connection | None = None,
                    max_history_size: int | None = None) -> Conversation:
        """A conversation holding ``state`` (``from_state``)."""
        if connection is not None:
            next_index = max((s.step_index for s in state.steps), default=-1) + 1
            connection.resume(state.chat_session, next_index)
        conv = cls(connection, max_history_size=state.max_history_size if max_history_size is None
                   else max_history_size)
        conv._log.restore(state)
        conv._loaded_id = state.conversation_id
        conv._loaded_session = state.chat_session
        return conv

    def save(self, path: str | Path, *, frames: bool = False) -> Path:
        """Write steps, the turn ledger and the ChatSession to one JSON file (atomic).

        ``frames=True`` also embeds the DataFrames as JSON rows, for readers
        without nbagent (they are derived: ``load_sessions`` does not need them).
        """
        from .analysis.sessions import export_frames
        from .core.session_file import save_conversation

        state = self._state()
        return save_conversation(state, path, frames=export_frames(state.steps, state.turns) if frames else None)

    @classmethod
    def load(cls, path: str | Path, connection: Connection | None = None,
             max_history_size: int | None = None) -> Conversation:
        """Bring a saved conversation back; read-only without a connection."""
        from .core.session_file import read_session

        return cls._from_state(read_session(path), connection, max_history_size)


def from_state(state: ConversationState, connection: Connection | None = None,
               max_history_size: int | None = None) -> Conversation:
    """A conversation holding ``state`` (a saved session read with ``core.session_file``); with a
    connection it continues where it stopped."""
    return Conversation._from_state(state, connection, max_history_size)


class _Reader:
    """Which stream handed to a caller reads the turn, held weakly: once the caller drops it
    (``break``), the event loop closes it soon (its finalizer is already scheduled)."""

    __slots__ = ("_stream", "loop")

    def __init__(self) -> None:
        self._stream: weakref.ref | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # where the stream reads the turn

    def hand_out(self, stream: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
        self._stream = weakref.ref(stream)
        return stream

    def dropped(self) -> bool:
        return self._stream is not None and self._stream() is None

