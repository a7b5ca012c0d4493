"""GeminiProvider: every recorded stream replayed, request bodies, error bodies."""

from __future__ import annotations

import json

import pytest

from support.replay import fixture_names, load_error_fixture, load_fixture, replay
from nbagent.core.errors import NbagentError
from nbagent.core.messages import Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from nbagent.providers.base import ModelRequest, ToolSpec, Usage
from nbagent.providers.gemini import PLACEHOLDER_SIGNATURE, GeminiProvider
from nbagent.core.steps import FinishReason

KEY = "AIzaSyTEST-0123456789abcdefghijklmn"
NAMES = fixture_names("gemini")
FINISH = {
    "STOP": FinishReason.STOP,
    "SAFETY": FinishReason.CONTENT_FILTER,
    "RECITATION": FinishReason.CONTENT_FILTER,
}
WEATHER = ToolSpec(
    "get_weather",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
     "additionalProperties": False},
)


def provider(model: str = "gemini-2.5-flash", **kw) -> GeminiProvider:
    return GeminiProvider(model, api_key=KEY, **kw)


def ask(text: str = "hi", **kw) -> ModelRequest:
    return ModelRequest(model="gemini-2.5-flash", messages=[Message("user", [TextPart(text)])], **kw)


def sse(*chunks: dict) -> bytes:
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode()


def test_fixtures_are_available():
    assert len(NAMES) >= 12


# --- every recorded stream ---------------------------------------------------


@pytest.mark.parametrize("split", ["whole", "random", "1"])
@pytest.mark.parametrize("name", NAMES)
async def test_fixture_replay(name, split):
    fx = load_fixture("gemini", name)
    exp = fx.expected
    result = await replay(provider(), ask(), fx.body, split=split, seed=len(name))

    if exp["error"]:  # in-band error after partial output
        assert result.text == exp["text"]
        assert result.finish is None
        assert result.error.kind == "server" and not result.error.retryable
        assert exp["error"]["message"] in str(result.error)
        return
    assert result.error is None, result.error
    finish = result.finish

    if exp["prompt_block_reason"]:
        assert finish.reason == FinishReason.CONTENT_FILTER
        assert finish.raw_reason == exp["prompt_block_reason"]
        assert finish.prompt_blocked == f"Gemini blocked this prompt ({exp['prompt_block_reason']}); no reply was generated."
        assert result.text == "" and finish.message.parts == []  # no made-up reply
        return

    assert result.text == exp["text"] == finish.message.text
    assert (result.thinking or None) == exp["thinking"]
    want = FINISH[exp["finish_reason"]]
    if exp["tool_calls"] and want == FinishReason.STOP:
        want = FinishReason.TOOL_CALLS
    assert finish.reason == want and finish.raw_reason == exp["finish_reason"]
    assert finish.model == (exp["model"] or "")

    uses = finish.message.tool_uses
    assert [(c.name, c.args) for c in result.tool_calls] == [
        (c["name"], c["arguments_parsed"]) for c in exp["tool_calls"]
    ]
    assert [(s.id, s.name) for s in result.starts] == [(c.id, c.name) for c in result.tool_calls]
    for use, call, want_call in zip(uses, result.tool_calls, exp["tool_calls"]):
        assert use.id == call.id
        if want_call["id"]:
            assert call.id == want_call["id"]
        else:
            assert call.id.startswith("call_")
        assert use.provider_details["thought_signature"] == want_call["thought_signature"]

    signed_text = [
        p.provider_details["thought_signature"]
        for p in finish.message.parts
        if isinstance(p, TextPart) and p.provider_details.get("thought_signature")
    ]
    assert signed_text == [s["thought_signature"] for s in exp["non_call_thought_signatures"]]
    assert all(p.text for p in finish.message.parts if isinstance(p, (TextPart, ThinkingPart))
               and not p.provider_details)  # no empty text parts

    if exp["raw_usage"] is None:
        assert result.usage is None
        return
    usage, want_usage = result.usage, exp["usage"]
    assert usage.raw == exp["raw_usage"]
    assert usage.usage.prompt_token_count == want_usage["input_tokens"]
    assert usage.usage.generated_token_count == want_usage["output_tokens"]
    assert usage.usage.total_token_count == want_usage["total_tokens"]
    assert usage.usage.cached_content_token_count == (want_usage["cache_read_tokens"] or 0)
    assert usage.usage.thoughts_token_count == (want_usage["reasoning_tokens"] or 0)


