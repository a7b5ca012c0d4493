"""The course policy: a teacher's ``nbagent.toml`` that every ``Agent`` under its folder obeys.

``find_policy()`` takes the topmost ``nbagent.toml`` above the working folder that says ``final = true``,
else ``$NBAGENT_CONFIG`` when set, else the first ``nbagent.toml`` found walking up from the working
folder (a notebook's kernel starts in the notebook's folder). Its ``[policy]`` table
has these keys, all optional::

    [policy]
    models = ["demo", "openai:*"]      # allowed model strings; a trailing * matches a prefix
    run_code = false                   # no run_python, no cell edits or inserts
    budget_usd = 2.0                   # dollars per user and period ...
    budget_period = "week"             # ... "day" or "week" (the default); resets at local midnight / Monday
    hours = ["09:00-12:00", "Tue,Thu 13:00-15:30"]   # lesson hours, local time: every day, or on the days named
    save_to = "sessions"               # where sessions are saved, relative to this file
    user = "student"                   # the user name when Agent(user=...) gives none
    rules = "AGENTS.md"                # a markdown file added to the system prompt, or "tutor"
    final = true                       # no nbagent.toml below (nor $NBAGENT_CONFIG) replaces this one

This module is pure data: parsing (a bad file or key is a ``ConfigError`` naming both), the checks
(``allows_model``, ``is_open``, ``next_opening``, ``period_start``, ``next_reset``) and nothing else. The
facade enforces it (agent.py), the budget check sums the period's spend (analysis/course_budget.py).
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Any

from .chat_session import read_small_file
from .errors import ConfigError, StorageError

POLICY_FILE = "nbagent.toml"
CONFIG_VARIABLE = "NBAGENT_CONFIG"
MAX_POLICY_BYTES = 1 << 20  # a policy is a few lines; a larger file is refused unread
KEYS = ("models", "run_code", "budget_usd", "budget_period", "hours", "save_to", "user", "rules", "final")
_HOURS = re.compile(r"^\s*(?:([A-Za-z][A-Za-z,\s-]*?)\s+)?(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # datetime.weekday() order
EVERY_DAY = frozenset(range(7))


class BudgetPeriod(str, enum.Enum):
    """How often a course budget starts afresh: local midnight, or Monday 00:00."""

    DAY = "day"
    WEEK = "week"

    def start(self, now: datetime) -> datetime:
        """When the period holding ``now`` (local time) began."""
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return day - timedelta(days=now.weekday()) if self is BudgetPeriod.WEEK else day

    def next_start(self, now: datetime) -> datetime:
        """When the period after the one holding ``now`` begins."""
        return self.start(now) + timedelta(days=7 if self is BudgetPeriod.WEEK else 1)


@dataclass(frozen=True)
class LessonHours:
    """One range of lesson hours, local time (``start`` < ``end``), on ``days`` (``weekday()`` numbers:
    Monday 0; every day by default)."""

    start: time
    end: time
    days: frozenset[int] = EVERY_DAY

    def __str__(self) -> str:
        hours = f"{self.start:%H:%M}-{self.end:%H:%M}"
        return hours if self.days == EVERY_DAY else f"{_day_list(self.days)} {hours}"

    def holds(self, now: datetime) -> bool:
        """Whether ``now`` (local wall-clock time) is within these hours."""
        return now.weekday() in self.days and self.start <= now.time().replace(tzinfo=None) < self.end


@dataclass(frozen=True)
class CoursePolicy:
    """A parsed ``nbagent.toml`` (see the module docstring); ``None`` fields are not restricted."""

    path: Path  # the policy file, absolute
    content_hash: str  # "sha256:<hex>" of the file's bytes, recorded in every saved session
    models: tuple[str, ...] | None = None
    run_code: bool = True
    budget_usd: float | None = None
    budget_period: BudgetPeriod = BudgetPeriod.WEEK
    hours: tuple[LessonHours, ...] = ()
    save_to: Path | None = None  # absolute (written relative to the file)
    user: str = ""
    rules: str | None = None  # as written: "tutor", or a file relative to the policy's folder
    final: bool = False  # no nbagent.toml below this one (nor $NBAGENT_CONFIG) replaces it

    @property
    def folder(self) -> Path:
        return self.path.parent

    def allows_model(self, model: str) -> bool:
        """Whether ``model`` (``"provider:name"`` or a bare name like ``"demo"``) is allowed."""
        if self.models is None:
            return True
        model = model.strip()
        for allowed in self.models:
            if allowed.endswith("*") and model.startswith(allowed[:-1]):
                return True
            if model == allowed:
                return True
        return False

    def is_open(self, now: datetime) -> bool:
        """Whether ``now`` (local wall-clock time) is within the lesson hours (always, without hours)."""
        return not self.hours or any(h.holds(now) for h in self.hours)

    def next_opening(self, now: datetime) -> datetime | None:
        """When the lessons open next after ``now`` (None: open now, or no hours)."""
        if self.is_open(now):
            return None
        today = now.replace(hour=0, minute=0, second=0, microsecond=0)
        starts = sorted(day.replace(hour=h.start.hour, minute=h.start.minute)
                        for day in (today + timedelta(days=d) for d in range(8))
                        for h in self.hours if day.weekday() in h.days)
        return next(s for s in starts if s > now)

    def period_start(self, now: datetime) -> datetime:
        """When the budget period holding ``now`` began (local midnight; Monday for a week)."""
        return self.budget_period.start(now)

    def next_reset(self, now: datetime) -> datetime:
        """When the budget starts afresh after ``now``."""
        return self.budget_period.next_start(now)


def find_policy(start: Path | None = None) -> CoursePolicy | None:
    """The policy in force: the topmost ``nbagent.toml`` from ``start`` (default: the working folder) up
    to the root that says ``final = true``; else ``$NBAGENT_CONFIG``; else the nearest ``nbagent.toml``;
    None when there is none. The files on the way up are read top first: one that does not parse is a
    ``ConfigError`` (it may be the teacher's final one), one below a final one is never read."""
    here = Path.cwd() if start is None else Path(start)
    here = here.expanduser().resolve()
    found = [c for c in (f / POLICY_FILE for f in (here, *here.parents)) if c.is_file()]
    policies = []
    for candidate in reversed(found):  # top first: a final one wins before anything below it is read
        policies.append(load_policy(candidate))
        if policies[-1].final:
            return policies[-1]
    named = os.environ.get(CONFIG_VARIABLE, "").strip()
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise ConfigError(f"${CONFIG_VARIABLE} names {path}, which is not a file")
        return load_policy(path)
    return policies[-1] if policies else None


def load_policy(path: str | os.PathLike) -> CoursePolicy:
    """Parse a policy file; a bad file or key is a ``ConfigError`` naming the file (and the key)."""
    path = Path(path).expanduser().resolve()
    try:  # a FIFO or a device at its name is never waited on or read whole
        data, _ = read_small_file(path, MAX_POLICY_BYTES)
    except OSError as exc:
        raise ConfigError(f"course policy {path}: cannot be read ({exc.strerror or exc})") from None
    except StorageError as exc:
        raise ConfigError(f"course policy {path}: cannot be read ({exc.message})") from None
    import tomllib  # only when there is a policy file (an Agent without one never parses TOML)

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"course policy {path}: not valid TOML ({exc})") from None
    table = doc.get("policy")
    if not isinstance(table, dict):
        raise ConfigError(f"course policy {path}: has no [policy] table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"course policy {path}: unknown key {unknown[0]!r} in [policy] "
                          f"(known: {', '.join(KEYS)})")
    fields: dict[str, Any] = {}
    for key, value in table.items():
        fields[key] = _PARSERS[key](value, _Where(path, key))
    return CoursePolicy(path=path, content_hash="sha256:" + hashlib.sha256(data).hexdigest(), **fields)


