"""Model strings resolve through the provider registry: built-ins, register(), entry points."""

from __future__ import annotations

import sys
import textwrap

import pytest

from nbagent import Agent, NbagentError, providers
from nbagent.providers.demo import DemoProvider


class EchoProvider(DemoProvider):
    """A plugin provider: the demo model under another name, recording how it was built."""

    name = "echo"

    def __init__(self, model: str = "echo-1", *, api_key: str | None = None, base_url: str | None = None,
                 **options):
        super().__init__(model, api_key=api_key, base_url=base_url)
        self.built_with = {"model": model, "api_key": api_key, "base_url": base_url, **options}


@pytest.fixture
def clean_registry():
    yield
    for prefix in ("echo", "plugged"):
        providers.unregister(prefix)


def test_builtin_prefixes_share_one_constructor_signature():
    for prefix in ("openai", "anthropic", "gemini", "demo"):
        provider = providers.create(prefix, "", api_key="k-123", base_url="http://127.0.0.1:9")
        assert provider.model == providers.lookup(prefix).default_model
        assert "k-123" not in repr(provider)


def test_register_a_prefix(clean_registry):
    providers.register("echo", EchoProvider, default_model="echo-1")
    agent = Agent(model="echo:big", api_key="secret", temperature=None)
    assert agent.model == "echo:big"
    assert agent.provider.built_with == {"model": "big", "api_key": "secret", "base_url": None}
    assert "Paris" in agent.ask("What is the capital of France?").text or agent.conversation.turn_count == 1
    assert Agent(model="echo").provider.model == "echo-1"
    with pytest.raises(NbagentError) as err:
        providers.register("bad:prefix", EchoProvider)
    assert err.value.kind == "config"


def test_unknown_prefix_names_the_known_ones():
    with pytest.raises(NbagentError) as err:
        Agent(model="nosuch:model")
    assert err.value.kind == "config" and "openai" in str(err.value) and "claude" not in str(err.value)


def test_a_plugin_package_adds_a_provider_through_its_entry_point(tmp_path, monkeypatch, clean_registry):
    pkg = tmp_path / "echo_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        from nbagent.providers.demo import DemoProvider

        class PluginProvider(DemoProvider):
            name = "plugged"
    """))
    dist = tmp_path / "echo_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[nbagent.providers]\nplugged = echo_plugin:PluginProvider\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    providers.refresh()
    agent = Agent(model="plugged:tiny")
    assert type(agent.provider).__name__ == "PluginProvider" and agent.provider.model == "tiny"
    assert agent.ask("hello").text
    sys.modules.pop("echo_plugin", None)
