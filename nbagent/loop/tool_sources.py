"""Tool sources: tools that come from elsewhere (MCP servers), listed when a turn first needs them.

A connection keeps its sources and, before a turn's first model call, adds the tools of every
source not listed yet to its tools. A tool whose name is taken gets its source's name as a prefix
(``time_get_current_time``).
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Protocol, runtime_checkable

from ..core.errors import NbagentError
from .tools import Tool


@runtime_checkable
class ToolSource(Protocol):
    """Where tools come from: ``name`` (shown on their cards), ``list_tools()``, ``aclose()``."""

    name: str

    async def list_tools(self) -> list[Tool]: ...

    async def aclose(self) -> None: ...


def add_source_tools(tools: dict[str, Tool], new: list[Tool], source: str) -> list[Tool]:
    """Add a source's tools to ``tools`` (in place); a taken name gets the source's name as a prefix.

    Returns the tools as added (a renamed one under its new name).
    """
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", source) or "server"
    added = []
    for item in new:
        name = item.name
        if name in tools:
            base = f"{prefix}_{name}"[:64]
            name, n = base, 2
            while name in tools:
                name = f"{base[:60]}_{n}"
                n += 1
            renamed = getattr(item, "renamed", None)
            item = renamed(name) if callable(renamed) else item
            item.name = name
        tools[name] = item
        added.append(item)
    return added


async def list_new_tools(sources: list[ToolSource], listed: set[int], tools: dict[str, Tool],
                         active_tasks: set[asyncio.Task], interrupted: threading.Event,
                         ) -> list[tuple[ToolSource, NbagentError]]:
    """List every source not in ``listed`` (ids) into ``tools``; returns the sources that failed.

    Each listing runs as a task in ``active_tasks`` so an interrupt cancels it
    (``asyncio.CancelledError`` then leaves this function).
    """
    failures = []
    for source in sources:
        if id(source) in listed:
            continue
        task = asyncio.ensure_future(source.list_tools())
        active_tasks.add(task)
        if interrupted.is_set():
            task.cancel()
        try:
            new = await task
        except NbagentError as exc:
            failures.append((source, exc))
            continue
        finally:
            active_tasks.discard(task)
        add_source_tools(tools, new, source.name)
        listed.add(id(source))
    return failures
