"""A list that knows when it changed other than by growing, and O(1) snapshots of it.

The model history (``ChatSession.messages``) and the turn ledger grow at their end, and the loop looks
at them every turn (token counts, prompt-cache fingerprints, the budget's spend). :class:`GrowingList`
is a ``list`` that counts every other change (an item set, deleted, inserted, popped or removed, the
list cleared, sorted, reversed or multiplied): while :attr:`GrowingList.changes` stays the same, what
was there before is still there, in order, and an observer looks at the new items only
(:class:`~nbagent.core.message_memo.MessageMemo`).

:meth:`GrowingList.snapshot` is the list as it is now, for a model request or a budget check, in
O(1): a read-only sequence of its first ``len`` items. Growth does not show in it, and before any
other change the list copies itself once for all its snapshots still alive, so a snapshot never
changes.

Counted: changes made through the list's own methods and operators (``messages[i] = m``,
``del messages[:4]``, ``messages.clear()`` ...). Edits inside an item are not changes of the list
(a message's parts are counted by :func:`~nbagent.core.messages.edit_count`).
"""

from __future__ import annotations

import weakref
from typing import Any, SupportsIndex, TypeVar, overload
from collections.abc import Iterable, Iterator, Sequence

T = TypeVar("T")


class GrowingList(list[T]):
    """A ``list`` with :attr:`changes`, the count of its changes other than growth at its end."""

    __slots__ = ("changes", "_snapshots", "_prune_at")

    def __init__(self, items: Iterable[T] = ()) -> None:
        super().__init__(items)
        self.changes = 0
        self._snapshots: list[weakref.ref[ListSnapshot[T]]] = []  # taken since the last change
        self._prune_at = 8

    def snapshot(self) -> ListSnapshot[T]:
        """The items as they are now, read-only, in O(1) (later changes do not show in it)."""
        view = ListSnapshot(self)
        refs = self._snapshots
        if len(refs) >= self._prune_at:  # forget the snapshots gone (amortized O(1) a snapshot)
            refs[:] = [r for r in refs if r() is not None]
            self._prune_at = 2 * len(refs) + 8
        refs.append(weakref.ref(view))
        return view

    def _changing(self) -> None:
        """Count a change about to happen; the live snapshots first take a copy of the list."""
        self.changes += 1
        views = [view for view in (r() for r in self._snapshots) if view is not None]
        if views:
            frozen = tuple(self)
            for view in views:
                view.freeze(frozen)
        self._snapshots.clear()
        self._prune_at = 8

    def __setitem__(self, index: Any, value: Any) -> None:
        self._changing()
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        self._changing()
        super().__delitem__(index)

    def __imul__(self, n: SupportsIndex) -> GrowingList[T]:
        self._changing()
        super().__imul__(n)
        return self

    def insert(self, index: SupportsIndex, item: T) -> None:
        self._changing()
        super().insert(index, item)

    def pop(self, index: SupportsIndex = -1) -> T:
        self._changing()
        return super().pop(index)

    def remove(self, item: T) -> None:
        self._changing()
        super().remove(item)

    def clear(self) -> None:
        self._changing()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._changing()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._changing()
        super().reverse()

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple:
        return type(self), (list(self),)  # copies and pickles: the items, no snapshots


class ListSnapshot(Sequence[T]):
    """The first ``len`` items of a :class:`GrowingList` when the snapshot was taken (read-only)."""

    __slots__ = ("_items", "_length", "__weakref__")

    def __init__(self, items: GrowingList[T]) -> None:
        self._items: Sequence[T] = items
        self._length = len(items)

    def source(self) -> GrowingList[T] | None:
        """The list this snapshot still reads from (None: frozen, the list changed since)."""
        return self._items if isinstance(self._items, GrowingList) else None

    def freeze(self, items: tuple[T, ...]) -> None:
        """Read from ``items`` from now on (the list is about to change)."""
        self._items = items

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            items = self._items
            return list(items[start:stop]) if step == 1 else [items[i] for i in range(start, stop, step)]
        i = index + self._length if index < 0 else index
        if not 0 <= i < self._length:
            raise IndexError("snapshot index out of range")
        return self._items[i]

    def __iter__(self) -> Iterator[T]:
        # over a copy taken at once (C speed): a change made meanwhile, even from another thread
        # once this iteration started, never shows in it
        return iter(self._items[:self._length])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ListSnapshot, list, tuple)):
            return len(other) == self._length and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ListSnapshot({list(self)!r})"


def snapshot(items: Sequence[T]) -> Sequence[T]:
    """``items`` as they are now, read-only: O(1) for a :class:`GrowingList`, else a copy."""
    return items.snapshot() if isinstance(items, GrowingList) else list(items)


def growth_mark(items: Sequence[Any]) -> tuple[GrowingList[Any], int] | None:
    """The list ``items`` live in and its change count, when that tells whether it only grew since
    (a :class:`GrowingList`, or a snapshot of one not frozen yet); None otherwise."""
    if isinstance(items, GrowingList):
        return items, items.changes
    source = items.source() if isinstance(items, ListSnapshot) else None
    return None if source is None else (source, source.changes)
