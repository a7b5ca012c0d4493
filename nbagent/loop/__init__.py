"""The agent loop: a turn of model calls and tool runs (ModelConnection), tools, hooks, compaction."""
