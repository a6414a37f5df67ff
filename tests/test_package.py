"""The installed package carries its skill, references and suite, and its console script runs.

CI installs the package without `-e`, so there these tests read the wheel's files, not the checkout's.
"""

import importlib.resources
import subprocess
import sys

import warpgrad


def test_skill_and_references_ship_inside_the_package():
    root = importlib.resources.files("warpgrad")
    assert (root / "skill" / "SKILL.md").is_file()
    refs = {p.name for p in (root / "references").iterdir()}
    assert {"quick-checks.md", "verification.md", "custom-gradients.md", "case-studies.md"} <= refs
    assert (root / "evals" / "evals.json").is_file()
    assert (root / "examples" / "bouncing_chain" / "train.py").is_file()


def test_the_console_script_answers_help():
    p = subprocess.run(
        [sys.executable, "-m", "warpgrad", "--help"], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0
    for command in ("diagnose", "gradcheck", "chat", "mcp", "eval", "tool"):
        assert command in p.stdout
    assert warpgrad.__version__


def test_skill_export_plugin_writes_a_claude_code_bundle(tmp_path):
    import json

    p = subprocess.run([sys.executable, "-m", "warpgrad", "skill", "export", str(tmp_path), "--plugin", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    files = set(json.loads(p.stdout)["files"])
    assert {".claude-plugin/plugin.json", ".mcp.json", "hooks/hooks.json",
            "skills/warp-debug-gradients/SKILL.md"} <= files
    server = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["warpgrad"]
    assert server["args"][0] == "mcp"
