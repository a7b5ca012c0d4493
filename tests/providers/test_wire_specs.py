"""Each wire package's ``SPEC`` is the one statement of its facts, and everything that needs them reads it:
the registry, model-name guessing, key variables (doctor, redaction), pricing ids and the token names
its stream parser reads usage objects by (checked on recorded bodies), and the OTel provider name. A new
wire is its package and its spec."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
import textwrap

import pytest

from nbagent import Agent, NbagentError, cli, providers
from nbagent.analysis.otel_spans import gen_ai_provider
from nbagent.analysis.pricing import pricing_id
from nbagent.core.errors import ConfigError, key_variables, redact
from nbagent.core.usage import TOKEN_COUNTS, UsageMetadata
from nbagent.providers.wire_spec import WireSpec, carried_count
from support.replay import FIXTURES

WIRES = ("anthropic", "gemini", "openai_chat", "openai_responses")
# the recorded bodies of each wire (tests/fixtures/<folder>)
RECORDED = {"openai_chat": ("openai", "openai_compat"), "openai_responses": ("openai_responses",),
            "anthropic": ("anthropic",), "gemini": ("gemini",)}


def spec_of(package: str) -> WireSpec:
    return next(s for s in providers.wire_specs() if s.package == package)


def test_every_wire_package_has_one_spec():
    assert [s.package for s in providers.wire_specs()] == list(WIRES)
    for package in WIRES:
        assert importlib.import_module(f"nbagent.providers.{package}").SPEC is spec_of(package)
    assert set(RECORDED) == set(WIRES), "every wire needs recorded bodies for its usage check"


@pytest.mark.parametrize("package", WIRES)
def test_the_registry_builds_each_prefix_from_the_spec(package):
    spec = spec_of(package)
    for prefix in spec.prefixes:
        reg = providers.lookup(prefix)
        assert (reg.factory, reg.default_model) == (spec.factory, spec.default_model)
        provider = providers.create(prefix, "", api_key="k-123456", base_url="http://127.0.0.1:9")
        assert provider.name == spec.name and provider.model == spec.default_model
        assert f"{type(provider).__module__}:{type(provider).__name__}" == spec.factory
    assert providers.aliases() == {"claude", "google"}


@pytest.mark.parametrize("package", WIRES)
def test_a_bare_model_name_goes_to_the_wire_that_claims_it(package):
    spec = spec_of(package)
    for start in spec.model_prefixes:
        assert providers.guess_prefix(start + "-test") == spec.name
        agent = Agent(model=start + "-test", api_key="k-123456")
        assert agent.provider.name == spec.name
    others = [p for s in providers.wire_specs() if s is not spec for p in s.model_prefixes]
    assert not [p for p in spec.model_prefixes if any(p.startswith(o) or o.startswith(p) for o in others)]


def test_a_bare_model_name_no_wire_claims_is_a_config_error():
    assert providers.guess_prefix("model.gguf") == "local" and providers.guess_prefix("mistral-7b") is None
    with pytest.raises(ConfigError, match="provider:model-name"):
        Agent(model="mistral-7b")


@pytest.mark.parametrize("package", WIRES)
def test_the_key_comes_from_the_specs_variables_and_is_scrubbed(package, monkeypatch):
    spec = spec_of(package)
    for name in {n for s in providers.wire_specs() for n in s.key_variables}:
        monkeypatch.delenv(name, raising=False)
    assert list(spec.key_variables) == [n for n in cli.key_variables() if n in spec.key_variables]
    for i, name in enumerate(spec.key_variables):
        value = f"plain-{name.lower()}-value"  # no key shape the redaction pattern would catch
        monkeypatch.setenv(name, value)
        if i:  # an earlier variable holding only spaces does not hide a later one
            monkeypatch.setenv(spec.key_variables[0], "  ")
        provider = providers.create(spec.name, "")
        assert provider.api_key == value
        assert name in key_variables() and value not in redact(f"the key is {value}")
        assert value not in str(NbagentError(f"echo {value}", kind="auth"))
        monkeypatch.delenv(name)


def test_doctor_lists_every_specs_key_variable(capsys):
    assert cli.KEY_VARIABLES == cli.key_variables()
    cli.main(["doctor"])
    out = capsys.readouterr().out
    for spec in providers.wire_specs():
        for name in spec.key_variables:
            assert name in out


@pytest.mark.parametrize("package", WIRES)
def test_pricing_uses_the_specs_provider_id(package):
    spec = spec_of(package)
    assert {pricing_id(p) for p in spec.prefixes} == {spec.pricing_id}
    genai_prices = pytest.importorskip("genai_prices")
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    assert data_snapshot.find_provider_by_id(snapshot.providers, spec.pricing_id) is not None
    assert genai_prices  # the catalogue knows the id, so prices match by provider


# --- token names: the wire's usage objects read by its spec ------------------------------------


def recorded_usage(spec: WireSpec) -> list[tuple[str, dict]]:
    """Every usage object in the wire's recorded bodies, where ``spec.usage_paths`` says it is."""
    found = []
    for folder in RECORDED[spec.package]:
        for body in sorted((FIXTURES / folder).glob("*.sse")):
            for line in body.read_text(encoding="utf-8").splitlines():
                text = line.removeprefix("data:").strip()
                if not text.startswith("{"):
                    continue
                try:
                    event = json.loads(text)
                except ValueError:
                    continue
                for path in spec.usage_paths:
                    raw = event
                    for part in path.split("."):
                        raw = raw.get(part) if isinstance(raw, dict) else None
                    if isinstance(raw, dict):
                        found.append((f"{folder}/{body.name}", raw))
    return found


