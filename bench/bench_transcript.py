"""Kernel -> browser bytes of a long chat in the widget, in a real kernel (tests/support/kernel_chat.py).

40 turns of 400-word answers are sent from the widget's box over its comm, as a browser does; every
iopub display_data / update_display_data (the saved transcript) and comm message (the live
widget) is counted as its JSON content. Goals: the saved transcript carries each turn's text once
(<= 1.2x the text), the last turn's transcript bytes within 3x the first's, and every turn in
the saved outputs. The comm side (flushes of deltas and patches, and the traits' updates) is reported
beside it, and the total against the text (issue #32: <= 2.2x, the last turn's total within 1.2x
the first's). The widget's one-off comm_open (its JavaScript) is left out.

Run: .venv/bin/python bench/bench_transcript.py [--turns 40 --words 400]     (always exits 0)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.kernel_chat import KernelChat, answer_text  # noqa: E402


def measure(turns: int, words: int) -> dict:
    answers = [answer_text(i, words) for i in range(turns)]
    with KernelChat(answers, timeout=120) as chat:
        costs = [chat.turn(f"question {i}") for i in range(turns)]
        saved = chat.outputs.markdown(chat.cell)
    text = sum(len(a.encode()) for a in answers)
    display = [c.display for c in costs]
    comm = [c.comm for c in costs]
    kept = sum(1 for i in range(turns) if f"begin{i:03d}" in saved and f"end{i:03d}" in saved)
    return {"turns": turns, "text": text, "display": sum(display), "comm": sum(comm),
            "display_ratio": sum(display) / text, "total_ratio": (sum(display) + sum(comm)) / text,
            "display_last_first": display[-1] / display[0],
            "total_last_first": costs[-1].total / costs[0].total, "kept": kept,
            "first_ratio": costs[0].total / len(answers[0].encode())}


def rows(quick: bool) -> list[dict]:
    """bench/run_all.py's rows."""
    m = measure(20 if quick else 40, 400)
    sizes = f"{m['turns']} turns of 400 words, {m['text'] / 1000:.0f} KB of text"
    return [
        {"measure": "saved transcript bytes over a long chat vs its text (real kernel)",
         "ratio": m["display_ratio"], "goal": "<= 1.2", "met": m["display_ratio"] <= 1.2,
         "detail": f"{m['display'] / 1000:.0f} KB for {sizes}; {m['kept']}/{m['turns']} turns in the saved outputs"},
        {"measure": "saved transcript bytes of the last turn vs the first's",
         "ratio": m["display_last_first"], "goal": "<= 3", "met": m["display_last_first"] <= 3, "detail": sizes},
        {"measure": "all kernel -> browser bytes (transcript + widget comm) vs the text",
         "ratio": m["total_ratio"], "goal": "<= 2.2, last turn <= 1.2x the first (issue #32)",
         "met": m["total_ratio"] <= 2.2 and m["total_last_first"] <= 1.2,
         "detail": f"transcript {m['display'] / 1000:.0f} KB + comm {m['comm'] / 1000:.0f} KB "
                   "(flushes: the text as deltas with the running turn's structure as patches and the running, "
                   f"finished and gauge values); one answer (the first turn) {m['first_ratio']:.2f}x; "
                   f"last turn vs first {m['total_last_first']:.2f}x"},
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--words", type=int, default=400)
    args = ap.parse_args(argv)
    m = measure(args.turns, args.words)
    print(f"{m['turns']} turns, {m['text']:,} B of answers")
    print(f"saved transcript: {m['display']:,} B = {m['display_ratio']:.2f}x the text (goal <= 1.2); "
          f"last turn {m['display_last_first']:.2f}x the first's (goal <= 3); {m['kept']}/{m['turns']} turns kept")
    print(f"widget comm: {m['comm']:,} B; total {m['total_ratio']:.2f}x the text (goal <= 2.2), "
          f"last turn {m['total_last_first']:.2f}x the first's (goal <= 1.2); one answer (the first turn) "
          f"{m['first_ratio']:.2f}x")


if __name__ == "__main__":
    main()
