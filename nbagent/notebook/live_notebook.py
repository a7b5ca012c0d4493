"""The live notebook the chat widget is shown in, as a ``NotebookBackend`` (JupyterLab 4, Notebook 7).

The kernel cannot see the notebook; the widget's front end can (``js/src/host.js`` reaches the
shared notebook model through the widget manager's document context). ``LiveNotebook`` asks it
over the widget's comm, one request at a time per call, each tagged with an id; the answer comes
back as a custom message with the same id. Unsaved edits are included: the front end reads the
model, not the file.

Messages (custom messages of the ``ChatWidget``, declared in protocol.py: ``NotebookOp``, ``NotebookAnswer``,
``UndoRequest`` / ``UndoDone``, ``ProvenanceRequest`` / ``CellProvenance``; ``id`` is a fresh hex string per request):

- kernel -> front end ``{"type": "notebook", "id", "op", ...}`` with ``op`` one of
  ``"read"`` (no arguments), ``"set_source"`` (``cell_id``, ``source``, ``expected_source``,
  ``metadata``: a whole metadata dict or null), ``"insert"`` (``source``, ``after``: a cell id or
  null, ``cell_type``, ``metadata`` or null), ``"delete"`` (``cell_id``, ``expected_source``),
  ``"set_metadata"`` (``cell_id``, ``metadata``: the whole dict), ``"add_action"`` (``cell_id``,
  ``action``: a ``CellAction`` as JSON, appended to the cell's ``metadata["nbagent"]["actions"]``),
  ``"run"`` (``cell_id``, ``expected_source``: the page executes the cell through the notebook's
  kernel connection as Shift+Enter does, and answers when the execution ends).
- front end -> kernel ``{"type": "notebook", "id", "ok": true, "result"}`` or
  ``{"type": "notebook", "id", "ok": false, "error", "kind"}`` (``kind`` an ``ErrorKind`` value,
  ``"tool"`` for a stale or missing cell). ``result`` of ``run`` is the cell after its run with
  ``status`` (the kernel's ``"ok"``, ``"error"`` or ``"abort"``); of ``read`` ``{"cells": [{"id", "index",
  "cell_type", "source", "execution_count", "outputs", "metadata"}], "active_cell_id",
  "chat_cell_id", "path"}``; of ``set_source`` / ``insert`` one such cell; of ``delete`` /
  ``set_metadata`` / ``add_action`` null. A request with an empty ``id`` is applied, not answered
  (``notify``: the kernel is busy in a cell and could not hear an answer).
- front end -> kernel ``{"type": "notebook", "host": true}``: a view of this widget can reach its
  notebook (sent when a view renders). Only then is the widget a live backend.
- front end -> kernel ``{"type": "undo", "id", "call_id"}`` (a card's Undo): the kernel runs
  ``conv.notebook.undo_async(call_id)`` (else ``conv.undo``) as a task and answers ``{"type": "undo", "id", "call_id", "ok", "text"}``.
- front end -> kernel ``{"type": "provenance", "id", "call_id", "source"}`` (*Insert as cell
  below*): the kernel answers ``{"type": "provenance", "id", "metadata"}``, the new cell's metadata
  with a ``CellAction`` (``inserted``, approved by the user) for the tool call's turn.

No answer within ``REQUEST_TIMEOUT`` seconds (no view is open, or the kernel is blocked in a cell
and cannot hear the answer, e.g. a blocking ``conv.ask()``; with ipykernel 7 a cell that *awaits*
is still heard) is a ``NoLiveView`` error
(``config``): the caller uses the notebook's file instead.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
import weakref
from typing import Any

from ..core.errors import ConfigError, NbagentError, ProtocolError, ToolError
from .notebook_doc import NotebookCell, NotebookSnapshot, NotebookSource, ReadOnlyBackend
from .protocol import CellProvenance, Handlers, NotebookAnswer, ProvenanceRequest, UndoDone, UndoRequest
from .provenance import CellAction, CellActionKind, code_hash, with_action

REQUEST_TIMEOUT = 5.0  # seconds a view has to answer
RUN_TIMEOUT = 600.0  # seconds a cell the page runs has to end, when the call has no time limit of its own
UNREACHABLE = ("the live notebook cannot be reached now: a cell is running, and the page cannot answer the kernel "
               "until it ends. Nothing was written: the notebook is open in a front end, and a write to its file "
               "would land behind the open editor. Ask again once the cell has finished, or from the chat box.")
__all__ = ["LiveNotebook", "LiveUnreachable", "NoLiveView", "REQUEST_TIMEOUT", "RUN_TIMEOUT", "UNREACHABLE",
           "current_live_backend", "live_backends", "serve"]


class NoLiveView(ConfigError):
    """No view of the widget answered: the live notebook cannot be reached now."""


_lock = threading.Lock()
_hosts: list[weakref.ref] = []  # widgets whose views reported a notebook, newest last
_backends: weakref.WeakKeyDictionary[Any, LiveNotebook] = weakref.WeakKeyDictionary()


def _open_hosts() -> list[Any]:
    """The widgets whose views reported a notebook, still open (a closed widget has no comm), newest last."""
    with _lock:
        _hosts[:] = [ref for ref in _hosts if (w := ref()) is not None and getattr(w, "comm", True) is not None]
        return [w for w in (ref() for ref in _hosts) if w is not None]


def current_live_backend() -> LiveNotebook | None:
    """The live notebook of the newest chat widget whose view can reach its notebook, or None
    (no widget shown, or shown where there is no notebook model: VS Code, marimo, a console)."""
    widgets = _open_hosts()
    return backend_of(widgets[-1]) if widgets else None


def live_backends() -> list[LiveNotebook]:
    """Every open chat widget's live notebook whose view reported one, newest last."""
    return [backend_of(w) for w in _open_hosts()]