def full_usage(spec: WireSpec, skip: frozenset[str] = frozenset()) -> dict:
    """A usage object with every path the token names read (except ``skip``), each a distinct count;
    a subtracted path gets a small one, so that no difference is negative."""
    raw: dict = {}
    subtracted = {w for e in spec.token_names.values() for w in e.split(" - ")[1:]}
    words = sorted({w for e in spec.token_names.values() for w in e.split() if w not in "+-"})
    for n, (word, path) in enumerate((w, p) for w in words for p in w.split("|")):
        if path in skip:
            continue
        node = raw
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node.setdefault(leaf, 1 + n if word in subtracted else 1000 + 37 * n)
    return raw


@pytest.mark.parametrize("package", WIRES)
def test_read_usage_reads_what_the_spec_says_on_recorded_bodies(package):
    spec = spec_of(package)
    normalize = spec.read_usage
    samples = recorded_usage(spec)
    assert len(samples) >= 3, f"{package}: too few recorded usage objects"
    assert any(UsageMetadata.to_dict(spec.declared_usage(raw), compact=True) for _, raw in samples)
    wrong, repaired = [], 0
    for where, raw in samples:
        declared, normalized = spec.declared_usage(raw), normalize(raw)
        if min(declared.to_dict().values()) < 0:  # a damaged object (more reasoning than output, on OpenRouter)
            repaired += 1
            counts = normalized.to_dict()
            assert min(counts.values()) >= 0 and normalized.generated_token_count == declared.generated_token_count
            assert counts["prompt_token_count"] == declared.prompt_token_count, where
        elif normalized != declared:
            wrong.append((where, raw))
    assert not wrong, f"{package}: read_usage and the spec's token names disagree on {wrong[:3]}"
    assert repaired < len(samples) / 2


@pytest.mark.parametrize("package", WIRES)
def test_read_usage_reads_every_name_the_spec_declares(package):
    spec = spec_of(package)
    normalize = spec.read_usage
    raw = full_usage(spec)
    declared = spec.declared_usage(raw)
    assert normalize(raw) == declared
    assert all(getattr(declared, f) for f, e in spec.token_names.items() if e), declared
    for word in {w for e in spec.token_names.values() for w in e.split() if "|" in w}:
        first, *later = word.split("|")
        without = full_usage(spec, skip=frozenset([first]))  # a later alternative is read when the first is absent
        assert normalize(without) == spec.declared_usage(without) != declared, word


# a usage object of each wire, more reasoning than output, no total: the generated count is the output count
DAMAGED = {
    "openai_chat": {"prompt_tokens": 10, "completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 8}},
    "openai_responses": {"input_tokens": 10, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 8}},
    "anthropic": {"input_tokens": 2, "cache_read_input_tokens": 6, "cache_creation_input_tokens": 2,
                  "output_tokens": 5, "output_tokens_details": {"thinking_tokens": 8}},
    "gemini": {"promptTokenCount": 10, "candidatesTokenCount": 0, "thoughtsTokenCount": 5},
}


