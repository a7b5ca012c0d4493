"""IPython extension: ``%load_ext nbagent`` adds the ``%%chat`` cell magic.

    %%chat                      # talk to the notebook's agent (created on first use)
    What is 2 + 2?

    %%chat -a my_agent          # use the Agent bound to the name my_agent
    %%chat -m demo --new        # a new agent with that model (stored as nbagent_agent)

The answer streams into the cell as plain text (appended, never re-sent),
then is replaced by rendered markdown with the turn's usage. Interrupting the
kernel stops the turn; the partial answer is kept.
"""

from __future__ import annotations

import shlex
import sys

DEFAULT_NAME = "nbagent_agent"


def load_ipython_extension(ipython) -> None:
    ipython.register_magic_function(_chat_magic(ipython), magic_kind="cell", magic_name="chat")


def _parse(line: str) -> dict:
    opts = {"agent": None, "model": None, "new": False, "widget": False}
    args = shlex.split(line)
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-a", "--agent") and i + 1 < len(args):
            opts["agent"] = args[i + 1]
            i += 2
        elif a in ("-m", "--model") and i + 1 < len(args):
            opts["model"] = args[i + 1]
            i += 2
        elif a == "--new":
            opts["new"] = True
            i += 1
        elif a == "--widget":
            opts["widget"] = True
            i += 1
        else:
            from ..core.errors import NbagentError

            raise NbagentError(f"%%chat: unknown option {a!r} (use -a NAME, -m MODEL, --new, --widget)",
                               kind="config")
    return opts


def _chat_magic(ipython):
    def chat(line: str, cell: str):
        from ..agent import Agent

        opts = _parse(line)
        ns = ipython.user_ns
        name = opts["agent"] or DEFAULT_NAME
        agent = ns.get(name)
        if agent is None or opts["new"]:
            if opts["agent"] and not opts["new"]:
                from ..core.errors import NbagentError

                raise NbagentError(f"%%chat: no agent named {name!r} in the notebook", kind="config")
            agent = Agent(model=opts["model"])
            ns[name] = agent
        prompt = cell.strip()
        if opts["widget"]:
            from IPython.display import display

            display(agent.conversation.widget())
            agent.conversation.ask(prompt)
            return None
        return _stream_to_cell(agent.conversation, prompt)

    return chat


def _stream_to_cell(conv, prompt: str):
    from IPython.display import Markdown, clear_output, display

    from ..core.steps import Text, Thought, ToolCall

    from ..core.conversation import chunks_of

    state = {"thinking": False}
    seen: set[str] = set()

    def on_step(event: str, payload) -> None:
        if event != "step":
            return
        for chunk in chunks_of(payload, seen):
            if isinstance(chunk, Thought):
                if not state["thinking"]:
                    sys.stdout.write("💭 ")
                    state["thinking"] = True
                sys.stdout.write(chunk.text)
            elif isinstance(chunk, Text):
                if state["thinking"]:
                    sys.stdout.write("\n\n")
                    state["thinking"] = False
                sys.stdout.write(chunk.text)
            elif isinstance(chunk, ToolCall):
                sys.stdout.write(f"\n🔧 {chunk.name}({chunk.args})\n")
        sys.stdout.flush()

    conv.add_listener(on_step)
    try:
        conv.ask(prompt)
    finally:
        conv.remove_listener(on_step)
        sys.stdout.flush()
    clear_output(wait=True)
    display(Markdown(turn_markdown(conv)))
    return None  # the answer is shown once; conv.last_response / conv.history keep it


def turn_markdown(conv) -> str:
    """Markdown for the last turn: thoughts, tool calls, answer, a usage line."""
    from .transcript import transcript_markdown

    turns = conv.turns
    starts = conv.turn_start_indices
    steps = conv.history[starts[-1]:] if starts else conv.history
    body = transcript_markdown([s for s in steps if s.source.value != "USER"])
    if not turns:
        return body
    rec = turns[-1]
    u = rec.usage
    bits = [rec.model or "model", f"in {u.prompt_token_count:,}"]
    if u.cached_content_token_count:
        bits.append(f"cached {u.cached_content_token_count:,}")
    if u.thoughts_token_count:
        bits.append(f"thinking {u.thoughts_token_count:,}")
    bits.append(f"out {u.candidates_token_count:,}")
    if rec.duration is not None:
        bits.append(f"{rec.duration * 1000:,.0f} ms" if rec.duration < 10 else f"{rec.duration:.1f} s")
    if rec.time_to_first_token is not None:
        bits.append(f"TTFT {rec.time_to_first_token * 1000:,.0f} ms")
    if rec.output_tokens_per_s:
        bits.append(f"{rec.output_tokens_per_s:,.0f} tok/s")
    return body + "\n\n<sub>" + " · ".join(bits) + "</sub>"
