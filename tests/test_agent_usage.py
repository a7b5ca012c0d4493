"""Other coding agents' session logs in nbagent's usage frames (issue #46).

The logs are in ``tests/fixtures/agent_logs`` (README there: ccusage's own test fixtures, and logs
written in the formats Claude Code and Codex write, with streamed duplicates, a subagent that
replays its parent's message, cumulative-only counts and damaged lines). The expected totals below
are ccusage 20.0.26's on the same folders; ``test_totals_equal_ccusage`` recomputes them with
ccusage itself where it is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

import nbagent  # noqa: E402
from nbagent.analysis.agent_logs import readers  # noqa: E402

LOGS = Path(__file__).resolve().parent / "fixtures" / "agent_logs"
CLAUDE, CODEX = LOGS / "claude", LOGS / "codex"
RECORDED = LOGS / "recorded"  # written by the real Claude Code 2.1.197 and Codex 0.171.0 (record.sh there)
SESSION = "4f1c2a9e-7b3d-4c55-9a0e-2d6f8b1c3e70"
CCUSAGE_CACHE = Path(os.environ.get("NBAGENT_CCUSAGE_DIR", Path.home() / ".cache" / "nbagent" / "ccusage"))


def days(df) -> dict:
    """Per source and UTC day: ccusage's token kinds (input without cache reads and writes)."""
    df = df.assign(day=df.started.dt.strftime("%Y-%m-%d"))
    out = {}
    for (source, day), g in df.groupby(["source", "day"], observed=True):
        out[(str(source), day)] = {
            "input": int(g.input_tokens.sum() - g.cached_tokens.sum() - g.cache_write_tokens.sum()),
            "cache_read": int(g.cached_tokens.sum()), "cache_write": int(g.cache_write_tokens.sum()),
            "output": int(g.output_tokens.sum() + g.thinking_tokens.sum()), "cost": round(g.cost_usd.sum(), 6)}
    return out


# ccusage 20.0.26 `claude daily --json` / `codex daily --json` (--timezone UTC --offline) on the fixtures
CCUSAGE_DAYS = {
    ("claude-code", "2026-01-12"): {"input": 2473, "cache_read": 46060, "cache_write": 5540, "output": 475,
                                    "cost": 0.043637},
    ("claude-code", "2026-01-13"): {"input": 900, "cache_read": 0, "cache_write": 2000, "output": 220,
                                    "cost": 0.0225},
    ("codex", "2026-01-12"): {"input": 6784, "cache_read": 6016, "cache_write": 0, "output": 260, "cost": 0.011832},
    ("codex", "2026-01-13"): {"input": 700, "cache_read": 6400, "cache_write": 0, "output": 400, "cost": 0.007945},
}


def test_claude_code_and_codex_logs_give_ccusages_totals_per_day():
    df = nbagent.agent_usage(CLAUDE, CODEX)
    assert days(df) == CCUSAGE_DAYS
    assert set(df.source) == {"claude-code", "codex"}
    assert set(df.project) == {"/home/ada/proj/shop", "/home/ada/proj/api"}  # the working folder each ran in


def test_logs_the_real_tools_wrote_give_ccusages_totals():
    df = nbagent.agent_usage(RECORDED / "claude", RECORDED / "codex")
    totals = {source: {k: sum(v[k] for (s, _), v in days(df).items() if s == source) for k in CCUSAGE_DAYS[
        ("codex", "2026-01-12")]} for source in ("claude-code", "codex")}
    # ccusage 20.0.26 `claude daily --json` / `codex daily --json` totals on the same folders
    assert totals["claude-code"] == {"input": 418, "cache_read": 8000, "cache_write": 0, "output": 98,
                                     "cost": pytest.approx(0.005124)}
    assert totals["codex"] == {"input": 383, "cache_read": 5632, "cache_write": 0, "output": 115,
                               "cost": pytest.approx(0.00233275, abs=1e-6)}
    assert df.attrs["skipped"] == {} and df.attrs["refused"] == {}
    claude = df[df.source == "claude-code"]
    assert claude.session_id.nunique() == 1  # the subagent's call is its parent session's
    assert claude.tool_calls.sum() == 2  # Agent, then Bash
    assert set(df.prompt) == {"Write hello into note.txt and show it", "Say in one line what note.txt should hold"}