async def test_usage_is_reported_live_and_last_one_wins():
    fx = load_fixture("gemini", "text-usage-live-mid-stream")
    result = await replay(provider(), ask(), fx.body, split="random")
    totals = [e.usage.total_token_count for e in result.events if isinstance(e, Usage)]
    assert len(totals) >= 2 and totals[-1] == 133


async def test_stream_without_finish_reason_is_a_network_error():
    body = sse({"candidates": [{"content": {"parts": [{"text": "Half an ans"}], "role": "model"}}]})
    result = await replay(provider(), ask(), body, split="1")
    assert result.text == "Half an ans"
    assert result.error.kind == "network" and result.finish is None


async def test_error_object_in_a_data_line_raises():
    body = sse(
        {"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]},
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}},
    )
    result = await replay(provider(), ask(), body)
    assert result.text == "Hi"
    assert result.error.kind == "server" and "overloaded" in str(result.error)


async def test_structured_output_is_parsed_from_the_json_reply():
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}}
    request = ask("2+2?", response_format=schema)
    config = provider().build_http_request(request)[2]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == schema
    body = sse(
        {"candidates": [{"content": {"parts": [{"text": '{"ans'}]}}]},
        {"candidates": [{"content": {"parts": [{"text": 'wer": 4}'}]}, "finishReason": "STOP"}]},
    )
    result = await replay(provider(), request, body, split="1")
    assert result.finish.structured_output == {"answer": 4}


def test_structured_output_accepts_a_named_schema():
    schema = {"type": "array", "items": {"type": "string"}}
    config = provider().build_http_request(ask(response_format={"name": "x", "schema": schema}))[2]
    assert config["generationConfig"]["responseJsonSchema"] == schema


# --- replay of what came back --------------------------------------------------


def _followup(message: Message, results: list) -> ModelRequest:
    msgs = [Message("user", [TextPart("hi")]), message, Message("user", results)]
    return ModelRequest(model="gemini-3-pro-preview", messages=msgs)


async def test_function_call_signature_and_synthetic_id_round_trip():
    fx = load_fixture("gemini", "gemini3-function-call-thought-signature")
    result = await replay(provider("gemini-3-pro-preview"), ask(), fx.body, split="random")
    call = result.finish.message.tool_uses[0]
    follow = _followup(result.finish.message, [ToolResultPart(call.id, "France")])
    contents = provider().build_http_request(follow)[2]["contents"]
    model_turn, results = contents[1], contents[2]
    assert model_turn == {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "get_country", "args": {}},  # synthetic id not sent
                "thoughtSignature": fx.expected["tool_calls"][0]["thought_signature"],
            }
        ],
    }
    assert results["parts"] == [
        {"functionResponse": {"name": "get_country", "response": {"result": "France"}}}
    ]


async def test_function_call_with_real_id_is_answered_by_id():
    fx = load_fixture("gemini", "function-call-with-id")
    result = await replay(provider(), ask(), fx.body)
    follow = _followup(result.finish.message, [ToolResultPart("96c1su3s", "no access", is_error=True)])
    contents = provider().build_http_request(follow)[2]["contents"]
    assert contents[1]["parts"][0]["functionCall"]["id"] == "96c1su3s"
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "get_user_country", "response": {"error": "no access"},
                              "id": "96c1su3s"}}
    ]


async def test_text_signature_replayed_and_thoughts_not():
    fx = load_fixture("gemini", "thinking-thought-parts")
    result = await replay(provider(), ask(), fx.body, split="random")
    follow = ModelRequest(
        model="gemini-2.5-pro",
        messages=[Message("user", [TextPart("hi")]), result.finish.message, Message("user", [TextPart("ok")])],
    )
    parts = provider().build_http_request(follow)[2]["contents"][1]["parts"]
    assert parts == [
        {"text": fx.expected["text"],
         "thoughtSignature": fx.expected["non_call_thought_signatures"][0]["thought_signature"]}
    ]


# --- request body ---------------------------------------------------------------

SIG_TEXT, SIG_CALL = "c2lnLXRleHQ=", "c2lnLWNhbGw="


