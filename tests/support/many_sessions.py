"""Realistic saved sessions in bulk, written by the real writer (``save_conversation``).

``synthetic_state(seed, turns)`` builds a ConversationState the way the agent loop leaves one:
per turn a prompt, model calls with usage (cached reads, cache writes, thinking on some),
tool calls with their execution steps (auto, approved, denied) on most turns, an answer and a
FINISH step; some turns fail with HTTP 429; a ChatSession mirrors the text. Seeds vary the
model, the provider and the shape, so a folder of them looks like weeks of real use.
"""

from __future__ import annotations

import random
from pathlib import Path

from nbagent.core.chat_session import ChatSession
from nbagent.core.conversation_state import ConversationState
from nbagent.core.ledger import TurnRecord
from nbagent.core.messages import Message, TextPart, ToolResultPart, ToolUsePart
from nbagent.core.session_file import save_conversation
from nbagent.core.steps import (ApprovalDecision, FinishReason, Step, StepSource, StepStatus, StepTarget, StepType,
                                ToolCall, TurnStatus, UsageMetadata)

MODELS = (("gpt-4.1-mini", "openai"), ("claude-sonnet-4-5", "anthropic"), ("gemini-2.5-flash", "gemini"),
          ("local", "local"))
TOOLS = ("read_file", "search", "calculator", "write_file")
T0 = 1_790_000_000.0  # 2026-09-21


def synthetic_state(seed: int, turns: int, *, tools: bool = True, errors: bool = True) -> ConversationState:
    """One session of ``turns`` turns (seeded: the same arguments give the same session)."""
    rnd = random.Random(seed)
    model, provider = MODELS[seed % len(MODELS)]
    t = T0 + seed * 3600.0
    steps: list[Step] = []
    records: list[TurnRecord] = []
    chat = ChatSession(session_id=f"chat-{seed}", system="You are a helpful assistant.")
    context = 800
    for turn in range(turns):
        prompt = f"question {turn} of session {seed}: " + "please look into it " * rnd.randint(1, 6)
        rec = TurnRecord(turn=turn, prompt=prompt, model=model, provider=provider, started_at=t,
                         context_window=128_000)
        steps.append(_step(len(steps), turn, StepType.TEXT_RESPONSE, StepSource.USER, StepTarget.UNSPECIFIED,
                           t, content=prompt))
        chat.push_user(prompt)
        if errors and rnd.random() < 0.05:  # rate limited: no usage, an error FINISH
            steps.append(_step(len(steps), turn, StepType.TEXT_RESPONSE, StepSource.MODEL, StepTarget.USER, t + 0.2,
                               status=StepStatus.ERROR, error="rate limited", http_code=429, model=model))
            steps.append(_finish(len(steps), turn, t + 0.3, FinishReason.ERROR, StepStatus.ERROR))
            rec.finished_at, rec.model_calls = t + 0.3, 1
            rec.status, rec.finish_reason, rec.error, rec.http_code = TurnStatus.ERROR, FinishReason.ERROR, \
                "rate limited", 429
            records.append(rec)
            t += 60.0
            continue
        calls = [ToolCall(f"call_{seed}_{turn}_{i}", rnd.choice(TOOLS), {"path": f"/data/{rnd.randint(0, 99)}.csv"})
                 for i in range(rnd.randint(1, 2) if tools and rnd.random() < 0.7 else 0)]
        rec.first_token_at = t + 0.4
        usage_total = UsageMetadata()
        if calls:
            use = _usage(rnd, context)
            steps.append(_step(len(steps), turn, StepType.TOOL_CALL, StepSource.MODEL, StepTarget.USER, t + 0.1,
                               finished=t + 1.0, tool_calls=calls, usage=use, model=model,
                               thinking="I should call a tool. " * rnd.randint(0, 3),
                               finish_reason=FinishReason.TOOL_CALLS))
            usage_total += use
            chat.push_assistant(Message("assistant", [ToolUsePart(c.id, c.name, c.args) for c in calls]))
            results = []
            for c in calls:
                decision = rnd.choice((ApprovalDecision.AUTO, ApprovalDecision.AUTO, ApprovalDecision.APPROVED,
                                       ApprovalDecision.DENIED))
                denied = decision is ApprovalDecision.DENIED
                result = "The user denied this call." if denied else "row,value\n" + "1,2\n" * rnd.randint(5, 60)
                steps.append(_step(len(steps), turn, StepType.TOOL_CALL, StepSource.SYSTEM, StepTarget.ENVIRONMENT,
                                   t + 1.0, finished=t + 1.5, tool_calls=[c], content=result, approval=decision,
                                   status=StepStatus.ERROR if denied else StepStatus.DONE,
                                   error="denied by the user" if denied else "", run_seconds=None if denied else 0.2,
                                   decided_at=t + 1.1, decided_by="user" if decision is not ApprovalDecision.AUTO
                                   else "policy allow_all"))
                results.append(ToolResultPart(c.id, result, is_error=denied, name=c.name))
                context += len(result) // 4
            chat.push_tool_results(results)
        use = _usage(rnd, context)
        answer = f"Answer {turn}: " + "here is what I found. " * rnd.randint(2, 12)
        steps.append(_step(len(steps), turn, StepType.TEXT_RESPONSE, StepSource.MODEL, StepTarget.USER, t + 1.6,
                           finished=t + 3.0, content=answer, usage=use, model=model, finish_reason=FinishReason.STOP))
        chat.push_assistant(Message("assistant", [TextPart(answer)]))
        usage_total += use
        steps.append(_finish(len(steps), turn, t + 3.0, FinishReason.STOP, StepStatus.DONE))
        rec.usage, rec.model_calls, rec.tool_calls = usage_total, 1 + bool(calls), len(calls)
        rec.finished_at, rec.status, rec.finish_reason = t + 3.0, TurnStatus.DONE, FinishReason.STOP
        rec.context_tokens = use.prompt_token_count + use.generated_token_count
        context = rec.context_tokens
        records.append(rec)
        t += 60.0 + rnd.random() * 600
    total = sum((r.usage for r in records), UsageMetadata())
    for step in steps:  # what a Conversation records as the steps stream in
        step.derive(f"session-{seed:05d}")
    return ConversationState(conversation_id=f"session-{seed:05d}", steps=steps,
                             turn_starts=[i for i, s in enumerate(steps) if s.source == StepSource.USER],
                             turns=records, total_usage=total, last_response=steps[-2].content, chat_session=chat)


