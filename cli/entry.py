"""The `warpgrad` executable: a forking command goes to the warm server when one is up (cli/warm), before
anything heavier than the standard library is imported; everything else runs the full command line."""

from __future__ import annotations

import sys


def main() -> None:
    from .warm.client import forward

    code = forward(sys.argv[1:])
    if code is not None:
        raise SystemExit(code)
    from .main import main as run_here

    run_here()