def test_a_streamed_message_written_three_times_is_one_call_and_a_subagents_replay_is_dropped():
    df = nbagent.load_sessions(str(CLAUDE / "**" / "*.jsonl"))
    sonnet = df[df.model == "claude-sonnet-4-5-20250929"]
    # msg_01A (three records), msg_01B (and its replay in the subagent's log), msg_01C
    assert len(sonnet) == 3
    assert sonnet.output_tokens.tolist() == [310, 95, 12]
    assert sonnet.input_tokens.iloc[0] == 4 + 11800 + 5120  # every input token: fresh, cache reads, cache writes
    assert sonnet.tool_calls.tolist() == [1, 1, 0]  # Read, then Task: the tool_use blocks of each message
    # the subagent's own calls are its parent session's
    assert set(df.session_id) == {SESSION}
    assert (df.model == "claude-haiku-4-5-20251001").sum() == 2
    assert (df.source == "claude-code").all()


def test_codex_counts_from_last_usage_or_the_difference_of_totals():
    df = nbagent.load_sessions(CODEX / "sessions" / "2026" / "01" / "12")  # a folder: its *.json and *.jsonl
    assert df.input_tokens.tolist() == [6200, 6600, 7100]  # last usage; 12800 - 6200; last usage
    assert df.cached_tokens.tolist() == [0, 6016, 6400]
    assert (df.output_tokens + df.thinking_tokens).tolist() == [180, 80, 400]
    assert df.thinking_tokens.tolist() == [128, 22, 256]
    assert df.model.tolist() == ["gpt-5.1-codex", "gpt-5.1-codex", "gpt-5.2-codex"]
    assert df.prompt.tolist() == ["List the endpoints", "List the endpoints", "Add a POST"]
    assert df.tool_calls.tolist() == [1, 0, 0]
    assert (df.source == "codex").all() and df.cost_usd.notna().all()


def test_bad_lines_are_skipped_and_counted_per_file():
    df = nbagent.agent_usage(LOGS / "claude", LOGS / "codex")
    skipped = {Path(k).name: v for k, v in df.attrs["skipped"].items()}
    assert skipped[f"{SESSION}.jsonl"] == {"corrupt line": 1, "unknown record type": 1, "unknown version": 1,
                                           "torn last line": 1}
    assert next(v for k, v in skipped.items() if k.startswith("rollout-")) == {"corrupt line": 1}


GEMINI = LOGS / "gemini" / "tmp"  # a GEMINI_DATA_DIR, laid out as ~/.gemini/tmp
# ccusage 20.0.24 `gemini daily --json` (--timezone UTC --offline) on the fixture: its outputTokens leave
# the thinking tokens out (they are in its totalTokens and priced as output)
GEMINI_SESSIONS = {"7c1e5b2a-3d4f-4a6b-9c8d-0e1f2a3b4c5d", "a0b1c2d3-e4f5-4a6b-8c9d-0e1f2a3b4c5e"}
CCUSAGE_GEMINI_DAYS = {
    "2026-01-12": {"input": 2596, "cache_read": 1824, "cache_write": 0, "output": 170, "total": 4870,
                   "cost": 0.004792},
    "2026-01-13": {"input": 952, "cache_read": 2048, "cache_write": 0, "output": 200, "total": 3300,
                   "cost": 0.004446},
    "2026-01-14": {"input": 400, "cache_read": 3000, "cache_write": 0, "output": 60, "total": 3460,
                   "cost": 0.001475},
}


def gemini_days(df) -> dict:
    """Per UTC day: ccusage's Gemini token kinds (output without thinking; total with it)."""
    df = df.assign(day=df.started.dt.strftime("%Y-%m-%d"))
    return {day: {"input": int(g.input_tokens.sum() - g.cached_tokens.sum() - g.cache_write_tokens.sum()),
                  "cache_read": int(g.cached_tokens.sum()), "cache_write": int(g.cache_write_tokens.sum()),
                  "output": int(g.output_tokens.sum()),
                  "total": int(g.input_tokens.sum() + g.output_tokens.sum() + g.thinking_tokens.sum()),
                  "cost": round(g.cost_usd.sum(), 6)}
            for day, g in df.groupby("day")}


