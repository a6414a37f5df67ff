"""Functions longer than 80 lines: `python tests/long_functions.py tools` lists them.

A long function in tools/ needs a reason: a paragraph of its docstring starting "Long because"
(tests/test_function_length.py holds tools/ to that).
"""

from __future__ import annotations

import ast
import pathlib
import sys
from typing import NamedTuple

LIMIT = 80
REASON = "Long because"


class LongFunction(NamedTuple):
    path: pathlib.Path
    line: int
    name: str
    length: int
    reason: bool  # its docstring says why it is long


def long_functions(folder: pathlib.Path, limit: int = LIMIT) -> list[LongFunction]:
    out = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    doc = ast.get_docstring(node) or ""
                    out.append(LongFunction(path, node.lineno, node.name, length, REASON in doc))
    return out


if __name__ == "__main__":
    for f in long_functions(pathlib.Path(sys.argv[1])):
        print(f"{f.path}:{f.line} {f.name} {f.length}" + ("" if f.reason else " (no reason in its docstring)"))
