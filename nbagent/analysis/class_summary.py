"""``nbagent.class_summary``: a shared ``save_to`` folder as one row per student.

Students chat with ``Agent(save_to=folder, user="ana")``; each saved session records its ``user``.
:class:`ClassFolder` keeps the heads of the folder's session files (settings and turn ledger, read by
``read_session_head`` as ``list_sessions`` does) and re-reads only the files whose modification time
or size changed since its last ``scan`` (the live ``class_view`` polls it). A file that cannot be read
(half-written, corrupt, not a session) is skipped and named in ``skipped``; it never stops the summary.

The columns are declared once, in ``CLASS_COLUMNS`` (``analysis.columns.Column``): the DataFrame and
the widget's JSON rows come from the same declarations.

Who wrote a session: on POSIX a user name belongs to the login (file owner uid) that wrote its first
session file; a file claiming that user written by another login (forged in a shared folder) is left
out of the row and named in ``skipped``. ``spent_since(owner=uid)`` counts only that login's files.

A student "asked for help" when the latest prompt of their latest session matches ``HELP_PATTERN``:
it starts with ``/help`` or 🙋, or names ``@teacher`` anywhere (e.g. "@teacher my plot is empty").
The prompt still goes to the model; the flag clears with the student's next prompt.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from datetime import datetime
from typing import Any
from collections.abc import Mapping

from ..core.course_policy import BudgetPeriod, find_policy
from ..core.errors import ConfigError, NbagentError
from ..core.session_file import SessionHead, gc_paused, read_session_head
from ..core.session_journal import journal_path
from ..core.steps import TurnStatus
from .columns import Column, Kind
from .frames import require_pandas
from .session_index import FileStat, folder_stats
from .tables import Table
from .session_list import title_of, turn_costs
from .sessions import expand_paths

HELP_PATTERN = r"^\s*(?:/help\b|\U0001F64B)|@teacher\b"
__all__ = ["CLASS_COLUMNS", "HELP_PATTERN", "ClassFolder", "Student", "class_summary", "course_budget",
           "with_course_budget"]


@dataclass
class Student:
    """One row of ``class_summary``: what one user's saved sessions add up to."""

    user: str
    sessions: int = 0
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    period_cost_usd: float = 0.0
    last_active: float = math.nan
    errors_in_a_row: int = 0
    over_budget: bool = False
    asked_for_help: bool = False
    last_prompt: str = ""
    model: str = ""
    latest_session: str = ""


def _attr(name: str) -> Any:
    return lambda table: [getattr(o, name) for o in table.objs]


CLASS_COLUMNS = (
    Column("user", Kind.TEXT, _attr("user"), "Agent(user=...) of the sessions (\"\" when not recorded)"),
    Column("sessions", Kind.INT, _attr("sessions"), "readable session files"),
    Column("turns", Kind.INT, _attr("turns"), "turns in all of them"),
    Column("input_tokens", Kind.INT, _attr("input_tokens"), "prompt tokens, all turns"),
    Column("output_tokens", Kind.INT, _attr("output_tokens"), "answer tokens, all turns"),
    Column("tokens", Kind.INT, _attr("tokens"), "every token counted, all turns"),
    Column("cost_usd", Kind.FLOAT, _attr("cost_usd"), "dollars, all turns (unknown prices count 0)"),
    Column("period_cost_usd", Kind.FLOAT, _attr("period_cost_usd"), "dollars of turns started this period"),
    Column("last_active", Kind.TIME, _attr("last_active"), "the latest save or turn end"),
    Column("errors_in_a_row", Kind.INT, _attr("errors_in_a_row"), "failed turns ending the latest session"),
    Column("over_budget", Kind.BOOL, _attr("over_budget"), "spent this period: period_cost_usd >= budget_usd (> 0)"),
    Column("asked_for_help", Kind.BOOL, _attr("asked_for_help"), "the latest prompt matches the help pattern"),
    Column("last_prompt", Kind.TEXT, _attr("last_prompt"), "the latest prompt, trimmed"),
    Column("model", Kind.TEXT, _attr("model"), "the model of the latest turn"),
    Column("latest_session", Kind.TEXT, _attr("latest_session"), "path of the latest session file"),
)