def test_gemini_cli_logs_give_ccusages_totals_per_day():
    df = nbagent.agent_usage(GEMINI)
    assert gemini_days(df) == CCUSAGE_GEMINI_DAYS
    assert set(df.source) == {"gemini-cli"} and set(df.project) == {"9f2c4e"}
    assert len(df) == 5  # a message rewritten under its id counts once; an all-zero count is no call
    assert df.model.tolist()[:3] == ["gemini-2.5-pro", "gemini-2.5-pro", "gemini-2.5-flash"]  # the latest named
    assert df.cost_usd.notna().all()


def test_gemini_cli_corrupt_and_torn_lines_are_skipped_and_counted():
    skipped = {Path(k).name: v for k, v in nbagent.agent_usage(GEMINI).attrs["skipped"].items()}
    assert skipped == {"session-2026-01-12T09-00-7c1e.jsonl": {"corrupt line": 1},
                       "session-2026-01-13T23-50-a0b1.jsonl": {"torn last line": 1}}


def test_hostile_folder_names_what_it_refuses_and_reads_the_rest(tmp_path):
    root = tmp_path / "claude" / "projects" / "p"
    shutil.copytree(CLAUDE / "projects" / "-home-ada-proj-shop", root)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes((CLAUDE / "projects" / "-home-ada-proj-shop" / f"{SESSION}.jsonl").read_bytes())
    (root / "link-out.jsonl").symlink_to(outside)
    (root / "loop").symlink_to(root)  # a link to a folder: never followed
    (root / "self.jsonl").symlink_to(root / "self.jsonl")  # a symlink loop
    os.mkfifo(root / "pipe.jsonl")  # reading it would block: refused without opening it for long
    (root / "empty.jsonl").write_bytes(b"")
    df = nbagent.agent_usage(tmp_path / "claude")
    refused = {Path(k).name: v for k, v in df.attrs["refused"].items()}
    assert refused.keys() == {"link-out.jsonl", "loop", "self.jsonl", "pipe.jsonl"}
    assert "not a regular file" in refused["pipe.jsonl"]
    assert days(df) == {k: v for k, v in CCUSAGE_DAYS.items() if k[0] == "claude-code"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
def test_an_unreadable_file_is_named_and_skipped(tmp_path):
    shutil.copytree(CODEX, tmp_path / "codex")
    locked = tmp_path / "codex" / "sessions" / "locked.jsonl"
    locked.write_bytes(b"{}\n")
    locked.chmod(0)
    df = nbagent.agent_usage(tmp_path / "codex")
    assert str(locked) in df.attrs["refused"]
    assert len(df) == 3


def test_a_line_being_appended_is_read_once_whole(tmp_path):
    folder = tmp_path / "codex" / "sessions"
    folder.mkdir(parents=True)
    log = folder / "rollout-x.jsonl"
    lines = (CODEX / "sessions" / "2026" / "01" / "12").glob("*.jsonl").__next__().read_bytes().splitlines(True)
    log.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])  # the writer is half way through the last line
    first = nbagent.agent_usage(tmp_path / "codex")
    assert len(first) == 2 and first.attrs["skipped"][str(log)] == {"corrupt line": 1, "torn last line": 1}
    with open(log, "ab") as f:
        f.write(lines[-1][40:])
    second = nbagent.agent_usage(tmp_path / "codex")
    assert len(second) == 3 and second.attrs["skipped"][str(log)] == {"corrupt line": 1}


def test_a_200_mb_line_is_skipped_and_counted_without_holding_the_file_twice(tmp_path):
    import tracemalloc

    folder = tmp_path / "claude" / "projects" / "p"
    shutil.copytree(CLAUDE / "projects" / "-home-ada-proj-shop", folder)
    log = folder / f"{SESSION}.jsonl"
    head, rest = log.read_bytes().split(b"\n", 1)
    size = 200 << 20
    with open(log, "wb") as f:  # a tool result of 200 MB on the second line, the log's own lines around it
        f.write(head + b"\n")
        f.write(b'{"type":"user","sessionId":"' + SESSION.encode() + b'","message":{"role":"user","content":"')
        for _ in range(size >> 20):
            f.write(b"x" * (1 << 20))
        f.write(b'"}}\n' + rest)
    nbagent.agent_usage(CLAUDE)  # what the read imports, imported before memory is traced
    tracemalloc.start()
    try:
        readers.read_log(log)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    df = nbagent.agent_usage(tmp_path / "claude")  # the log as read above (unchanged: not read again)
    assert df.attrs["skipped"][str(log)]["line over 64 MiB"] == 1
    assert days(df) == {k: v for k, v in CCUSAGE_DAYS.items() if k[0] == "claude-code"}  # the rest all read
    assert peak < 1.25 * log.stat().st_size  # the file once, not its line copied again
    assert nbagent.open_agent_log(log).usage_df().prompt.tolist() == ["Why is the cart total off by a cent?",
                                                                      "Now add a test"]


