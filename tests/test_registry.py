"""Tools are declared once, by `@tool` where they are defined: the registry finds them, in an order that does
not depend on what the caller imported first, and every front end reads the same list."""

import subprocess
import sys

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


def test_the_gradcheck_and_run_commands_take_their_options_from_the_input_models():
    import click

    from warpgrad.cli.core import click_commands
    from warpgrad.tools.gradcheck import GradcheckArgs
    from warpgrad.tools.run_script import RunScriptArgs

    models = {"gradcheck": GradcheckArgs, "run": RunScriptArgs}
    renamed = {"params": "param", "timeout_s": "timeout"}
    for cmd in click_commands():
        opts = {o for p in cmd.get_params(click.Context(cmd)) for o in p.opts}
        for field in set(models[cmd.name].model_fields) - {"script", "args"}:
            assert "--" + renamed.get(field, field).replace("_", "-") in opts, (cmd.name, field)
