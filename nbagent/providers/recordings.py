"""How a chat names a replayed recording: light, so showing a chat never imports the replay provider."""

from __future__ import annotations

from pathlib import Path


def is_recording_path(model: str) -> bool:
    """Whether a replay's model string is the recording's path (not a recorded model's name)."""
    return str(model).lower().endswith(".json")


def replay_label(path: str) -> str:
    """A replay as a person reads it: the recording's name, not its path ("replay of lesson-7")."""
    return f"replay of {Path(str(path)).stem or str(path)}"
