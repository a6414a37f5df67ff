"""List the functions longer than 80 lines under a folder: `python tests/long_functions.py tools`."""

import ast
import pathlib
import sys

LIMIT = 80

for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > LIMIT:
                print(f"{path}:{node.lineno} {node.name} {length}")
