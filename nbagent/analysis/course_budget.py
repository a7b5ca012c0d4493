"""A course budget: what one user spent in the current day or week, and the lesson hours, checked
before every turn (see ``analysis/budget.py``, which asks :class:`CourseLimits` first).

The spend is summed from the sessions saved in the policy's ``save_to`` folder (every ``*.json`` in
it whose settings name this user: their turns that started in the period, read as the teacher's
``class_summary`` reads them) plus the live conversation's turns in the period (its own saved file is
skipped, by conversation id, so nothing counts twice). Only files this login wrote count (POSIX: the
file's owner uid is the kernel's): a session another login saved claiming this user, forged in a shared
folder, spends nothing of this user's budget. Turns are priced with the shared price data,
never with ``Agent(pricing=...)`` (an argument cannot make a model free); turns without a known price
count $0. Each file is read once per change (by its size and modification time), and so is the
policy file: a teacher's edit of the hours or the budget applies to running agents from their next
check (models, ``run_code``, rules, ``save_to`` and ``user`` stay as each agent was made with them).

Out of lesson hours, or when the spend plus the next request's expected cost would exceed the
budget, the turn is refused with ``BudgetExceeded`` naming the policy file and when it opens again;
``allow_over_budget_once`` does not apply (it is the conversation's own budget's escape hatch).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from ..core.course_policy import CoursePolicy, load_policy
from ..core.errors import BudgetExceeded, ConfigError, NbagentError
from ..core.ledger import TurnRecord
from .class_summary import OWNERS, ClassFolder
from .estimate import turn_cost, usd

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class CourseStatus:
    """The policy's limits now: open or not, spend in the period, when things change."""

    now: datetime
    open: bool
    next_opening: datetime | None
    spent_usd: float
    budget_usd: float | None
    period_start: datetime
    next_reset: datetime

    @property
    def left_usd(self) -> float | None:
        return None if self.budget_usd is None else max(0.0, self.budget_usd - self.spent_usd)


def when(dt: datetime) -> str:
    """A moment for people: ``09:00 on Tue 08 Dec``."""
    return f"{dt:%H:%M} on {dt:%a %d %b}"


def known(x: float) -> float:
    return 0.0 if x is None or math.isnan(x) else float(x)


class CourseLimits:
    """The course policy's hours and period budget for one user (``clock``: local time now)."""

    def __init__(self, policy: CoursePolicy, user: str, clock: Clock | None = None) -> None:
        self._policy = policy
        self._stamp = _stamp(policy.path)
        self.user = user
        self.clock: Clock = clock or datetime.now  # tests pass a fake clock
        self._saved: ClassFolder | None = None  # the save_to folder, read incrementally

    @property
    def policy(self) -> CoursePolicy:
        """The policy with the hours and budget its file holds now: a teacher's edit of ``hours``,
        ``budget_usd`` or ``budget_period`` applies from the next check (the file is read again when
        its modification time or size changed). The other keys stay as the agent was made with them;
        an edit that does not parse, or a file gone, keeps the last policy read."""
        stamp = _stamp(self._policy.path)
        if stamp is not None and stamp != self._stamp:
            self._stamp = stamp
            try:
                now = load_policy(self._policy.path)
            except ConfigError:
                return self._policy
            self._policy = replace(self._policy, hours=now.hours, budget_usd=now.budget_usd,
                                   budget_period=now.budget_period, content_hash=now.content_hash)
        return self._policy

    def saved_spend(self, since: float, exclude: str = "") -> float:
        """Dollars this user's saved sessions (but the conversation ``exclude``) spent in turns started
        from ``since``."""
        folder = self.policy.save_to
        if folder is None or not folder.is_dir():  # nothing saved yet
            return 0.0
        if self._saved is None:
            self._saved = ClassFolder(folder)  # shared prices: an argument cannot make a model free
        self._saved.scan()
        return self._saved.spent_since(self.user, since, exclude, owner=os.geteuid() if OWNERS else -1)

    def status(self, turns: Sequence[TurnRecord] = (), conversation_id: str = "",
               now: datetime | None = None) -> CourseStatus:
        """Hours and spend now (``turns``: the live conversation's, ``conversation_id`` its id)."""
        p = self.policy
        now = self.clock() if now is None else now
        start = p.period_start(now)
        since = start.timestamp()
        spent = 0.0
        if p.budget_usd is not None:
            live = sum(known(turn_cost(t)) for t in turns if t.started_at >= since)
            spent = self.saved_spend(since, conversation_id) + live
        return CourseStatus(now, p.is_open(now), p.next_opening(now), spent, p.budget_usd, start, p.next_reset(now))

    def refusal(self, turns: Sequence[TurnRecord], conversation_id: str,
                expected_usd: float = 0.0) -> NbagentError | None:
        """Why the next turn may not start (closed, or over the period's budget); None: it may."""
        s = self.status(turns, conversation_id)
        p = self.policy
        if not s.open and s.next_opening is not None:
            hours = ", ".join(str(h) for h in p.hours)
            return BudgetExceeded(f"closed: outside the lesson hours ({hours}) of the course policy {p.path}; "
                                  f"opens again at {when(s.next_opening)}")
        budget = s.budget_usd
        if budget is not None and (s.spent_usd + known(expected_usd) > budget or 0 < budget <= s.spent_usd):
            return BudgetExceeded(
                f"over the course budget, nothing sent: spent {usd(s.spent_usd)} of {usd(budget)} this "
                f"{p.budget_period.value} (course policy {p.path}); it starts afresh at {when(s.next_reset)}")
        return None

    def stop_reason(self, turns: Sequence[TurnRecord], conversation_id: str) -> str:
        """Why a running turn must stop before its next model call ("" while within the budget)."""
        p = self.policy
        if p.budget_usd is None:
            return ""
        s = self.status(turns, conversation_id)
        if s.spent_usd <= p.budget_usd:
            return ""
        return (f"budget: stopped before the next model call, spent {usd(s.spent_usd)} of the course's "
                f"{usd(p.budget_usd)} this {p.budget_period.value}")


def _stamp(path: Path) -> tuple[int, int] | None:
    """The file's (mtime_ns, size), or None when it cannot be read now."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)
