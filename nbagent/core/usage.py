"""Token counts of a model call or a turn, alike for every provider, and their one vocabulary.

``TOKEN_COUNTS`` is the only place that says what each count is called: its ``UsageMetadata``
field (the seed's name) and its DataFrame column (``history_df``, ``usage_df``, Parquet); the
frames' token columns are generated from it. Where each wire's usage object carries a count is
that wire's spec (``WireSpec.token_names``), which its stream parser reads them by. "Input" is every
token sent; "output" is the generated tokens other than thinking; "generated" is output plus thinking.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

MAX_COUNT = 2**53  # the largest count a float64 frame column holds exactly; past it a file is damaged


def count(value: Any, name: str) -> int:
    """``value`` as a count read from a file: an int from 0 to :data:`MAX_COUNT` (ValueError otherwise,
    never a count that would wrap to a negative int64 in a frame)."""
    n = int(value or 0)
    if not 0 <= n <= MAX_COUNT:
        raise ValueError(f"{name} {str(n)[:30]}{'…' if len(str(n)) > 30 else ''} is out of range (0 to 2**53)")
    return n


@dataclass
class UsageMetadata:
    """Token counts, normalized alike for every provider.

    ``prompt_token_count`` counts every input token (cached and cache-written
    included), ``cached_content_token_count`` the cache reads among them,
    ``thoughts_token_count`` the reasoning tokens, ``candidates_token_count``
    the other generated tokens, and ``cache_write_token_count`` the input
    tokens written to a prompt cache (Anthropic, OpenRouter; 0 elsewhere).
    """

    prompt_token_count: int = 0
    candidates_token_count: int = 0
    total_token_count: int = 0
    cached_content_token_count: int = 0
    thoughts_token_count: int = 0
    cache_write_token_count: int = 0

    def __add__(self, other: UsageMetadata) -> UsageMetadata:
        if not isinstance(other, UsageMetadata):
            return NotImplemented
        return UsageMetadata(
            self.prompt_token_count + other.prompt_token_count,
            self.candidates_token_count + other.candidates_token_count,
            self.total_token_count + other.total_token_count,
            self.cached_content_token_count + other.cached_content_token_count,
            self.thoughts_token_count + other.thoughts_token_count,
            self.cache_write_token_count + other.cache_write_token_count,
        )

    def __sub__(self, other: UsageMetadata) -> UsageMetadata:
        if not isinstance(other, UsageMetadata):
            return NotImplemented
        return UsageMetadata(
            self.prompt_token_count - other.prompt_token_count,
            self.candidates_token_count - other.candidates_token_count,
            self.total_token_count - other.total_token_count,
            self.cached_content_token_count - other.cached_content_token_count,
            self.thoughts_token_count - other.thoughts_token_count,
            self.cache_write_token_count - other.cache_write_token_count,
        )

    def __radd__(self, other):  # sum() starts from 0
        if other == 0:
            return UsageMetadata(*_usage_tuple(self))
        return NotImplemented

    @property
    def generated_token_count(self) -> int:
        """Every generated token: candidates (output) plus thoughts (thinking)."""
        return self.candidates_token_count + self.thoughts_token_count

    def to_dict(self, *, compact: bool = False) -> dict:
        """Every count by name; ``compact`` leaves out the zeros (``from_dict`` reads them as 0)."""
        if compact:
            return {k: v for k, v in self.__dict__.items() if v}
        return {"prompt_token_count": self.prompt_token_count, "candidates_token_count": self.candidates_token_count,
                "total_token_count": self.total_token_count,
                "cached_content_token_count": self.cached_content_token_count,
                "thoughts_token_count": self.thoughts_token_count,
                "cache_write_token_count": self.cache_write_token_count}

    @classmethod
    def from_dict(cls, d: dict | None) -> UsageMetadata | None:
        """Counts from their saved form (None for None; a value that is not a count is refused)."""
        if d is None:
            return None
        if not isinstance(d, dict):
            raise TypeError(f"usage must be an object, got {type(d).__name__}")
        get = d.get
        return cls(*(count(get(name), name) for name in _USAGE_FIELDS))


_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(UsageMetadata))


@dataclass(frozen=True)
class TokenCount:
    """One token count under each of its names (where each wire's usage object carries it is in
    that wire's spec: ``WireSpec.token_names``, providers/wire_spec.py)."""

    field: str  # the UsageMetadata field (the seed's name)
    column: str  # the DataFrame / Parquet column
    meaning: str


TOKEN_COUNTS: tuple[TokenCount, ...] = (
    TokenCount("prompt_token_count", "input_tokens", "every input token, cached and cache-written included"),
    TokenCount("cached_content_token_count", "cached_tokens", "cache reads among the input tokens"),
    TokenCount("cache_write_token_count", "cache_write_tokens", "input tokens written to a prompt cache"),
    TokenCount("thoughts_token_count", "thinking_tokens", "reasoning tokens"),
    TokenCount("candidates_token_count", "output_tokens", "generated tokens other than thinking"),
    TokenCount("total_token_count", "total_tokens", "the provider's total"),
)


def _usage_tuple(u: UsageMetadata) -> tuple[int, ...]:
    return tuple(getattr(u, name) for name in _USAGE_FIELDS)
