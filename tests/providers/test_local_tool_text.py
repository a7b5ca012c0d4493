"""Tool calls small local models wrote as text, replayed through the local provider's stream parser.

The messages are real (tests/fixtures/local_tool_text/, with their provenance): Qwen2.5-Coder 1.5B and
0.5B asked notebook questions with the notebook tools offered. A message that is nothing but a call to
an offered tool, with arguments valid against its schema, becomes a real call; everything else stays text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support.replay import replay
from nbagent.core.messages import Message, TextPart
from nbagent.core.steps import FinishReason
from nbagent.providers.base import ModelRequest, TextDelta, ToolSpec
from nbagent.providers.local import LlamaChatParser
from nbagent.providers.openai_chat import OpenAIProvider
from nbagent.providers.text_tool_calls import could_be_tool_call, read_tool_calls

FIXTURE = Path(__file__).parents[1] / "fixtures" / "local_tool_text" / "transcripts.jsonl"
LINES = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]

# the tools the recordings offered (schemas as nbagent.notebook_tools() writes them)
TOOLS = [
    ToolSpec("list_variables", "", {"type": "object", "properties": {}, "required": [], "additionalProperties": False}),
    ToolSpec("describe_variable", "", {"type": "object", "properties": {"name": {"type": "string"}},
                                       "required": ["name"], "additionalProperties": False}),
    ToolSpec("run_python", "", {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}),
]
SALES = ("describe_variable", {"name": "sales"})
# what each recorded line must become: the call, or None (the text stays text)
EXPECTED = {
    ("Qwen2.5-Coder-1.5B", "columns"): SALES,
    ("Qwen2.5-Coder-1.5B", "variables"): ("list_variables", {}),
    ("Qwen2.5-Coder-1.5B", "rows"): SALES,
    ("Qwen2.5-Coder-1.5B", "max_month"): SALES,
    ("Qwen2.5-Coder-1.5B", "mean"): SALES,
    ("Qwen2.5-Coder-1.5B", "arith"): ("run_python", {"code": "print(17 * 23)"}),
    # a valid call whose code is wrong still runs: the tool's output tells the model
    ("Qwen2.5-Coder-1.5B", "total"): ("run_python", None),
    # a variable that does not exist is a valid argument: describe_variable answers that it is not there
    ("Qwen2.5-Coder-1.5B", "capital"): ("describe_variable", {"name": "capital_of_france"}),
    ("Qwen2.5-Coder-1.5B", "plot"): None,  # Python triple-quoted strings inside: not JSON
    ("Qwen2.5-Coder-1.5B", "add_col"): None,
}


def expected(line: dict):
    if line["model"].startswith("Qwen2.5-Coder-0.5B"):
        return None  # tools never offered (columns, sales), prose around a block, SQL in prose
    return EXPECTED[(line["model"].split("-Instruct")[0], line["task"])]


def llama_body(text: str, finish: str = "stop") -> bytes:
    """``text`` framed as llama.cpp's server streams it: a chunk a token-sized piece, then the finish,
    the usage with timings, and [DONE]."""
    base = {"id": "chatcmpl-rec", "object": "chat.completion.chunk", "created": 1764547200,
            "model": "qwen2.5-coder", "system_fingerprint": "b1-rec"}
    out = [{**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"role": "assistant", "content": None}}]}]
    for piece in re.findall(r"\s+|\w+|[^\w\s]", text):
        out.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"content": piece}}]})
    out.append({**base, "choices": [{"index": 0, "finish_reason": finish, "delta": {}}]})
    out.append({**base, "choices": [], "usage": {"completion_tokens": 40, "prompt_tokens": 300, "total_tokens": 340},
                "timings": {"prompt_n": 300, "predicted_n": 40, "predicted_per_second": 20.5}})
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in out) + b"data: [DONE]\n\n"


class LlamaWire(OpenAIProvider):
    """The OpenAI wire with the local provider's parser (no server: the body is replayed)."""

    name = "local"

    def new_parser(self, request):
        return LlamaChatParser(provider=self.name, tools=request.tools)


def ask(tools=TOOLS) -> ModelRequest:
    return ModelRequest("qwen", [Message("user", [TextPart("What columns does `sales` have?")])], tools=list(tools))


@pytest.mark.parametrize("split", ["whole", "1", "random"])
@pytest.mark.parametrize("index", range(len(LINES)), ids=[f"{i}-{ln['task']}" for i, ln in enumerate(LINES)])
async def test_recorded_text_becomes_a_call_only_when_it_is_one(index, split):
    line = LINES[index]
    want = expected(line)
    result = await replay(LlamaWire("qwen", base_url="http://127.0.0.1:9/v1", api_key="x"), ask(),
                          llama_body(line["text"], line["finish"]), split=split, seed=index)
    assert result.error is None
    if want is None:  # the text, exactly as the model wrote it, and nothing to run
        assert result.text == line["text"]
        assert result.tool_calls == [] and result.starts == []
        assert result.finish.reason == FinishReason.STOP
        assert result.finish.message.text == line["text"]
        return
    name, args = want
    [call] = result.tool_calls
    assert call.name == name
    assert call.args == (args if args is not None else json.loads(line["text"].strip("`json\n"))["arguments"])
    assert result.text == ""  # the block is not shown as answer text
    assert [s.name for s in result.starts] == [name]
    assert result.finish.reason == FinishReason.TOOL_CALLS
    assert [(p.name, p.args) for p in result.finish.message.tool_uses] == [(call.name, call.args)]
    assert result.usage.raw["timings"]["predicted_n"] == 40


