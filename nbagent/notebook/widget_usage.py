"""The widget's usage footer and budget gate: the context gauge, spend vs budget, and what a
send from the widget does when ``conv.estimate`` says it would overflow or exceed the budget.

Kernel -> front end, a few numbers per turn: the ``gauge`` trait is ``{"model", "tokens", "window",
"spent", "budget", "unpriced", "rules"}`` (the model the next turn goes to, tokens in context after the last
turn, the model's window or None, dollars spent, the budget or None, turns without a known price, the
rules file in the system prompt or ""),
refreshed when a turn starts or ends or the agent switches model, never per token. An over-budget send is answered with ``{"type": "confirm",
"prompt", "text"}``; the view shows ``text`` (the estimate) with "Send anyway" (it sends
``{"type": "send", "prompt", "over_budget": true}``) and "Cancel".
"""

from __future__ import annotations

from ..providers.recordings import is_recording_path, replay_label
from .conversation_view import ConversationView
from ..core.conversation_state import has_plumbing, plumbing_of


def model_label(provider: str, model: str) -> str:
    """A model as the chat names it: ``provider:model``, or the model alone where the provider
    adds nothing (``demo``, not ``demo:demo``); a replay by its recording's name, not its path."""
    provider, model = str(provider or ""), str(model or "")
    if provider == "replay" and is_recording_path(model):
        return replay_label(model)
    return model if not provider or provider in (model, "mock") or model.startswith(provider + ":") else f"{provider}:{model}"


def current_model(conv: ConversationView) -> str:
    """The model the conversation's next turn goes to ("" when it has no connection)."""
    conn = getattr(conv, "connection", None)
    return model_label(getattr(conn, "provider_name", ""), getattr(conn, "model_name", "")) if conn is not None else ""


def gauge_dict(conv: ConversationView) -> dict:
    """The footer's gauge: context tokens and window, spend and budget (JSON-ready)."""
    turns = conv.turns
    if not turns and not conv.history:  # a new chat: nothing spent, no context yet (no estimate, issue #32)
        return _new_chat_gauge(conv)
    tokens = turns[-1].context_tokens if turns else 0
    try:
        est = conv.estimate("")  # the spend so far, kept between calls (not a pass over every turn)
    except Exception:  # a broken price override: the gauge still shows tokens
        est = None
    if not tokens and conv.history:  # the last turn reported none (stopped, failed): estimate it
        tokens = est.input_tokens if est is not None else next(
            (t.context_tokens for t in reversed(turns) if t.context_tokens), 0)
    try:
        window = conv.budget.context_window
        usd, unpriced = (est.spent_usd, est.unpriced_turns) if est is not None else (0.0, 0)
    except Exception:  # a broken price override: the gauge still shows tokens
        window, usd, unpriced = None, 0.0, 0
    return {"model": current_model(conv), "tokens": int(tokens), "window": window, "spent": round(usd, 8),
            "budget": conv.budget.usd, "unpriced": unpriced, "rules": rules_label(conv)}


def rules_label(conv: ConversationView) -> str:
    """The rules file the conversation runs under, as the footer names it, or ""."""
    return plumbing_of(conv).rules_label if has_plumbing(conv) else ""


def _new_chat_gauge(conv: ConversationView) -> dict:
    """``gauge_dict`` of a conversation without turns, without importing the estimate module (prices,
    token counts) when the model declares its window (the local and demo models do): what the estimate
    would say of no turns, $0 spent."""
    declared = getattr(getattr(conv, "connection", None), "context_window", None)
    try:
        window = declared if isinstance(declared, int) and declared > 0 else conv.budget.context_window
    except Exception:  # a broken price override: the gauge still shows the rest
        window = None
    return {"model": current_model(conv), "tokens": 0, "window": window, "spent": 0.0,
            "budget": conv.budget.usd, "unpriced": 0, "rules": rules_label(conv)}


def policy_notice(conv: ConversationView, prompt: str = "") -> str:
    """Why the conversation's policy refuses a turn now (a course: closed, over its period's budget,
    and when it opens again), or ""."""
    if not has_plumbing(conv):
        return ""
    try:
        err = plumbing_of(conv).refusal(prompt)
    except Exception as exc:  # a broken policy or session folder: say so, the send will tell too
        return f"{plumbing_of(conv).policy.name}: {exc}"
    return f"Not sent: {err.message}" if err is not None else ""



def gate(conv: ConversationView, prompt: str, over_budget: bool) -> tuple[str | None, str]:
    """Before a widget send: (the question to ask instead of sending — the widget's ``confirm``
    event, protocol.py — or None; a notice).

    ``over_budget=True`` is the user's "Send anyway": the conversation lets this one turn through.
    """
    try:
        est = conv.estimate(prompt)
    except Exception as exc:  # no estimate: send as usual, the request itself will tell
        return None, f"(no estimate: {exc})"
    if est.over_budget and not over_budget:
        return f"This turn would exceed the budget. Estimate: {est.summary()}.", ""
    if over_budget:
        conv.budget.allow_over_once()
    if est.will_overflow:
        return None, (f"Warning: this turn will likely overflow the context window "
                      f"(~{est.input_tokens:,} tokens of {est.context_window:,}).")
    return None, ""
