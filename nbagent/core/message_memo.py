"""Per-message values of a growing history, computed once per message.

A conversation's model history grows at its end, and the loop needs a value of every message each
model call (its token count for compaction, its part fingerprints for prompt-cache analytics).
:class:`MessageMemo` keeps those values between calls and tells how many leading messages are
unchanged, so a call costs the new messages, not the whole history.

A message counts as unchanged while it is the same object with the same parts (the same part
objects, each with the same content). Checking that for every message each call would walk the whole
history again, so a call checks:

- whether the list only grew at its end: for the same
  :class:`~nbagent.core.growing_list.GrowingList` (a ChatSession's ``messages``, or a request's
  snapshot of them) its change count says so at once; any other sequence is compared with the
  previous one, object by object (one C-speed list comparison);
- the parts of the messages from the newest user message on (``push_user``,
  ``push_tool_results`` and ``append_to_last_user`` add parts there);
- everything, when a field of any message or part was assigned in place since the previous call
  (``part.text = ...``, counted by :func:`~nbagent.core.messages.edit_count`), after
  ``ChatSession.compress``, or when the list is not the previous one grown at its end (messages
  replaced, deleted, inserted: compaction, a trim).

Not seen by itself: parts added to, removed from or replaced in the parts list of a message older
than the newest user message. Replace the message instead (``messages[i] = Message(role, parts)``),
or call :func:`~nbagent.core.messages.note_edit` after such an edit.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar
from collections.abc import Callable, Sequence

from .messages import Message, edit_count
from .growing_list import GrowingList, growth_mark

T = TypeVar("T")


def _content(part: Any) -> Any:
    for name in ("text", "content", "data", "args"):
        value = getattr(part, name, None)
        if value is not None:
            return value
    return None


def shape(message: Message) -> tuple:
    """What identifies a message's state: its part objects and their contents (the text objects
    themselves: an edit assigns a new one, whatever its length)."""
    return tuple((part, _content(part)) for part in message.parts)


class MessageMemo(Generic[T]):
    """``values[i]`` is ``compute(messages[i])`` for the history last given to :meth:`update`.

    Not thread-safe: a memo shared by threads needs its caller's lock."""

    def __init__(self, compute: Callable[[Message], T]) -> None:
        self.compute = compute
        self.values: list[T] = []
        self._seen: list[Message] = []
        self._shapes: list[tuple] = []
        self._edits = edit_count()
        self._newest_user = -1
        self._source: GrowingList | None = None  # the list last seen, when it counts its changes
        self._source_changes = -1

    def update(self, messages: Sequence[Message]) -> tuple[int, list[T]]:
        """Take ``messages`` as the history; return how many leading messages kept their values
        and the values the messages after those had before (what the caller may compare)."""
        edits, old = edit_count(), len(self._seen)
        mark = growth_mark(messages)
        if (mark is not None and mark[0] is self._source and mark[1] == self._source_changes
                and edits == self._edits and len(messages) >= old):
            kept = self._kept_tail(messages, old)  # the same list, only grown since
        else:
            kept = self._kept(messages, old, edits != self._edits)
        self._edits = edits
        self._source, self._source_changes = mark if mark is not None else (None, -1)
        before = self.values[kept:]
        self._recompute(messages, kept, old)
        return kept, before

    def _kept(self, messages: Sequence[Message], old: int, edited: bool) -> int:
        seen = self._seen
        if not edited and len(messages) >= old:
            seen.extend(messages[old:])  # new messages: trivially the same objects
            if seen == messages:  # the old part unchanged, object by object (values when not the same)
                del seen[old:]
                return self._kept_tail(messages, old)
            del seen[old:]
        shapes = self._shapes
        for i in range(min(old, len(messages))):
            if seen[i] is not messages[i] or shape(messages[i]) != shapes[i]:
                return i
        return min(old, len(messages))

    def _kept_tail(self, messages: Sequence[Message], old: int) -> int:
        """The unchanged count when only parts of the newest messages may have grown."""
        for i in range(max(self._newest_user, 0), old):
            if shape(messages[i]) != self._shapes[i]:
                return i
        return old

    def _recompute(self, messages: Sequence[Message], kept: int, old: int) -> None:
        seen, shapes, values = self._seen, self._shapes, self.values
        index = {id(seen[j]): j for j in range(kept, old)}
        new_seen, new_shapes, new_values = [], [], []
        for message in messages[kept:]:
            form = shape(message)
            j = index.get(id(message))
            if j is not None and seen[j] is message and shapes[j] == form:
                value = values[j]  # moved (a compaction dropped turns before it), not changed
            else:
                value = self.compute(message)
            new_seen.append(message)
            new_shapes.append(form)
            new_values.append(value)
        del seen[kept:], shapes[kept:], values[kept:]
        seen += new_seen
        shapes += new_shapes
        values += new_values
        self._newest_user = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), -1)