async def test_without_tools_offered_a_json_block_streams_as_text():
    text = LINES[0]["text"]
    result = await replay(LlamaWire("qwen", base_url="http://127.0.0.1:9/v1", api_key="x"), ask(tools=[]),
                          llama_body(text), split="random", seed=3)
    assert result.tool_calls == [] and result.text == text
    assert len([e for e in result.events if isinstance(e, TextDelta)]) > 10  # streamed, not held


async def test_an_ordinary_answer_streams_while_tools_are_offered():
    text = "The capital of France is Paris. It has many museums."
    result = await replay(LlamaWire("qwen", base_url="http://127.0.0.1:9/v1", api_key="x"), ask(), llama_body(text))
    deltas = [e.text for e in result.events if isinstance(e, TextDelta)]
    assert "".join(deltas) == text and len(deltas) > 5


async def test_a_call_cut_by_the_token_limit_is_not_run():
    text = '```json\n{"name": "describe_variable", "arguments": {"name": "sales"}}\n```'
    result = await replay(LlamaWire("qwen", base_url="http://127.0.0.1:9/v1", api_key="x"), ask(),
                          llama_body(text, "length"))
    assert result.tool_calls == [] and result.text == text


@pytest.mark.parametrize("text,calls", [
    ('<tool_call>\n{"name": "describe_variable", "arguments": {"name": "sales"}}\n</tool_call>', [SALES]),
    ('<tool_call>{"name": "list_variables", "arguments": {}}</tool_call>\n'
     '<tool_call>{"name": "describe_variable", "arguments": {"name": "df"}}</tool_call>',
     [("list_variables", {}), ("describe_variable", {"name": "df"})]),
    ('```json\n{"name": "run_python", "parameters": {"code": "1+1"}}\n```', [("run_python", {"code": "1+1"})]),
    ('```\n{"name": "describe_variable", "arguments": "{\\"name\\": \\"sales\\"}"}\n```', [SALES]),
    # prose: never a call
    ("Use describe_variable with name sales to see its columns.", None),
    ('You could call {"name": "describe_variable", "arguments": {"name": "sales"}}.', None),
    ('Here it is:\n```json\n{"name": "describe_variable", "arguments": {"name": "sales"}}\n```', None),
    ('```json\n{"name": "describe_variable", "arguments": {"name": "sales"}}\n```\nThat shows the columns.', None),
    # an unknown tool, arguments that do not fit, extra keys, one bad block among good ones
    ('```json\n{"name": "columns", "arguments": {"sales": []}}\n```', None),
    ('```json\n{"name": "describe_variable", "arguments": {"name": 3}}\n```', None),
    ('```json\n{"name": "describe_variable", "arguments": {"name": "sales", "deep": true}}\n```', None),
    ('```json\n{"name": "describe_variable", "arguments": {}}\n```', None),
    ('```json\n{"name": "describe_variable", "arguments": {"name": "s"}, "id": 1}\n```', None),
    ('```python\n{"name": "list_variables"}\n```', None),
    ('<tool_call>{"name": "list_variables"}</tool_call>\n<tool_call>{"name": "nope"}</tool_call>', None),
])
def test_what_counts_as_a_call(text, calls):
    got = read_tool_calls(text, TOOLS)
    assert (None if got is None else [(c.name, c.arguments) for c in got]) == calls


@pytest.mark.parametrize("text,held", [
    ("", True), ("``", True), ("```js", True), ("```json\n{", True), ("<tool_c", True), ("<tool_call>\n{", True),
    ("```python\n", False), ("```\nimport os", False), ("The answer", False), ("<tool_call>x", False),
    ('```json\n{"name": "list_variables"}\n```\nSo', False),
])
def test_text_is_held_back_only_while_it_may_be_a_call(text, held):
    assert could_be_tool_call(text) is held


async def test_a_recorded_json_block_runs_the_tool_in_a_conversation_and_the_model_sees_its_result(fault_server):
    from support.fault_server import sse

    from nbagent import Agent

    seen: list[str] = []

    def describe_variable(name: str) -> str:
        """Describe a variable of the notebook."""
        seen.append(name)
        return "DataFrame sales: 12 rows, columns month, revenue"

    columns = next(line for line in LINES if line["task"] == "columns")
    fault_server.push(sse(llama_body(columns["text"])), sse(llama_body("It has the columns month and revenue.")))
    provider = LlamaWire("qwen", base_url=f"{fault_server.url}/v1", api_key="x")
    agent = Agent(model=provider, tools=[describe_variable])
    reply = await agent.chat_to_completion(columns["prompt"])
    assert seen == ["sales"]  # the tool ran once, with the recorded argument
    assert reply.text == "It has the columns month and revenue."
    second = fault_server.requests[1].json["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "describe_variable"
    assert second[-1]["role"] == "tool" and "12 rows" in second[-1]["content"]
