"""What a piece of code did to the namespace it ran in: the variables it created, changed, deleted.

``fingerprints(namespace)`` takes, for each of the user's variables (``variables.user_variables``),
a cheap fingerprint: the object's ``id``, its type and its shape or length, never a copy of its
data, so a 1 GB DataFrame costs the same as an int. ``changes(before, after, namespace)`` compares
two of them. A value rebound to a new object, or whose type, shape or length differs, is
*changed*; a change made in place that keeps all three (a DataFrame's cell edited) is not seen.
``run_python`` records the result on its step (``Step.changes``): the card shows it and
``tool_calls_df()`` has it as the ``variables_changed`` column.
"""

from __future__ import annotations

from typing import Any

from ..core.steps import ChangeKind, VariableChange
from .variables import size_text, user_variables

Fingerprint = tuple[int, str, str]  # id, type name, shape or length


def fingerprints(namespace: dict) -> dict[str, Fingerprint]:
    """Each user variable's fingerprint (id, type name, shape or length)."""
    return {name: (id(value), type(value).__name__, size_text(value))
            for name, value in user_variables(namespace).items()}


def changes(before: dict[str, Fingerprint], after: dict[str, Fingerprint]) -> tuple[VariableChange, ...]:
    """The variables created, changed and deleted between two fingerprints, in that order, each
    group by name."""
    created = [VariableChange(n, ChangeKind.CREATED, after[n][1], after[n][2]) for n in sorted(after.keys() - before.keys())]
    changed = [VariableChange(n, ChangeKind.CHANGED, after[n][1], after[n][2])
               for n in sorted(after.keys() & before.keys()) if after[n] != before[n]]
    deleted = [VariableChange(n, ChangeKind.DELETED, before[n][1], before[n][2]) for n in sorted(before.keys() - after.keys())]
    return (*created, *changed, *deleted)


def snapshot_or_none(namespace: Any) -> dict[str, Fingerprint] | None:
    """``fingerprints`` of a dict namespace, None when it cannot be taken (never raises)."""
    try:
        return fingerprints(namespace) if isinstance(namespace, dict) else None
    except Exception:  # a namespace that cannot be listed: no changes reported
        return None
