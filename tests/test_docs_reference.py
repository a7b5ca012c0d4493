"""The generated reference (docs/_ext/nbagent_reference.py) covers what it promises, checked in the fast
tier so a new public name, frame or ``nbagent.toml`` key is caught before the docs tier builds the site:
every public name in exactly one API group, every listed frame declared, every policy key explained."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")  # the docs dependency group (scripts/setup.sh installs it)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))
reference = importlib.import_module("nbagent_reference")

import nbagent  # noqa: E402
from nbagent.core import course_policy  # noqa: E402


def test_every_public_name_is_in_exactly_one_api_group():
    assert sorted(reference.public_groups()) == sorted(nbagent._EXPORTS), \
        "docs/_ext/nbagent_reference.py API_GROUPS is out of date"
    for dotted in {name for names in reference.API_GROUPS.values() for name in names} - set(nbagent._EXPORTS):
        module, _, attr = dotted.rpartition(".")  # the accessors' types, by their module
        assert getattr(importlib.import_module(module), attr).__doc__, dotted


def test_every_frame_of_the_columns_page_is_declared_with_documented_columns():
    for frame, (module, index, columns, _) in reference.FRAMES.items():
        declared = getattr(importlib.import_module(module), columns)
        assert declared, frame
        assert all(column.doc for column in declared), f"{frame}: a column without its meaning"
        if index:
            assert getattr(importlib.import_module(module), index).doc


def test_every_policy_key_has_its_commented_example():
    explained = reference.policy_key_examples(course_policy.__doc__ or "")
    assert set(course_policy.KEYS) <= set(explained), set(course_policy.KEYS) - set(explained)
    assert explained["budget_period"][0] == '"week"'


def test_the_magics_and_the_cli_are_read_from_their_parsers():
    from nbagent import cli
    from nbagent.extension.magics import ChatMagics

    assert {"chat", "chat_model"} <= set(ChatMagics.magics["cell"]) | set(ChatMagics.magics["line"])
    assert all(hasattr(getattr(ChatMagics, name), "parser") for name in ChatMagics.magics["line"])
    rows = reference.option_rows(ChatMagics.chat_model.parser)
    assert any("``-a NAME``, ``--agent NAME``" in row for row in rows)
    assert any("``doctor``" in line for line in reference.cli_lines(cli.parser()))


def test_the_assembled_frames_columns_are_read_off_real_frames():
    from nbagent.analysis import session_list
    from nbagent.analysis.columns import USAGE

    listed, meanings = reference.made_frame_columns("list_sessions")
    assert [name for name, _ in listed] == list(session_list.COLUMNS)
    assert meanings["models"].startswith("every model that answered")  # SessionRow's field comment
    loaded, _ = reference.made_frame_columns("load_sessions")
    names = [name for name, _ in loaded]
    assert names[:3] == ["session_id", "path", "turn"] and {c.name for c in USAGE} <= set(names)