def test_a_log_appended_while_it_is_read_never_counts_a_torn_record(tmp_path):
    import threading

    log = tmp_path / "codex" / "sessions" / "rollout-2026-01-14T09-00-00-live.jsonl"
    log.parent.mkdir(parents=True)
    meta = {"timestamp": "2026-01-14T09:00:00.000Z", "type": "session_meta", "payload": {"id": "live"}}
    log.write_text(json.dumps(meta) + "\n")
    lines = 3000

    def write() -> None:  # each count written in two halves, so a read may well stop between them
        with open(log, "ab", buffering=0) as f:
            for n in range(lines):
                record = json.dumps({"timestamp": f"2026-01-14T09:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
                                     "type": "event_msg", "payload": {"type": "token_count", "info": {
                                         "last_token_usage": {"input_tokens": 100, "output_tokens": 1}}}}).encode()
                f.write(record[:50])
                f.write(record[50:] + b"\n")

    writer = threading.Thread(target=write)
    writer.start()
    reads = []
    while writer.is_alive() or len(reads) < 2:
        df = nbagent.agent_usage(tmp_path / "codex")
        reads.append(len(df))
        assert set(df.attrs["skipped"].get(str(log), {})) <= {"torn last line"}
        assert (df.input_tokens == 100).all() and (df.output_tokens + df.thinking_tokens == 1).all()
    writer.join()
    reads.append(len(nbagent.agent_usage(tmp_path / "codex")))  # a read that may have begun before the last write
    assert reads == sorted(reads) and reads[-1] == lines


def test_a_second_call_reads_only_the_files_that_changed(tmp_path, monkeypatch):
    shutil.copytree(CLAUDE, tmp_path / "claude")
    shutil.copytree(CODEX, tmp_path / "codex")
    nbagent.agent_usage(tmp_path / "claude", tmp_path / "codex")
    parsed: list[str] = []
    real = readers.parse_log
    monkeypatch.setattr(readers, "parse_log", lambda path, data: parsed.append(path.name) or real(path, data))
    again = nbagent.agent_usage(tmp_path / "claude", tmp_path / "codex")
    assert parsed == [] and days(again) == CCUSAGE_DAYS
    from nbagent.analysis.pricing import reset_prices, set_price

    set_price("claude-opus-4-5-20251101", input=0, output=0)  # prices apply to the files kept in memory too
    try:
        assert nbagent.agent_usage(tmp_path / "claude").cost_usd.sum() == pytest.approx(0.043637)
    finally:
        reset_prices("claude-opus-4-5-20251101")
    sub = next((tmp_path / "claude").rglob("agent-7e1.jsonl"))
    with open(sub, "ab") as f:
        f.write(json.dumps({"type": "future-record-kind", "sessionId": SESSION}).encode() + b"\n")
    third = nbagent.agent_usage(tmp_path / "claude", tmp_path / "codex")
    assert parsed == ["agent-7e1.jsonl"] and days(third) == CCUSAGE_DAYS


def test_no_argument_reads_the_standard_folders_of_each_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    shutil.copytree(CLAUDE, tmp_path / "a")
    shutil.copytree(LOGS / "ccusage" / "claude", tmp_path / "b")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", f"{tmp_path / 'a'}, {tmp_path / 'b' / 'projects'}")  # ccusage's list
    monkeypatch.setenv("CODEX_HOME", str(CODEX))
    monkeypatch.setenv("GEMINI_DATA_DIR", f"{tmp_path / 'none'},{GEMINI}")  # ccusage's list
    df = nbagent.agent_usage()
    assert set(df.session_id) == {SESSION, "session-alpha", "session-beta", "019b8a2c-5d1e-7f30-a4b2-6c9d0e1f2a3b",
                                  *GEMINI_SESSIONS}
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.delenv("CODEX_HOME")
    monkeypatch.delenv("GEMINI_DATA_DIR")
    shutil.copytree(CLAUDE, tmp_path / ".claude")
    shutil.copytree(GEMINI, tmp_path / ".gemini" / "tmp")
    assert set(nbagent.agent_usage().session_id) == {SESSION, *GEMINI_SESSIONS}


