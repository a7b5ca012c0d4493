"""SSE decoding of one huge event: time at N and 4N bytes in the same run (linear => ratio ~4).

Before the decoder kept an unfinished line as pieces, each read re-joined and re-scanned the
whole pending line: 2 MB took 0.29 s and 8 MB 3.66 s (ratio 12.6). Always exits 0.
"""

from __future__ import annotations

import time

from nbagent.providers.sse import SSEDecoder


def decode_seconds(size: int, read: int = 4096) -> float:
    body = b"data: " + b"x" * size + b"\n\n"
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        decoder = SSEDecoder()
        events = []
        for i in range(0, len(body), read):
            events += decoder.feed(body[i : i + read])
        events += decoder.flush()
        best = min(best, time.perf_counter() - t0)
        assert len(events) == 1 and len(events[0].data) == size
    return best


def main() -> None:
    small, large = decode_seconds(2_000_000), decode_seconds(8_000_000)
    print(f"one event of 2 MB: {small * 1000:.1f} ms; 8 MB: {large * 1000:.1f} ms; "
          f"ratio {large / small:.1f} (linear ~4, goal <= 6)")


if __name__ == "__main__":
    main()
