"""Whether a person can answer a conversation's approvals from a chat widget.

A ``ChatWidget`` counts once one of its views has spoken to the kernel (each view says ``view``
when it is drawn; any message from it counts too). A widget that is displayed but never drawn,
as when nbclient, papermill or ``nbconvert --execute`` run a notebook without a browser, has no
live view, so a call waiting for approval there is announced and ends after
``Conversation.approval_wait`` instead of waiting forever (approval_wait.py). Standard library only:
``Conversation`` asks without importing the widget.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

_widgets: weakref.WeakSet = weakref.WeakSet()  # every ChatWidget made in this process
_live: weakref.WeakSet = weakref.WeakSet()  # those a view has spoken to
_lock = threading.Lock()


def register(widget: Any) -> None:
    """A new widget (``widget.conversation`` is the conversation it shows)."""
    with _lock:
        _widgets.add(widget)


def view_seen(widget: Any) -> None:
    """A front end sent ``widget`` a message: a view of it is live."""
    with _lock:
        _live.add(widget)


def _bound(conversation: Any, among: weakref.WeakSet) -> bool:
    with _lock:
        widgets = list(among)
    return any(getattr(w, "conversation", None) is conversation and getattr(w, "comm", None) is not None
               for w in widgets)


def has_widget(conversation: Any) -> bool:
    """Whether an open chat widget shows ``conversation`` (live or not)."""
    return _bound(conversation, _widgets)


def has_live_view(conversation: Any) -> bool:
    """Whether an open chat widget showing ``conversation`` has a live view (someone can click)."""
    return _bound(conversation, _live)