def backend_of(widget: Any) -> LiveNotebook:
    """The one ``LiveNotebook`` speaking through ``widget``."""
    with _lock:
        backend = _backends.get(widget)
    return backend if backend is not None else LiveNotebook(widget)


def serve(widget: Any, handlers: Handlers) -> None:
    """Handle the chat protocol's live-notebook requests for ``widget`` (protocol.py): a view's
    answers and its ``host`` report, a card's Undo, *Insert as cell below*'s provenance."""
    handlers.on(NotebookAnswer, lambda r: _notebook_answer(widget, r))
    handlers.on(UndoRequest, lambda r: _undo_task(widget, r.id, r.call_id))
    handlers.on(ProvenanceRequest, lambda r: CellProvenance(
        r.id, inserted_metadata(widget.conversation, r.call_id, r.source)))


def _notebook_answer(widget: Any, answer: NotebookAnswer) -> None:
    if answer.host:
        with _lock:
            if not any(ref() is widget for ref in _hosts):
                _hosts.append(weakref.ref(widget))
        return
    backend_of(widget).answer({"id": answer.id, "ok": answer.ok, "result": answer.result, "error": answer.error,
                               "kind": answer.kind})


_undoing: set[asyncio.Task] = set()


def _undo_task(widget: Any, rid: str, call_id: str) -> None:
    """Run ``conv.undo(call_id)`` (a coroutine or not) and answer the card that asked."""

    async def run() -> None:
        try:
            conv = widget.conversation  # undo_async: a blocking undo on this loop could not hear the page
            undo = getattr(getattr(conv, "notebook", None), "undo_async", None) or getattr(conv, "undo", None)
            if undo is None:
                raise ConfigError("this conversation cannot undo cell edits")
            done = undo(call_id)
            if asyncio.iscoroutine(done):
                done = await done
            answer = UndoDone(rid, call_id, True, done if isinstance(done, str) else "Undone")
        except Exception as exc:  # shown on the card
            answer = UndoDone(rid, call_id, False, str(exc))
        widget.handlers.emit(answer)

    task = asyncio.ensure_future(run())
    _undoing.add(task)  # kept until it ends
    task.add_done_callback(_undoing.discard)


def inserted_metadata(conversation: Any, call_id: str, source: str) -> dict:
    """The metadata of a cell the user inserted from a tool card: one ``inserted`` action naming
    the call's turn, the conversation and its model."""
    turn = next((s.turn for s in getattr(conversation, "history", [])
                 if any(c.id == call_id for c in s.tool_calls or [])), -1)
    record = next((r for r in getattr(conversation, "turns", []) if r.turn == turn), None)
    return with_action({}, CellAction(
        CellActionKind.INSERTED, session_id=str(getattr(conversation, "conversation_id", "") or ""), turn=turn,
        model=str(getattr(record, "model", "") or ""), call_id=call_id, approved_by="user",
        code_sha256=code_hash(source)))


def _cell(data: Any) -> NotebookCell:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise ProtocolError("the notebook's answer has no cell")
    count = data.get("execution_count")
    return NotebookCell(id=data["id"], index=int(data.get("index", -1)), cell_type=str(data.get("cell_type", "code")),
                        source=str(data.get("source", "")), execution_count=count if isinstance(count, int) else None,
                        outputs=tuple(o for o in data.get("outputs") or [] if isinstance(o, dict)),
                        metadata=dict(data.get("metadata") or {}))


class LiveUnreachable(ReadOnlyBackend):
    """The notebook's file (or the kernel's history) while its open live view cannot be reached (a
    cell blocks): read as usual, every write refused with ``UNREACHABLE`` (a ``ToolError``), so
    nothing lands behind the open editor. ``unwritable`` says so to an approval card beforehand."""

    unwritable = UNREACHABLE

    def __init__(self, offline: Any) -> None:
        super().__init__(lambda: ToolError(UNREACHABLE))
        self.offline = offline
        self.source = offline.source

    def __getattr__(self, name: str) -> Any:  # label, cached, changed_on_disk… of the file
        return getattr(self.offline, name)

    def __repr__(self) -> str:
        return f"LiveUnreachable({self.offline!r})"

    async def read(self) -> NotebookSnapshot:
        return await self.offline.read()


