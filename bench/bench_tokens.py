"""Offline o200k_base counts: bpe-openai (bundled vocabulary) against tiktoken, and speed against chars/4.

Reference: tiktoken's own BPE over the o200k_base file that bpe-openai bundles, loaded only after its
SHA-256 matches the hash OpenAI publishes in tiktoken (tiktoken checks ``expected_hash`` itself).
Counts are compared on a few thousand varied strings (prose, code, numbers, unicode, emoji, whitespace
runs, random code points). Prints agreement and throughput ratios. Needs ``nbagent[tokens]`` and tiktoken.
"""

from __future__ import annotations

import gzip
import random
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

from nbagent.core.compression import ApproxTokenizer, exact_tokenizer

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # tiktoken_ext/openai_public.py


def reference_encoding() -> tiktoken.Encoding:
    data = resources.files("bpe_openai.data").joinpath("o200k_base.tiktoken.gz").read_bytes()
    path = Path(tempfile.mkdtemp()) / "o200k_base.tiktoken"
    path.write_bytes(gzip.decompress(data))
    ranks = tiktoken.load.load_tiktoken_bpe(str(path), expected_hash=O200K_SHA256)  # raises on mismatch
    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: ranks  # keep tiktoken's pattern and special tokens
    try:
        return tiktoken.Encoding(**openai_public.o200k_base())
    finally:
        openai_public.load_tiktoken_bpe = original


def samples(n: int = 4000, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    corpus = [p.read_text(errors="replace") for p in sorted(Path(tiktoken.__file__).parent.parent.glob("*/*.py"))[:300]]
    corpus += [Path(__file__).parents[1].joinpath("README.md").read_text()]
    pieces = ["héllo wörld", "日本語のテキストです。", "中文分词测试", "Привет, мир", "مرحبا بالعالم", "🙂👍🏽🇫🇷",
              "3.14159", "1,234,567.89", "0x1F4A9", "  \t\n\n   ", "ǅungla", "naïve café", "€£¥", "\u200b\u00a0",
              "<|endoftext|>", "def f(x):\n    return x**2\n", "SELECT * FROM t WHERE a>=10;", "ﬁ ﬂ", "🏳️‍🌈"]
    out: list[str] = []
    while len(out) < n:
        kind = rng.randrange(4)
        if kind == 0:
            text = rng.choice(corpus)
            start = rng.randrange(max(1, len(text)))
            out.append(text[start:start + rng.randrange(1, 3000)])
        elif kind == 1:
            out.append("".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30))))
        elif kind == 2:
            out.append(" ".join(str(rng.randrange(10 ** rng.randrange(1, 15))) for _ in range(rng.randrange(1, 40))))
        else:
            out.append("".join(chr(rng.choice([rng.randrange(32, 0x2FF), rng.randrange(0x300, 0xD7FF),
                                               rng.randrange(0xE000, 0x10FFFF)])) for _ in range(rng.randrange(1, 200))))
    return out


def rate(count, texts: list[str]) -> float:
    """Characters a second, best of three runs."""
    chars, best = sum(map(len, texts)), float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for text in texts:
            count(text)
        best = min(best, time.perf_counter() - t0)
    return chars / best


def main() -> None:
    reference, exact = reference_encoding(), exact_tokenizer()
    texts = samples()
    code = Path(tiktoken.__file__).parent.joinpath("core.py").read_text() * 60
    texts += [code, " ".join(code.split())]  # ~1 MB with and without newlines: counted in several calls
    mismatches = [t for t in texts if exact.count(t) != len(reference.encode(t, disallowed_special=()))]
    print(f"o200k_base vocabulary SHA-256 matches OpenAI's: {O200K_SHA256[:12]}...")
    print(f"counts agree with tiktoken on {len(texts) - len(mismatches)}/{len(texts)} strings "
          f"({sum(map(len, texts)):,} chars)")
    short = texts[:-2]  # speed on chat-sized texts (chars/4 of a long text costs nothing)
    approx = ApproxTokenizer()
    speed = {"chars/4": rate(approx.count, short), "bpe-openai": rate(exact.count, short),
             "tiktoken": rate(lambda t: len(reference.encode(t, disallowed_special=())), short)}
    print(f"bpe-openai / chars/4 speed ratio: {speed['bpe-openai'] / speed['chars/4']:.4f} "
          f"({speed['bpe-openai'] / 1e6:.1f} M chars/s vs {speed['chars/4'] / 1e6:.0f} M chars/s)")
    print(f"bpe-openai / tiktoken speed ratio: {speed['bpe-openai'] / speed['tiktoken']:.2f}")
    load = ("import time; t = time.perf_counter(); from nbagent.core.compression import exact_tokenizer; "
            "exact_tokenizer(); print(time.perf_counter() - t)")
    seconds = float(subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, check=True).stdout)
    print(f"first use in a fresh process (import + vocabulary): {seconds:.2f} s "
          f"= {seconds * speed['bpe-openai'] / 1e6:.1f} M chars of counting")


if __name__ == "__main__":
    main()
