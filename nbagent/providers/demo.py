"""The demo model: deterministic, offline, for teaching and tests.

It streams a short thought, calls a tool when one fits the prompt (a
calculator-like tool for arithmetic, or a tool the prompt names as a whole word, with
the prompt's "double-quoted" texts as its text arguments; with the notebook tools, the moves of
``demo_notebook.py``: a look at a variable, or "fix the error" in a cell), answers in markdown, and reports plausible token usage. It says plainly
that it is a
demo. Nothing here is random: the same history gives the same stream.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from ..core.compression import ApproxTokenizer
from ..core.messages import Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from ..core.steps import FinishReason, ToolCall, UsageMetadata
from .demo_notebook import fix_move, notebook_move
from .base import (
    Event,
    Finish,
    ModelRequest,
    Provider,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    Usage,
)

_ARITH = re.compile(r"(-?\d+(?:\.\d+)?(?:\s*(?:[-+*/x×÷^]|\*\*)\s*\(?-?\d+(?:\.\d+)?\)?)+)")
_CALC_WORDS = ("calc", "math", "arith", "add", "sum", "multiply", "evaluate", "compute")
_WORD = re.compile(r"\S+\s*")
_ATTACHMENTS = re.compile(r"^\[Attached notebook (?:variables|cells): ", re.M)


class DemoProvider(Provider):
    """A scripted model. ``delay`` is the pause between streamed pieces (seconds)."""

    name = "demo"

    def __init__(self, model: str = "demo", *, api_key: str | None = None, base_url: str | None = None,
                 delay: float = 0.01, context_window: int = 8192):
        # api_key / base_url: the signature every provider shares; the demo needs neither
        self.model = model
        self.delay = delay
        self.context_window = context_window
        self._tok = ApproxTokenizer()
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        self.calls += 1
        last = request.messages[-1] if request.messages else Message("user", [])
        results = last.tool_results
        prompt = _last_prompt(request.messages)
        parts: list = []
        asked = _ATTACHMENTS.split(prompt, maxsplit=1)[0]  # the user's own words: no numbers from an attached cell
        call: ToolCall | None = None if results else _pick_call(asked, request.tools, len(request.messages))
        move = None
        if call is None:
            n = len(request.messages)
            move = fix_move(request.messages, request.tools, prompt, n) or notebook_move(request.messages, request.tools,
                                                                                        prompt, n)
        if move is not None:
            thought, answer, call = move.thought, move.answer, move.call
        elif results:
            thought = "The tool returned a result; I will report it to the user."
            answer = _answer_from_results(results)
        elif call is not None:
            thought = (f"The user asked: \u201c{_short(prompt)}\u201d. The `{call.name}` tool fits, "
                       f"so I will call it with {json.dumps(call.args)}.")
            answer = f"Let me use `{call.name}` for that."
        else:
            thought = f"The user asked: \u201c{_short(prompt)}\u201d. No tool is needed; I will answer directly."
            answer = _plain_answer(prompt)
        pause = self._pacer()
        if request.include_reasoning:
            for piece in _WORD.findall(thought):
                await pause()
                yield ThinkingDelta(piece)
            parts.append(ThinkingPart(thought))
        for piece in _WORD.findall(answer):
            await pause()
            yield TextDelta(piece)
        parts.append(TextPart(answer))
        structured = None
        if request.response_format is not None and call is None:
            structured = _example_for(request.response_format)
        if call is not None:
            args = json.dumps(call.args)
            yield ToolCallStart(0, call.id, call.name)
            for i in range(0, len(args), 8):
                await pause()
                yield ToolCallDelta(0, args[i : i + 8])
            yield ToolCallEnd(0, call)
            parts.append(ToolUsePart(call.id, call.name, call.args))
        prompt_tokens = self._tok.count(request.system or "") + sum(
            self._tok.count_message(m) for m in request.messages
        )
        thoughts = self._tok.count(thought) if request.include_reasoning else 0
        out = self._tok.count(answer) + (self._tok.count(json.dumps(call.args)) if call else 0)
        yield Usage(UsageMetadata(prompt_tokens, out, prompt_tokens + out + thoughts, 0, thoughts),
                    raw={"demo": True})
        yield Finish(FinishReason.TOOL_CALLS if call else FinishReason.STOP,
                     "tool_calls" if call else "stop", Message("assistant", parts),
                     structured_output=structured, model=self.model)

    def _pacer(self) -> Callable[[], Awaitable[None]]:
        """A pause to await before each piece of one answer: ``delay`` between pieces, none before
        the first (the loop is still yielded to, so a Stop is seen)."""
        started = False

        async def pause() -> None:
            nonlocal started
            await asyncio.sleep(self.delay if started and self.delay > 0 else 0)
            started = True

        return pause


def _last_prompt(messages: Sequence[Message]) -> str:
    for m in reversed(messages):
        if m.role == "user" and m.text:
            return m.text
    return ""


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _pick_call(prompt: str, tools: list[ToolSpec], n: int) -> ToolCall | None:
    if not tools or not prompt:
        return None
    lowered = prompt.lower()
    named = [t for t in tools if re.search(rf"(?<![\w-]){re.escape(t.name.lower())}(?![\w-])", lowered)]
    match = _ARITH.search(prompt)
    if match and not named:
        named = [t for t in tools
                 if any(w in (t.name + " " + t.description).lower() for w in _CALC_WORDS)]
    if not named:
        return None
    tool = named[0]
    return ToolCall(f"call_demo_{n}", tool.name, _fill_args(tool, prompt, match))


def _fill_args(tool: ToolSpec, prompt: str, match: re.Match | None) -> dict:
    props = tool.input_schema.get("properties", {})
    required = tool.input_schema.get("required", list(props))
    numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", match.group(0) if match else prompt)]
    quoted = re.findall(r'"([^"]+)"', prompt)  # text arguments in double quotes, in order
    args: dict = {}
    for name in required:
        schema = props.get(name, {})
        kind = schema.get("type")
        if "enum" in schema:
            args[name] = schema["enum"][0]
        elif kind in ("number", "integer"):
            value = numbers.pop(0) if numbers else 0
            args[name] = int(value) if kind == "integer" or float(value).is_integer() else value
        elif kind == "boolean":
            args[name] = True
        elif kind == "array":
            args[name] = [int(x) if x.is_integer() else x for x in numbers]
        elif quoted and not match:
            args[name] = quoted.pop(0)
        else:
            expr = match.group(0) if match else prompt
            args[name] = expr.replace("×", "*").replace("x", "*").replace("÷", "/").replace("^", "**") if match else expr
    return args


def _answer_from_results(results: list[ToolResultPart]) -> str:
    lines = []
    for r in results:
        if r.is_error:
            lines.append(f"The `{r.name or 'tool'}` call did not work: {_short(r.content, 200)}")
        else:
            lines.append(f"The `{r.name or 'tool'}` tool says: **{_short(r.content, 200)}**.")
    return " ".join(lines) + "\n\n*(nbagent demo model: this answer is scripted.)*"


def _plain_answer(prompt: str) -> str:
    return (
        "Hello! I am **nbagent's demo model**: deterministic and offline, so I do not "
        "really understand questions.\n\n"
        f"You wrote:\n\n> {_short(prompt, 200)}\n\n"
        "Here is what a real model's answer can contain:\n\n"
        "- *thoughts*, shown above in a collapsible block\n"
        "- **markdown** with lists and `inline code`\n"
        "- code blocks:\n\n"
        "```python\nfrom nbagent import Agent\nagent = Agent(model=\"local\")  # a real model, offline\n```\n\n"
        "Try `Agent(model=\"local\")`, or `openai:…`, `anthropic:…`, `gemini:…` with an API key."
    )


def _example_for(schema: dict):
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _example_for(v) for k, v in props.items()}
    if kind == "array":
        return []
    return {"string": "demo", "integer": 0, "number": 0.0, "boolean": False}.get(str(kind))
