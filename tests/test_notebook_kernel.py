"""Where the notebook tools find the notebook, and the kernel's last error, in IPython's real shell:
the kernel's own file (VS Code's variable, Jupyter Server's environment), the live notebook when
the widget has one (and not while a cell runs), else the input history, read only."""

from __future__ import annotations

import asyncio

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from nbagent import notebook_tools  # noqa: E402
from nbagent.core.errors import ConfigError  # noqa: E402
from nbagent.notebook import notebook_select  # noqa: E402
from nbagent.notebook.notebook_doc import NotebookCell, NotebookSnapshot, NotebookSource  # noqa: E402

v4 = nbformat.v4


@pytest.fixture
def ip(monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    shell = InteractiveShell.instance()
    for name in ("__vsc_ipynb_file__", "__session__"):
        shell.user_ns.pop(name, None)
    yield shell
    shell.user_ns.pop("__vsc_ipynb_file__", None)


def tools(namespace, **options):
    return {t.name: t for t in notebook_tools(namespace, **options)}


def read(tool, **args) -> str:
    return asyncio.run(tool.handler(**args))


class MemoryNotebook:
    """A notebook held in memory, speaking the backend protocol (a stand-in for the live one)."""

    source = NotebookSource.LIVE
    label = "live: test"

    def __init__(self, fail: bool = False) -> None:
        self.cells = [NotebookCell("m1", 0, source="x = 1")]
        self.fail = fail

    async def read(self) -> NotebookSnapshot:
        if self.fail:
            raise ConfigError("no view answered")
        return NotebookSnapshot(NotebookSource.LIVE, tuple(self.cells), active_cell_id="m1")

    async def set_source(self, cell_id, source, *, expected_source, metadata=None):
        raise AssertionError("not used")

    async def insert(self, source, *, after=None, cell_type="code", metadata=None):
        raise AssertionError("not used")

    async def delete(self, cell_id, *, expected_source):
        raise AssertionError("not used")


def test_without_a_notebook_the_history_is_read_and_cannot_be_edited(ip):
    ip.run_cell("a_value = 41", store_history=True)
    ip.run_cell("a_value + 1", store_history=True)
    t = tools(ip.user_ns)
    text = read(t["read_notebook"])
    assert "Notebook read from history: the kernel's input history" in text
    count = ip.execution_count - 1
    assert f"id=in-{count} code, In [{count}]" in text and "a_value + 1" in text and "[result]\n```\n42\n```" in text
    with pytest.raises(ConfigError, match="input history, which cannot be edited"):
        asyncio.run(t["edit_cell"].handler(cell_id=f"in-{count}", source="a_value"))


def test_the_last_error_names_the_cell_it_came_from(ip):
    ip.run_cell("def helper():\n    return 1 / 0", store_history=True)
    ip.run_cell("helper()", store_history=True)
    failing = ip.execution_count - 1
    text = read(tools(ip.user_ns)["read_notebook"])
    assert (f"Last error in the kernel, from cell [{failing}] id=in-{failing}, In [{failing}]:\n```\n"
            "ZeroDivisionError: division by zero\n") in text
    assert "return 1 / 0" in text and "interactiveshell.py" not in text  # IPython's own frame left out
    assert f"id=in-{failing} code, In [{failing}], raised the last error" in text


def test_the_kernels_file_comes_from_vs_code_or_jupyter_server(ip, tmp_path, monkeypatch):
    nb = v4.new_notebook(cells=[v4.new_code_cell("y = 2", id="only")])
    vsc, server = tmp_path / "vsc.ipynb", tmp_path / "server.ipynb"
    nbformat.write(nb, str(vsc))
    nbformat.write(nb, str(server))
    ip.user_ns["__vsc_ipynb_file__"] = str(vsc)
    assert f"Notebook read from file: {vsc}" in read(tools(ip.user_ns)["read_notebook"])
    del ip.user_ns["__vsc_ipynb_file__"]
    monkeypatch.setenv("JPY_SESSION_NAME", str(server))
    assert f"Notebook read from file: {server}" in read(tools(ip.user_ns)["read_notebook"])
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "renamed-since.ipynb"))  # gone: not used
    assert "Notebook read from history" in read(tools(ip.user_ns)["read_notebook"])


