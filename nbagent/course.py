"""How ``Agent`` obeys a course policy (``nbagent.toml``, core/course_policy.py): each argument
checked or narrowed, never loosened. :class:`AgentCourse` (``agent.course``) is the
:class:`~nbagent.core.turn_policy.TurnPolicy` the agent and its conversations consult: the
conversation, its tool loop and the widget know only that seam.

What is enforced where, all in the kernel:

- ``models``: ``Agent(model=...)`` and ``set_model`` refuse another model with a ``ConfigError`` naming
  the policy file; with no model given, the first allowed model is taken when the default is not allowed.
  A Provider object passes only when its class is the one nbagent makes for its name (a subclass or
  another class calling itself ``"demo"`` is refused).
- ``run_code = false``: tools that run code or edit cells (``run_python``, ``run_cell``, ``edit_cell``,
  ``insert_cell``: ``Tool.runs_code``) are left out, from ``notebook=True`` and from ``tools=`` alike,
  and the loop refuses such a tool added later (``%chat_tools``) as a tool error.
- ``budget_usd``: the conversation's own budget is at most the policy's, and the period's budget is
  checked before every turn (analysis/course_budget.py).
- ``save_to``: the policy's folder wins over ``Agent(save_to=...)``; ``user`` is not an argument under a
  policy: ``$JUPYTERHUB_USER``, else the policy's ``user``, else the login name (``course_user``).
- ``rules``: see core/course_rules.py.

A student can still edit or delete the files, change the objects from Python, or start Python
without the policy: this keeps honest students inside the course's limits, it is not a sandbox.
"""

from __future__ import annotations

import getpass
import importlib
import os
import warnings
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

from typing import TYPE_CHECKING

from .core.course_policy import CoursePolicy, find_policy
from .core.course_rules import PRESETS, find_rules
from .core.errors import ConfigError, NbagentError
from .core.ledger import TurnRecord
from .core.turn_policy import PolicySource, Rules, TurnPolicy
from .providers.base import Provider

PERSON_VARIABLE = "JUPYTERHUB_USER"  # JupyterHub names the person of each single-user server

if TYPE_CHECKING:
    from .analysis.course_budget import CourseLimits


