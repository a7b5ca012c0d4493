"""MCP tool results as nbagent tool outputs, and MCP tools as nbagent ``Tool`` objects.

A result's text blocks become the text the model sees; an image becomes a note to the model
("[image/png image, 2.1 KB; shown to the user]") and a PNG the tool card shows; structured
content becomes JSON text when the server sent no text; ``isError`` results are tool errors.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
from typing import Any, Protocol

from ..core.errors import NbagentError, ToolError
from .tool_threads import ToolTimeout, run_in_daemon_thread
from .tools import DISPLAY_MAX_BYTES, Tool, ToolOutput, format_result

NO_OUTPUT = "(the tool returned no output)"


class ToolCaller(Protocol):
    """What an MCP tool calls: its server (``McpServer``)."""

    @property
    def name(self) -> str: ...

    async def call_tool(self, name: str, args: dict) -> Any: ...

    def call_tool_sync(self, name: str, args: dict) -> Any: ...


def result_output(result: Any, max_chars: int | None = None) -> ToolOutput:
    """A ``CallToolResult`` as a ``ToolOutput`` (text to the model, images for the card)."""
    texts: list[str] = []
    notes: list[str] = []
    display: dict | None = None
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            png = None if display else _png_base64(block.data, block.mime_type)
            if png is not None and len(png) <= DISPLAY_MAX_BYTES:
                display = {"image/png": png}
                notes.append(f"[{block.mime_type} image, {_size(block.data)}; shown to the user]")
            else:
                notes.append(f"[{block.mime_type} image, {_size(block.data)}; not shown]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            texts.append(text if text is not None else f"[resource {resource.uri} ({resource.mime_type or 'binary'})]")
        elif kind == "resource_link":
            notes.append(f"[resource {block.uri}: {block.name}]")
        else:  # audio and kinds newer than this code
            notes.append(f"[{kind or 'unknown'} content; not shown]")
    structured = getattr(result, "structured_content", None)
    if not texts and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = format_result("\n".join(texts + notes) or NO_OUTPUT, max_chars)
    if getattr(result, "is_error", False):
        return ToolOutput(text=text, is_error=True, error=text)
    return ToolOutput(text=text, value=result, display=display)


def _size(data: str) -> str:
    n = len(data) * 3 // 4
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} bytes"


def _png_base64(data: str, mime_type: str) -> str | None:
    """The image as base64 PNG for the card (other formats converted when Pillow is installed)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return None
    if mime_type == "image/png" and raw.startswith(b"\x89PNG"):
        return base64.b64encode(raw).decode("ascii")
    try:
        from PIL import Image

        buf = io.BytesIO()
        Image.open(io.BytesIO(raw)).save(buf, format="PNG")
    except Exception:  # no Pillow, or not an image: the note to the model stands alone
        return None
    return base64.b64encode(buf.getvalue()).decode("ascii")


class McpTool(Tool):
    """A tool of an MCP server: calling it calls the server (``server`` names it).

    ``remote_name`` is the name the server gave it; ``name`` may carry the server's name as a
    prefix when another tool already had that name.
    """

    def __init__(self, caller: ToolCaller, remote_name: str, description: str | None,
                 input_schema: dict | None, *, name: str | None = None) -> None:
        schema = input_schema if isinstance(input_schema, dict) and input_schema.get("type") == "object" else None
        super().__init__(name or remote_name, description, schema, self._call_sync, server=caller.name)
        self.caller = caller
        self.remote_name = remote_name
        self.has_pattern = '"pattern"' in json.dumps(schema or {}, default=str)

    def renamed(self, name: str) -> McpTool:
        """The same server tool under another name (for a name clash)."""
        return McpTool(self.caller, self.remote_name, self.description, self.input_schema, name=name)

    def _call_sync(self, **args: Any) -> str:
        output = result_output(self.caller.call_tool_sync(self.remote_name, args), self.max_result_chars)
        if output.is_error:
            raise ToolError(output.text)
        return output.text

    async def run(self, args: dict | None = None, *, timeout: float | None = None) -> ToolOutput:
        """Validate, call the server and convert its result; never raises on tool errors."""
        args = {} if args is None else args
        if self.has_pattern:  # a server's pattern may backtrack for ages: matched off the loop
            problems = await run_in_daemon_thread(self.validate, args)
        else:
            problems = self.validate(args)
        if problems:
            msg = f"Invalid arguments for tool {self.name!r}: " + "; ".join(problems)
            return ToolOutput(text=msg, is_error=True, error=msg)
        limit = self.timeout if self.timeout is not None else timeout
        try:
            result = await asyncio.wait_for(self.caller.call_tool(self.remote_name, args), limit)
        except TimeoutError:
            msg = str(ToolTimeout(self.name, limit or 0.0))
            return ToolOutput(text=msg, is_error=True, error=msg)
        except NbagentError as exc:
            return ToolOutput(text=str(exc), is_error=True, error=str(exc))
        return result_output(result, self.max_result_chars)

    def __repr__(self) -> str:
        return f"McpTool(name={self.name!r}, server={self.server!r})"
