"""Helpers shared by the tests, the browser tests and bench/ (not tests themselves).

- ``replay``: load the recorded fixtures in ``tests/fixtures`` and replay them through a provider;
- ``fault_server``: a real, scriptable misbehaving HTTP server on loopback;
- ``wires``: each provider's wire format (OpenAI, Anthropic, Gemini) for the fault tests;
- ``scripted``: a provider that replays scripted events, for agent-loop tests;
- ``streams``: scripted streaming connections for the widget (kernel-less and in a real kernel);
- ``jupyter``: an isolated Jupyter server and Chromium page for the browser tests;
- ``tool_runs``: a conversation's tool runs, and a call that must not hang;
- ``waiting``: wait for a condition under one generous deadline (a hang guard, never a speed check).

Import them as ``from support.<module> import ...``: ``tests/`` is on ``sys.path`` through
``pythonpath`` in pyproject.toml's pytest section (bench scripts and the browser tests' kernels
add it themselves). Pytest fixtures shared by several test modules live in ``tests/conftest.py``.
"""