def as_period(period: str | BudgetPeriod) -> BudgetPeriod:
    """``"day"`` / ``"week"`` as a :class:`BudgetPeriod` (a ``config`` error for anything else)."""
    try:
        return BudgetPeriod(period)
    except ValueError:
        raise ConfigError(f"period must be one of {', '.join(p.value for p in BudgetPeriod)}, not {period!r}") from None


def with_course_budget(folder: Any, budget_usd: float | None,
                       period: str | BudgetPeriod | None) -> tuple[float | None, BudgetPeriod]:
    """``budget_usd`` and ``period`` as given, else the course policy's (else no budget, by day)."""
    if budget_usd is None:
        budget_usd, course_period = course_budget(folder)
        period = period if period is not None else course_period
    return budget_usd, as_period(period if period is not None else BudgetPeriod.DAY)


def course_budget(folder: str | os.PathLike | Any) -> tuple[float | None, BudgetPeriod | None]:
    """The budget and period of the course policy (``nbagent.toml``) over a sessions folder, found by
    walking up from it; ``(None, None)`` without one, or for a glob or a list of files."""
    if not isinstance(folder, (str, os.PathLike)) or not os.path.isdir(os.path.expanduser(os.fspath(folder))):
        return None, None
    policy = find_policy(Path(os.path.expanduser(os.fspath(folder))))
    if policy is None or policy.budget_usd is None:
        return None, None
    return policy.budget_usd, policy.budget_period


@dataclass
class _File:
    stamp: FileStat  # the file's and its journal's (mtime_ns, size) when read
    head: SessionHead | None = None
    costs: list[float] = field(default_factory=list)
    error: str = ""
    owner: int = -1  # the file's owner uid (-1: unknown)
    born: float = 0.0  # its st_ctime: a user cannot set it back


OWNERS = hasattr(os, "geteuid")  # POSIX: files have owners (Windows: no owner check)


def _name_owner(files: list[_File]) -> int:
    """The login a user name belongs to: the owner of its first session file (by ``st_ctime``, which
    no user can set back)."""
    return min(files, key=lambda f: f.born).owner


def _last_active(head: SessionHead) -> float:
    times = [t for t in (head.saved_at,) if t is not None]
    if head.turns:
        last = head.turns[-1]
        times.append(last.finished_at if last.finished_at is not None else last.started_at)
    return max(times) if times else math.nan


def _errors_in_a_row(head: SessionHead) -> int:
    n = 0
    for i, rec in enumerate(reversed(head.turns)):
        if rec.status is TurnStatus.ERROR:
            n += 1
        elif not (i == 0 and rec.status is TurnStatus.RUNNING):  # a turn still going does not break the run
            break
    return n


