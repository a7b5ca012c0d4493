"""Parameter descriptions from docstrings: Google, NumPy and Sphinx styles."""

from __future__ import annotations

import inspect
import re

_SECTIONS = "Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Attributes|Other Parameters"
_GOOGLE_HEADER = re.compile(rf"^(\s*)({_SECTIONS}):\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ENTRY = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:\s*(.*)$")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_ANY_HEADER = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(first paragraph, {parameter: description}) from Google, NumPy or Sphinx style."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    for i, line in enumerate(lines):
        starts_section = (
            _GOOGLE_HEADER.match(line) or line.lstrip().startswith(":")
            or (i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1]))
        )
        if not line.strip() or starts_section:
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        google = _GOOGLE_HEADER.match(line)
        numpy = (line.strip() in ("Parameters", "Other Parameters", "Attributes", "Keyword Arguments")
                 and i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1]))
        sphinx = _SPHINX_ENTRY.match(line.strip())
        if numpy:
            i = _parse_numpy(lines, i + 2, _indent(line), params)
        elif google:
            i = _parse_google(lines, i + 1, _indent(line), params)
        elif sphinx:
            text = [sphinx.group(2).strip()]
            i += 1
            while i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith(":") \
                    and _indent(lines[i]) > _indent(line):
                text.append(lines[i].strip())
                i += 1
            params[sphinx.group(1)] = " ".join(t for t in text if t)
        else:
            i += 1
    return " ".join(summary), params


def _parse_google(lines: list[str], i: int, header_indent: int, params: dict[str, str]) -> int:
    entry_indent = None
    current: list[str] | None = None
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        ind = _indent(line)
        if ind <= header_indent:
            break
        if entry_indent is None:
            entry_indent = ind
        m = _GOOGLE_ENTRY.match(line.strip()) if ind <= entry_indent else None
        if m:
            current = [m.group(2).strip()]
            params[m.group(1)] = current  # type: ignore[assignment]
        elif current is not None:
            current.append(line.strip())
        i += 1
    for key, val in list(params.items()):
        if isinstance(val, list):
            params[key] = " ".join(t for t in val if t)
    return i


def _parse_numpy(lines: list[str], i: int, header_indent: int, params: dict[str, str]) -> int:
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        for n in names:
            params[n] = " ".join(text)

    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and _NUMPY_RULE.match(lines[i + 1]):
            break  # the next section's header
        if not line.strip():
            i += 1
            continue
        if _indent(line) <= header_indent:
            if _ANY_HEADER.match(line):
                break
            flush()
            head = line.split(" : ", 1)[0].split(":", 1)[0]
            names, text = [n.strip().lstrip("*") for n in head.split(",") if n.strip()], []
        else:
            text.append(line.strip())
        i += 1
    flush()
    return i
