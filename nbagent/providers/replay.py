"""Replay: a saved session's recorded answers streamed again, turn by turn, offline.

``Agent(model="replay:lesson.json")`` answers each prompt with the next recorded turn: its
thoughts, text, tool calls and usage, model call by model call, at ``speed`` tokens per second
(``speed=None``: at once). The recorded tool results are given back by stand-in tools
(``nbagent.loop.replay_tools``) unless ``rerun_tools=True``, when the agent's own tools run.
Past the recording's end the model says so. ``step=True`` waits before each model call until
``next_step()`` is called (a *Next* button; ``waiting`` says whether it is waiting). A step is one
recorded model call (its thoughts, text and tool calls); ``status`` counts them ("step 3 of 12").

A prompt that differs from the recorded one (whitespace and case aside) is a ``ReplayMismatch``.
``on_mismatch`` says what follows: ``"continue"`` plays the recording (noted in ``notes`` and a
line in the turn's thoughts), ``"live"`` has the ``live`` model answer it, ``"ask"`` (the default
with ``step=True``) waits in ``status.mismatch`` until ``choose("continue" | "live")``. A live
answer does not use up the recorded turn: the next prompt is compared with the same recorded one.
It streams at once (no ``next_step()``) and gets no tools unless ``rerun_tools=True`` (the stand-in
tools only know the recording).
Nothing is random, and nothing touches the network unless a live model does.

Each answer names the model that recorded it; an answer past the recording's end (or a recorded call
that names none) the last recorded model, so a chat draws no model switch between replayed turns.
``recordings.replay_label(path)`` is how a chat names the replay itself ("replay of lesson-7"), never the path.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from collections.abc import AsyncIterator

from ..core.errors import ConfigError
from ..core.messages import Message, TextPart, ThinkingPart, ToolUsePart
from ..core.session_file import read_session
from ..core.steps import (
    FinishReason,
    Step,
    StepKind,
    StepStatus,
    ToolCall,
    UsageMetadata,
)
from .base import (
    Event,
    Finish,
    ModelRequest,
    Provider,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

DEFAULT_SPEED = 40.0  # tokens per second: about a hosted model's pace
_CHARS_PER_TOKEN = 4
END_OF_RECORDING = "*(replay: the recording has no more turns.)*"
END_OF_TURN = "*(replay: the recorded turn ended here.)*"


@dataclass
class RecordedCall:
    """One model call of a recorded turn."""

    thinking: str = ""
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: UsageMetadata | None = None
    finish_reason: FinishReason = FinishReason.STOP
    model: str = ""


@dataclass
class RecordedResult:
    """A recorded tool result, given back by the stand-in tools."""

    call_id: str
    name: str
    args: dict
    content: str
    is_error: bool = False


@dataclass
class RecordedTurn:
    prompt: str
    calls: list[RecordedCall] = field(default_factory=list)


@dataclass
class Recording:
    """What a replay plays: the turns in order and every tool result."""

    path: Path
    turns: list[RecordedTurn]
    results: list[RecordedResult]


@dataclass
class ReplayNote:
    """A prompt that differed from the recorded one (the replay went on)."""

    turn: int
    recorded_prompt: str
    prompt: str


class ReplayChoice(str, Enum):
    """What a replay does with a prompt that differs from the recorded one."""

    ASK = "ask"  # wait for choose(): the widget's notice
    CONTINUE = "continue"  # play the recording anyway
    LIVE = "live"  # the live model answers this prompt


@dataclass(frozen=True)
class ReplayMismatch:
    """A typed prompt that differs from the recorded one, waiting for ``choose()``."""

    turn: int  # the recorded turn (0-based)
    recorded_prompt: str
    prompt: str
    live: str  # the live model that "answer live" would ask ("": none)
    live_unavailable: str  # why "answer live" cannot be chosen ("": it can)


@dataclass(frozen=True)
class ReplayStatus:
    """Where a replay is: ``step`` of ``steps`` recorded model calls played, and what it waits for."""

    step: int
    steps: int
    waiting: bool  # a step=True replay waits for next_step()
    mismatch: ReplayMismatch | None = None  # a differing prompt waits for choose()
    live: bool = False  # the running turn is answered by the live model
    stepping: bool = False  # step=True: each step waits for next_step()
    waits: int = 0  # how many waits for next_step() have begun: a new wait has a new number


NO_LIVE = "no live model: make the agent with live=\"demo\" (or another model) to answer live"


def same_prompt(a: str, b: str) -> bool:
    """Whether two prompts are the same, whitespace and case aside."""
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def read_recording(path: str | Path) -> Recording:
    """The turns and tool results of a saved session (``StorageError`` when unusable)."""
    state = read_session(path)
    prompts = {t.turn: t.prompt for t in state.turns}
    by_turn: dict[int, RecordedTurn] = {}
    results: list[RecordedResult] = []
    for step in state.steps:
        turn = by_turn.setdefault(step.turn, RecordedTurn(prompts.get(step.turn, "")))
        if step.kind is StepKind.PROMPT and not turn.prompt:
            turn.prompt = step.content
        elif step.kind is StepKind.MODEL_CALL:
            turn.calls.append(_recorded_call(step))
        elif step.kind is StepKind.TOOL_RUN and step.tool_calls:
            call = step.tool_calls[0]
            results.append(RecordedResult(call.id, call.name, dict(call.args), step.content,
                                          step.status is StepStatus.ERROR))
    turns = [by_turn[k] for k in sorted(by_turn) if by_turn[k].calls]
    return Recording(Path(path), turns, results)


def _recorded_call(step: Step) -> RecordedCall:
    reason = FinishReason.TOOL_CALLS if step.tool_calls else step.finish_reason or FinishReason.STOP
    if reason in (FinishReason.INTERRUPTED, FinishReason.ERROR):  # a cut call is replayed as far as it went
        reason = FinishReason.STOP
    return RecordedCall(step.thinking, step.content, list(step.tool_calls), step.usage_metadata, reason, step.model)


class ReplayProvider(Provider):
    """Streams a recording (see the module docstring). ``model`` is the session file's path."""

    name = "replay"

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 speed: float | None = DEFAULT_SPEED, rerun_tools: bool = False, step: bool = False,
                 live: str | Provider | None = None, on_mismatch: str | None = None) -> None:
        if not model:
            raise ConfigError("replay needs a saved session: model=\"replay:PATH\"")
        if speed is not None and (isinstance(speed, bool) or not isinstance(speed, (int, float)) or speed <= 0):
            raise ConfigError(f"speed must be tokens per second (> 0) or None, not {speed!r}")
        self.model = model
        self.speed = speed
        self.rerun_tools = bool(rerun_tools)
        self.recording = read_recording(Path(model).expanduser())
        self.notes: list[ReplayNote] = []
        self.step = bool(step)
        self.live = _live_provider(live)
        self.on_mismatch = _on_mismatch(on_mismatch, self.step, self.live)
        self.steps = sum(len(t.calls) for t in self.recording.turns)
        self._played = 0  # recorded model calls played
        self._last_model = ""  # the model of the last recorded call played (answers past the end name it)
        self._turn = -1
        self._call = 0
        self._live_turn = False  # the running turn is answered live
        self._lock = threading.Lock()
        self._gate: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._released = 0  # next_step() calls not yet used
        self._waits = 0
        self._mismatch: ReplayMismatch | None = None
        self._choice_gate: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._choice = ReplayChoice.CONTINUE

    @property
    def status(self) -> ReplayStatus:
        """The step counter and what the replay waits for (thread-safe)."""
        with self._lock:
            return ReplayStatus(self._played, self.steps, self._gate is not None, self._mismatch, self._live_turn,
                                self.step, self._waits)

    def choose(self, choice: ReplayChoice | str) -> None:
        """Answer a waiting mismatch: ``"continue"`` with the recording or ``"live"`` (thread-safe).

        ``ConfigError`` when nothing waits, for an unknown choice, or "live" without a live model.
        """
        try:
            picked = ReplayChoice(choice)
        except ValueError:
            raise ConfigError(f"a replay choice is 'continue' or 'live', not {choice!r}") from None
        with self._lock:
            if self._choice_gate is None or self._mismatch is None or picked is ReplayChoice.ASK:
                raise ConfigError("the replay is not asking: no typed prompt differs from the recording now")
            if picked is ReplayChoice.LIVE and self._mismatch.live_unavailable:
                raise ConfigError(f"cannot answer live: {self._mismatch.live_unavailable}")
            loop, event = self._choice_gate
            self._choice, self._choice_gate, self._mismatch = picked, None, None
        loop.call_soon_threadsafe(event.set)

    @property
    def waiting(self) -> bool:
        """Whether a ``step=True`` replay waits for ``next_step()``."""
        with self._lock:
            return self._gate is not None

    def next_step(self) -> None:
        """Let a ``step=True`` replay play its next model call (thread-safe; early calls are kept)."""
        with self._lock:
            if self._gate is None:
                self._released += 1
                return
            loop, event = self._gate
            self._gate = None  # released: no longer waiting, even before the waiter wakes
        loop.call_soon_threadsafe(event.set)

    async def _wait_for_next(self) -> None:
        with self._lock:
            self._waits += 1
            if self._released:
                self._released -= 1
                return
            event = asyncio.Event()
            self._gate = (asyncio.get_running_loop(), event)
        try:
            await event.wait()
        finally:
            with self._lock:
                if self._gate is not None and self._gate[1] is event:  # stopped while waiting
                    self._gate = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        last = request.messages[-1] if request.messages else Message("user", [])
        note = ""
        if not last.tool_results:  # a new prompt: the next recorded turn, unless it is answered live
            self._live_turn = False
            self._turn, self._call = self._turn + 1, 0
            recorded = self._recorded_prompt()
            if recorded is not None and not same_prompt(recorded, last.text):
                choice = await self._decide(recorded, last.text)
                if choice is ReplayChoice.LIVE:
                    self._turn -= 1  # the recorded turn waits for its own prompt
                    self._live_turn = True
                else:
                    self.notes.append(ReplayNote(self._turn, recorded, last.text))
                    note = f"(replay: the recording answers the prompt \u201c{_short(recorded)}\u201d)\n\n"
        if self._live_turn and self.live is not None:
            live_request = request if self.rerun_tools else replace(request, tools=[])
            async for event in self.live.stream(live_request):
                yield event
            return
        call = self._next_call()
        if self.step:
            await self._wait_for_next()
        if call.text not in (END_OF_RECORDING, END_OF_TURN):
            with self._lock:
                self._played += 1
        async for event in self._play(call, note):
            yield event

    def _recorded_prompt(self) -> str | None:
        return self.recording.turns[self._turn].prompt if self._turn < len(self.recording.turns) else None

    async def _decide(self, recorded: str, prompt: str) -> ReplayChoice:
        """What to do with a differing prompt: ``on_mismatch``, or the choice made while it waits."""
        if self.on_mismatch is not ReplayChoice.ASK:
            return self.on_mismatch
        event = asyncio.Event()
        with self._lock:
            self._mismatch = ReplayMismatch(self._turn, recorded, prompt, self.live_name,
                                            "" if self.live is not None else NO_LIVE)
            self._choice_gate = (asyncio.get_running_loop(), event)
        try:
            await event.wait()
        finally:
            with self._lock:
                if self._choice_gate is not None and self._choice_gate[1] is event:  # stopped while asking
                    self._choice_gate, self._mismatch = None, None
        return self._choice

    @property
    def live_name(self) -> str:
        """The live model as ``provider:model`` ("" when there is none)."""
        live = self.live
        return f"{live.name}:{getattr(live, 'model', '')}" if live is not None else ""

    def _next_call(self) -> RecordedCall:
        if self._turn >= len(self.recording.turns):
            return RecordedCall(text=END_OF_RECORDING)
        calls = self.recording.turns[self._turn].calls
        if self._call >= len(calls):
            return RecordedCall(text=END_OF_TURN)
        self._call += 1
        return calls[self._call - 1]

    async def _play(self, call: RecordedCall, note: str) -> AsyncIterator[Event]:
        thinking = note + call.thinking
        parts: list = []
        if thinking:
            for piece in _pieces(thinking):
                await self._pause(piece)
                yield ThinkingDelta(piece)
            parts.append(ThinkingPart(thinking))
        for piece in _pieces(call.text):
            await self._pause(piece)
            yield TextDelta(piece)
        if call.text:
            parts.append(TextPart(call.text))
        for i, tc in enumerate(call.tool_calls):
            args = json.dumps(tc.args)
            yield ToolCallStart(i, tc.id, tc.name)
            await self._pause(args)
            yield ToolCallDelta(i, args)
            yield ToolCallEnd(i, ToolCall(tc.id, tc.name, dict(tc.args)))
            parts.append(ToolUsePart(tc.id, tc.name, dict(tc.args)))
        if call.usage is not None:
            yield Usage(UsageMetadata(**call.usage.to_dict()), raw={"replay": True})
        self._last_model = call.model or self._last_model
        yield Finish(call.finish_reason, call.finish_reason.value.lower(), Message("assistant", parts),
                     model=call.model or self._last_model or self._first_model() or self.model)

    def _first_model(self) -> str:
        """The first model the recording names ("" for none)."""
        return next((c.model for t in self.recording.turns for c in t.calls if c.model), "")

    async def _pause(self, piece: str) -> None:
        if self.speed is None:
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(max(1, len(piece) // _CHARS_PER_TOKEN) / self.speed)


def _live_provider(live: str | Provider | None) -> Provider | None:
    if live is None or isinstance(live, Provider):
        return live
    if not isinstance(live, str) or not live.strip() or live.strip().lower().startswith("replay:"):
        raise ConfigError(f"live= is a model such as \"demo\" or \"openai:gpt-4.1-mini\", not {live!r}")
    from . import create, guess_prefix, lookup

    prefix, _, name = live.strip().partition(":")
    if lookup(prefix) is None and guess_prefix(live.strip()) is not None:
        prefix, name = str(guess_prefix(live.strip())), live.strip()
    return create(prefix, name)


def _on_mismatch(value: str | None, step: bool, live: Provider | None) -> ReplayChoice:
    if value is None:
        return ReplayChoice.ASK if step else ReplayChoice.CONTINUE
    try:
        choice = ReplayChoice(value)
    except ValueError:
        raise ConfigError(f"on_mismatch is 'ask', 'continue' or 'live', not {value!r}") from None
    if choice is ReplayChoice.LIVE and live is None:
        raise ConfigError("on_mismatch='live' needs a live model: live=\"demo\" (or another model)")
    return choice


def _pieces(text: str) -> list[str]:
    """``text`` in word-sized pieces (spaces kept with the word before them)."""
    out, start = [], 0
    for i in range(1, len(text)):
        if text[i - 1].isspace() and not text[i].isspace():
            out.append(text[start:i])
            start = i
    if text:
        out.append(text[start:])
    return out


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "\u2026"