class ClassFolder:
    """The session files of a folder (or glob), read incrementally, summed per student."""

    def __init__(self, folder: str | os.PathLike, *, budget_usd: float | None = None,
                 period: str | BudgetPeriod = BudgetPeriod.DAY, pricing: Mapping | None = None,
                 help_pattern: str = HELP_PATTERN) -> None:
        if budget_usd is not None and (isinstance(budget_usd, bool) or not isinstance(budget_usd, (int, float))
                                       or not budget_usd >= 0):
            raise ConfigError(f"budget_usd must be a number >= 0, not {budget_usd!r}")
        try:
            self.help = re.compile(help_pattern, re.IGNORECASE)
        except re.error as exc:
            raise ConfigError(f"help_pattern is not a regular expression: {exc}") from None
        self.folder = folder
        self.budget_usd = None if budget_usd is None else float(budget_usd)
        self.period = as_period(period)
        self.pricing = pricing
        self.files: dict[str, _File] = {}
        self.reads = 0  # files read so far (each changed file once per scan)
        self._version = 0  # bumped by a scan that changed something
        self._students: tuple[tuple[int, float], list[Student]] | None = None  # (version, period start) -> rows

    def set_budget(self, budget_usd: float | None, period: BudgetPeriod) -> bool:
        """Another budget or period (a teacher's edit of the course policy); whether it changed."""
        if (budget_usd, period) == (self.budget_usd, self.period):
            return False
        self.budget_usd, self.period, self._students = budget_usd, period, None
        return True

    @property
    def skipped(self) -> dict[str, str]:
        """The files that could not be read, or are not counted (another login's file claiming a
        user), with why."""
        out = {p: f.error for p, f in self.files.items() if f.error}
        for user, files in self._by_user().items():
            owner = _name_owner(files)
            for f in files:
                if f.owner != owner:
                    out[os.fspath(f.head.path) if f.head else ""] = (
                        f"not counted: it says user {user!r} but was written by uid {f.owner}, and {user!r}'s "
                        f"first session by uid {owner} (a session forged in a shared folder?)")
        return out

    def _by_user(self) -> dict[str, list[_File]]:
        by_user: dict[str, list[_File]] = {}
        for f in self.files.values():
            if f.head is not None:
                by_user.setdefault(f.head.user, []).append(f)
        return by_user

    def scan(self) -> bool:
        """Read the files that are new or changed since the last scan; forget removed ones.
        Returns whether anything changed."""
        seen = self._stamps()
        changed = [p for p, stamp in seen.items() if p not in self.files or self.files[p].stamp != stamp]
        gone = [p for p in self.files if p not in seen]
        for p in gone:
            del self.files[p]
        with gc_paused():
            for p in changed:
                self.files[p] = self._read(p, seen[p])
        if changed or gone:
            self._version += 1
        return bool(changed or gone)

    def _stamps(self) -> dict[str, FileStat]:
        """The (mtime_ns, size) of each session file and of its autosave journal (a turn saved by
        autosave changes only the journal): a folder's by one ``scandir`` (a poll of a thousand files
        costs milliseconds), anything else as ``expand_paths`` names it."""
        folder = self.folder
        if isinstance(folder, (str, os.PathLike)) and os.path.isdir(os.path.expanduser(os.fspath(folder))):
            top = os.path.normpath(os.path.expanduser(os.fspath(folder)))
            return {os.path.join(top, name): stat for name, stat in folder_stats(Path(top)).items()}
        seen: dict[str, FileStat] = {}
        for path in expand_paths(folder):
            try:
                st = os.stat(path)
            except OSError:
                continue
            try:
                jt = os.stat(journal_path(path))
                journal = (jt.st_mtime_ns, jt.st_size)
            except OSError:
                journal = (0, 0)
            seen[os.fspath(path)] = (st.st_mtime_ns, st.st_size, *journal)
        return seen

    def _read(self, path: str, stamp: FileStat) -> _File:
        self.reads += 1
        try:
            st = os.lstat(path)  # the owner of a link is who planted it, not its target's
            head = read_session_head(path)
            (costs,) = turn_costs([head], self.pricing)
        except (NbagentError, OSError, ValueError) as exc:  # half-written, corrupt, foreign: skipped
            return _File(stamp, error=str(exc) or type(exc).__name__)
        return _File(stamp, head, list(costs), owner=st.st_uid if OWNERS else -1, born=st.st_ctime)

    def students(self, now: float | None = None) -> list[Student]:
        """One ``Student`` per user, sorted by user name."""
        start = self.period.start(datetime.fromtimestamp(time.time() if now is None else now)).timestamp()
        key = (self._version, start)
        if self._students is not None and self._students[0] == key:  # nothing changed: the same sums
            return list(self._students[1])
        by_user = self._by_user()
        out = []
        for user in sorted(by_user):
            owner = _name_owner(by_user[user])  # a file another login wrote claiming this user is left out
            out.append(self._student(user, [f for f in by_user[user] if f.owner == owner], start))
        self._students = (key, out)
        return list(out)

    def spent_since(self, user: str, since: float, exclude: str = "", owner: int = -1) -> float:
        """Dollars ``user``'s sessions (but the conversation ``exclude``) spent in turns started from
        ``since`` (epoch seconds), as of the last ``scan``; with ``owner`` (a uid), only the sessions
        that login wrote."""
        total = 0.0
        for f in self.files.values():
            head = f.head
            if head is None or head.user != user or (exclude and head.conversation_id == exclude):
                continue
            if owner >= 0 and f.owner >= 0 and f.owner != owner:  # another login's file claiming this user
                continue
            total += sum(cost for rec, cost in zip(head.turns, f.costs) if rec.started_at >= since)
        return total

    def _student(self, user: str, files: list[_File], start: float) -> Student:
        s = Student(user, sessions=len(files))
        latest: SessionHead | None = None
        for f in files:
            head = f.head
            assert head is not None
            s.turns += len(head.turns)
            for rec, cost in zip(head.turns, f.costs):
                s.input_tokens += rec.usage.prompt_token_count
                s.output_tokens += rec.usage.candidates_token_count
                s.tokens += rec.usage.total_token_count
                s.cost_usd += cost
                if rec.started_at >= start:
                    s.period_cost_usd += cost
            active = _last_active(head)
            if latest is None or active > s.last_active or math.isnan(s.last_active):
                latest, s.last_active = head, active
        if latest is not None:
            s.latest_session = os.fspath(latest.path)
            s.errors_in_a_row = _errors_in_a_row(latest)
            if latest.turns:
                prompt = latest.turns[-1].prompt
                s.last_prompt = title_of(prompt)
                s.asked_for_help = bool(self.help.search(prompt))
                last = latest.turns[-1]
                s.model = f"{last.provider}:{last.model}" if last.provider and last.model else last.model
        s.over_budget = self.budget_usd is not None and s.period_cost_usd > 0 and s.period_cost_usd >= self.budget_usd
        return s

    def frame(self, now: float | None = None) -> Any:
        """The summary as a DataFrame (see ``class_summary``)."""
        pd = require_pandas()
        table = Table(self.students(now))
        df = pd.DataFrame({c.name: c.to_pandas(c.extract(table)) for c in CLASS_COLUMNS})
        df.attrs["skipped"] = self.skipped
        return df

    def rows(self, now: float | None = None) -> list[dict]:
        """The summary as JSON rows (timestamps as ISO 8601 UTC, NaN as None), for the widget."""
        table = Table(self.students(now))
        names = [c.name for c in CLASS_COLUMNS]
        values = [c.to_json(c.extract(table)) for c in CLASS_COLUMNS]
        return [dict(zip(names, row)) for row in zip(*values)]