def test_nbagent_sessions_join_the_same_frame(tmp_path):
    agent = nbagent.Agent(model="demo")
    agent.ask("Hello")
    agent.conversation.save(tmp_path / "s.json")
    (tmp_path / "settings.json").write_text('{"theme": "dark"}')  # another tool's JSON: not a session
    df = nbagent.agent_usage(CODEX, sessions=tmp_path)
    assert df.source.value_counts().to_dict() == {"codex": 3, "nbagent": 1}
    assert df.attrs["refused"] == {}


def test_to_parquet_reads_agent_logs(tmp_path):
    pytest.importorskip("pyarrow")
    out = nbagent.to_parquet(str(CODEX / "**" / "*.jsonl"), tmp_path / "u.parquet")
    back = pd.read_parquet(out)
    assert back.input_tokens.tolist() == [6200, 6600, 7100]


def ccusage_binary() -> str | None:
    found = shutil.which("ccusage")
    local = CCUSAGE_CACHE / "node_modules" / ".bin" / "ccusage"
    return found or (str(local) if local.exists() else None)


REPORTS = {"daily": ("daily", "date", "%Y-%m-%d"), "monthly": ("monthly", "month", "%Y-%m"),
           "session": ("sessions", "sessionId", None)}


def tokens(row: dict, cost) -> dict:
    """ccusage's token kinds of one JSON row (its ``inputTokens`` leave cache reads and writes out)."""
    return {"input": row["inputTokens"], "cache_read": row["cacheReadTokens"],
            "cache_write": row["cacheCreationTokens"], "output": row["outputTokens"],
            "cost": None if cost is None else round(cost, 6)}


def add(rows: dict, key: tuple, values: dict) -> None:
    old = rows.setdefault(key, dict.fromkeys(values, 0))
    for k, v in values.items():
        old[k] = None if v is None else round(old[k] + v, 6)


