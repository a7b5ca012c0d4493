"""Other coding agents' session logs (Claude Code, Codex) read into nbagent's usage records."""
