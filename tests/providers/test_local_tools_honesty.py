"""The offline model tells the truth about tools (fast tier: no server is started).

A local model whose GGUF chat template has no tools section never sees the tool schemas (llama.cpp
drops them). ``Agent(model="local", tools=...)`` says so at once, as a warning and in the widget;
with no model given and tools wanted, the default is a model that can take them (a tool-capable GGUF in
the model folder), else the demo model, with a notice that says why. The templates are read from GGUF
files written here (the real SmolLM2 file's template is checked in the local_model tier).
"""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import pytest

from nbagent import Agent
from nbagent.agent import default_model
from nbagent.providers.gguf_template import chat_template, template_takes_tools
from nbagent.providers.local import LocalProvider, tools_notice

needs_xllamacpp = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("xllamacpp") is None, reason="xllamacpp not installed")

# SmolLM2-135M-Instruct's template, as its GGUF stores it (no tools section)
SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>"
           "system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
           "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# the start of Qwen2.5-Instruct's template (it renders the tools into the system message)
QWEN = ("{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {{- \"\\n\\n# Tools\\n\\n<tools>\" }}\n"
        "    {%- for tool in tools %}{{- tool | tojson }}{%- endfor %}\n{%- endif %}")


def _s(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, template: str | None, tokens: int = 50) -> Path:
    """A GGUF header (version 3, no tensors) with an architecture, a token array, a bool, and the template."""
    kvs = [_s("general.architecture") + struct.pack("<I", 8) + _s("llama"),
           _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, tokens) + b"".join(_s(f"t{i}") for i in range(tokens)),
           _s("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, tokens) + b"\0" * 4 * tokens,
           _s("tokenizer.ggml.add_bos_token") + struct.pack("<I", 7) + b"\1"]
    if template is not None:
        kvs.append(_s("tokenizer.chat_template") + struct.pack("<I", 8) + _s(template))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs) + b"\0" * 64)
    return path


def test_the_template_is_read_from_the_gguf_header(tmp_path):
    assert chat_template(write_gguf(tmp_path / "a.gguf", SMOLLM2, tokens=3000)) == SMOLLM2
    assert chat_template(write_gguf(tmp_path / "b.gguf", None)) is None
    (tmp_path / "c.gguf").write_bytes(b"not a model")
    assert chat_template(tmp_path / "c.gguf") is None
    cut = (tmp_path / "a.gguf").read_bytes()[:200]
    (tmp_path / "d.gguf").write_bytes(cut)
    assert chat_template(tmp_path / "d.gguf") is None  # truncated: no template, no exception


@pytest.mark.parametrize("template,takes", [
    (SMOLLM2, False), (QWEN, True), (None, False), ("", False),
    ("{{ messages }} Tools are great", False),  # the word in text, not the variable
    ("{% for t in tools %}{{ t.name }}{% endfor %}", True),
])
def test_which_templates_take_tools(template, takes):
    assert template_takes_tools(template) is takes


def tool_free(x: int) -> int:
    """A tool."""
    return x


@needs_xllamacpp
def test_a_local_model_without_tools_in_its_template_says_so_at_once(tmp_path, monkeypatch):
    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    gguf = write_gguf(tmp_path / "tiny.gguf", SMOLLM2)
    with pytest.warns(RuntimeWarning, match="cannot call tools") as caught:
        agent = Agent(model=f"local:{gguf}", tools=[tool_free])
    text = str(caught[0].message)
    assert 'model="demo"' in text and "install-model" in text and "openai:" in text
    assert agent.tools_notice == text
    pytest.importorskip("anywidget")
    prestarts: list[bool] = []
    agent.provider.prestart = lambda: prestarts.append(True)  # the real one is the local_model tier's
    widget = agent.widget()
    assert widget.notice == text  # shown in the chat until the first prompt
    assert prestarts == [True]  # showing the chat starts the server