def history() -> list[Message]:
    return [
        Message("user", [TextPart("Weather in Paris and Rome?")]),
        Message(
            "assistant",
            [
                ThinkingPart("**Planning** call the tool"),
                TextPart("Checking.", provider_details={"thought_signature": SIG_TEXT}),
                ToolUsePart("fc_1", "get_weather", {"city": "Paris"},
                            provider_details={"thought_signature": SIG_CALL}),
                ToolUsePart("call_ab_1", "get_weather", {"city": "Rome"},
                            provider_details={"synthetic_id": True}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultPart("fc_1", "18C"),
                ToolResultPart("call_ab_1", "city not found", is_error=True, name="get_weather"),
            ],
        ),
        Message("assistant", [TextPart("Paris is 18C; Rome failed.")]),
        Message("user", [TextPart("Thanks. And tomorrow?")]),
    ]


def request(**kw) -> ModelRequest:
    base = dict(model="gemini-2.5-flash", messages=history(), system="Be brief.", tools=[WEATHER],
                temperature=0.3, max_tokens=500)
    base.update(kw)
    return ModelRequest(**base)


def test_request_url_keeps_the_key_in_a_header():
    url, headers, _ = provider().build_http_request(request())
    assert url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"
        ":streamGenerateContent?alt=sse"
    )
    assert KEY not in url
    assert headers["x-goog-api-key"] == KEY


def test_request_history():
    body = provider().build_http_request(request())[2]
    contents = body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "model", "user"]
    assert contents[1]["parts"] == [
        {"text": "Checking.", "thoughtSignature": SIG_TEXT},  # the unsigned thought is not replayed
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "fc_1"},
         "thoughtSignature": SIG_CALL},
        {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"result": "18C"}, "id": "fc_1"}},
        {"functionResponse": {"name": "get_weather", "response": {"error": "city not found"}}},
    ]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["tools"] == [{"functionDeclarations": [
        {"name": "get_weather", "description": "Weather for a city.",
         "parametersJsonSchema": WEATHER.input_schema}]}]
    assert body["generationConfig"] == {
        "temperature": 0.3, "maxOutputTokens": 500, "thinkingConfig": {"includeThoughts": True}
    }


def test_tool_results_and_text_share_one_user_turn():
    msgs = history()[:2] + [
        Message("user", [ToolResultPart("fc_1", "18C")]),
        Message("user", [TextPart("and hurry"), ToolResultPart("call_ab_1", "20C")]),
    ]
    contents = provider().build_http_request(request(messages=msgs))[2]["contents"]
    assert len(contents) == 3
    assert [next(iter(p)) for p in contents[2]["parts"]] == ["functionResponse", "functionResponse", "text"]


def test_thinking_config_only_for_thinking_models_and_when_wanted():
    def config(**kw):
        return provider().build_http_request(request(**kw))[2]["generationConfig"]

    assert "thinkingConfig" not in config(model="gemini-2.0-flash")
    assert "thinkingConfig" not in config(include_reasoning=False)
    assert config(model="gemini-3-pro-preview")["thinkingConfig"] == {"includeThoughts": True}


def test_request_model_wins_and_models_prefix_is_accepted():
    url = provider("gemini-2.5-flash").build_http_request(request(model="models/gemini-2.5-pro"))[0]
    assert "/models/gemini-2.5-pro:streamGenerateContent" in url


def test_extra_merges_into_generation_config():
    extra = {"generationConfig": {"topK": 8}, "safetySettings": []}
    body = provider().build_http_request(request(extra=extra))[2]
    assert body["generationConfig"]["topK"] == 8 and body["generationConfig"]["temperature"] == 0.3
    assert body["safetySettings"] == []


def test_gemini3_gets_a_placeholder_signature_for_unsigned_calls():
    msgs = [
        Message("user", [TextPart("time?")]),
        Message("assistant", [ToolUsePart("toolu_x", "now", {})]),  # e.g. from another provider
        Message("user", [ToolResultPart("toolu_x", "12:00", name="now")]),
    ]
    gemini3 = request(messages=msgs, model="gemini-3-flash-preview")
    parts = provider().build_http_request(gemini3)[2]["contents"][1]["parts"]
    assert parts[0]["thoughtSignature"] == PLACEHOLDER_SIGNATURE
    older = provider().build_http_request(request(messages=msgs))[2]["contents"][1]["parts"]
    assert "thoughtSignature" not in older[0]