class AgentCourse(TurnPolicy):
    """``agent.course``: what holds an agent to a course, and the :class:`TurnPolicy` its
    conversations obey: the ``policy`` (``nbagent.toml`` with its hours and budget as the file holds
    them now; None: none found), its ``limits`` for this user (hours and period budget,
    analysis/course_budget.py) and the ``rules`` added to the system prompt (core/course_rules.py;
    None: none)."""

    name = "Course policy"

    def __init__(self, policy: CoursePolicy | None, limits: CourseLimits | None, rules: Rules | None) -> None:
        self._policy, self.limits, self.rules = policy, limits, rules

    @classmethod
    def find(cls, user: str, rules: str | os.PathLike | bool | None) -> AgentCourse:
        """The course in force for an ``Agent(user=..., rules=...)`` made now: the policy found from the
        working folder (core/course_policy.py), its limits for the person who chats and the rules."""
        policy = find_policy()
        limits = None
        if policy is not None:  # imported only under a course policy: it reads the class's sessions
            from .analysis.course_budget import CourseLimits

            limits = CourseLimits(policy, course_user(policy, user))
        return cls(policy, limits, find_rules(policy, rules))

    @property
    def policy(self) -> CoursePolicy | None:
        return self._policy if self.limits is None else self.limits.policy

    def __repr__(self) -> str:
        policy = self.policy
        return (f"AgentCourse(policy={str(policy.path) if policy else None!r}, "
                f"rules={self.rules.label if self.rules else None!r})")

    # --- the TurnPolicy a conversation consults ----------------------------------------------

    def refusal(self, turns: Sequence[TurnRecord], conversation_id: str,
                expected_usd: Callable[[], float]) -> NbagentError | None:
        """Closed, or over the period's budget with the next request's expected cost."""
        if self.limits is None:
            return None
        expected = expected_usd() if self.limits.policy.budget_usd is not None else 0.0
        return self.limits.refusal(turns, conversation_id, expected)

    def stop_reason(self, turns: Sequence[TurnRecord], conversation_id: str) -> str:
        return self.limits.stop_reason(turns, conversation_id) if self.limits is not None else ""

    def tools(self, tools: Any) -> Any:
        """``tools`` without those that run code or edit cells when the policy says ``run_code = false``."""
        policy = self._policy
        if policy is None or policy.run_code:
            return tools
        from .loop.tools import to_tools

        tools = list(to_tools(tools).values())
        dropped = [t.name for t in tools if getattr(t, "runs_code", False)]
        if dropped:
            warnings.warn(f"nbagent: the course policy {policy.path} sets run_code = false: "
                          f"{', '.join(dropped)} left out", RuntimeWarning, stacklevel=3)
        return [t for t in tools if not getattr(t, "runs_code", False)]

    def tool_refusal(self, tool: Any) -> str:
        """What the model is told when it calls a code-running tool under ``run_code = false``."""
        policy = self._policy
        if policy is None or policy.run_code or not getattr(tool, "runs_code", False):
            return ""
        return f"Running code and editing cells is turned off by the course policy ({policy.path.name})."

    def model(self, model: Any, default: Callable[[], str]) -> Any:
        return course_model(self._policy, model, default)

    def budget_usd(self, given: float | None) -> float | None:
        """The conversation's own budget: never above the policy's."""
        policy = self._policy
        if policy is None or policy.budget_usd is None:
            return given
        return policy.budget_usd if given is None else min(given, policy.budget_usd)

    def save_to(self, given: str | os.PathLike | None) -> Path | None:
        """Where sessions are saved: the policy's folder wins (with a warning when another was given)."""
        policy, chosen = self._policy, super().save_to(given)
        if policy is None or policy.save_to is None:
            return chosen
        if chosen is not None and chosen.resolve() != policy.save_to:
            warnings.warn(f"nbagent: the course policy {policy.path} saves sessions to {policy.save_to}, "
                          f"not {chosen}", RuntimeWarning, stacklevel=3)
        return policy.save_to

    def user(self, given: str) -> str:
        """The person the limits count (``course_user``), else ``given``."""
        return self.limits.user if self.limits is not None else given

    @property
    def source(self) -> PolicySource | None:
        policy = self.policy
        return None if policy is None else PolicySource(str(policy.path), policy.content_hash)


def saved_rules(source: str | None) -> str | None:
    """The rules a saved session ran with (its ``rules`` setting), while they exist: a preset, or a
    file still there; else None."""
    return source if source and (source in PRESETS or Path(source).is_file()) else None


def model_allowed(policy: CoursePolicy, model: str | Provider) -> bool:
    """Whether the policy allows ``model`` as written, or as ``provider:name`` once its provider is known."""
    if isinstance(model, Provider):  # a name is only an attribute: the class must be the one registered for it
        named = policy.allows_model(f"{model.name}:{model.model}") or policy.allows_model(model.name)
        return named and type(model) is registered_class(model.name)
    text = model.strip()
    if policy.allows_model(text):
        return True
    from . import providers

    prefix, _, name = text.partition(":")
    if providers.lookup(prefix) is None:
        guessed = providers.guess_prefix(text)
        return guessed is not None and policy.allows_model(f"{guessed}:{text}")
    return policy.allows_model(f"{prefix.lower()}:{name}")


def registered_class(prefix: str) -> type | None:
    """The Provider class nbagent makes for ``prefix:…`` (None: unknown, or made by a function)."""
    from . import providers

    reg = providers.lookup(str(prefix))
    if reg is None:
        return None
    factory = reg.factory
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except Exception:  # noqa: BLE001 - a plugin that cannot load: nothing to compare with
            return None
    return factory if isinstance(factory, type) else None


