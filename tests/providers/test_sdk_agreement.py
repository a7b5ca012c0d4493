"""nbagent's parsers against the official SDKs' stream parsers, on every recorded stream.

Each fixture body is served offline (``httpx.MockTransport``; ``httpx2`` for
the anthropic SDK, which bundles its own copy of httpx) to the official
client with a dummy key, in 37-byte reads, and read the way an SDK user
would: openai ``chat.completions.create(stream=True)`` folded by
``ChatCompletionStreamState`` (the accumulator behind ``.stream()``), openai
``responses.stream(...).get_final_response()``, anthropic
``messages.stream(...).get_final_message()``, google-genai
``models.generate_content_stream`` (it has no accumulator: its typed chunks
are joined here, text and thought parts concatenated, the last finish
reason and usage kept). The same bytes go through nbagent's provider, and
the two are compared field by field: text, refusal, thinking, tool calls
(id, name, parsed arguments; ``""`` / ``null`` arguments are ``{}``),
the provider's raw finish reason (Gemini: the prompt's block reason when
there is no candidate), usage (input incl. cache, output incl. reasoning,
total, cache reads, reasoning -- read from the SDK's typed fields), model,
the replay tokens (Anthropic signatures and redacted data, Gemini thought
signatures, Responses reasoning items' encrypted content), and errors
(the SDK's message must be part of nbagent's). When the SDK raises, only
the error is compared: nbagent keeps the partial text, the SDK gives none.

Every other difference is a test failure. The known, intended ones:

| fixture | field | SDK | nbagent, and why |
|---|---|---|---|
| openai/extra-chunk-after-usage-moderation | usage | none: ``ChatCompletionStreamState`` takes each chunk's ``usage``, and the moderation chunk after the usage chunk has ``null`` | the last non-null usage (the billed tokens) |
| openai_compat/groq-think-tags-in-content-xgroq-usage | usage | none (reads only ``usage``) | Groq's ``x_groq.usage``: the only usage that stream has |
| openai_compat/novita-repeated-name-and-id-no-finish-reason | calls | id ``"00"``, name ``"llm_versionllm_version"`` (concatenates every delta) | ``"0"`` / ``"llm_version"``: id and name are set once, only arguments are appended |
| openai_compat/openrouter-claude-reasoning-text | replay | -- | nbagent keeps OpenRouter's ``reasoning_details`` (signature) to send back; the SDK has no field for them (not compared) |
| openai_responses/reasoning-summary-multipart | thinking | 4 summary parts (read here concatenated) | the parts joined by a blank line, as one thought |
| openai_responses/text-and-function-call-reasoning | replay | ``encrypted_content`` of ``response.completed`` | the copy from ``response.output_item.done``, which OpenAI says to send back (the server re-encrypts each copy) |
| openai_responses/reasoning-summary-multipart | replay | (same) | (same) |
| openai_responses/cached-tokens-web-search | replay | both reasoning items | only the one followed by the message: the first precedes a ``web_search_call`` item, which cannot be sent back statelessly |
| anthropic/max-tokens-incomplete-tool-json | calls | a ``tool_use`` with the partial JSON parsed leniently | no call: it was cut by ``max_tokens``; ``Finish.cut_tool_calls`` keeps it, nothing runs it or replays it |
| gemini/gemini3-function-call-thought-signature, thinking-then-function-call-signature | calls | id ``None`` when Gemini sent none (compared on name and arguments) | a generated ``call_<hex>_<n>`` id, needed to pair the result; never sent to Gemini |

The openai_compat/groq-error-event-midstream, openrouter-comments-reasoning-error-midstream and
gemini/error-mid-stream-raw-json streams make both raise (errors agree). ``pytest -m sdk`` runs this
module alone; it is skipped per SDK when one is not installed.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from nbagent.core.messages import TextPart, ThinkingPart, ToolUsePart
from nbagent.providers.anthropic import AnthropicProvider
from nbagent.providers.base import ModelRequest
from nbagent.providers.gemini import GeminiProvider
from nbagent.providers.openai_chat import OpenAIProvider
from nbagent.providers.openai_responses import OpenAIResponsesProvider
from nbagent.core.messages import Message
from support.replay import fixture_names, load_fixture, replay

pytestmark = [pytest.mark.sdk,  # the openai SDK's own models warn while dumping web-search items
              pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")]

FIELDS = ("text", "refusal", "thinking", "calls", "finish", "usage", "model", "replay", "error")
INTENDED: dict[tuple[str, str], set[str]] = {
    ("openai", "extra-chunk-after-usage-moderation"): {"usage"},
    ("openai_compat", "groq-think-tags-in-content-xgroq-usage"): {"usage"},
    ("openai_compat", "novita-repeated-name-and-id-no-finish-reason"): {"calls"},
    ("openai_responses", "reasoning-summary-multipart"): {"thinking", "replay"},
    ("openai_responses", "text-and-function-call-reasoning"): {"replay"},
    ("openai_responses", "cached-tokens-web-search"): {"replay"},
    ("anthropic", "max-tokens-incomplete-tool-json"): {"calls"},
}
NO_CALL_IDS = {("gemini", "gemini3-function-call-thought-signature"), ("gemini", "thinking-then-function-call-signature")}
FAMILIES = ("openai", "openai_compat", "openai_responses", "anthropic", "gemini")
CASES = [(family, name) for family in FAMILIES for name in fixture_names(family)]


@dataclass
class Seen:
    """What one reader got from one stream."""

    text: str = ""
    refusal: str = ""
    thinking: str = ""
    calls: list = field(default_factory=list)  # (id, name, args dict)
    finish: str | None = None
    usage: tuple | None = None  # (input, output, total, cache reads, reasoning)
    model: str = ""
    replay: list = field(default_factory=list)  # signatures / encrypted reasoning, in order
    error: str | None = None


def _args(raw: Any) -> Any:
    if isinstance(raw, dict):
        return raw
    if raw in (None, ""):
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return {"_raw": raw}


def _chunks(body: bytes) -> list[bytes]:
    return [body[i:i + 37] for i in range(0, len(body), 37)]


def _client(module: Any, body: bytes) -> Any:
    def handler(request):
        return module.Response(200, headers={"content-type": "text/event-stream"}, content=iter(_chunks(body)))

    return module.Client(transport=module.MockTransport(handler))


# --- the SDKs ---------------------------------------------------------------------------


def sdk_openai_chat(body: bytes) -> Seen:
    openai = pytest.importorskip("openai")
    from openai.lib.streaming.chat import ChatCompletionStreamState

    client = openai.OpenAI(api_key="sk-dummy", base_url="http://sdk.test/v1", max_retries=0,
                           http_client=_client(httpx, body))
    state = ChatCompletionStreamState()
    try:
        for chunk in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                    stream=True):
            state.handle_chunk(chunk)
        completion = state.get_final_completion()
    except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
        completion = exc.completion  # the SDK's parse step refuses these; its accumulation is done
    except openai.APIError as exc:
        return Seen(error=exc.message)
    choice = completion.choices[0]
    message, extra = choice.message, choice.message.model_extra or {}
    usage = completion.usage
    seen = Seen(text=message.content or "", refusal=message.refusal or "", finish=choice.finish_reason,
                thinking=extra.get("reasoning_content") or extra.get("reasoning") or "", model=completion.model,
                calls=[(c.id, c.function.name, _args(c.function.arguments)) for c in message.tool_calls or []])
    if usage is not None:
        cached = (usage.prompt_tokens_details and usage.prompt_tokens_details.cached_tokens) or 0
        reasoning = (usage.completion_tokens_details and usage.completion_tokens_details.reasoning_tokens) or 0
        seen.usage = (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, cached, reasoning)
    return seen


def sdk_responses(body: bytes) -> Seen:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(api_key="sk-dummy", base_url="http://sdk.test/v1", max_retries=0,
                           http_client=_client(httpx, body))
    with client.responses.stream(model="m", input="hi") as stream:
        for _ in stream:
            pass
        response = stream.get_final_response()
    seen = Seen(text=response.output_text, finish=response.status, model=response.model)
    thinking: list[str] = []
    for item in response.output:
        if item.type == "reasoning":
            thinking += [p.text for p in item.summary] + [p.text for p in item.content or []]
            seen.replay += [item.encrypted_content] if item.encrypted_content else []
        elif item.type == "function_call":
            seen.calls.append((item.call_id, item.name, _args(item.arguments)))
        elif item.type == "message":
            seen.refusal += "".join(c.refusal for c in item.content if c.type == "refusal")
    seen.thinking = "".join(thinking)
    u = response.usage
    seen.usage = (u.input_tokens, u.output_tokens, u.total_tokens, u.input_tokens_details.cached_tokens,
                  u.output_tokens_details.reasoning_tokens)
    return seen


def sdk_anthropic(body: bytes) -> Seen:
    anthropic = pytest.importorskip("anthropic")
    httpx2 = pytest.importorskip("httpx2")
    client = anthropic.Anthropic(api_key="sk-ant-dummy", base_url="http://sdk.test", max_retries=0,
                                 http_client=_client(httpx2, body))
    with client.messages.stream(model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}]) as stream:
        for _ in stream:
            pass
        message = stream.get_final_message()
    blocks = message.content
    u = message.usage
    read, write = u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0
    details = getattr(u, "output_tokens_details", None)
    thinking_tokens = getattr(details, "thinking_tokens", None) or 0
    return Seen(
        text="".join(b.text for b in blocks if b.type == "text"),
        thinking="".join(b.thinking for b in blocks if b.type == "thinking"),
        calls=[(b.id, b.name, b.input) for b in blocks if b.type == "tool_use"],
        finish=message.stop_reason, model=message.model,
        usage=(u.input_tokens + read + write, u.output_tokens, u.input_tokens + read + write + u.output_tokens,
               read, thinking_tokens),
        replay=[b.signature if b.type == "thinking" else b.data for b in blocks
                if b.type in ("thinking", "redacted_thinking")],
    )


def sdk_gemini(body: bytes) -> Seen:
    genai = pytest.importorskip("google.genai")
    from google.genai import errors, types

    options = types.HttpOptions(base_url="http://sdk.test", httpx_client=_client(httpx, body))
    client = genai.Client(api_key="dummy", http_options=options)
    seen, usage, block = Seen(), None, None
    try:
        for chunk in client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"):
            block = (chunk.prompt_feedback and chunk.prompt_feedback.block_reason) or block
            usage = chunk.usage_metadata or usage
            seen.model = chunk.model_version or seen.model
            for candidate in (chunk.candidates or [])[:1]:
                seen.finish = candidate.finish_reason or seen.finish
                for part in (candidate.content and candidate.content.parts) or []:
                    _gemini_part(seen, part)
    except errors.APIError as exc:
        return Seen(error=exc.message)
    seen.finish = _enum(seen.finish) or _enum(block)
    if usage is not None:
        prompt = (usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0)
        thoughts = usage.thoughts_token_count or 0
        output = (usage.candidates_token_count or 0) + thoughts
        seen.usage = (prompt, output, usage.total_token_count or prompt + output,
                      usage.cached_content_token_count or 0, thoughts)
    return seen


def _gemini_part(seen: Seen, part: Any) -> None:
    if part.thought_signature:
        seen.replay.append(base64.b64encode(part.thought_signature).decode())
    if part.function_call:
        seen.calls.append((part.function_call.id, part.function_call.name, part.function_call.args or {}))
    elif part.text is not None:
        if part.thought:
            seen.thinking += part.text
        else:
            seen.text += part.text


def _enum(value: Any) -> str | None:
    return None if value is None else getattr(value, "value", str(value))


SDK_READERS = {"openai": sdk_openai_chat, "openai_compat": sdk_openai_chat, "openai_responses": sdk_responses,
               "anthropic": sdk_anthropic, "gemini": sdk_gemini}


# --- nbagent ------------------------------------------------------------------------------


def _provider(family: str) -> Any:
    if family in ("openai", "openai_compat"):
        return OpenAIProvider("m", api_key="sk-dummy-0123456789")
    if family == "openai_responses":
        return OpenAIResponsesProvider("gpt-5", api_key="sk-dummy-0123456789")
    if family == "anthropic":
        return AnthropicProvider("m", api_key="sk-ant-dummy-0123456789")
    return GeminiProvider("gemini-2.5-flash", api_key="AIza-dummy-0123456789")


async def nbagent_reads(family: str, body: bytes) -> Seen:
    result = await replay(_provider(family), ModelRequest("m", [Message("user", [TextPart("hi")])]), body)
    if result.error is not None:
        return Seen(text=result.text, error=result.error.message)
    finish = result.finish
    parts = finish.message.parts
    seen = Seen(text=result.text, refusal=result.refusal, thinking=result.thinking, finish=finish.raw_reason,
                model=finish.model, calls=[(c.id, c.name, c.args) for c in result.tool_calls])
    if result.usage is not None:
        u = result.usage.usage
        seen.usage = (u.prompt_token_count, u.generated_token_count, u.total_token_count,
                      u.cached_content_token_count, u.thoughts_token_count)
    for part in parts:
        details = part.provider_details or {}
        if family == "anthropic" and isinstance(part, ThinkingPart):
            seen.replay.append(details.get("signature") or details.get("redacted_data"))
        elif family == "gemini" and details.get("thought_signature"):
            seen.replay.append(details["thought_signature"])
        elif family == "openai_responses" and isinstance(part, ThinkingPart) and "openai_item" in details:
            seen.replay += [details["openai_item"].get("encrypted_content")] * bool(
                details["openai_item"].get("encrypted_content"))
    if family == "gemini" and finish.prompt_blocked:
        seen.finish = finish.raw_reason
    assert all(isinstance(p, (TextPart, ThinkingPart, ToolUsePart)) for p in parts)
    return seen


# --- the comparison -----------------------------------------------------------------------------


def differences(family: str, name: str, sdk: Seen, ours: Seen) -> set[str]:
    """The fields on which the two readers disagree."""
    if sdk.error is not None or ours.error is not None:
        agree = sdk.error is not None and ours.error is not None and sdk.error in ours.error
        return set() if agree else {"error"}
    found = set()
    for name_ in FIELDS:
        mine, theirs = getattr(ours, name_), getattr(sdk, name_)
        if name_ == "calls" and (family, name) in NO_CALL_IDS:  # Gemini sent no id: ours is generated
            mine, theirs = [c[1:] for c in mine], [c[1:] for c in theirs]
        if mine != theirs:
            found.add(name_)
    return found


@pytest.mark.parametrize("family,name", CASES, ids=[f"{f}/{n}" for f, n in CASES])
async def test_nbagent_agrees_with_the_official_sdk(family, name):
    fx = load_fixture(family, name)
    sdk = SDK_READERS[family](fx.body)
    ours = await nbagent_reads(family, fx.body)
    assert differences(family, name, sdk, ours) == INTENDED.get((family, name), set()), (sdk, ours)


def test_every_intended_difference_is_in_the_table():
    for family, name in list(INTENDED) + list(NO_CALL_IDS):
        assert name in __doc__, f"{family}/{name} is not explained in the module docstring"
    assert len(CASES) >= 50