@dataclass(frozen=True)
class _Where:
    path: Path
    key: str

    def error(self, what: str) -> ConfigError:
        return ConfigError(f"course policy {self.path}: key {self.key!r} {what}")


def _models(value: Any, where: _Where) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise where.error(f'must be a list of model strings like ["demo", "openai:*"], not {value!r:.80}')
    return tuple(v.strip() for v in value)


def _bool(value: Any, where: _Where) -> bool:
    if not isinstance(value, bool):
        raise where.error(f"must be true or false, not {value!r:.80}")
    return value


def _budget(value: Any, where: _Where) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
        raise where.error(f"must be a number of dollars >= 0, not {value!r:.80}")
    return float(value)


def _period(value: Any, where: _Where) -> BudgetPeriod:
    try:
        return BudgetPeriod(value)
    except ValueError:
        raise where.error(f'must be "day" or "week", not {value!r:.80}') from None


def _hours(value: Any, where: _Where) -> tuple[LessonHours, ...]:
    if not isinstance(value, list):
        raise where.error(f'must be a list like ["09:00-12:00", "Mon-Fri 13:00-15:30"], not {value!r:.80}')
    out = []
    for item in value:
        m = _HOURS.match(item) if isinstance(item, str) else None
        try:
            start, end = (time(int(m[2]), int(m[3])), time(int(m[4]), int(m[5]))) if m else (None, None)
        except ValueError:
            start = end = None
        days = _days(m[1]) if m and m[1] else EVERY_DAY
        if start is None or end is None or not start < end or not days:
            raise where.error(f'has {item!r:.40}: write "HH:MM-HH:MM", the start before the end, after '
                              f'days if any ("Mon-Fri 09:00-12:00", "Tue,Thu 13:00-15:30")')
        out.append(LessonHours(start, end, days))
    return tuple(out)