def check_model(policy: CoursePolicy | None, model: str | Provider) -> None:
    """A ``ConfigError`` naming the policy file when it does not allow ``model``."""
    if policy is None or policy.models is None or model_allowed(policy, model):
        return
    shown = f"{model.name}:{model.model}" if isinstance(model, Provider) else model
    raise ConfigError(f"model {shown!r} is not allowed by the course policy {policy.path} "
                      f"(allowed: {', '.join(policy.models) or 'none'})")


def course_model(policy: CoursePolicy | None, model: str | Provider | None,
                 default: Callable[[], str]) -> str | Provider:
    """The model to use: ``model`` when allowed; with none given, ``default()``, or the first model the
    policy names when that one is not allowed; else a ``ConfigError``."""
    if model is None:
        model = default()
        if policy is not None and policy.models and not model_allowed(policy, model):
            first = next((m for m in policy.models if not m.endswith("*")), None)
            if first is not None:
                return first
    check_model(policy, model)
    return model


def course_user(policy: CoursePolicy | None, user: str) -> str:
    """Who chats. Without a policy: ``user``. Under one, the person, not an argument (their budget is
    counted by this name): ``$JUPYTERHUB_USER``, else the policy's ``user``, else the login name; a
    ``user`` given that differs is replaced, with a warning (``user`` only when none of those is known)."""
    if policy is None:
        return user
    person = os.environ.get(PERSON_VARIABLE, "").strip() or policy.user or login_name()
    if not person:
        return user
    if user and user != person:
        warnings.warn(f"nbagent: under the course policy {policy.path} you chat as {person!r}, not {user!r} "
                      f"(a course budget is counted per person: the name is ${PERSON_VARIABLE}, the policy's "
                      "user, or the login name)", RuntimeWarning, stacklevel=4)
    return person


def login_name() -> str:
    """The login name ("" when there is none, as in some containers)."""
    try:
        return getpass.getuser()
    except Exception:  # no login name (some containers)
        return ""


def policy_report(course: AgentCourse | None = None, turns: Sequence[TurnRecord] = (),
                  conversation_id: str = "") -> str:
    """What ``%chat_policy`` prints of an agent's ``course`` (its live conversation's ``turns`` and
    ``conversation_id`` counted), else of the course found from the working folder now."""
    course = AgentCourse.find("", None) if course is None else course
    policy = course.policy
    if policy is None or course.limits is None:
        return ("no course policy: no nbagent.toml here or above, and $NBAGENT_CONFIG is not set"
                + (f"\nrules: {course.rules.source}" if course.rules is not None else ""))
    return policy_summary(policy, course.limits.status(turns, conversation_id), course.rules)


def policy_summary(policy: CoursePolicy, status: Any, rules: Any) -> str:
    """What ``%chat_policy`` prints: the file, models, run_code, budget left and its reset, hours, rules."""
    from .analysis.course_budget import when
    from .analysis.estimate import usd

    lines = [f"course policy: {policy.path}  ({policy.content_hash[:19]}…)",
             f"models: {', '.join(policy.models) if policy.models is not None else 'any'}",
             f"run_code: {'yes' if policy.run_code else 'no (run_python and cell edits are off)'}"]
    if policy.budget_usd is None:
        lines.append("budget: none")
    else:
        lines.append(f"budget: {usd(status.left_usd)} left of {usd(policy.budget_usd)} this "
                     f"{policy.budget_period.value} (spent {usd(status.spent_usd)}); starts afresh at "
                     f"{when(status.next_reset)}")
    if policy.hours:
        state = "open now" if status.open else f"closed, opens at {when(status.next_opening)}"
        lines.append(f"hours: {', '.join(str(h) for h in policy.hours)} ({state})")
    else:
        lines.append("hours: any time")
    lines.append(f"saved to: {policy.save_to or 'not set'}")
    lines.append(f"rules: {rules.source if rules is not None else 'none'}")
    return "\n".join(lines)
