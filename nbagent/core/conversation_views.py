"""The views of a Conversation: DataFrames, usage reports and the chat widget.

They live in the analysis and notebook layers and are imported when first
used, so ``import nbagent`` needs neither pandas nor anywidget. A
Conversation gets them from this mixin; it supplies ``history`` and ``turns``.
"""

from __future__ import annotations

from typing import Any


class ConversationViews:
    """``history_df()``, ``usage_df()``, ``tool_calls_df()``, ``approvals_df()``, ``estimate()``, ``usage_summary()``,
    ``plot_usage()``, ``to_markdown()``, ``to_html()``, ``widget()`` and the notebook
    display of a Conversation."""

    _widget: Any = None

    def history_df(self):
        """One row per step (pandas)."""
        from ..analysis.frames import history_frame

        return history_frame(self.history)

    def _prices(self, pricing: dict | None) -> Any:
        """The price overrides of one call, else the conversation's own (``conv.pricing``)."""
        return pricing if pricing is not None else getattr(self, "pricing", None)

    def usage_df(self, pricing: dict | None = None, by: str | None = None):
        """One row per turn from the never-trimmed ledger (pandas).

        ``by="tool"``: one row per turn and token contributor (each tool's results,
        thinking), so ``usage_df(by="tool").groupby("tool")`` shows where the tokens go.
        """
        if by == "tool":
            from ..analysis.attribution import tool_tokens_frame

            return tool_tokens_frame(self.history, self.turns)
        if by is not None:
            from .errors import NbagentError

            raise NbagentError(f"usage_df(by=...) takes None or 'tool', not {by!r}", kind="config")
        from ..analysis.frames import usage_frame

        return usage_frame(self.turns, pricing=self._prices(pricing))

    def approvals_df(self):
        """One row per approval decision on a tool call: who or what decided, and when (pandas)."""
        from ..analysis.approvals import approvals_frame

        return approvals_frame(self.history)

    def estimate(self, prompt: str, pricing: dict | None = None):
        """Tokens and cost of the next request if ``prompt`` were sent now (nothing is sent)."""
        from ..analysis.estimate import estimate_request

        return estimate_request(self, prompt, pricing=pricing)

    def tool_calls_df(self):
        """One row per tool call (pandas)."""
        from ..analysis.frames import tool_calls_frame

        return tool_calls_frame(self.history)

    def usage_summary(self, pricing: dict | None = None):
        from ..analysis.report import usage_summary

        return usage_summary(self.turns, pricing=self._prices(pricing))

    def plot_usage(self, pricing: dict | None = None):
        from ..analysis.report import plot_usage

        return plot_usage(self.turns, pricing=self._prices(pricing))

    def to_markdown(self) -> str:
        """The conversation as a markdown document: prompts, thoughts, answers, tool calls
        with their arguments and results, errors, each turn's usage. Model and tool text is
        escaped (raw HTML shows as text, images become links, only safe links remain)."""
        from ..notebook.transcript import conversation_markdown

        return conversation_markdown(self.history, self.turns, self.conversation_id)

    def to_html(self) -> str:
        """The conversation as one self-contained HTML page (inline CSS; no scripts, no
        remote fetches), everything from the model and the tools escaped."""
        from ..notebook.transcript import conversation_html

        return conversation_html(self.history, self.turns, self.conversation_id)

    def widget(self, **kwargs):
        """The ChatWidget bound to this conversation (one per conversation; kwargs make a new one)."""
        from ..notebook.widget import ChatWidget

        if kwargs or self._widget is None or getattr(self._widget, "comm", None) is None:
            widget = ChatWidget(self, **kwargs)
            if kwargs:
                return widget
            self._widget = widget
        return self._widget

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            return self.widget()._repr_mimebundle_(include=include, exclude=exclude)
        except ImportError:
            from ..notebook.transcript import transcript_markdown

            return {"text/markdown": transcript_markdown(self.history), "text/plain": repr(self)}

    def export_frames(self, state: Any = None) -> dict:
        """The DataFrames as JSON rows (what ``save(path, frames=True)`` embeds); needs numpy."""
        from ..analysis.sessions import export_frames

        state = state if state is not None else self.to_state()
        return export_frames(state.steps, state.turns)
