"""Analysis: DataFrames of history, usage and tool calls, prices and cost, reports, many sessions."""