def test_the_live_notebook_wins_when_there_is_one_but_not_while_a_cell_runs(ip, monkeypatch):
    live = MemoryNotebook()
    monkeypatch.setattr(notebook_select, "live_backend", lambda: live)
    t = tools(ip.user_ns)
    text = read(t["read_notebook"])
    assert "Notebook read from live: test" in text and "id=m1 code, not run, ACTIVE" in text
    ip.user_ns["the_tool"] = t["read_notebook"]
    ip.run_cell("import asyncio\nfrom_a_cell = asyncio.run(the_tool.handler())", store_history=True)
    assert "Notebook read from history" in ip.user_ns.pop("from_a_cell")  # the front end could not answer
    ip.user_ns.pop("the_tool")


def test_from_a_running_cell_an_edit_never_lands_in_the_file_behind_the_open_editor(ip, monkeypatch, tmp_path):
    """A blocking cell (``%%chat``, ``conv.ask()``) while the notebook is open in a front end: the
    page cannot answer, so the file is read, and an edit or insert is refused: nothing written."""
    from nbagent.notebook.live_notebook import UNREACHABLE

    path = tmp_path / "open.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell("y = 2", id="only")]), str(path))
    before = path.read_bytes()
    ip.user_ns["__vsc_ipynb_file__"] = str(path)
    monkeypatch.setattr(notebook_select, "live_backend", lambda: MemoryNotebook())
    t = tools(ip.user_ns, approve_code=False)
    ip.user_ns["the_tools"] = t
    ip.run_cell("import asyncio\n"
                "async def go():\n"
                "    t = the_tools\n"
                "    read = await t['read_notebook'].handler()\n"
                "    preview = await t['edit_cell'].preview({'cell_id': 'only', 'source': 'y = 3'})\n"
                "    try:\n"
                "        await t['edit_cell'].handler(cell_id='only', source='y = 3')\n"
                "    except Exception as exc:\n"
                "        edit = exc\n"
                "    try:\n"
                "        await t['insert_cell'].handler(source='z = 1')\n"
                "    except Exception as exc:\n"
                "        insert = exc\n"
                "    return read, preview, edit, insert\n"
                "from_a_cell = asyncio.run(go())", store_history=True)
    read_text, preview, edit, insert = ip.user_ns.pop("from_a_cell")
    ip.user_ns.pop("the_tools")
    assert f"Notebook read from file: {path}" in read_text and "y = 2" in read_text  # reading is fine
    assert preview.problem == UNREACHABLE  # the card says it before anyone approves
    for refused in (edit, insert):
        assert getattr(refused, "kind", None) == "tool" and "live notebook cannot be reached now" in str(refused)
        assert "Nothing was written" in str(refused)
    assert path.read_bytes() == before


def test_a_live_notebook_that_does_not_answer_falls_back_and_says_so(ip, monkeypatch):
    monkeypatch.setattr(notebook_select, "live_backend", lambda: MemoryNotebook(fail=True))
    text = read(tools(ip.user_ns)["read_notebook"])
    assert "The live notebook did not answer ([config] no view answered); read from history" in text
    assert text.startswith("Notebook read from history")


def test_a_bad_notebook_argument_is_a_config_error(ip, tmp_path):
    with pytest.raises(ConfigError, match="is not an .ipynb file"):
        notebook_tools(ip.user_ns, notebook=tmp_path / "notes.txt")
    with pytest.raises(ConfigError, match="takes a path to an .ipynb or a NotebookBackend"):
        notebook_tools(ip.user_ns, notebook=42)
    missing = tools(ip.user_ns, notebook=tmp_path / "missing.ipynb")["read_notebook"]
    with pytest.raises(Exception, match="no notebook file at"):
        read(missing)


def test_a_history_value_whose_repr_hangs_is_not_shown_and_the_read_returns(ip):
    """``Out[n]``'s repr was made on the event loop with no limit: one hanging ``__repr__`` hung
    read_notebook (and the kernel's loop) for good."""
    import threading

    class Hangs:
        def __repr__(self):
            while True:
                pass

    ip.run_cell("41 + 1", store_history=True)
    count = ip.execution_count - 1
    ip.user_ns["Out"][count] = Hangs()
    done: list = []
    worker = threading.Thread(target=lambda: done.append(read(tools(ip.user_ns)["read_notebook"])), daemon=True)
    worker.start()
    worker.join(60)  # the bound is 1 s a value; a hang never ends
    ip.user_ns["Out"].pop(count, None)  # the shell is shared with later tests
    assert done, "read_notebook did not return"
    assert f"id=in-{count} code" in done[0] and "Hangs: not shown: its repr took longer than 1 s" in done[0]
