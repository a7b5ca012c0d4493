"""Rules without code: a markdown file added to the system prompt, and the ``tutor`` preset.

The rules in force (``find_rules``), first match wins:

1. the policy's ``rules`` key (a file relative to the policy's folder, or a preset name);
2. ``Agent(rules=...)``: a preset name or a markdown file (``False``: none) — under a policy only when
   the policy names none and no ``AGENTS.md`` of the course applies (a student cannot replace or
   remove the teacher's rules);
3. the nearest ``AGENTS.md`` from the working folder up to the policy's folder (without a policy: in
   the working folder only).

A rules file found in a folder (``AGENTS.md``, the policy's ``rules``) must resolve inside that folder:
a link leading out of it (to ``~/.env``, a key file) is a ``ConfigError``, never read into the prompt.

Presets ship in ``nbagent/core/presets/`` (``tutor``: hints and questions instead of the solution).
"""

from __future__ import annotations

import os
from pathlib import Path

from .course_policy import CoursePolicy
from .chat_session import read_small_file
from .errors import ConfigError, NbagentError
from .turn_policy import Rules

RULES_FILE = "AGENTS.md"
PRESETS_FOLDER = Path(__file__).parent / "presets"
PRESETS = ("tutor",)
MAX_RULES_BYTES = 256 * 1024  # rules are a page or two; a larger file is refused unread


def preset_rules(name: str) -> Rules:
    """A shipped preset by name (a ``ConfigError`` for another name)."""
    if name not in PRESETS:
        raise ConfigError(f"no rules preset {name!r} (presets: {', '.join(PRESETS)})")
    return Rules(name, name, (PRESETS_FOLDER / f"{name}.md").read_text(encoding="utf-8").strip())


def file_rules(path: Path, what: str, inside: Path | None = None) -> Rules:
    """The rules in a markdown file; ``what`` says where it was named, for the error. With ``inside``,
    a file that resolves outside that folder (a link to ``~/.env``) is refused, never read. Opened
    without blocking and read up to ``MAX_RULES_BYTES`` (a FIFO or a device is refused)."""
    real = path.resolve()
    if inside is not None and not real.is_relative_to(inside.resolve()):
        raise ConfigError(f"{what}: the rules file {path} leads outside {inside} (to {real}); rules files of a "
                          "course are read only inside the folder they are found in")
    try:
        data, _ = read_small_file(real, MAX_RULES_BYTES)
        text = data.decode("utf-8").strip()
    except (OSError, UnicodeDecodeError, NbagentError) as exc:
        raise ConfigError(f"{what}: the rules file {path} cannot be read ({exc})") from None
    return Rules(path.name, str(path), text)


def named_rules(value: str | os.PathLike, folder: Path, what: str, inside: Path | None = None) -> Rules:
    """A preset name, or a file relative to ``folder`` (kept ``inside`` a folder when given)."""
    if isinstance(value, str) and value in PRESETS:
        return preset_rules(value)
    return file_rules((folder / Path(value).expanduser()).resolve(), what, inside)


def find_rules(policy: CoursePolicy | None, choice: str | os.PathLike | bool | None = None,
               start: Path | None = None) -> Rules | None:
    """The rules in force (see the module docstring); None: no rules."""
    here = (Path.cwd() if start is None else Path(start)).expanduser().resolve()
    if policy is not None and policy.rules is not None:
        return named_rules(policy.rules, policy.folder, f"course policy {policy.path}: key 'rules'", policy.folder)
    found = nearest_agents_md(here, policy.folder if policy is not None else here)
    if policy is not None and found is not None:
        return file_rules(found, f"course policy {policy.path}", found.parent)
    if choice is False:
        return None
    if choice is not None and choice is not True:
        return named_rules(choice, here, "Agent(rules=...)")  # the student's own file: anywhere
    return file_rules(found, RULES_FILE, found.parent) if found is not None else None


def nearest_agents_md(here: Path, top: Path) -> Path | None:
    """The first ``AGENTS.md`` from ``here`` up to ``top`` (only ``here`` when ``top`` is not above it)."""
    folders = [here]
    if top != here and top in here.parents:
        folders += [p for p in here.parents if p == top or top in p.parents]
    return next((f / RULES_FILE for f in folders if (f / RULES_FILE).is_file()), None)
