"""ChatWidget without a browser: the kernel's variable names for ``@name`` autocomplete, the prompt
seam every send passes, and a code tool's call as the card gets it (before and after approval)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("anywidget")

from nbagent import Agent, tool  # noqa: E402
from nbagent.notebook.variables import VariableName, variable_names  # noqa: E402
from nbagent.notebook.protocol import Approve, NamesRequest, Send  # noqa: E402
from nbagent.notebook.widget import ChatWidget  # noqa: E402

from support.widget_messages import customs, until_idle, deliver  # noqa: E402
from support.scripted import ScriptedProvider, text_call, tool_call  # noqa: E402
from support.waiting import until  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_names_leave_out_underscores_modules_and_what_ipython_put_there():
    import math

    def get_ipython():  # stands for IPython's own function in user_ns_hidden
        return None

    Out: dict = {}
    ns = {"sales": [1, 2], "Revenue": 3.5, "_private": 1, "__name__": "__main__", "math": math, "np_alias": math,
          "get_ipython": get_ipython, "Out": Out, "exit": "rebound by the user", 3: "not a name"}
    hidden = {"get_ipython": get_ipython, "Out": Out, "exit": object()}
    names = variable_names(ns, hidden)
    assert names == [VariableName("exit", "str"), VariableName("Revenue", "float"), VariableName("sales", "list")]
    assert variable_names(ns, hidden, limit=1) == [VariableName("exit", "str")]


def test_names_from_a_real_ipython_shell_namespace(tmp_path):
    """In a real shell (a subprocess: the shell is a process-wide singleton), ``namespace=None``
    reads its user namespace and leaves out IPython's own names."""
    script = textwrap.dedent("""
        import json
        from IPython.core.interactiveshell import InteractiveShell
        from nbagent.notebook.variables import variable_names
        shell = InteractiveShell.instance()
        shell.run_cell("import os\\nsales = {'jan': 3}\\n_hidden = 1\\nsales_2024 = [1]\\n1 + 1")
        print(json.dumps([[v.name, v.type_name] for v in variable_names()]))
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), IPYTHONDIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [["sales", "dict"], ["sales_2024", "list"]]


def test_the_widget_answers_a_names_request_with_its_id():
    w = ChatWidget(Agent(model="demo"))
    w.namespace = {"sales": [1], "_x": 2, "price": 1.5}
    sent = customs(w)
    deliver(w, NamesRequest(id="box-1-7"))
    assert sent == [{"type": "names", "id": "box-1-7", "names": [["price", "float"], ["sales", "list"]]}]


async def test_every_send_passes_the_prompt_seam_and_a_refused_one_comes_back_as_typed(monkeypatch):
    import nbagent.notebook.widget_prompt as prompt_path

    monkeypatch.setattr(prompt_path, "prepare_prompt", lambda prompt, namespace=None: prompt + "\n\n[attached: sales]")
    Prepared = ChatWidget
    provider = ScriptedProvider([text_call("ok")])
    agent = Agent(model=provider)
    w = Prepared(agent)
    deliver(w, Send(prompt="look at @sales"))
    await until_idle(w)
    assert agent.conversation.turns[-1].prompt == "look at @sales\n\n[attached: sales]"
    over = Agent(model=ScriptedProvider([text_call("never")]), pricing={"scripted-1": {"input": 1.0, "output": 1.0}},
                 budget_usd=0.0)
    w2 = Prepared(over)
    sent = customs(w2)
    deliver(w2, Send(prompt="look at @sales"))
    await until_idle(w2)
    assert [m["type"] for m in sent] == ["confirm"] and sent[0]["prompt"] == "look at @sales"


async def test_a_mention_in_the_box_attaches_the_variable_like_chat_cells_do():
    agent = Agent(model=ScriptedProvider([text_call("ok")]))
    w = ChatWidget(agent)
    w.namespace = {"sales": [3, 1, 2], "other": 1}
    deliver(w, Send(prompt="sum @sales please, mail me at a@b.com"))
    await until_idle(w)
    prompt = agent.conversation.turns[-1].prompt
    assert prompt.startswith("sum @sales please, mail me at a@b.com")
    assert "Attached notebook variables: @sales" in prompt and "[3, 1, 2]" in prompt
    assert "@other" not in prompt and "@b" not in prompt.split("Attached", 1)[1]


async def test_a_code_tool_call_reaches_the_card_with_its_code_before_and_after_approval():
    """A stand-in ``run_python`` (approval required) returning a DataFrame: while it waits, the
    model step carries the call with its code (the card highlights it); approved, its result has
    the escaped table display the card shows."""
    import pandas as pd

    @tool(requires_approval=True)
    def run_python(code: str) -> object:
        """Run Python code."""
        return pd.DataFrame({"month": ["jan", "<script>x</script>"], "revenue": [3, 4]})

    code = "sales.groupby('month').revenue.sum()"
    provider = ScriptedProvider([tool_call(("c1", "run_python", {"code": code})), text_call("Done.")])
    agent = Agent(model=provider, tools=[run_python])
    w = ChatWidget(agent)
    deliver(w, Send(prompt="revenue by month"))
    await until(lambda: any(s["status"] == "WAITING_FOR_USER" for s in (w.current or {}).get("steps", [])),
                "the call waiting in the widget's state")
    calls = [(c["id"], c["name"], c["args"]) for s in w.current["steps"] if s["source"] == "MODEL"
             for c in s.get("tool_calls", [])]
    assert calls == [("c1", "run_python", {"code": code})]
    deliver(w, Approve(call_id="c1"))
    await until_idle(w)
    turn = w.finished_turns()[-1]
    run = next(s for s in turn["steps"] if s.get("target") == "ENVIRONMENT" and s["type"] == "TOOL_CALL")
    assert run["status"] == "DONE" and "<table" in run["display"]["text/html"]
    assert "&lt;script&gt;" in run["display"]["text/html"] and "<script>" not in run["display"]["text/html"]
