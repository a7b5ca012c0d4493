"""A small tmpfs to fill up: real "no space left on device" errors, where a test may mount one."""

from __future__ import annotations

import errno
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


@contextmanager
def small_disk(folder: Path, size_kb: int = 512) -> Iterator[Path]:
    """Mount a ``size_kb`` tmpfs on ``folder`` (skips the test where mounting is not allowed)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> None:
    """Write a filler file in ``folder`` until the disk is full."""
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    assert os.statvfs(folder).f_bavail == 0
