"""A GGUF file's chat template, and whether it can take tools.

llama.cpp renders each request with the Jinja chat template stored in the model file
(``tokenizer.chat_template``). A template with no tools section drops the request's tool schemas:
the model never hears of the tools (SmolLM2-135M's template is such a one). Reading the template
needs no server: the GGUF header is a list of typed key/value pairs (version 2 and 3, little-endian),
walked here without loading the tensors.
"""

from __future__ import annotations

import functools
import mmap
import os
import re
import struct
from pathlib import Path

__all__ = ["chat_template", "template_takes_tools"]

TEMPLATE_KEY = "tokenizer.chat_template"
_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes
_STRING, _ARRAY = 8, 9
# a Jinja statement or expression that reads the ``tools`` variable ({% if tools %}, {{ tools | tojson }}, ...)
_READS_TOOLS = re.compile(r"\{[{%][^}]*\btools\b", re.DOTALL)


def template_takes_tools(template: str | None) -> bool:
    """Whether a chat template reads the request's ``tools`` (without it, llama.cpp drops them)."""
    return bool(template) and _READS_TOOLS.search(template or "") is not None


def chat_template(path: str | os.PathLike) -> str | None:
    """The chat template stored in the GGUF file at ``path``; None when it has none or is no GGUF."""
    p = Path(path)
    try:
        stat = p.stat()
    except OSError:
        return None
    return _cached_template(str(p.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _cached_template(path: str, size: int, mtime_ns: int) -> str | None:
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _Header(data).template()
    except (OSError, ValueError, struct.error, UnicodeDecodeError):
        return None


class _Header:
    """A cursor over a GGUF file's key/value header."""

    def __init__(self, data: mmap.mmap) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def template(self) -> str | None:
        if self.data[:4] != b"GGUF":
            return None
        self.pos = 4
        version, _tensors, count = self.unpack("<IQQ")
        if version < 2:
            return None
        for _ in range(count):
            key = self.string()
            (kind,) = self.unpack("<I")
            if key == TEMPLATE_KEY and kind == _STRING:
                return self.string()
            self.skip(kind)
        return None

    def string(self) -> str:
        (n,) = self.unpack("<Q")
        end = self.pos + n
        if end > len(self.data):
            raise ValueError("truncated GGUF header")
        text = self.data[self.pos : end].decode("utf-8")
        self.pos = end
        return text

    def skip(self, kind: int) -> None:
        if kind in _SCALARS:
            self.pos += _SCALARS[kind]
        elif kind == _STRING:
            (n,) = self.unpack("<Q")
            self.pos += n
        elif kind == _ARRAY:
            item, n = self.unpack("<IQ")
            if item in _SCALARS:
                self.pos += _SCALARS[item] * n
            else:
                for _ in range(n):
                    self.skip(item)
        else:
            raise ValueError(f"unknown GGUF value type {kind}")
        if self.pos > len(self.data):
            raise ValueError("truncated GGUF header")
