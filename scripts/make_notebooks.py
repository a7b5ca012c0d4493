"""Write the notebooks in notebooks/ (run again after editing this file)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parents[1] / "notebooks"


def save(name, cells):
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating changes only what was edited
        cell.id = f"{Path(name).stem}-{i}"
    nbformat.write(nb, HERE / name)


save("quickstart.ipynb", [
    new_markdown_cell(
        "# nbagent quick start\n\n"
        "Chat with a model inside this notebook. `Agent()` picks a model in this order: the "
        "`NBAGENT_MODEL` environment variable, the **offline local model** (SmolLM2-135M through "
        "llama.cpp, installed by the README's set-up command), else the scripted **demo** model.\n\n"
        "Use `Agent(model=\"openai:gpt-4.1-mini\")`, `\"anthropic:claude-sonnet-4-5\"` or "
        "`\"gemini:gemini-2.5-flash\"` with an API key in the usual environment variable for a "
        "bigger model."),
    new_code_cell("from nbagent import Agent\n\nagent = Agent(max_tokens=200, temperature=0)\nagent.model"),
    new_markdown_cell("Display the agent to get the chat widget. Type in the box: **Enter** sends, "
                      "**Shift+Enter** adds a line, **Stop** interrupts the answer."),
    new_code_cell("agent"),
    new_markdown_cell("Cells can talk to the same conversation; the answer streams into the widget above."),
    new_code_cell('resp = await agent.conversation.chat_to_completion("What is the capital of France?")\n'
                  "print(resp.text)"),
    new_markdown_cell("Every turn's tokens, timing and cost are a DataFrame away "
                      "(`usage_df()` has more columns: cache writes, thinking, model calls, status…):"),
    new_code_cell("agent.conversation.usage_df()[[\"prompt\", \"model\", \"input_tokens\", \"cached_tokens\",\n"
                  "                               \"output_tokens\", \"ttft_s\", \"output_tokens_per_s\", \"cost_usd\"]]"),
    new_markdown_cell("Or chat with a cell magic:"),
    new_code_cell("%load_ext nbagent"),
    new_code_cell("%%chat -a agent\nName three colours of the rainbow."),
    new_code_cell("agent.conversation.history_df()[[\"turn\", \"type\", \"source\", \"status\", \"content\"]]"),
])

save("tools_and_approval.ipynb", [
    new_markdown_cell(
        "# How an agent thinks and calls tools\n\n"
        "The **demo** model is scripted and offline: it always thinks out loud, calls a fitting tool, "
        "and answers — perfect for showing each step of an agent loop in class."),
    new_code_cell(
        "from nbagent import Agent, tool\n\n"
        "@tool\n"
        "def calculator(expression: str) -> float:\n"
        "    \"\"\"Evaluate an arithmetic expression.\n\n"
        "    Args:\n"
        "        expression: Python arithmetic such as '12 * 7'.\n"
        "    \"\"\"\n"
        "    import ast, operator as op\n"
        "    ops = {ast.Add: op.add, ast.Sub: op.sub, ast.Mult: op.mul, ast.Div: op.truediv, ast.Pow: op.pow,\n"
        "           ast.USub: op.neg}\n"
        "    def ev(node):\n"
        "        if isinstance(node, ast.Constant):\n"
        "            return node.value\n"
        "        if isinstance(node, ast.BinOp):\n"
        "            return ops[type(node.op)](ev(node.left), ev(node.right))\n"
        "        if isinstance(node, ast.UnaryOp):\n"
        "            return ops[type(node.op)](ev(node.operand))\n"
        "        raise ValueError('not arithmetic')\n"
        "    return ev(ast.parse(expression, mode='eval').body)\n\n"
        "calculator.input_schema"),
    new_markdown_cell("With `policy=\"ask\"` every tool call waits for **Approve** or **Deny** in the widget."),
    new_code_cell("agent = Agent(model=\"demo\", tools=[calculator], policy=\"ask\")\nagent"),
    new_markdown_cell("From code, the same decision is `approve` / `deny`:"),
    new_code_cell(
        "import asyncio\n\n"
        "conv = agent.conversation\n"
        "turn = asyncio.ensure_future(conv.chat_to_completion(\"What is 12 * 7?\"))\n"
        "while not any(s.status.value == \"WAITING_FOR_USER\" for s in conv.history):\n"
        "    await asyncio.sleep(0.05)\n"
        "call = [s for s in conv.history if s.status.value == \"WAITING_FOR_USER\"][0].tool_calls[0]\n"
        "conv.approve(call.id)\n"
        "resp = await turn\n"
        "print(resp.text)"),
    new_markdown_cell("Every step of that turn, as data:"),
    new_code_cell("conv.history_df()[[\"turn\", \"type\", \"source\", \"target\", \"status\", \"content\", \"tool_names\"]]"),
    new_code_cell("conv.tool_calls_df()"),
])

save("usage_analysis.ipynb", [
    new_markdown_cell(
        "# Token usage and cost as DataFrames\n\n"
        "Each conversation keeps a ledger of its turns; saved sessions can be analysed together."),
    new_code_cell(
        "import tempfile, pathlib\n"
        "from nbagent import Agent, load_sessions\n\n"
        "folder = pathlib.Path(tempfile.mkdtemp())\n"
        "for i in range(3):\n"
        "    agent = Agent(model=\"demo\")\n"
        "    for q in [\"Hello\", \"What is a monad?\", \"Thanks!\"][: i + 1]:\n"
        "        await agent.conversation.chat_to_completion(q)\n"
        "    agent.conversation.save(folder / f\"session-{i}.json\")\n"
        "sorted(p.name for p in folder.glob(\"*.json\"))"),
    new_code_cell("usage = load_sessions(str(folder / \"*.json\"))\nusage"),
    new_code_cell("usage.groupby(\"session_id\")[[\"input_tokens\", \"output_tokens\", \"cost_usd\"]].sum()"),
    new_code_cell("agent.conversation.usage_summary()"),
    new_code_cell("agent.conversation.plot_usage();"),
])
print("notebooks written to", HERE)