def _days(text: str) -> frozenset[int]:
    """``"Mon-Fri"``, ``"Tue,Thu"``, ``"Sat"`` as weekday numbers (a range may wrap: ``"Fri-Mon"``);
    empty when a name is not a day."""
    index = {name.lower(): i for i, name in enumerate(DAY_NAMES)}
    days: set[int] = set()
    for part in text.replace(" ", "").lower().split(","):
        first, _, last = part.partition("-")
        if first not in index or (last and last not in index):
            return frozenset()
        a, b = index[first], index[last or first]
        days.update((a + i) % 7 for i in range((b - a) % 7 + 1))
    return frozenset(days)


def _day_list(days: frozenset[int]) -> str:
    """Weekday numbers as ``"Mon-Fri"`` / ``"Tue,Thu"``: runs of three or more days as ranges (a run
    over the weekend's end as ``"Sat-Mon"``)."""
    first = max(set(range(7)) - days, default=-1) + 1 if {0, 6} <= days else 0  # after the week's last day off
    runs: list[list[int]] = []
    for d in ((first + i) % 7 for i in range(7)):
        if d not in days:
            continue
        if runs and runs[-1][-1] == (d - 1) % 7:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ",".join(f"{DAY_NAMES[r[0]]}-{DAY_NAMES[r[-1]]}" if len(r) > 2 else ",".join(DAY_NAMES[d] for d in r)
                    for r in runs)


def _save_to(value: Any, where: _Where) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"must be a folder name, not {value!r:.80}")
    return (where.path.parent / Path(value).expanduser()).resolve()


def _text(value: Any, where: _Where) -> str:
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"must be a non-empty string, not {value!r:.80}")
    return value.strip()


_PARSERS = {"final": _bool, "models": _models, "run_code": _bool, "budget_usd": _budget, "budget_period": _period,
            "hours": _hours, "save_to": _save_to, "user": _text, "rules": _text}
