"""``python -m nbagent``: the command line (see ``nbagent/cli.py``)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
