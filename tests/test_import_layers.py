"""The package's layers hold: no import cycles (deferred imports included), Warp only in the harness,
tools/ below agent/, cli/ and evals/, and every module imports on its own in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from import_graph import cycles, import_graph, layer_violations


def test_the_import_graph_has_no_cycle_and_no_layer_violation():
    files, edges, child_only = import_graph()
    assert len(files) > 50 and len(edges) > 200  # the walk found the package, not an empty folder
    assert cycles(edges) == []
    assert layer_violations(edges, child_only) == []


def _plant(root: Path, files: dict[str, str]) -> Path:
    for sub in ("", "tools", "tools/harness", "agent", "cli", "evals"):
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / "__init__.py").write_text("")
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


def test_a_planted_cycle_and_planted_layer_violations_are_found(tmp_path):
    root = _plant(tmp_path / "pkg", {
        "tools/a.py": "from . import b\n",
        "tools/b.py": "def f():\n    from .a import x  # deferred: still a dependency\n",
        "tools/c.py": "import warp\nfrom ..agent import loop\nfrom .harness import hooks\n",
        "tools/d.py": "from .harness.protocol import RunConfig  # the one harness module the parent may import\n",
        "tools/harness/hooks.py": "import warp\n",
        "tools/harness/protocol.py": "from pydantic import BaseModel\nfrom .. import c\n",
        "agent/loop.py": "",
    })
    _, edges, child_only = import_graph(root)
    assert cycles(edges) == [["warpgrad.tools.a", "warpgrad.tools.b"]]
    bad = "\n".join(layer_violations(edges, child_only))
    assert "tools.c:1 imports warp at module level" in bad
    assert "tools.c:2 imports warpgrad.agent.loop" in bad
    assert "tools.c:3 imports warpgrad.tools.harness.hooks" in bad
    assert "harness.hooks" not in bad.split("imports warpgrad.tools.harness.hooks")[-1]  # the harness may import warp
    assert "tools.d:" not in bad
    assert "tools.harness.protocol:2 imports warpgrad.tools.c: the protocol imports only pydantic" in bad


def _import_alone(module: str) -> tuple[str, int, str]:
    r = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120, check=False)
    return module, r.returncode, r.stderr[-2000:]


def test_every_module_imports_alone_in_a_fresh_interpreter():
    files, _, _ = import_graph()
    mods = sorted(m for m in files if not m.endswith("__main__"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [(m, err) for m, rc, err in pool.map(_import_alone, mods) if rc != 0]
    assert failed == []


def test_the_protocol_imports_nothing_but_pydantic_and_the_standard_typing():
    """Both processes import it: the parent must not load numpy or Warp through it."""
    import ast

    from import_graph import package_root

    tree = ast.parse((package_root() / "tools" / "harness" / "protocol.py").read_text(encoding="utf-8"))
    imported = {n.module.split(".")[0] if isinstance(n, ast.ImportFrom) and n.module else a.name.split(".")[0]
                for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert imported <= {"__future__", "typing", "pydantic"}, imported