def ccusage_report(tool: str, report: str, env: dict[str, str]) -> dict:
    """ccusage's ``<tool> <report> --json`` as {(source, period or session, model or ""): token kinds}:
    each row's totals and its per-model breakdown (Claude Code: ``modelBreakdowns``, with their costs;
    Codex: ``models``, without). A Claude fast-mode model ccusage names ``<model>-fast`` is the model's."""
    out = subprocess.run([ccusage_binary(), tool, report, "--json", "--offline", "--timezone", "UTC"],
                         env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    source = "claude-code" if tool == "claude" else "codex"
    listed, key_field, _ = REPORTS[report]
    rows: dict = {}
    for r in json.loads(out)[listed]:
        key = r[key_field]
        add(rows, (source, key, ""), tokens(r, r.get("totalCost", r.get("costUSD"))))
        for m in r.get("modelBreakdowns", []):
            add(rows, (source, key, m["modelName"].removesuffix("-fast")), tokens(m, m["cost"]))
        for name, m in r.get("models", {}).items():
            add(rows, (source, key, name), tokens(m, None))
    return rows


def nbagent_report(df, report: str, codex_home: Path) -> dict:
    """:func:`ccusage_report`'s rows from nbagent's frame. A Codex session is ccusage's: its log's path
    under ``sessions/`` (nbagent's ``session_id`` is the id Codex writes in it, one per file)."""
    _, _, period = REPORTS[report]
    if period is not None:
        key = df.started.dt.strftime(period)
    else:
        sessions = str(codex_home / "sessions") + os.sep
        key = [p.removeprefix(sessions).removesuffix(".jsonl") if s == "codex" else str(i)
               for p, s, i in zip(df.path, df.source, df.session_id)]
    df = df.assign(key=key, cost=df.cost_usd)
    rows: dict = {}
    for (source, k, model), g in df.groupby(["source", "key", "model"], observed=True):
        values = {"input": int(g.input_tokens.sum() - g.cached_tokens.sum() - g.cache_write_tokens.sum()),
                  "cache_read": int(g.cached_tokens.sum()), "cache_write": int(g.cache_write_tokens.sum()),
                  "output": int(g.output_tokens.sum() + g.thinking_tokens.sum()), "cost": float(g.cost.sum())}
        add(rows, (str(source), k, ""), values)
        add(rows, (str(source), k, str(model)), {**values, "cost": None if source == "codex" else values["cost"]})
    return rows


def without_replay(want: dict, daily: dict) -> dict:
    """``want`` without what ccusage counts twice. ccusage 20.0.24's ``monthly`` and ``session``
    reports count a subagent's replay of its parent's message that its ``daily`` report (and nbagent)
    count once: where its Claude Code totals exceed its daily ones, the excess must be exactly the
    written fixture's replay of msg_01B (January 2026, in the subagent's session), taken out there."""
    kinds = ("input", "cache_read", "cache_write", "output", "cost")

    def total(rows: dict) -> dict:
        return {k: sum(v[k] for key, v in rows.items() if key[0] == "claude-code" and key[2] == "") for k in kinds}

    excess = {k: round(total(want)[k] - total(daily)[k], 6) for k in kinds}
    if any(excess.values()):
        assert {k: excess[k] for k in kinds[:4]} == {"input": 6, "cache_read": 16920, "cache_write": 420,
                                                     "output": 95}
        for key, row in want.items():
            if key[0] == "claude-code" and key[1] in ("2026-01", SESSION) and key[2] in (
                    "", "claude-sonnet-4-5-20250929"):
                for k in kinds:
                    row[k] = round(row[k] - excess[k], 6)
    return {key: row for key, row in want.items() if any(row.values())}


needs_ccusage = pytest.mark.skipif(ccusage_binary() is None, reason=(
    "ccusage is not installed: npm install --prefix ~/.cache/nbagent/ccusage ccusage@20 "
    "@ccusage/ccusage-linux-x64 (or put ccusage on PATH)"))


@needs_ccusage
@pytest.mark.parametrize("report", list(REPORTS))
@pytest.mark.parametrize("folders", [(CLAUDE, CODEX), (LOGS / "ccusage" / "claude", LOGS / "ccusage" / "codex"),
                                     (RECORDED / "claude", RECORDED / "codex")], ids=["written", "ccusage", "recorded"])
def test_totals_equal_ccusage(folders, report, tmp_path):
    """Per day, month and session, and per model within each: every token kind, and the cost where
    both price alike (not ccusage's own fixtures, whose lines carry a ``costUSD`` ccusage uses)."""
    claude, codex = folders
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(claude),
           "CODEX_HOME": str(codex)}
    want = {**ccusage_report("claude", report, env), **ccusage_report("codex", report, env)}
    got = nbagent_report(nbagent.agent_usage(claude, codex), report, codex)
    if report != "daily":
        want = without_replay(want, ccusage_report("claude", "daily", env))
    if claude.parent.name == "ccusage":
        for rows in (got, want):
            for row in rows.values():
                row.pop("cost")
    assert got == want


@needs_ccusage
def test_a_claude_code_session_is_its_files_as_ccusage_groups_them(tmp_path):
    """A log whose name is not the session its records name (renamed, or resumed into a new file) is
    the session its path names, as in ccusage's session report; its subagent's stays its folder's."""
    shutil.copytree(CLAUDE, tmp_path / "claude")
    folder = tmp_path / "claude" / "projects" / "-home-ada-proj-shop"
    other = "0c2d9b1e-5a4f-4e3d-8c7b-6a5f4e3d2c1b"
    (folder / f"{SESSION}.jsonl").rename(folder / f"{other}.jsonl")
    df = nbagent.agent_usage(tmp_path / "claude")
    assert set(df.session_id) == {SESSION, other}
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    want = without_replay(ccusage_report("claude", "session", env), ccusage_report("claude", "daily", env))
    assert nbagent_report(df, "session", tmp_path) == want