def class_summary(folder: str | os.PathLike, *, budget_usd: float | None = None, period: str | None = None,
                  pricing: Mapping | None = None, help_pattern: str = HELP_PATTERN, now: float | None = None) -> Any:
    """One row per student (the ``user`` their saved sessions record) of a shared ``save_to`` folder.

    ``folder``: a folder (its ``*.json``), a glob (``"class/**/*.json"``) or a list of those.
    Columns: user, sessions, turns, input_tokens, output_tokens, tokens, cost_usd, period_cost_usd
    (turns started since the period began: local midnight for ``period="day"``, Monday's for
    ``"week"``), last_active (UTC), errors_in_a_row (failed turns ending the student's latest
    session), over_budget (``period_cost_usd >= budget_usd``, something spent; False without a budget),
    asked_for_help (the latest prompt matches ``help_pattern``, by default ``HELP_PATTERN``: it starts
    with ``/help`` or 🙋 or names ``@teacher``), last_prompt, model, latest_session (its path).
    Without ``budget_usd``, the budget and period come from the course policy (``nbagent.toml``) found
    by walking up from ``folder``, as the students' agents obey it; ``period`` defaults to ``"day"``.
    ``pricing`` overrides prices as in ``list_sessions``; ``now`` (epoch seconds) fixes the clock.
    Files that cannot be read are left out and named, with why, in ``df.attrs["skipped"]``.
    """
    budget_usd, period = with_course_budget(folder, budget_usd, period)
    summary = ClassFolder(folder, budget_usd=budget_usd, period=period, pricing=pricing, help_pattern=help_pattern)
    summary.scan()
    return summary.frame(now)