def test_cache_strategy_changes_nothing():
    a = provider().build_http_request(request(cache_strategy="auto"))[2]
    b = provider().build_http_request(request(cache_strategy="none"))[2]
    assert a == b


def test_missing_key_is_an_auth_error(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(NbagentError) as err:
        GeminiProvider("gemini-2.5-flash").build_http_request(ask())
    assert err.value.kind == "auth"


def test_google_api_key_fallback(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaSyENV-abcdefghijklmnopqrstuvw")
    p = GeminiProvider("gemini-2.5-flash")
    assert p.build_http_request(ask())[1]["x-goog-api-key"] == "AIzaSyENV-abcdefghijklmnopqrstuvw"
    assert "abcdefghij" not in repr(p)


# --- error bodies ---------------------------------------------------------------


def _google_error(code: int, status: str, message: str, details: list | None = None) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "status": status,
                                 "details": details or []}}, indent=2).encode()


def test_invalid_api_key_400_is_auth_and_does_not_echo_the_key():
    fx = load_error_fixture("gemini-400-api-key-invalid")
    error = provider().parse_error(400, json.dumps(fx["body"], indent=2).encode(), {})
    assert error.kind == "auth" and not error.retryable and error.http_code == 400
    assert "API key not valid" in str(error)
    assert "AIzv00G7" not in str(error) + repr(error)


@pytest.mark.parametrize(
    "name, kind",
    [("gemini-404-model-not-found", "invalid_request"), ("gemini-400-failed-precondition-location", "invalid_request")],
)
def test_recorded_error_bodies(name, kind):
    fx = load_error_fixture(name)
    error = provider().parse_error(fx["http_status"], json.dumps(fx["body"]).encode(), {})
    assert error.kind == kind and not error.retryable


async def test_recorded_mid_stream_cancel_after_output_is_a_clear_error():
    fx = load_fixture("gemini", "error-mid-stream-raw-json")  # {"error": {"code": 499, "status": "CANCELLED"}}
    result = await replay(provider(), ask(), fx.body, split="random")
    assert result.text == "First Second "
    assert (result.error.kind, result.error.retryable) == ("server", False)
    assert "cancelled the request on its side (499 CANCELLED) after part of the reply" in result.error.message
    assert len(result.requests) == 1


def test_location_error_says_what_the_debug_detail_says():
    fx = load_error_fixture("gemini-400-failed-precondition-location")
    error = provider().parse_error(400, json.dumps(fx["body"], indent=2).encode(), {})
    assert error.message == "User location is not supported for the API use."  # not "$grpcMessage"
    assert (error.kind, error.http_code) == ("invalid_request", 400)


def test_429_with_retry_info_is_retryable_after_the_delay():
    body = _google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"},
    ])
    error = provider().parse_error(429, body, {})
    assert (error.kind, error.retryable, error.retry_after) == ("rate_limit", True, 13)


def test_429_for_a_daily_quota_is_final():
    body = _google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
    ])
    error = provider().parse_error(429, body, {})
    assert error.kind == "rate_limit" and not error.retryable


@pytest.mark.parametrize("code, status", [(500, "INTERNAL"), (503, "UNAVAILABLE")])
def test_server_errors_are_retryable(code, status):
    error = provider().parse_error(code, _google_error(code, status, "try again"), {})
    assert error.kind == "server" and error.retryable


async def test_error_reply_wrapped_in_a_list():
    body = json.dumps([{"error": {"code": 404, "message": "models/x is not found", "status": "NOT_FOUND"}}]).encode()
    result = await replay(provider(max_retries=0), ask(), body, status=404)
    assert result.error.kind == "invalid_request" and "not found" in str(result.error)


async def test_signature_on_a_trailing_empty_text_part_is_kept_for_replay():
    body = sse(
        {"candidates": [{"content": {"parts": [{"text": "Done."}], "role": "model"}}]},
        {"candidates": [{"content": {"parts": [{"text": "", "thoughtSignature": "c2ln"}], "role": "model"},
                         "finishReason": "STOP"}]},
    )
    result = await replay(provider(), ask(), body, split="1")
    assert result.text == "Done."
    follow = ModelRequest(model="gemini-2.5-flash",
                          messages=[Message("user", [TextPart("hi")]), result.finish.message])
    parts = provider().build_http_request(follow)[2]["contents"][1]["parts"]
    assert parts == [{"text": "Done."}, {"text": "", "thoughtSignature": "c2ln"}]
