"""Write the notebooks of notebooks/ that are made here (run again after editing this file); the
others (usage_analysis.ipynb, fix_the_error.ipynb, ...) are edited as notebooks, without outputs.

Each one runs top to bottom offline (tests/test_notebooks.py executes them); cells that
need an API key print a note instead of calling out when the key is not set.
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parents[1] / "notebooks"


def md(text):
    return new_markdown_cell(text)


def code(text, tags=()):
    cell = new_code_cell(text)
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def save(name, cells):
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating changes only what was edited
        cell.id = f"{Path(name).stem}-{i}"
    nbformat.write(nb, HERE / name)


CALCULATOR = (
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
    "    return ev(ast.parse(expression, mode='eval').body)\n"
)

save("quickstart.ipynb", [
    md("# nbagent quick start\n\n"
       "nbagent puts a chat with an LLM agent in your notebook: you see each step as it streams (its "
       "thoughts, its tool calls with their arguments and results, Approve / Deny), and the whole "
       "conversation is a Python object whose history and usage are pandas DataFrames.\n\n"
       "**Run All** (the ⏩ button, or *Run → Run All Cells*). In under a minute, offline: a chat appears, "
       "answers a question from a cell, and the last cell fails on purpose. Then type **fix the error** "
       "into the chat: the agent reads the notebook, shows you the diff of the fix and waits for your "
       "*Approve*, then asks to run the fixed cell (*Approve* again).\n\n"
       "**Which model answers.** This notebook uses the scripted **demo** model: offline, instant, the same "
       "every time, there so you can see what an agent does. nbagent also bundles an offline **local model**, "
       "SmolLM2-135M run by llama.cpp on your CPU (`Agent(model=\"local\")`, or `Agent()` when it is "
       "installed): a 135-million-parameter **toy for trying the interface** (streaming, Stop, usage tables), "
       "whose answers are often wrong and which cannot call tools. For real answers, name a real model; "
       "everything else stays the same:\n\n"
       "```python\n"
       "Agent(model=\"openai:gpt-4.1-mini\", notebook=True)   # with OPENAI_API_KEY set; also anthropic:…, gemini:…\n"
       "Agent(model=\"openai:llama3.2\", base_url=\"http://localhost:11434/v1\")  # Ollama, vLLM, llama.cpp…\n"
       "```\n\n"
       "`providers.ipynb` shows every provider."),
    code("import pandas as pd\n\n"
         "sales = pd.DataFrame({\n"
         "    \"month\": [\"Jan\", \"Feb\", \"Mar\"],\n"
         "    \"revenue\": [120, 135, 160],\n"
         "})"),
    md("Display an agent to get the chat. `notebook=True` gives it tools to look at your variables, read "
       "and edit the cells and run code, each edit or run waiting for your approval. In the box, "
       "**Enter** sends, **Shift+Enter** adds a line, **Stop** interrupts the answer."),
    code("from nbagent import Agent\n\n"
         "agent = Agent(model=\"demo\", notebook=True)\n"
         "agent"),
    md("A cell can talk to the same conversation; the answer streams into the chat above, with the tool "
       "call the agent made:"),
    code('resp = await agent.conversation.chat_to_completion("Which variables does my notebook have?")\n'
         "print(resp.text)"),
    md("Every turn's tokens, timing and cost are a DataFrame away (`history_df()` has every step):"),
    code("agent.conversation.usage_df()[[\"prompt\", \"model\", \"input_tokens\", \"output_tokens\", "
         "\"ttft_s\", \"cost_usd\"]]"),
    md("## Fix an error\n\n"
         "The next cell fails on purpose: the column is `revenue`, not `revnue`. (Run All stops here.)"),
    code('total = sales["revnue"].sum()\ntotal', tags=["raises-exception"]),
    md("Now scroll up to the chat and type **fix the error**. The agent calls `read_notebook` (the cells "
       "and the kernel's last error), then `edit_cell`: its card shows the diff, old line and new, and "
       "nothing changes until you press **Approve**. Then it asks to `run_cell` the fixed cell; approve "
       "that too and the cell above shows `415`. The card's **Undo** puts the old source back, and the "
       "cell's metadata records what the agent did (turn, model, who approved).\n\n"
       "Next: `fix_the_error.ipynb` (the same from code), `data_analysis.ipynb` (the agent on a "
       "DataFrame), `usage_analysis.ipynb` (usage, cost and the prompt cache), `teaching.ipynb` (how an "
       "agent thinks, step by step), `tools_and_approval.ipynb`, `magics.ipynb`, `providers.ipynb`."),
])

save("tools_and_approval.ipynb", [
    md("# How an agent thinks and calls tools\n\n"
       "The **demo** model is scripted and offline: it always thinks out loud, calls a fitting tool, "
       "and answers — perfect for showing each step of an agent loop in class."),
    code("from nbagent import Agent, tool\n\n" + CALCULATOR + "\ncalculator.input_schema"),
    md("With `policy=\"ask\"` every tool call waits for **Approve** or **Deny** in the widget."),
    code("agent = Agent(model=\"demo\", tools=[calculator], policy=\"ask\")\nagent"),
    md("From code, the same decision is `approve` / `deny`:"),
    code("import asyncio\n\n"
         "conv = agent.conversation\n"
         "turn = asyncio.ensure_future(conv.chat_to_completion(\"What is 12 * 7?\"))\n"
         "while not any(s.status.value == \"WAITING_FOR_USER\" for s in conv.history):\n"
         "    await asyncio.sleep(0.05)\n"
         "call = [s for s in conv.history if s.status.value == \"WAITING_FOR_USER\"][0].tool_calls[0]\n"
         "conv.approve(call.id)\n"
         "resp = await turn\n"
         "print(resp.text)"),
    md("Every step of that turn, as data:"),
    code("conv.history_df()[[\"turn\", \"type\", \"source\", \"target\", \"status\", \"content\", \"tool_names\"]]"),
    code("conv.tool_calls_df()"),
])

save("teaching.ipynb", [
    md("# Inside an agent: thinking, tools, answers\n\n"
       "For a classroom. An **agent** is a language model in a loop: it reads the conversation, may "
       "*think*, may ask to *call a tool*, gets the tool's *result* back, and goes on until it *answers*. "
       "This notebook uses nbagent's **demo** model — scripted, offline, the same every time — so that "
       "each of those moves is easy to see. (It only pretends to understand; swap in a real model with "
       "`Agent(model=...)` and the same tables fill up the same way.)\n\n"
       "Three words we will use:\n\n"
       "- a **turn** is one prompt and everything the agent does until it answers it;\n"
       "- a **step** is one thing that happens inside a turn: the prompt, one model call (its thoughts, "
       "text and tool calls), one tool run, the end of the turn;\n"
       "- **usage** is what a turn cost: tokens the model read (*input*), wrote (*output*) and spent "
       "thinking, and the time it took."),
    md("Two tools the agent may use: a calculator, and a quadratic-equation solver that answers in "
       "LaTeX (so the answer has math in it)."),
    code("from nbagent import Agent, tool\n\n" + CALCULATOR + "\n\n"
         "@tool\n"
         "def solve_quadratic(a: float, b: float, c: float) -> str:\n"
         "    \"\"\"Solve a x^2 + b x + c = 0 and give the roots in LaTeX.\"\"\"\n"
         "    d = b * b - 4 * a * c\n"
         "    if d < 0:\n"
         "        return r\"no real roots ($\\Delta < 0$)\"\n"
         "    r1, r2 = (-b - d ** 0.5) / (2 * a), (-b + d ** 0.5) / (2 * a)\n"
         "    return rf\"$x = \\frac{{-b \\pm \\sqrt{{\\Delta}}}}{{2a}}$, so $x_1 = {r1:g}$ and $x_2 = {r2:g}$\"\n\n"
         "agent = Agent(model=\"demo\", tools=[calculator, solve_quadratic])\n"
         "conv = agent.conversation\n"
         "agent"),
    md("## Turn 1: a question that needs a tool\n\n"
       "Watch the widget above: first the thought (click it to open), then the tool card with the "
       "arguments the model chose and the result, then the answer."),
    code("resp = await conv.chat_to_completion(\"What is 12 * 7?\")\n"
         "print(\"thought:\", resp.thinking)\n"
         "print(\"answer: \", resp.text)"),
    md("The same turn as data: one row per **step**. Read it top to bottom — the user's prompt; a model "
       "call that *thinks* and asks for `calculator` (`target` ENVIRONMENT: it talks to the tools, not to "
       "you); the tool's run with its result in `content`; a second model call that reads the result and "
       "answers you (`target` USER); the end of the turn."),
    code("cols = [\"turn\", \"type\", \"source\", \"target\", \"status\", \"thinking\", \"content\", \"tool_names\"]\n"
         "conv.history_df()[cols]"),
    md("## Turn 2: math in the answer\n\n"
       "This time through the `%%chat` cell magic, which shows the whole turn in the cell: the thought, "
       "the tool call and its result, and the answer — whose LaTeX is rendered as math, here and in the "
       "widget above."),
    code("%load_ext nbagent"),
    code("%%chat -a agent\nPlease solve_quadratic with a=1, b=-5, c=6"),
    code("conv.history_df()[cols].tail(5)"),
    md("## Turn 3: no tool needed\n\nThe model can also answer straight away: one model call, no tool step."),
    code("resp = await conv.chat_to_completion(\"Hello! Who are you?\")\n"
         "conv.history_df()[cols].tail(3)"),
    md("## Usage: what each turn cost\n\n"
       "One row per **turn**: the tokens the model read (`input_tokens`: every model call reads the whole "
       "conversation so far, so a turn with a tool call, which takes two calls, reads it twice), wrote "
       "(`output_tokens`) and spent thinking, how many model calls and tool calls the turn took, and how "
       "long. A real model's provider also reports `cost_usd`; the demo is free."),
    code("conv.usage_df()[[\"prompt\", \"input_tokens\", \"output_tokens\", \"thinking_tokens\",\n"
         "                 \"model_calls\", \"tool_calls\", \"duration_s\"]]"),
    md("Every tool call of the conversation, with its arguments and result:"),
    code("conv.tool_calls_df()"),
    md("## Replay a recorded lesson\n\n"
       "Record a lesson at home with a real model, replay it in class: offline, the same every time, "
       "at a readable pace. `save_to=` saves the conversation after every turn, one file per "
       "conversation. (Here the demo model stands in for the real one.)"),
    code("home = Agent(model=\"demo\", tools=[calculator], save_to=\"lesson\")  # at home: a real model\n"
         "home.ask(\"What is 12 * 7?\")\n"
         "home.ask(\"Hello! Who are you?\")\n"
         "lesson = home.session_path\n"
         "print(lesson)"),
    md("`model=\"replay:PATH\"` streams the recorded turns again: thoughts, text, tool calls with "
       "their recorded results (the tools do not run: `rerun_tools=True` would run them), usage. "
       "`speed=` is the pace in tokens per second (40 by default, like a hosted model); `speed=None` "
       "shows each turn at once, as here."),
    code("replay = Agent(model=f\"replay:{lesson}\", speed=None)\n"
         "resp = await replay.conversation.chat_to_completion(\"What is 12 * 7?\")\n"
         "print(\"thought:\", resp.thinking)\n"
         "print(\"answer: \", resp.text)"),
    md("In class, `step=True` waits before each recorded model call: the widget shows \"step k of N\" and a "
       "large *Next*; with the keyboard in the chat, → or Space plays the next step (← cannot take one "
       "back). A student's different prompt then shows a notice before anything plays: *Continue with the "
       "recording*, or *Answer live* with `live=\"demo\"` (or a real model)."),
    md("Without `step=True` (`on_mismatch=\"continue\"`, the default then), a student who asks something "
       "else gets a note, and the replay goes on with the recording:"),
    code("resp = await replay.conversation.chat_to_completion(\"Can you do my homework?\")\n"
         "print(resp.thinking.splitlines()[0])\n"
         "replay.provider.notes"),
    md("## Review a class's chats\n\n"
       "Each student's agent saves into one folder with `user=` and a budget; `list_sessions` lists "
       "the folder (one row per conversation, newest first, reading only each file's head) and "
       "`load_sessions` gives every turn with who asked. Below, three students chat with made-up "
       "prices so the cost shows; a turn that would pass a student's budget is refused before "
       "anything is sent."),
    code("from nbagent import NbagentError, list_sessions, load_sessions\n\n"
         "prices = {\"demo\": {\"input\": 2.0, \"output\": 8.0}}  # $ per million tokens, made up\n"
         "questions = {\n"
         "    \"alice\": [\"What is 12 * 7?\", \"What is 2 ** 10?\"],\n"
         "    \"bob\": [\"Hello!\", \"What is a loop?\", \"Why is the sky blue?\", \"Explain recursion\",\n"
         "            \"What is 3 + 4?\", \"Thanks!\"],\n"
         "    \"chen\": [\"What is 6 * 7?\"],\n"
         "}\n"
         "for student, prompts in questions.items():\n"
         "    agent = Agent(model=\"demo\", tools=[calculator], save_to=\"class\", user=student,\n"
         "                  budget_usd=0.005, pricing=prices)\n"
         "    for prompt in prompts:\n"
         "        try:\n"
         "            agent.ask(prompt)\n"
         "        except NbagentError as err:\n"
         "            print(f\"{student}: refused ({err.kind})\")\n"
         "            break"),
    code("sessions = list_sessions(\"class\")\n"
         "sessions[[\"user\", \"title\", \"turns\", \"tokens\", \"cost_usd\", \"budget_usd\", \"out_of_budget\"]]"),
    md("Per student: conversations, turns, tokens, cost, and who ran out of budget (`out_of_budget`: "
       "what is left would not pay for another turn like the last):"),
    code("per_student = sessions.groupby(\"user\").agg(\n"
         "    chats=(\"path\", \"count\"), turns=(\"turns\", \"sum\"), tokens=(\"tokens\", \"sum\"),\n"
         "    cost_usd=(\"cost_usd\", \"sum\"), out_of_budget=(\"out_of_budget\", \"any\"))\n"
         "per_student"),
    md("Every turn, with who asked it and what it cost:"),
    code("turns = load_sessions(\"class\", pricing=prices)\n"
         "turns[[\"user\", \"turn\", \"prompt\", \"input_tokens\", \"output_tokens\", \"cost_usd\"]]"),
    md("And one student's chat, read back as a transcript:"),
    code("from IPython.display import Markdown\n"
         "from nbagent import Conversation\n\n"
         "bob = sessions[sessions.user == \"bob\"].path.iloc[0]\n"
         "Markdown(Conversation.load(bob).to_markdown())"),
    md("## A course in a folder\n"
       "\n"
       "A teacher puts two files in the course folder, and every student's notebook below it obeys them:\n"
       "`nbagent.toml` (which models, whether the agent may run code, a budget per student and week, lesson\n"
       "hours, where sessions are saved) and `AGENTS.md` (rules added to the system prompt). Here both go into\n"
       "a temporary course folder, and this kernel moves into a student's folder inside it, as if this\n"
       "notebook were `course/week1/lesson.ipynb`."),
    code("import os\n"
         "import tempfile\n"
         "from pathlib import Path\n"
         "\n"
         "course = Path(tempfile.mkdtemp()) / \"course\"\n"
         "(course / \"week1\").mkdir(parents=True)\n"
         "(course / \"nbagent.toml\").write_text(\"\"\"\\\n"
         "[policy]\n"
         "models = [\"demo\"]          # the only model students may use\n"
         "run_code = false           # no run_python, no cell edits\n"
         "budget_usd = 2.0           # dollars per student ...\n"
         "budget_period = \"week\"     # ... and week (it starts afresh on Monday)\n"
         "save_to = \"sessions\"       # every chat saved here, for the teacher\n"
         "user = \"student\"\n"
         "\"\"\")\n"
         "(course / \"AGENTS.md\").write_text(\n"
         "    \"You are the tutor of Data Science 101. Give hints and ask questions; never write the solution.\\n\")\n"
         "before = os.getcwd()\n"
         "os.chdir(course / \"week1\")  # a student's notebook folder: the policy is found walking up"),
    md("An agent made here obeys the policy: the demo model (the first one allowed when none is named),\n"
       "the rules of `AGENTS.md` in front of its system prompt (its widget's footer says *rules: AGENTS.md*),\n"
       "and its sessions saved in the course's `sessions` folder, each recording the policy's path and hash."),
    code("student = Agent()\n"
         "student.ask(\"Write the function for exercise 3, please.\")\n"
         "print(student.model, \"| rules:\", student.course.rules.label, \"| saved in:\", student.session_path.parent.name)\n"
         "print(student.system)"),
    md("Arguments cannot loosen the policy: another model is refused, naming the policy file, and a bigger\n"
       "budget stays at the course's. (Lesson hours, `hours = [\"09:00-12:00\"]` or `[\"Tue,Thu 13:00-15:30\"]`, refuse a\n"
       "turn outside them the same way, saying when the class opens again. An edit of the hours or the budget\n"
       "applies to the students' running agents from their next turn.)"),
    code("try:\n"
         "    Agent(model=\"openai:gpt-4.1-mini\")\n"
         "except NbagentError as err:\n"
         "    print(type(err).__name__, \"-\", err.message.replace(str(course), \"course\"))\n"
         "print(\"budget:\", Agent(budget_usd=100).conversation.budget.usd)"),
    md("`%chat_policy` shows a student the policy in force: its file, the models, whether code may run,\n"
       "the budget left this week and when it starts afresh, the hours and the rules file."),
    code("%chat_policy"),
    code("os.chdir(before)  # back to this notebook's own folder"),
    md("## Try it\n\n"
       "- Ask `\"What is 2 ** 10 - 24?\"` and predict the rows `history_df()` will gain before running it.\n"
       "- Give the agent `policy=\"ask\"` (see `tools_and_approval.ipynb`) and approve or deny a call.\n"
       "- Run the same cells with a real model and compare its thoughts with the script's."),
])

save("providers.ipynb", [
    md("# Models and providers\n\n"
       "`Agent(model=\"provider:model-name\")` picks who answers; the rest of nbagent (widget, tools, "
       "DataFrames, magics) is the same for all of them. Keys come from `api_key=` or the usual "
       "environment variables (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`) and never appear "
       "in reprs, saved files or errors.\n\n"
       "Making an agent does not call anyone, so the cells below run anywhere; the cells that *send* "
       "something need a key and print a note instead when it is not set."),
    code("import os\nfrom nbagent import Agent\n\n"
         "for model in [\"openai:gpt-4.1-mini\", \"openai-responses:gpt-5-mini\",\n"
         "              \"anthropic:claude-sonnet-4-5\", \"gemini:gemini-2.5-flash\"]:\n"
         "    print(Agent(model=model))"),
    md("## OpenAI, Anthropic, Gemini\n\nEach cell asks one short question when its key is set."),
    code("if os.environ.get(\"OPENAI_API_KEY\"):\n"
         "    agent = Agent(model=\"openai:gpt-4.1-mini\", max_tokens=50)\n"
         "    print((await agent.conversation.chat_to_completion(\"Say hello in French.\")).text)\n"
         "else:\n"
         "    print(\"OPENAI_API_KEY is not set: skipped. Set it (in your shell or os.environ) and re-run.\")"),
    code("if os.environ.get(\"ANTHROPIC_API_KEY\"):\n"
         "    agent = Agent(model=\"anthropic:claude-sonnet-4-5\", max_tokens=50)\n"
         "    print((await agent.conversation.chat_to_completion(\"Say hello in French.\")).text)\n"
         "else:\n"
         "    print(\"ANTHROPIC_API_KEY is not set: skipped. Set it (in your shell or os.environ) and re-run.\")"),
    code("if os.environ.get(\"GEMINI_API_KEY\"):\n"
         "    agent = Agent(model=\"gemini:gemini-2.5-flash\", max_tokens=50)\n"
         "    print((await agent.conversation.chat_to_completion(\"Say hello in French.\")).text)\n"
         "else:\n"
         "    print(\"GEMINI_API_KEY is not set: skipped. Set it (in your shell or os.environ) and re-run.\")"),
    md("## Any OpenAI-compatible server: vLLM, Ollama, llama.cpp, LM Studio…\n\n"
       "Use the `openai:` prefix with the server's `base_url` and the model name it serves. No key is "
       "needed for a server on your machine (none is sent to a loopback address)."),
    code("ollama = Agent(model=\"openai:llama3.2\", base_url=\"http://localhost:11434/v1\")\n"
         "vllm = Agent(model=\"openai:Qwen/Qwen2.5-7B-Instruct\", base_url=\"http://localhost:8000/v1\")\n"
         "llama_server = Agent(model=\"openai:my-model\", base_url=\"http://localhost:8080/v1\")\n"
         "[(a.model, a.provider.base_url) for a in (ollama, vllm, llama_server)]"),
    md("To see one answer for real without installing anything more: nbagent's offline model *is* "
       "llama.cpp's OpenAI-compatible server, started on your machine. Start it, then talk to it as any "
       "OpenAI-compatible server:"),
    code("from nbagent.providers.local import LocalProvider, local_runtime_available\n\n"
         "if local_runtime_available():\n"
         "    server = LocalProvider()\n"
         "    await server.start()\n"
         "    agent = Agent(model=\"openai:smollm2\", base_url=server.base_url, max_tokens=40, temperature=0)\n"
         "    resp = await agent.conversation.chat_to_completion(\"Name a planet of the solar system.\")\n"
         "    print(server.base_url, \"→\", resp.text)\n"
         "    await server.aclose()  # stops the server\n"
         "else:\n"
         "    print(\"The offline model is not installed (run scripts/setup.sh): skipped.\")"),
    md("## Offline, and your own\n\n"
       "- `Agent(model=\"local\")` — SmolLM2-135M, a toy for trying the interface; "
       "`Agent(model=\"local:/path/to/model.gguf\", n_ctx=8192)` runs any bigger GGUF file the same way.\n"
       "- `Agent(model=\"demo\")` — the scripted teaching model (`teaching.ipynb`).\n"
       "- `nbagent.providers.register(\"myllm\", MyProvider)` makes `model=\"myllm:name\"` work; a plugin "
       "package does the same through the `nbagent.providers` entry-point group.\n"
       "- `NBAGENT_MODEL=anthropic:claude-sonnet-4-5` makes that the default of every `Agent()`."),
])

save("magics.ipynb", [
    md("# The `%%chat` cell magic and its friends\n\n"
       "`%load_ext nbagent` adds a cell magic that sends the cell to an agent, and line magics that "
       "manage it. `%%chat?` or `%chat_model?` shows the options of each. This notebook uses the offline "
       "demo model; drop `-m demo` to get the default model."),
    code("%load_ext nbagent"),
    md("A `%%chat` cell makes the notebook's agent (`nbagent_agent`) on first use. The answer streams "
       "into the cell, then becomes the cell's result — shown as markdown with the thoughts, tool calls "
       "and a usage line, and kept in `_`:"),
    code("%%chat -m demo --new\nHello! What can you do?"),
    code("answer = _\nprint(type(answer).__name__, len(answer), \"characters\")"),
    md("`{name}` puts a notebook variable in the prompt; a DataFrame becomes a compact table (long ones "
       "show their first and last rows). `{{` and `}}` are literal braces."),
    code("import pandas as pd\n\n"
         "cities = pd.DataFrame({\"city\": [\"Paris\", \"Lyon\", \"Nice\"], \"population_k\": [2103, 522, 342]})\n"
         "limit = 500"),
    code("%%chat\nWhich of these cities have more than {limit} thousand people? {{answer briefly}}\n{cities}"),
    md("## Tools, system prompt, model"),
    code("def add(a: float, b: float) -> float:\n"
         "    \"\"\"Add two numbers.\"\"\"\n"
         "    return a + b"),
    code("%chat_tools add"),
    code("%%chat\nPlease add 2 + 40"),
    code("%chat_system You are a patient teacher. Keep answers short."),
    code("%chat_model demo:demo-2"),
    code("%%chat\nAnd now?"),
    md("## Usage and history, as DataFrames"),
    code("%chat_usage"),
    code("%chat_history"),
    md("## Save, start afresh, load, export\n\n"
       "`%chat_save` writes the conversation to JSON; `%chat_reset` starts a new one (same model, tools and "
       "system prompt); `%chat_load` continues a saved one; `%chat_export` writes a readable transcript — "
       "markdown or one self-contained HTML page, everything the model wrote escaped."),
    code("%chat_save chat.json"),
    code("%chat_reset"),
    code("%chat_load chat.json"),
    code("%chat_export chat.md"),
    code("%chat_export chat.html"),
    code("print(open(\"chat.md\").read()[:600])"),
    md("## The widget from a cell\n\n"
       "`--widget` shows the chat widget and streams the answer there (in a kernel the turn runs in the "
       "background, so Stop and Approve/Deny keep working)."),
    code("%%chat --widget\nOne more question, in the widget this time."),
    md("## Errors\n\nA mistake shows as one line (the cell fails, as any error does), never a long traceback:"),
    code("%%chat -a no_such_agent\nHello?", tags=["raises-exception"]),
])
save("class_view.ipynb", [
    md("# A class in a folder: the teacher's live view\n\n"
       "Each student chats in their own notebook with `Agent(save_to=\"class\", user=\"their name\")`: every "
       "session saves into the one shared folder, naming its student. Here two students are simulated in "
       "this kernel with the offline demo model; in a class each runs in the student's own kernel."),
    code("import nbagent\nfrom nbagent import Agent\n\n"
         "ana = Agent(model=\"demo\", delay=0, save_to=\"class\", user=\"ana\")\n"
         "ben = Agent(model=\"demo\", delay=0, save_to=\"class\", user=\"ben\")\n"
         "ana.ask(\"What is 12 * 7?\")\n"
         "ben.ask(\"Explain a for loop\")\n"
         "ben.ask(\"@teacher my loop never ends\");"),
    md("## One row per student\n\n"
       "`nbagent.class_summary(folder)` adds up each student's saved sessions: sessions, turns, tokens, cost, "
       "last activity, the failed turns ending their latest session (`errors_in_a_row`), and whether they "
       "asked for help: a prompt that starts with `/help` or 🙋, or names `@teacher`, sets the flag until "
       "their next prompt."),
    code("summary = nbagent.class_summary(\"class\")\n"
         "summary[[\"user\", \"sessions\", \"turns\", \"tokens\", \"cost_usd\", \"last_active\", "
         "\"errors_in_a_row\", \"asked_for_help\"]]"),
    code("print(\"asking for help:\", list(summary.loc[summary.asked_for_help, \"user\"]))"),
    md("## Budgets\n\n"
       "`budget_usd=` with `period=\"day\"` (from local midnight) or `\"week\"` (from Monday) marks who spent it. "
       "The demo model is free, so this example prices it at $100 per million tokens:"),
    code("priced = nbagent.class_summary(\"class\", budget_usd=0.03, pricing={\"demo\": {\"input\": 100, \"output\": 100}})\n"
         "priced[[\"user\", \"period_cost_usd\", \"over_budget\"]]"),
    md("## The live view\n\n"
       "`nbagent.class_view(folder)` shows the same rows and follows the folder as students' sessions save "
       "(it polls every 2 s and re-reads only the files that changed). Help, over-budget and failing rows "
       "are highlighted; click a row to read that student's latest chat."),
    code("view = nbagent.class_view(\"class\")\nview"),
    md("Ana asks again: her row in the view above shows 2 turns within a couple of seconds."),
    code("ana.ask(\"And 6 * 7?\");"),
    code("view.poll()  # what the thread does every 2 s, done now: the rows that changed\n"
         "[(row[\"user\"], row[\"turns\"]) for row in view.rows]"),
])
print("notebooks written to", HERE)
