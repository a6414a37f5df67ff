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
    , check=False)
    assert p.returncode == 0
    for command in ("diagnose", "gradcheck", "chat", "mcp", "eval", "tool"):
        assert command in p.stdout
    assert warpgrad.__version__


def test_skill_export_plugin_writes_a_claude_code_bundle(tmp_path):
    import json

    p = subprocess.run([sys.executable, "-m", "warpgrad", "skill", "export", str(tmp_path), "--plugin", "--json"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    files = set(json.loads(p.stdout)["files"])
    assert {".claude-plugin/plugin.json", ".mcp.json", "hooks/hooks.json",
            "skills/warp-debug-gradients/SKILL.md"} <= files
    server = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["warpgrad"]
    assert server["args"][0] == "mcp"


def test_every_tool_is_a_generated_cli_command_with_options_from_its_input_model(tmp_path):
    import json

    (tmp_path / "sim.py").write_text("a = 1\nb = 2\nc = 3\n", encoding="utf-8")
    run = [sys.executable, "-m", "warpgrad", "tool"]
    p = subprocess.run([*run, "read_file", "--path", "sim.py", "--max-lines", "2", "--workspace", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["text"].splitlines() == ["1\ta = 1", "2\tb = 2"] and doc["truncated"]
    p = subprocess.run([*run, "read_file", "--help"], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0 and "--max-lines" in p.stdout
    p = subprocess.run([*run, "read_file", "--path", "../outside.py", "--workspace", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 2 and "outside the workspace" in p.stderr


def test_a_cited_reference_section_can_be_read_from_the_installed_package():
    run = [sys.executable, "-m", "warpgrad", "skill", "reference", "quick-checks"]
    p = subprocess.run([*run, "--section", "6b"], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0 and p.stdout.startswith("### §6b") and "WG009" in p.stdout
    assert "### §7" not in p.stdout and "## §7" not in p.stdout
    p = subprocess.run([*run, "--section", "99"], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 2 and "no section §99" in p.stderr


def test_the_wheel_ships_the_suite_without_its_graders():
    """The expected answers (graders/*/meta.json, probes, reference fixes) never ship: an agent with the package
    installed could otherwise read them. The cases and their fixtures do ship."""
    from test_pytest_plugin import installed_dist

    installed = [str(f) for f in installed_dist().files or []]
    assert any(f.startswith("warpgrad/evals/files/") for f in installed)
    assert "warpgrad/evals/evals.json" in installed
    suite = [f for f in installed if f.startswith("warpgrad/evals/")]
    leaked = [f for f in suite if "/graders/" in f or f.endswith("probe.py") or "/blind" in f]
    assert leaked == []