def write_sessions(folder: Path, count: int, turns: tuple[int, int] = (20, 50), **kw) -> list[Path]:
    """``count`` sessions of ``turns[0]``..``turns[1]`` turns saved into ``folder`` (``session-00000.json``...)."""
    folder.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(count)
    return [save_conversation(synthetic_state(i, rnd.randint(*turns), **kw), folder / f"session-{i:05d}.json")
            for i in range(count)]


def _usage(rnd: random.Random, context: int) -> UsageMetadata:
    prompt = context + rnd.randint(20, 200)
    cached = int(prompt * rnd.choice((0.0, 0.5, 0.9)))
    writes = rnd.choice((0, 0, 256))
    out, thoughts = rnd.randint(20, 400), rnd.choice((0, 0, rnd.randint(10, 300)))
    return UsageMetadata(prompt, out, prompt + out + thoughts, cached, thoughts, writes)


def _step(index: int, turn: int, type_: StepType, source: StepSource, target: StepTarget, created: float, *,
          finished: float | None = None, status: StepStatus = StepStatus.DONE, usage: UsageMetadata | None = None,
          **fields) -> Step:
    return Step(id=f"step-{index}", step_index=index, type=type_, source=source, target=target, status=status,
                created_at=created, finished_at=created if finished is None else finished, turn=turn,
                usage_metadata=usage, **fields)


def _finish(index: int, turn: int, at: float, reason: FinishReason, status: StepStatus) -> Step:
    return _step(index, turn, StepType.FINISH, StepSource.SYSTEM, StepTarget.USER, at, status=status,
                 finish_reason=reason)
