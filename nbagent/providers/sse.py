"""A byte-level Server-Sent Events decoder (WHATWG rules).

Lines are split on the *bytes* CR, LF and CRLF (a CR ending one read and an
LF starting the next are one line break) and each complete line is decoded
as UTF-8, so multi-byte characters split across reads survive and U+2028,
U+2029 or U+0085 inside a JSON string never break a line. Comments (``:``)
and unknown fields are ignored, ``data`` lines are joined with ``\\n``, an
event is dispatched on a blank line and the pending one at end of stream.

A read's usual events (an optional ``event: `` line, one ``data: `` line, the blank line) are
matched whole by one regex each; every other line goes through the line-by-line rules, with the
same result (a test checks the two against each other). ``events`` hands them out one at a time.

``raw_lines=True`` also reports unprefixed JSON lines (Gemini's mid-stream
errors, possibly pretty-printed over several lines) as ``SSEEvent("raw")``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from collections.abc import AsyncIterator, Iterator

__all__ = ["SSEEvent", "SSEDecoder", "aiter_sse"]

_LINE_BREAK_TEXT = re.compile("\r\n|\r|\n")  # only these: U+2028 and friends stay inside a line
# the usual event, whole: blank lines, an optional "event: " line, one "data: " line, the blank line;
# in text with LF breaks only ("." is quicker than "[^\r\n]"), and in text with CRs
_USUAL_EVENT = re.compile("\n*(?:event: (.*)\n)?data: (.*)\n\n")
_USUAL_EVENT_CR = re.compile("(?:\r\n|\n)*(?:event: ([^\r\n]*)(?:\r\n|\n))?data: ([^\r\n]*)(?:\r\n|\n)(?:\r\n|\n)")
_TWO_BREAKS = re.compile("(?>\r\n|\r|\n)(?>\r\n|\r|\n)")  # atomic: a CRLF is never a CR then an LF


@dataclass(slots=True)
class SSEEvent:
    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Incremental decoder: ``feed`` bytes, get complete events back."""

    def __init__(self, raw_lines: bool = False) -> None:
        self.raw_lines = raw_lines
        self._pending: list[bytes] = []  # pieces of an unfinished line
        self._skip_lf = False  # the previous read ended with CR
        self._started = False  # BOM handling
        self._event = ""
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None
        self._raw: list[str] | None = None  # collecting an unprefixed JSON value

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode one network read; return the events it completed.

        The complete lines of a read are decoded and split at once; an unfinished line is kept
        as a list of pieces, so one huge event costs linear time however it is split.
        """
        return list(self.events(chunk))

    def events(self, chunk: bytes) -> Iterator[SSEEvent]:
        """``feed`` one event at a time: each is made when it is taken, so a read's events need not
        all be alive at once (take them all before the next read).

        Between events, whole usual events (an optional ``event: `` line, one ``data: `` line, the
        blank line) are matched by one regex each; any other line, and the rest of its event, goes
        line by line, then the regex again.
        """
        text = self._complete_lines(chunk)
        if not text:
            return
        if self._raw is not None:
            yield from self._line_by_line(text)
            return
        match = _USUAL_EVENT.match
        if "\r" in text:
            lf_only = text.replace("\r\n", "\n")  # one line break either way
            if "\r" in lf_only:  # a lone CR (a break too): "\r\r\n" must not become "\r\n"
                match = _USUAL_EVENT_CR.match
            else:
                text = lf_only
        pos, end = 0, len(text)
        while pos < end:
            if not (self._data or self._event):
                found = match(text, pos)
                while found is not None:
                    name, data = found.groups()
                    retry, self._retry = self._retry, None
                    pos = found.end()
                    yield SSEEvent(name or "message", data, self._last_id, retry)
                    found = match(text, pos)
                if pos == end:
                    return
            stop = _after_blank_line(text, pos)
            out: list[SSEEvent] = []
            self._common_lines(_lines(text[pos:stop]), out)
            yield from out
            pos = stop

    def flush(self) -> list[SSEEvent]:
        """End of stream: dispatch whatever is pending."""
        out: list[SSEEvent] = []
        if self._pending:
            line, self._pending = b"".join(self._pending), []
            self._line(line.decode("utf-8", errors="replace"), out)
        self._end_raw(out)
        self._dispatch(out)
        self._skip_lf = False
        return out

    # -- internals -------------------------------------------------------

    def _complete_lines(self, chunk: bytes) -> str:
        """The text of the complete lines that this read ends (with what was pending); the unfinished
        line is kept, as pieces."""
        if not chunk:
            return ""
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r")) + 1
        if not end:
            if chunk:
                self._pending.append(chunk)
            return ""
        head = chunk[:end]
        if self._pending:
            self._pending.append(head)
            head, self._pending = b"".join(self._pending), []
        if end < len(chunk):
            self._pending.append(chunk[end:])
        elif head.endswith(b"\r"):
            self._skip_lf = True  # maybe the first half of a CRLF split across reads
        text = head.decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        return text

    def _line_by_line(self, text: str) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        for line in _lines(text):
            self._line(line, out)
        return out

    def _common_lines(self, lines: list[str], out: list[SSEEvent]) -> None:
        """``_line`` for each line, with the usual ones (``data: ``, ``event: ``, blank) inlined."""
        data = self._data
        for line in lines:
            if self._raw is None:
                if not line:
                    if data:
                        out.append(SSEEvent(self._event or "message", data[0] if len(data) == 1 else "\n".join(data),
                                            self._last_id, self._retry))
                        data = self._data = []
                        self._retry = None
                    self._event = ""
                    continue
                if line.startswith("data: "):
                    data.append(line[6:])
                    continue
                if line.startswith("event: "):
                    self._event = line[7:]
                    continue
            self._line(line, out)
            data = self._data

    def _line(self, line: str, out: list[SSEEvent]) -> None:
        if not self._started:
            self._started = True
            if line.startswith("\ufeff"):
                line = line[1:]
        if self._raw is not None:
            self._raw_line(self._raw, line, out)
            return
        if not line:
            self._dispatch(out)
            return
        if line[0] == ":":
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self._retry = int(value)
        elif self.raw_lines and line[0] in "{[":
            self._start_raw(line, out)
        # any other field is ignored

    def _start_raw(self, line: str, out: list[SSEEvent]) -> None:
        """A bare JSON line (``raw_lines``) opens a raw event; one that parses alone is complete."""
        self._dispatch(out)
        self._raw = [line]
        if _parses(line):
            self._end_raw(out)

    def _raw_line(self, raw: list[str], line: str, out: list[SSEEvent]) -> None:
        """A line inside the raw JSON event ``raw``: it ends at a blank line or once the JSON parses."""
        if not line:
            self._end_raw(out)
            return
        raw.append(line)
        if _parses("\n".join(raw)):
            self._end_raw(out)

    def _dispatch(self, out: list[SSEEvent]) -> None:
        if not self._data:
            self._event = ""
            return
        out.append(
            SSEEvent(
                event=self._event or "message",
                data="\n".join(self._data),
                id=self._last_id,
                retry=self._retry,
            )
        )
        self._event = ""
        self._data = []
        self._retry = None

    def _end_raw(self, out: list[SSEEvent]) -> None:
        if self._raw is not None:
            out.append(SSEEvent(event="raw", data="\n".join(self._raw)))
            self._raw = None


def _after_blank_line(text: str, pos: int) -> int:
    """Where the first blank line at or after ``pos`` (a line start) ends; the end of ``text`` if none."""
    if text[pos] in "\r\n":
        return pos + (2 if text.startswith("\r\n", pos) else 1)
    found = _TWO_BREAKS.search(text, pos)
    return found.end() if found else len(text)


def _lines(text: str) -> list[str]:
    """The lines of text that ends with a line break."""
    lines = _LINE_BREAK_TEXT.split(text)
    del lines[-1]  # the text ends with a break: the last piece is empty
    return lines


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


async def aiter_sse(
    chunks: AsyncIterator[bytes], raw_lines: bool = False
) -> AsyncIterator[SSEEvent]:
    """Decode an async iterator of byte chunks into SSE events."""
    decoder = SSEDecoder(raw_lines=raw_lines)
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.flush():
        yield event
