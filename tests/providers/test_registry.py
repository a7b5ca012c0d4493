"""Model strings resolve through the provider registry: built-ins, register(), entry points."""

from __future__ import annotations

import sys
import textwrap
import traceback

import pytest

from nbagent import Agent, NbagentError, providers
from nbagent.core.errors import ConfigError
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


def plugin_package(folder, module: str, source: str, entry_points: bytes, dist: str = "") -> None:
    """A plugin installed the way pip leaves one: a module and a dist-info with entry_points.txt."""
    (folder / f"{module}.py").write_text(textwrap.dedent(source))
    info = folder / f"{dist or module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist or module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_bytes(entry_points)


KEY = "sk-plugin-" + "7" * 24


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    monkeypatch.undo()  # off sys.path before reading the entry points again
    for prefix in ("raising", "broken", "notaprovider", "works", "exiting", "quitting"):
        providers.unregister(prefix)
    for module in ("raising_plugin", "broken_plugin", "dict_plugin", "works_plugin", "exiting_plugin",
                   "quitting_plugin"):
        sys.modules.pop(module, None)
    providers.refresh()


def test_plugin_failures_are_config_errors_naming_the_plugin_without_the_key(plugins):
    plugin_package(plugins, "raising_plugin", """
        def make(model, *, api_key=None, base_url=None, **options):
            raise ValueError(f"bad key {api_key!r} for {model}")
    """, b"[nbagent.providers]\nraising = raising_plugin:make\n")
    plugin_package(plugins, "broken_plugin", "raise ImportError('needs libfoo')\n",
                   b"[nbagent.providers]\nbroken = broken_plugin:Provider\n")
    plugin_package(plugins, "dict_plugin", """
        def make(model, **kwargs):
            return {"model": model}
    """, b"[nbagent.providers]\nnotaprovider = dict_plugin:make\n")
    providers.refresh()
    cases = [("raising:m", "'raising' (raising_plugin:make) failed: ValueError: bad key"),
             ("broken:m", "'broken' (broken_plugin:Provider) cannot be loaded: ImportError: needs libfoo"),
             ("notaprovider:m", "'notaprovider' (dict_plugin:make) returned a dict, not an nbagent Provider")]
    for model, message in cases:
        with pytest.raises(NbagentError) as err:
            Agent(model=model, api_key=KEY)
        assert err.value.kind == "config" and message in str(err.value), str(err.value)
        shown = "".join(traceback.format_exception(err.value)) + repr(err.value)
        assert KEY not in shown and KEY[:12] not in shown


def test_a_plugin_that_exits_at_import_or_when_called_is_a_config_error_naming_it(plugins):
    """SystemExit (a BaseException) from a plugin must not end the kernel or escape untyped."""
    plugin_package(plugins, "exiting_plugin", "import sys\nsys.exit('no licence for this machine')\n",
                   b"[nbagent.providers]\nexiting = exiting_plugin:Provider\n")
    plugin_package(plugins, "quitting_plugin", """
        def make(model, **kwargs):
            raise SystemExit(3)
    """, b"[nbagent.providers]\nquitting = quitting_plugin:make\n")
    providers.refresh()
    cases = [("exiting:m", "'exiting' (exiting_plugin:Provider) cannot be loaded: SystemExit: no licence"),
             ("quitting:m", "'quitting' (quitting_plugin:make) failed: SystemExit: 3")]
    for model, message in cases:
        with pytest.raises(NbagentError) as err:
            Agent(model=model)
        assert err.value.kind == "config" and isinstance(err.value, ConfigError), repr(err.value)
        assert message in str(err.value), str(err.value)
    assert Agent(model="demo").ask("hello").text  # the process goes on


def test_a_distribution_with_non_utf8_entry_points_is_skipped_with_a_warning(plugins):
    plugin_package(plugins, "latin_plugin", "", "[console_scripts]\ncaf\xe9 = latin_plugin:main\n".encode("latin-1"),
                   dist="latin-plugin")
    plugin_package(plugins, "works_plugin", """
        from nbagent.providers.demo import DemoProvider

        class Works(DemoProvider):
            name = "works"
    """, b"[nbagent.providers]\nworks = works_plugin:Works\n")
    with pytest.warns(RuntimeWarning, match="latin-plugin-0.1.dist-info"):
        providers.refresh()
    agent = Agent(model="works:tiny")
    assert type(agent.provider).__name__ == "Works" and agent.ask("hello").text