def test_list_sessions_lists_agent_logs_with_their_usage(tmp_path):
    shutil.copytree(RECORDED, tmp_path / "recorded")
    (tmp_path / "recorded" / "claude" / "projects" / "broken.jsonl").write_bytes(b"not a log\n")
    listed = nbagent.list_sessions(str(tmp_path / "recorded" / "**" / "*.jsonl"))
    usage = nbagent.agent_usage(tmp_path / "recorded")
    assert len(listed) == 4  # the main Claude Code log, its subagent's, the Codex rollout, the broken file
    broken = listed[listed.path.str.endswith("broken.jsonl")]
    assert "not valid JSON" in broken.error.iloc[0] or "corrupt" in broken.error.iloc[0]
    good = listed[listed.error == ""]
    assert set(good.title) == {"Write hello into note.txt and show it", "Say in one line what note.txt should hold"}
    assert good.cost_usd.sum() == pytest.approx(usage.cost_usd.sum())
    assert good.turns.sum() == len(usage)


def test_a_claude_code_log_opens_as_a_read_only_conversation():
    conv = nbagent.open_agent_log(CLAUDE / "projects" / "-home-ada-proj-shop" / f"{SESSION}.jsonl")
    history = conv.history_df()
    assert history.source.tolist()[:3] == ["USER", "MODEL", "SYSTEM"]  # prompt, answer with a call, its result
    assert history.thinking.iloc[1] == "Look at money.py"  # the three records of one message are one step
    calls = conv.tool_calls_df()
    assert calls.name.tolist() == ["Read", "Task"]
    assert calls.result_preview.tolist() == ["def total(xs): return round(sum(xs), 2)", "cart.py:12"]
    assert conv.compaction_indices == [6]  # the step after the last answer of the first day
    compaction = history.iloc[6]
    assert compaction.type == "COMPACTION" and compaction.content.startswith("This session is being continued")
    usage = conv.usage_df()
    assert usage.prompt.tolist() == ["Why is the cart total off by a cent?", "Now add a test"]
    own = nbagent.load_sessions(CLAUDE / "projects" / "-home-ada-proj-shop" / f"{SESSION}.jsonl")
    assert usage.input_tokens.sum() == own.input_tokens.sum() and usage.cost_usd.sum() == pytest.approx(
        own.cost_usd.sum())  # the same calls counted once
    assert usage.cache_saved_usd.sum() > 0
    with pytest.raises(nbagent.NbagentError):
        conv.ask("more?")  # read-only: no connection


@pytest.mark.parametrize("log", [next((CODEX / "sessions").rglob("*.jsonl")), next((RECORDED / "codex").rglob("*.jsonl"))],
                         ids=["written", "recorded"])
def test_a_codex_log_opens_as_a_read_only_conversation(log):
    conv = nbagent.open_agent_log(log)
    own = nbagent.load_sessions(log)
    usage = conv.usage_df()
    assert usage.input_tokens.sum() == own.input_tokens.sum()
    assert (usage.output_tokens + usage.thinking_tokens).sum() == (own.output_tokens + own.thinking_tokens).sum()
    assert usage.cost_usd.sum() == pytest.approx(own.cost_usd.sum())
    calls = conv.tool_calls_df()
    assert len(calls) == 1 and calls.result_preview.iloc[0]  # the shell call paired with its output
    if log.is_relative_to(CODEX):  # a `compacted` record: a compaction holding its summary
        history = conv.history_df()
        assert history[history.type == "COMPACTION"].content.tolist() == ["Summary: the API lists items with GET /items."]
    assert usage.prompt.iloc[0] in ("List the endpoints", "Write hello into note.txt and show it")


