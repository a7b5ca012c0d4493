"""The tier markers of the running test, for helpers that start something slow (a browser, a
kernel): such a helper calls :func:`require`, so a test in the fast tier that starts one fails
at once, naming the marker it needs (tests/conftest.py sets ``current`` before each test)."""

from __future__ import annotations

import pytest

#: every tier but the fast one (``scripts/test.sh --fast`` runs the tests marked none of them), and the
#: time limit in seconds of each test in it (pyproject's ``timeout`` is the fast tier's)
SLOW_TIERS = {"browser": 900, "notebook": 900, "local_model": 600, "wheel": 1800}

# the markers of the test being set up, run or torn down; None outside pytest (bench/ scripts use the
# same helpers, unchecked)
current: set[str] | None = None


def require(tier: str, what: str) -> None:
    """Fail the running test unless it is marked ``tier`` (``what`` says what the helper starts)."""
    if current is not None and tier not in current:
        pytest.fail(f"this test {what} but is not marked {tier}: add pytest.mark.{tier} (the fast tier, "
                    "scripts/test.sh --fast, must start none)", pytrace=False)
