"""The `warpgrad` command line: one typer app, one module per command group (`main.py` assembles them)."""
