"""Agent(...) arguments of the wrong type are a ConfigError naming the argument, at once (#48.10).

A string where a number belongs (``budget_usd="5"``, ``temperature="0.2"``) used to be taken and
fail later, or go to the provider as it was; a bool is no count.
"""

from __future__ import annotations

import math

import pytest

from nbagent import Agent, ConfigError


@pytest.mark.parametrize("name,value", [
    ("budget_usd", "5"), ("temperature", "0.2"), ("temperature", math.nan), ("max_tokens", "10"),
    ("max_tokens", True), ("max_tokens", 1.5), ("max_tool_iterations", "3"), ("max_tool_iterations", None),
    ("tool_timeout", "30"), ("compaction_budget", "1000"), ("include_reasoning", "no"),
    ("auto_execute_tools", 1), ("system", 42),
])
def test_a_wrong_typed_setting_is_a_config_error_naming_it(name, value):
    with pytest.raises(ConfigError) as err:
        Agent(model="demo", **{name: value})
    assert err.value.kind == "config" and name in str(err.value)


def test_right_types_pass_and_ints_count_as_numbers():
    agent = Agent(model="demo", budget_usd=5, temperature=0, max_tokens=100, max_tool_iterations=3,
                  tool_timeout=30, compaction_budget=None)
    assert agent.conversation.budget.usd == 5.0


def test_numpy_numbers_are_taken_as_python_numbers(tmp_path):
    np = pytest.importorskip("numpy")
    agent = Agent(model="demo", max_tokens=np.int64(100), temperature=np.float32(0.5), budget_usd=np.float64(2),
                  save_to=tmp_path)
    assert type(agent.settings().max_tokens) is int and type(agent.settings().temperature) is float
    agent.ask("hi")  # and the session saves (JSON has no numpy numbers)
    assert agent.conversation.budget.usd == 2.0 and len(list(tmp_path.glob("*.json"))) == 1