def test_a_subagents_calls_and_steps_are_marked(tmp_path):
    df = nbagent.agent_usage(CLAUDE, RECORDED / "claude")
    marked = df[df.subagent]
    assert marked.path.str.contains("/subagents/").all() and len(marked) == 3  # two written, one recorded
    assert marked.model.tolist().count("claude-haiku-4-5-20251001") == 2 and not df[~df.subagent].path.str.contains(
        "/subagents/").any()
    main = CLAUDE / "projects" / "-home-ada-proj-shop" / f"{SESSION}.jsonl"
    assert not nbagent.open_agent_log(main).history_df().subagent.any()
    assert nbagent.open_agent_log(next(CLAUDE.rglob("agent-7e1.jsonl"))).history_df().subagent.all()
    # a Codex subagent's log: its own session_meta names a subagent source (its parent's follows it)
    rollout = tmp_path / "codex" / "sessions" / "rollout-2026-01-14T09-00-00-sub.jsonl"
    rollout.parent.mkdir(parents=True)
    lines = [{"timestamp": "2026-01-14T09:00:00.000Z", "type": "session_meta",
              "payload": {"id": "sub-1", "source": {"subagent": "review"}, "cwd": "/home/ada/proj/api"}},
             {"timestamp": "2026-01-14T09:00:00.000Z", "type": "session_meta", "payload": {"id": "parent-1"}},
             {"timestamp": "2026-01-14T09:00:01.000Z", "type": "turn_context", "payload": {"model": "gpt-5.1-codex"}},
             {"timestamp": "2026-01-14T09:00:02.000Z", "type": "response_item",
              "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}},
             {"timestamp": "2026-01-14T09:00:03.000Z", "type": "event_msg", "payload": {"type": "token_count", "info": {
                 "last_token_usage": {"input_tokens": 500, "cached_input_tokens": 0, "output_tokens": 20,
                                      "reasoning_output_tokens": 0, "total_tokens": 520}}}}]
    rollout.write_text("".join(json.dumps(r) + "\n" for r in lines))
    codex = nbagent.agent_usage(tmp_path / "codex", CODEX)
    assert codex.set_index("session_id").subagent.to_dict() == {"sub-1": True, "019b8a2c-5d1e-7f30-a4b2-6c9d0e1f2a3b": False}
    assert nbagent.open_agent_log(rollout).history_df().subagent.all()


def test_a_progress_line_on_stderr_when_asked_and_none_by_default_in_tests(capsys):
    nbagent.agent_usage(LOGS)  # "auto": stderr is not a terminal here and no kernel watches
    assert capsys.readouterr() == ("", "")
    nbagent.agent_usage(LOGS, progress=True)
    err = capsys.readouterr().err
    files = len(list(LOGS.rglob("*.json*")))
    assert err.startswith("\rReading agent logs: 1/") and err.endswith(f"{files}/{files} files, 0.1 MB 100%\n")
    with pytest.raises(nbagent.NbagentError):
        nbagent.agent_usage(LOGS, progress="yes")


@pytest.mark.notebook
def test_in_a_notebook_the_progress_is_one_display_updated_in_place():
    manager = pytest.importorskip("ipykernel.inprocess.manager").InProcessKernelManager()
    manager.start_kernel()
    client = manager.client()
    client.start_channels()
    try:
        client.execute(f"import nbagent; nbagent.agent_usage({str(LOGS)!r}, progress=True)")
        shown = [m for m in client.iopub_channel.get_msgs() if m["msg_type"] in ("display_data", "update_display_data")]
    finally:
        client.stop_channels()
        manager.shutdown_kernel()
    assert [m["msg_type"] for m in shown] == ["display_data", "update_display_data"]
    assert len({m["content"]["transient"]["display_id"] for m in shown}) == 1
    assert shown[-1]["content"]["data"]["text/plain"].endswith("files, 0.1 MB 100%")


def test_to_otel_sends_agent_logs_as_spans():
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    nbagent.to_otel(str(RECORDED / "**" / "*.jsonl"), exporter=exporter)
    spans = exporter.get_finished_spans()
    tokens = sum(s.attributes.get("gen_ai.usage.input_tokens", 0) for s in spans if s.name.startswith("chat"))
    assert tokens == nbagent.agent_usage(RECORDED).input_tokens.sum()
    assert {s.attributes.get("gen_ai.tool.name") for s in spans} >= {"Bash", "exec_command"}


@needs_ccusage
def test_gemini_cli_totals_equal_ccusage(tmp_path):
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "GEMINI_DATA_DIR": str(GEMINI)}
    out = subprocess.run([ccusage_binary(), "gemini", "daily", "--json", "--offline", "--timezone", "UTC"],
                         env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    want = {r["date"]: {"input": r["inputTokens"], "cache_read": r["cacheReadTokens"],
                        "cache_write": r["cacheCreationTokens"], "output": r["outputTokens"],
                        "total": r["totalTokens"], "cost": round(r["totalCost"], 6)} for r in json.loads(out)["daily"]}
    assert gemini_days(nbagent.agent_usage(GEMINI)) == want
