"""Stand-in tools for a replay: each answers with the recorded result instead of running.

A call is matched to a recorded result of the same tool with the same arguments (in recorded
order), else to that tool's next unused result; with none left it is an error result saying so.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from ..providers.replay import RecordedResult, Recording
from .tools import Tool, ToolOutput

NO_RESULT = "replay: no recorded result is left for this call"


class RecordedTool(Tool):
    """A tool of a recording that gives back its recorded results (nothing runs)."""

    def __init__(self, name: str, results: list[RecordedResult]) -> None:
        super().__init__(name, f"(replay) the recorded results of {name}",
                         {"type": "object", "properties": {}, "additionalProperties": True}, self._unused)
        self._left = deque(results)

    @staticmethod
    def _unused(**kwargs: Any) -> str:
        return NO_RESULT

    async def run(self, args: dict | None = None, *, timeout: float | None = None) -> ToolOutput:
        key = _key(args or {})
        match = next((r for r in self._left if _key(r.args) == key), None)
        if match is None and self._left:
            match = self._left[0]
        if match is None:
            return ToolOutput(text=NO_RESULT, is_error=True, error=NO_RESULT)
        self._left.remove(match)
        return ToolOutput(text=match.content, is_error=match.is_error,
                          error=match.content if match.is_error else "")


def _key(args: dict) -> str:
    return json.dumps(args, sort_keys=True, default=str)


def recorded_tools(recording: Recording) -> list[Tool]:
    """One stand-in tool per tool name of the recording."""
    names: dict[str, list[RecordedResult]] = {}
    for result in recording.results:
        names.setdefault(result.name, []).append(result)
    for turn in recording.turns:  # tools called without a recorded result still exist
        for call in turn.calls:
            for tc in call.tool_calls:
                names.setdefault(tc.name, [])
    return [RecordedTool(name, results) for name, results in names.items()]