class LiveNotebook:
    """The notebook a ``ChatWidget`` is shown in, read and edited through its front end."""

    source = NotebookSource.LIVE

    def __init__(self, widget: Any, timeout: float = REQUEST_TIMEOUT) -> None:
        self.widget = widget
        self.timeout = timeout
        self._pending: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        with _lock:
            _backends[widget] = self  # the widget's answers come here

    async def request(self, op: str, *, wait: float | None = None, **args: Any) -> Any:
        """Send one request and wait for its answer (``NoLiveView`` past ``wait``, default the timeout)."""
        wait = self.timeout if wait is None else wait
        loop = asyncio.get_running_loop()
        rid = uuid.uuid4().hex
        future: asyncio.Future = loop.create_future()
        self._pending[rid] = (loop, future)
        try:
            self.widget.send({"type": "notebook", "id": rid, "op": op, **args})
            answer = await asyncio.wait_for(future, wait)
        except TimeoutError:
            raise NoLiveView(f"the live notebook did not answer within {wait:g} s (no chat view is open, "
                             "or the kernel is blocked in a cell and cannot hear it)", kind="config") from None
        finally:
            self._pending.pop(rid, None)
        if not answer.get("ok"):
            kind = answer.get("kind") if answer.get("kind") in {"tool", "config", "protocol"} else "tool"
            raise NbagentError(f"the notebook refused: {answer.get('error') or 'no reason given'}", kind=kind)
        return answer.get("result")

    def answer(self, content: dict) -> None:
        """A view's answer to a request (called from the widget's message handler)."""
        entry = self._pending.get(str(content.get("id", "")))
        if entry is None:
            return  # a late answer (timed out) or another view answering the same request twice
        loop, future = entry

        def deliver() -> None:
            if not future.done():
                future.set_result(content)

        loop.call_soon_threadsafe(deliver)

    async def read(self) -> NotebookSnapshot:
        data = await self.request("read")
        if not isinstance(data, dict):
            raise ProtocolError("the notebook's answer has no cells")
        cells = tuple(_cell(c) for c in data.get("cells") or [])
        text = lambda key: data.get(key) if isinstance(data.get(key), str) else None  # noqa: E731
        return NotebookSnapshot(NotebookSource.LIVE, cells, path=text("path"),
                                active_cell_id=text("active_cell_id"), chat_cell_id=text("chat_cell_id"))

    async def set_source(self, cell_id: str, source: str, *, expected_source: str,
                         metadata: dict[str, Any] | None = None) -> NotebookCell:
        return _cell(await self.request("set_source", cell_id=cell_id, source=source,
                                        expected_source=expected_source, metadata=metadata))

    async def insert(self, source: str, *, after: str | None = None, cell_type: str = "code",
                     metadata: dict[str, Any] | None = None) -> NotebookCell:
        return _cell(await self.request("insert", source=source, after=after, cell_type=cell_type,
                                        metadata=metadata))

    async def delete(self, cell_id: str, *, expected_source: str) -> None:
        await self.request("delete", cell_id=cell_id, expected_source=expected_source)

    async def run(self, cell_id: str, *, expected_source: str,
                  timeout: float | None = None) -> tuple[NotebookCell, str]:
        """Have the page run the cell as the user would (its outputs and execution count replaced,
        in the kernel's queue) and wait for the end of it: the cell after its run and the kernel's
        status. Only while the kernel can run it: not from inside a running cell (it would queue
        behind the cell that waits for it). No answer within ``timeout`` (plus the request's own
        timeout; default ``RUN_TIMEOUT``) is a ``ToolError`` saying the cell may still run in the page."""
        wait = RUN_TIMEOUT if timeout is None else timeout + self.timeout
        try:
            data = await self.request("run", wait=wait, cell_id=cell_id, expected_source=expected_source)
        except NoLiveView:  # the page may have started it: never run it again elsewhere
            raise ToolError(f"no answer from the page within {wait:g} s: the cell may still be running there (its "
                            "outputs show in the notebook when it ends; the kernel's interrupt stops it). "
                            "It was not run again in the kernel") from None
        status = data.get("status") if isinstance(data, dict) else None
        return _cell(data), status if isinstance(status, str) else "ok"

    def notify(self, op: str, **args: Any) -> None:
        """Send a request nobody waits for (the kernel is busy in a cell and could not hear the
        answer): applied by every open view."""
        self.widget.send({"type": "notebook", "id": "", "op": op, **args})
