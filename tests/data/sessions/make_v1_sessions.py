"""Make the version-1 session files here with the nbagent of commit e5aa3d3 (before typed step fields).

    git worktree add /tmp/nbagent-v1 e5aa3d3
    python tests/data/sessions/make_v1_sessions.py \
        tests/data/sessions/demo-tools-v1.json tests/data/sessions/cache-writes-v1.json /tmp/nbagent-v1
"""
import asyncio, sys
sys.path.insert(0, sys.argv[3])
import nbagent
assert nbagent.__file__.startswith(sys.argv[3]), nbagent.__file__
from nbagent import Agent, tool, Step, StepSource, StepTarget, StepStatus, StepType, UsageMetadata, MockConnection, Conversation, FinishReason

@tool
def calculator(expression: str) -> float:
    """Evaluate an arithmetic expression."""
    return eval(expression, {"__builtins__": {}})

async def main():
    agent = Agent(model="demo", tools=[calculator], policy="ask", compaction_budget=300)
    conv = agent.conversation
    async def approver():
        while True:
            await asyncio.sleep(0.005)
            for s in conv.history:
                if s.metadata.get("approval") == "pending":
                    (conv.approve if "12" in str(s.tool_calls[0].args) else conv.deny)(s.tool_calls[0].id)
    task = asyncio.create_task(approver())
    await conv.chat_to_completion("What is 12 * 7?")
    await conv.chat_to_completion("What is 3 + 4?")
    await conv.chat_to_completion("Tell me about the history of arithmetic " * 20)
    task.cancel()
    conv.save(sys.argv[1])
    # a conversation with Anthropic-style cache writes through a script
    steps = [
        Step(step_index=0, type=StepType.TEXT_RESPONSE, source=StepSource.USER, target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content="hi"),
        Step(step_index=1, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER, status=StepStatus.DONE, content="hello", usage_metadata=UsageMetadata(1200, 5, 1205, 0, 0), metadata={"model": "claude-sonnet-4-5-20250929", "cache_write_tokens": 1000, "raw_usage": {"input_tokens": 200, "cache_creation_input_tokens": 1000, "output_tokens": 5}, "finish_reason": "STOP"}),
        Step(step_index=2, type=StepType.FINISH, source=StepSource.SYSTEM, target=StepTarget.USER, status=StepStatus.DONE, metadata={"finish_reason": "STOP"}),
    ]
    c2 = Conversation(MockConnection([steps]))
    await c2.chat_to_completion("hi")
    c2.save(sys.argv[2])

asyncio.run(main())
