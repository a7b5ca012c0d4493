"""The local model's sampling defaults (repeat penalty + DRY) with the real llama.cpp server
and SmolLM2-135M: they reach the server, a request can override them, and a longer answer
no longer loops."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from nbagent.core.messages import Message, TextPart
from nbagent.providers.base import Finish, ModelRequest
from nbagent.providers.local import (
    DEFAULT_SAMPLING,
    INSTALL_COMMAND,
    LocalProvider,
    local_runtime_available,
)

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(not local_runtime_available(),
                       reason=f"local model runtime missing; install with: {INSTALL_COMMAND}"),
]

STORY = "Write a long story about a dragon and a knight."
OFF = {"repeat_penalty": 1.0, "dry_multiplier": 0.0}


def repeated_5grams(text: str) -> tuple[int, int]:
    """(word 5-grams that repeat an earlier one, all word 5-grams)."""
    words = text.split()
    grams = [tuple(words[i:i + 5]) for i in range(len(words) - 4)]
    return len(grams) - len(set(grams)), len(grams)


def request(prompt: str, max_tokens: int, **extra) -> ModelRequest:
    return ModelRequest(model="smollm2", messages=[Message("user", [TextPart(prompt)])],
                        temperature=0, max_tokens=max_tokens, extra=extra)


async def answer(provider: LocalProvider, req: ModelRequest) -> str:
    events = [e async for e in provider.stream(req)]
    assert isinstance(events[-1], Finish)
    return events[-1].message.text


async def slot_params(provider: LocalProvider, n_predict: int) -> dict:
    """The sampling parameters llama.cpp used for the request that asked for ``n_predict``."""
    base = provider.base_url.rsplit("/v1", 1)[0]
    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        slots = (await client.get(f"{base}/slots")).json()
    used = [s["params"] for s in slots if s.get("params", {}).get("n_predict") == n_predict]
    assert used, f"no slot served a request with n_predict={n_predict}: {slots}"
    return used[0]


async def test_defaults_reach_the_server_and_a_request_can_override_them():
    provider = LocalProvider(n_ctx=1024)
    bodies = []
    build = provider.build_http_request

    def record(req):
        url, headers, body = build(req)
        bodies.append(body)
        return url, headers, body

    provider.build_http_request = record  # type: ignore[method-assign]
    try:
        await answer(provider, request("Say hello.", 37))
        assert {k: bodies[0][k] for k in DEFAULT_SAMPLING} == DEFAULT_SAMPLING
        params = await slot_params(provider, 37)
        assert params["repeat_penalty"] == pytest.approx(1.1)
        assert params["repeat_last_n"] == 256
        assert params["dry_multiplier"] == pytest.approx(0.8)

        await answer(provider, request("Say hello.", 38, repeat_penalty=1.3))
        params = await slot_params(provider, 38)
        assert params["repeat_penalty"] == pytest.approx(1.3)  # the request's own field wins
        assert params["dry_multiplier"] == pytest.approx(0.8)
    finally:
        await provider.aclose()


async def test_a_longer_answer_no_longer_loops():
    # the same prompt, greedy decoding and a fixed seed, without and with the defaults
    plain = LocalProvider(n_ctx=1024, sampling={**OFF, "seed": 42})
    tuned = LocalProvider(n_ctx=1024, sampling={"seed": 42})
    try:
        before = await answer(plain, request(STORY, 300))
        after = await answer(tuned, request(STORY, 300))
    finally:
        await asyncio.gather(plain.aclose(), tuned.aclose())
    rep_before, n_before = repeated_5grams(before)
    rep_after, n_after = repeated_5grams(after)
    print(f"\nrepeated 5-grams: {rep_before}/{n_before} without the defaults, "
          f"{rep_after}/{n_after} with them")
    assert n_after >= 100, after  # a longer answer, not a short one that cannot repeat
    assert rep_before >= 20, before  # the loop the defaults are for is still there without them
    assert rep_after * 5 <= rep_before and rep_after <= 0.05 * n_after, after
