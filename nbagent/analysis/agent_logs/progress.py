"""A progress line for a long first read of many logs: on stderr in a terminal, an updating display
in a notebook (IPython's ``display_id``).

``progress="auto"`` shows it only once the read has taken more than :data:`DELAY` seconds, and
only where someone watches (a terminal's stderr, a notebook's kernel); ``True`` shows it at once
wherever the read runs (stderr outside a notebook); ``False`` never.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

DELAY = 1.0  # seconds of reading before "auto" shows the line
EVERY = 0.2  # seconds between two redraws
LABEL = "Reading agent logs"


def _kernel() -> bool:
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and getattr(shell, "kernel", None) is not None


class Progress:
    """How far a read of ``total`` files has got; :meth:`step` after each file, :meth:`close` at the end."""

    def __init__(self, total: int, mode: bool | str = "auto") -> None:
        if mode not in (True, False, "auto"):
            from ...core.errors import ConfigError

            raise ConfigError(f"progress= takes True, False or 'auto', not {mode!r}")
        self.total, self.done, self.bytes = total, 0, 0
        self.in_kernel = mode is not False and _kernel()  # drawn as display data
        self.watched = mode is True or (mode == "auto" and (self.in_kernel or sys.stderr.isatty()))
        self.started = time.monotonic()
        self.delay = 0.0 if mode is True else DELAY
        self.drawn_at: float | None = None
        self.handle: Any = None

    def step(self, path: str | os.PathLike) -> None:
        """One more file read (its size counted only when the line may show)."""
        self.done += 1
        if not self.watched:
            return
        try:
            self.bytes += os.stat(path).st_size
        except OSError:
            pass
        now = time.monotonic()
        if now - self.started >= self.delay and (self.drawn_at is None or now - self.drawn_at >= EVERY):
            self._draw()
            self.drawn_at = now

    def close(self) -> None:
        """The last count, when the line was shown."""
        if self.drawn_at is not None or (self.watched and self.delay == 0.0):
            self._draw(last=True)

    def text(self) -> str:
        share = f" {100 * self.done // self.total}%" if self.total else ""
        return f"{LABEL}: {self.done:,}/{self.total:,} files, {self.bytes / 1e6:,.1f} MB{share}"

    def _draw(self, last: bool = False) -> None:
        if self.in_kernel:
            from IPython.display import display

            shown = {"text/plain": self.text()}
            if self.handle is None:
                self.handle = display(shown, raw=True, display_id=True)
            else:
                self.handle.update(shown, raw=True)
            return
        sys.stderr.write("\r" + self.text() + ("\n" if last else ""))
        sys.stderr.flush()
