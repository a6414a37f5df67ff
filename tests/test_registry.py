"""Tools are declared once, by `@tool` where they are defined: the registry finds them, in an order that does
not depend on what the caller imported first, and every front end reads the same list."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import warpgrad
from warpgrad.agent import prompt
from warpgrad.agent.context import agent_tools
from warpgrad.tools.registry import load_tools, tool_modules


def _order_after_importing(module: str) -> list[str]:
    code = f"import {module}\nfrom warpgrad.tools.registry import load_tools\nprint(' '.join(load_tools()))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          timeout=120).stdout.split()


def test_the_tool_order_is_the_same_whatever_was_imported_first():
    first = _order_after_importing("warpgrad.tools.gradcheck")
    assert first == _order_after_importing("warpgrad.tools.workspace") == list(load_tools())


def test_every_front_end_lists_exactly_the_declared_tools():
    declared = load_tools()
    assert {spec.run.__module__ for spec in declared.values()} <= set(tool_modules())
    assert list(prompt.known_tools()) == list(declared)
    assert list(agent_tools()) == [*declared, "read_reference"]
    skill_tools = prompt.render_skill().split("## Tools")[1].split("## References")[0]
    for name in declared:
        assert f"- `{name}`: " in skill_tools


def test_the_diagnose_gradcheck_and_run_commands_take_their_options_from_the_input_models():
    import click

    from warpgrad.cli.core import click_commands
    from warpgrad.tools.diagnose import DiagnoseArgs
    from warpgrad.tools.gradcheck import GradcheckArgs
    from warpgrad.tools.run_script import RunScriptArgs

    models = {"diagnose": DiagnoseArgs, "gradcheck": GradcheckArgs, "run": RunScriptArgs}
    renamed = {"params": "param", "timeout_s": "timeout"}
    commands = click_commands()
    assert sorted(c.name for c in commands) == ["diagnose", "gradcheck", "run"]
    for cmd in commands:
        opts = {o for p in cmd.get_params(click.Context(cmd)) for o in p.opts}
        for field in set(models[cmd.name].model_fields) - {"script", "args"}:
            assert "--" + renamed.get(field, field).replace("_", "-") in opts, (cmd.name, field)


def test_the_commands_read_from_the_source_are_the_commands_the_imported_tools_declare():
    from warpgrad.tools.registry import declared_commands

    declared = {(d.name, d.help) for d in declared_commands()}
    imported = {(s.cli.name, s.cli.help) for s in load_tools().values() if s.cli is not None}
    assert declared == imported and {"gradcheck", "run", "diagnose"} <= {d[0] for d in declared}


def test_the_derived_command_help_lists_every_input_field_with_its_description():
    from warpgrad.tools.diagnose import DiagnoseArgs
    from warpgrad.tools.gradcheck import GradcheckArgs
    from warpgrad.tools.run_script import RunScriptArgs

    for command, model in (("gradcheck", GradcheckArgs), ("run", RunScriptArgs), ("diagnose", DiagnoseArgs)):
        p = subprocess.run([sys.executable, "-m", "warpgrad", command, "--help"], capture_output=True, text=True,
                           timeout=120, check=False, env={**os.environ, "COLUMNS": "400"})
        assert p.returncode == 0, p.stderr
        for name, field in model.model_fields.items():
            if name in ("script", "args"):  # the positional argument, and the script's own after `--`
                continue
            assert field.description and " ".join(field.description.split()) in " ".join(p.stdout.split()), \
                (command, name)


def test_a_command_naming_a_field_its_input_model_lacks_is_refused_where_it_is_declared():
    from pydantic import BaseModel

    from warpgrad.tools.registry import TOOLS, CliCommand, tool

    class Args(BaseModel):
        script: str

    def misnamed(args: Args, workspace: Path) -> Args:
        """Declared with a CLI rename of a field that does not exist."""
        return args

    declare = tool(args=Args, result=Args, cli=CliCommand(name="misnamed", help="x", rename={"timeout_s": "timeout"}))
    with pytest.raises(TypeError, match="timeout_s"):
        declare(misnamed)
    assert "misnamed" not in TOOLS


# A new tool module, as a contributor would write it: one declaration and nothing else anywhere.
PLANTED = '''"""A tool planted by tests/test_registry.py."""

from pathlib import Path

from pydantic import BaseModel, Field

from .registry import CliCommand, tool


class CountArgs(BaseModel):
    script: str = Field(description="Workspace-relative file whose lines are counted.")
    scale_factor: float = Field(1.0, description="Multiplies the count before it is reported.")
    labels: list[str] = Field(default_factory=list, description="Words echoed back in the result.")
    loud: bool = Field(False, description="Shout the labels back in capitals.")
    args: list[str] = Field(default_factory=list, description="Arguments after the double dash.")


class CountResult(BaseModel):
    lines: float
    labels: list[str]
    args: list[str]


@tool(args=CountArgs, result=CountResult,
      cli=CliCommand(name="count-lines", help="Count the lines of a file (a tool planted by a test).",
                     rename={"scale_factor": "scale"}, exit_code=lambda r: 0 if r.lines else 1))
def count_lines(args: CountArgs, workspace: Path) -> CountResult:
    """Count the lines of a workspace file, scaled: a tool planted by a test."""
    n = len((workspace / args.script).read_text(encoding="utf-8").splitlines())
    labels = [x.upper() for x in args.labels] if args.loud else args.labels
    return CountResult(lines=n * args.scale_factor, labels=labels, args=args.args)
'''

# In the copy: every front end, read through its own entry point.
FRONT_ENDS = '''
import json, sys
from pathlib import Path
import anyio
from mcp import Client
import warpgrad
from warpgrad.agent import prompt
from warpgrad.agent.context import agent_tools, tool_params
from warpgrad.agent.mcp_server import build_server

ws = Path(sys.argv[1])

async def mcp():
    async with Client(build_server(ws)) as client:
        listed = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        called = await client.call_tool("count_lines", {"script": "f.txt", "scale_factor": 3})
        return listed, called.structured_content

listed, called = anyio.run(mcp)
print(json.dumps({
    "package": warpgrad.__file__,
    "mcp": listed.get("count_lines"), "mcp_call": called,
    "chat": [t["name"] for t in tool_params(agent_tools())],
    "known": prompt.known_tools().get("count_lines"),
    "skill": "- `count_lines`: Count the lines" in prompt.render_skill(),
}))
'''


def test_a_tool_declared_once_appears_in_mcp_chat_the_skill_and_the_cli(tmp_path):
    """Plant a new tool module in a copy of the package: nothing but its declaration is written, and every
    front end lists it; its own command takes an option per input field."""
    root = Path(warpgrad.__file__).resolve().parent
    pkg = tmp_path / "site" / "warpgrad"
    shutil.copytree(root, pkg, ignore=shutil.ignore_patterns(".*", "__pycache__", "tests", "bench", "*.egg-info"))
    (pkg / "tools" / "planted_count.py").write_text(PLANTED, encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("a\nb\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "COLUMNS": "400"}

    def python(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300, check=False,
                              env=env, cwd=ws)

    p = python("-c", FRONT_ENDS, str(ws))
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout)
    assert seen["package"].startswith(str(pkg))  # the copy was imported, not the checkout
    assert set(seen["mcp"]["properties"]) >= {"script", "scale_factor", "labels", "loud", "args"}
    assert seen["mcp_call"]["lines"] == 6.0
    assert "count_lines" in seen["chat"] and seen["known"].startswith("Count the lines of a workspace file")
    assert seen["skill"] is True

    top = python("-m", "warpgrad", "--help")
    assert top.returncode == 0 and "count-lines" in top.stdout and "a tool planted by a test" in top.stdout
    usage = python("-m", "warpgrad", "count-lines", "--help")
    assert usage.returncode == 0, usage.stderr
    for option in ("--scale", "--labels", "--loud / --no-loud", "--workspace", "--json"):
        assert option in usage.stdout
    for description in ("Multiplies the count before it is reported.", "Words echoed back in the result.",
                        "Shout the labels back in capitals."):
        assert description in usage.stdout
    ran = python("-m", "warpgrad", "count-lines", "f.txt", "--scale", "2", "--labels", "a", "--labels", "b",
                 "--loud", "--json", "--", "x")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"lines": 4.0, "labels": ["A", "B"], "args": ["x"]}
    empty = ws / "empty.txt"
    empty.write_text("", encoding="utf-8")
    assert python("-m", "warpgrad", "count-lines", "empty.txt", "--json").returncode == 1  # its declared exit status
    assert "count_lines" in python("-m", "warpgrad", "tool", "--help").stdout

    # A second declaration of a command the CLI already has is an error, not a silent replacement.
    clash = PLANTED.replace('name="count-lines"', 'name="eval"').replace("def count_lines", "def count_again")
    (pkg / "tools" / "planted_clash.py").write_text(clash, encoding="utf-8")
    refused = python("-m", "warpgrad", "--help")
    assert refused.returncode == 3 and "declares the command 'eval'" in refused.stderr

    # Two tools declaring one command: the error names both modules.
    twice = PLANTED.replace('name="count-lines"', 'name="diagnose"').replace("def count_lines", "def count_again")
    (pkg / "tools" / "planted_clash.py").write_text(twice, encoding="utf-8")
    refused = python("-m", "warpgrad", "--help")
    assert refused.returncode == 3 and "both declare the command 'diagnose'" in refused.stderr


def test_a_forking_command_finds_its_workspace_and_device_before_it_imports_its_tool(tmp_path, monkeypatch):
    """The warm worker boots while the tool's module is imported: the workspace and device come from the
    command line alone (the first `.py` argument, `--workspace`, `--device`); anything unsure boots nothing early."""
    from warpgrad.cli.core import _early_workspace
    from warpgrad.tools.registry import declared_commands

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("", encoding="utf-8")
    assert _early_workspace(["--iteration", "2", "train.py", "--device", "cpu"]) == (tmp_path.resolve(), "cpu")
    other = tmp_path / "ws"
    assert _early_workspace(["train.py", f"--workspace={other}"]) == (other.resolve(), None)
    assert _early_workspace(["train.py", "--help"]) is None
    assert _early_workspace(["--json", "--", "data.py"]) is None  # after `--`: the script's own arguments
    assert {d.name for d in declared_commands() if d.forks} >= {"diagnose", "gradcheck", "run"}