@needs_xllamacpp
def test_no_notice_without_tools_or_with_a_template_that_takes_them(tmp_path):
    plain = LocalProvider(write_gguf(tmp_path / "plain.gguf", SMOLLM2))
    capable = LocalProvider(write_gguf(tmp_path / "capable.gguf", QWEN))
    assert tools_notice(plain, []) == "" and tools_notice(capable, ["list_variables"]) == ""
    assert "cannot call tools" in tools_notice(plain, ["list_variables"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent = Agent(model=f"local:{capable.model_path}", tools=[tool_free])
        assert agent.tools_notice == ""
        Agent(model=f"local:{plain.model_path}")


@needs_xllamacpp
def test_with_tools_wanted_the_default_is_a_model_that_can_take_them(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    monkeypatch.setenv("NBAGENT_MODEL_DIR", str(tmp_path))
    import nbagent.providers.local as local

    monkeypatch.setattr(local, "local_runtime_available", lambda: True)  # SmolLM2 "installed"
    assert default_model() == "local"
    assert default_model(tools=True) == "demo"  # SmolLM2 cannot: the scripted demo, and why
    assert "cannot call tools" in capsys.readouterr().err
    agent = Agent(tools=[tool_free])
    assert agent.model.startswith("demo:") and agent.tools_notice == ""
    capable = write_gguf(tmp_path / "qwen2.5-1.5b-instruct-q4_k_m.gguf", QWEN)
    write_gguf(tmp_path / "other.gguf", SMOLLM2)
    assert default_model(tools=True) == f"local:{capable}"
    monkeypatch.setenv("NBAGENT_MODEL", "demo")  # the variable still wins
    assert default_model(tools=True) == "demo" and default_model() == "demo"


# --- a fresh server that drops the first request ---------------------------------------


class _Answering:
    """Stands for a started llama.cpp server at ``url`` (alive, never stopped here)."""

    def __init__(self, url: str) -> None:
        self.url, self.pid = url, 0

    def alive(self) -> bool:
        return True


@needs_xllamacpp
async def test_a_first_request_the_fresh_server_drops_is_sent_again_once_it_answers_health(tmp_path, fault_server):
    from support.fault_server import reply, sse

    from nbagent.core.messages import Message, TextPart
    from nbagent.providers.base import ModelRequest, TextDelta

    provider = LocalProvider(write_gguf(tmp_path / "m.gguf", SMOLLM2), retry_base_delay=0.0)
    server = _Answering(fault_server.url)

    async def started() -> None:  # the server is up: its ready line and /health were seen
        provider._server, provider.base_url = server, f"{server.url}/v1"

    provider.start = started  # type: ignore[method-assign]
    answer = (b'data: {"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}\n\n'
              b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    hang_up = lambda ex: ex.drop()  # noqa: E731 - "Server disconnected without sending a response"
    fault_server.push(hang_up, hang_up, hang_up, reply(503, {"error": "loading"}), reply(200, {"status": "ok"}),
                      sse(answer))
    request = ModelRequest(provider.model, [Message("user", [TextPart("hi")])])
    events = [e async for e in provider.stream(request)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello"
    assert [r.path for r in fault_server.requests] == ["/v1/chat/completions"] * 3 + ["/health"] * 2 + [
        "/v1/chat/completions"]


@needs_xllamacpp
def test_a_loaded_laptop_gets_180_s_to_start_the_server(tmp_path):
    gguf = write_gguf(tmp_path / "m.gguf", SMOLLM2)
    assert LocalProvider(gguf)._spec.startup_timeout == 180.0  # one start under load took 57.6 s
    assert LocalProvider(gguf, startup_timeout=5)._spec.startup_timeout == 5.0


@needs_xllamacpp
def test_switching_to_a_local_model_without_tools_says_so_and_back_clears_it(tmp_path):
    pytest.importorskip("anywidget")
    plain = write_gguf(tmp_path / "plain.gguf", SMOLLM2)
    capable = write_gguf(tmp_path / "capable.gguf", QWEN)
    agent = Agent(model="demo", tools=[tool_free])
    widget = agent.widget()
    assert agent.tools_notice == "" and widget.notice == ""
    with pytest.warns(RuntimeWarning, match="cannot call tools") as caught:
        agent.set_model(f"local:{plain}")
    assert agent.tools_notice == str(caught[0].message) and widget.notice == agent.tools_notice
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent.set_model(f"local:{capable}")  # a template that takes tools: no warning, the notice goes
    assert agent.tools_notice == "" and widget.notice == ""
    widget.notice = "Error: the last turn failed"  # another notice is not the switch's to clear
    with pytest.warns(RuntimeWarning, match="cannot call tools"):
        agent.set_model(f"local:{plain}")
    assert widget.notice == "Error: the last turn failed"


def test_the_warning_names_the_users_line_not_nbagents_files(tmp_path, monkeypatch):
    """#48 rough edges: the warning printed ``…/nbagent/agent.py:177: RuntimeWarning`` and nbagent's own
    source line under it."""
    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    gguf = write_gguf(tmp_path / "tiny.gguf", SMOLLM2)
    with pytest.warns(RuntimeWarning, match="cannot call tools") as caught:
        Agent(model=f"local:{gguf}", tools=[tool_free])
    (warning,) = caught
    assert warning.filename == __file__  # this line, the caller's


def test_a_cell_whose_chat_shows_the_notice_does_not_print_it_too(tmp_path, monkeypatch):
    """In a cell, the warning waits for the cell's end: printed once when no chat says it, left out
    when the agent's chat shown by that cell does (the cell said it twice)."""
    pytest.importorskip("anywidget")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    gguf = write_gguf(tmp_path / "tiny.gguf", SMOLLM2)
    ip = InteractiveShell.instance()
    ip.user_ns.update(Agent=Agent, tool_free=tool_free, gguf=str(gguf))
    with warnings.catch_warnings(record=True) as plain:
        warnings.simplefilter("always")
        with capture_output():
            ip.run_cell("agent = Agent(model=f'local:{gguf}', tools=[tool_free])")
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with capture_output():
            ip.run_cell("agent = Agent(model=f'local:{gguf}', tools=[tool_free])\n"
                        "agent.provider.prestart = lambda: None\nchat = agent.widget()")
    (said,) = [w for w in plain if "cannot call tools" in str(w.message)]
    assert said.category is RuntimeWarning and "/nbagent/" not in said.filename.replace("\\", "/")  # the cell's line
    assert not [w for w in shown if "cannot call tools" in str(w.message)]  # the chat says it
    assert ip.user_ns["chat"].notice.startswith("nbagent: the local model")


async def test_a_turn_that_waits_for_the_server_to_start_says_so_on_its_model_step(tmp_path):
    """#48 rough edges: the first local turn after a model switch waited 18 s for the server with
    nothing on screen. While the server starts, the call's notice says so (the model step shows it),
    then the usual wait for the first byte, cleared when the answer starts."""
    import asyncio

    from nbagent.core.messages import Message, TextPart
    from nbagent.core.steps import Step
    from nbagent.loop.model_step import fold_batch
    from nbagent.providers.base import ModelRequest, Waiting

    provider = LocalProvider(str(write_gguf(tmp_path / "tiny.gguf", SMOLLM2)))
    up = asyncio.Event()

    async def slow_start() -> None:  # the real start loads the GGUF (18 s on the run's laptop)
        await up.wait()

    provider.start = slow_start
    batches = provider.stream_batches(ModelRequest("tiny", [Message("user", [TextPart("hi")])]))
    first = await asyncio.wait_for(batches.__anext__(), 30)  # before the server is up
    (starting,) = first
    assert isinstance(starting, Waiting) and starting.notice.startswith("starting the local model tiny")
    step = Step()
    fold_batch(step, first, [], None)
    assert step.notice.startswith("starting the local model tiny")  # the muted line on the model step
    up.set()
    after = await asyncio.wait_for(batches.__anext__(), 30)
    assert [type(e) for e in after] == [Waiting] and after[0].notice.startswith(Waiting.PREFIX)  # cleared by the answer
    await batches.aclose()