@pytest.mark.parametrize("package", WIRES)
def test_read_usage_caps_reasoning_at_the_output_and_sums_a_missing_total(package):
    usage = spec_of(package).read_usage(DAMAGED[package])
    assert (usage.prompt_token_count, usage.candidates_token_count, usage.thoughts_token_count) == (10, 0, 5)
    assert usage.total_token_count == 15


def test_the_otel_provider_name_is_the_specs():
    assert [gen_ai_provider(n) for n in ("openai", "openai-responses", "anthropic", "claude", "gemini")] == \
        ["openai", "openai", "anthropic", "anthropic", "gcp.gemini"]
    assert gen_ai_provider("local") == "local" and gen_ai_provider("") == ""


def test_token_names_cover_the_one_vocabulary():
    fields = [f.name for f in dataclasses.fields(UsageMetadata)]
    assert sorted(t.field for t in TOKEN_COUNTS) == sorted(fields)
    for spec in providers.wire_specs():
        assert sorted(spec.token_names) == sorted(fields)
    with pytest.raises(ConfigError, match="token_names"):
        dataclasses.replace(spec_of("gemini"), token_names={"prompt_token_count": "x"})
    with pytest.raises(ConfigError, match="prefixes"):
        dataclasses.replace(spec_of("gemini"), prefixes=("Bad:prefix",))


def test_carried_count_reads_sums_paths_and_alternatives():
    raw = {"a": 5, "b": {"c": 2}, "d": None, "e": "x"}
    assert carried_count("a + b.c", raw) == 7 and carried_count("a - b.c", raw) == 3
    assert carried_count("d|a", raw) == 5 and carried_count("z|b.c", raw) == 2
    assert carried_count("", raw) == 0 and carried_count("e + nowhere.x", raw) == 0


# --- a new wire: its package and its spec -----------------------------------------------------


TOY_WIRE = '''
from nbagent.providers.demo import DemoProvider
from nbagent.providers.wire_spec import WireSpec


class ToyProvider(DemoProvider):
    name = "toy"


SPEC = WireSpec(
    package="toy_wire", prefixes=("toy", "toybox"), factory="nbagent.providers.toy_wire:ToyProvider",
    default_model="toy-1", key_variables=("TOY_API_KEY",), pricing_id="toy-prices",
    token_names={"prompt_token_count": "in", "cached_content_token_count": "", "cache_write_token_count": "",
                 "thoughts_token_count": "", "candidates_token_count": "out", "total_token_count": "in + out"},
    usage_paths=("usage",), model_prefixes=("toy-",), otel_name="toy.ai")
'''


def test_a_new_wire_is_its_package_and_its_spec(tmp_path, monkeypatch):
    (tmp_path / "toy_wire").mkdir()
    (tmp_path / "toy_wire" / "__init__.py").write_text(textwrap.dedent(TOY_WIRE))
    monkeypatch.setattr(providers, "__path__", [*providers.__path__, str(tmp_path)])
    monkeypatch.setenv("TOY_API_KEY", "plain-toy-key-value")
    try:
        providers.refresh()
        assert "toy_wire" in [s.package for s in providers.wire_specs()]
        assert type(Agent(model="toy:big").provider).__name__ == "ToyProvider"
        assert Agent(model="toy-2").provider.model == "toy-2"  # guessed from the name
        assert Agent(model="toybox").provider.model == "toy-1"  # an alias, the default model
        assert "toybox" in providers.aliases() and pricing_id("toybox") == "toy-prices"
        assert gen_ai_provider("toy") == "toy.ai"  # OTel spans name it as its spec says
        assert "TOY_API_KEY" in cli.key_variables()
        assert "plain-toy-key-value" not in redact("key: plain-toy-key-value")
    finally:
        monkeypatch.undo()
        for prefix in ("toy", "toybox"):
            providers.unregister(prefix)
        sys.modules.pop("nbagent.providers.toy_wire", None)
        providers.refresh()
    assert "toy_wire" not in [s.package for s in providers.wire_specs()]
