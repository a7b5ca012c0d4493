"""Every public name of nbagent, and every public method and property of a public class, has a docstring:
the API reference (docs/reference/api.md) is made from them, so a name without one would show there bare."""

from __future__ import annotations

import builtins
import doctest
import inspect

import nbagent


def own_members(cls: type) -> dict[str, object]:
    """The public methods and properties ``cls`` has from nbagent's classes (not ``object``'s, ``Enum``'s or
    ``Exception``'s), as ``vars`` holds them (a property, a classmethod...)."""
    members: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("nbagent"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (property, classmethod, staticmethod)) or inspect.isfunction(value):
                members[name] = value
    return members


def docstring(cls: type, name: str) -> str:
    """The member's docstring, or the one of the method it overrides (as the reference shows it)."""
    return (inspect.getdoc(getattr(cls, name)) or "").strip()


def test_every_public_name_has_a_docstring_of_its_own():
    missing = []
    for name in sorted(nbagent._EXPORTS):
        obj = getattr(nbagent, name)
        text = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__
        if not (text or "").strip():
            missing.append(f"nbagent.{name}")
    assert not missing, f"public names without a docstring: {missing}"


def test_every_public_method_and_property_of_a_public_class_has_a_docstring():
    missing = []
    for name in sorted(nbagent._EXPORTS):
        obj = getattr(nbagent, name)
        if not inspect.isclass(obj):
            continue
        for member in own_members(obj):
            if not docstring(obj, member):
                missing.append(f"nbagent.{name}.{member}")
    assert not missing, f"{len(missing)} public members without a docstring: {missing}"


def test_the_check_sees_a_missing_docstring():
    class Bare:
        __module__ = "nbagent.example"

        def undocumented(self):
            pass

        @property
        def documented(self):
            """Here."""

    assert {m for m in own_members(Bare) if not docstring(Bare, m)} == {"undocumented"}


def documented_examples() -> list[tuple[str, str]]:
    """(name, docstring) of each public name and member whose docstring has a ``>>>`` example."""
    found = []
    for name in sorted(nbagent._EXPORTS):
        obj = getattr(nbagent, name)
        texts = [(f"nbagent.{name}", inspect.getdoc(obj) or "")]
        if inspect.isclass(obj):
            texts += [(f"nbagent.{name}.{m}", docstring(obj, m)) for m in own_members(obj)]
        found += [(where, text) for where, text in texts if ">>>" in text]
    return found


def test_the_docstring_examples_run_and_show_what_they_say():
    examples = documented_examples()
    assert "nbagent.Agent.ask" in dict(examples)
    names = {name: getattr(nbagent, name) for name in nbagent.__all__}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    had_underscore = "_" in builtins.__dict__
    try:
        for where, text in examples:
            test = doctest.DocTestParser().get_doctest(text, {**names, "nbagent": nbagent}, where, None, 0)
            runner.run(test, clear_globs=True)
    finally:  # Python's displayhook leaves the last result in builtins._, where IPython then never sets `_`
        if not had_underscore:
            builtins.__dict__.pop("_", None)
    assert runner.failures == 0, f"{runner.failures} docstring examples failed (their output is above)"
