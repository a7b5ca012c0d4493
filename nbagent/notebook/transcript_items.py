"""What a transcript shows of a step, as a small family of values every renderer matches on.

``transcript.step_items`` turns steps into these; the markdown, plain-text and HTML renderers
(``transcript.py``, ``transcript_html.py``) each handle every kind, so a new kind is one class here
and one case in each renderer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    """What the user asked."""

    text: str


@dataclass(frozen=True)
class Thinking:
    """The model's thoughts."""

    text: str


@dataclass(frozen=True)
class Answer:
    """The model's answer (markdown)."""

    text: str


@dataclass(frozen=True)
class Note:
    """A short line about the turn: a refusal, a compaction, "stopped"."""

    text: str


@dataclass(frozen=True)
class Call:
    """A tool call the model asked for; ``cut``: cut at the token limit and never run."""

    name: str
    args: str  # JSON text (or the cut call's partial arguments)
    cut: bool = False


@dataclass(frozen=True)
class Waiting:
    """A tool call waiting: ``for_what`` is "approval", "a result" (manual mode) or "approval or a result"."""

    name: str
    for_what: str = "approval or a result"


@dataclass(frozen=True)
class Result:
    """What a tool gave back; ``why`` says why it did not run (denied, blocked...)."""

    name: str
    text: str
    failed: bool
    why: str = ""


@dataclass(frozen=True)
class Diff:
    """What a notebook cell tool changes (or would change): a title and the line diff, ``+`` / ``-`` / `` ``."""

    title: str
    lines: str


@dataclass(frozen=True)
class Failure:
    """An error the turn met (shown once however many steps carry it)."""

    text: str


TranscriptItem = Prompt | Thinking | Answer | Note | Call | Waiting | Result | Diff | Failure
