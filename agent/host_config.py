"""Host integration for `warpgrad mcp`: ready-to-paste configs, the Claude Code Stop hook, the plugin bundle."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from . import prompt

SERVER_NAME = "warpgrad"


def _executable() -> str:
    """The absolute `warpgrad` launcher, so a host that does not share this PATH still finds it."""
    here = Path(sys.executable).parent / "warpgrad"
    return str(here) if here.exists() else shutil.which("warpgrad") or "warpgrad"


def gate_hook_command(workspace: Path | None = None) -> str:
    """The Claude Code Stop-hook command (see `stop_hook_verdict`)."""
    ws = f" --workspace {shlex.quote(str(workspace))}" if workspace else ""
    return f"{shlex.quote(_executable())} stop-hook{ws}"


def stop_hook_verdict(workspace: Path) -> str | None:
    """Why the host's model may not stop yet, or None when it may.

    The gate holds even when the host's own model drives the session: once the program has been patched
    (a `patch` record with no accepted `finish` or `undo` after it), stopping needs the same evidence
    `finish(outcome="fixed")` needs, checked by the ledger's own `check_finish`. A session that only
    diagnosed, or whose outcome `finish` already accepted, stops freely.
    """
    from ..tools.gate import check_finish
    from ..tools.ledger import Ledger

    last = next(
        (r for r in reversed(Ledger(workspace).records()) if r.kind in ("patch", "undo", "finish")), None
    )
    if last is None or last.kind != "patch":
        return None
    gate = check_finish(workspace, "fixed")
    if gate.accepted:
        return None
    missing = "\n".join(f"- {m}" for m in gate.missing)
    return (
        f"warpgrad: the program was patched (ledger record {last.seq}) but the fix is not proven. "
        f"Missing:\n{missing}\nDo what is listed and call finish(outcome='fixed', summary='<the root cause in a sentence>'); or, if the patch "
        "was wrong, undo it (`warpgrad undo`) or call finish with the outcome the evidence supports."
    )


def print_config(host: str, workspace: Path) -> str:
    """Ready-to-paste configuration for `host` (claude-code, claude-desktop, cursor, claude-code-hooks)."""
    ws = str(Path(workspace).resolve())
    exe = _executable()
    env = {"WARP_CACHE_PATH": str(Path(ws) / ".warpgrad" / "warp-cache")}
    if host == "claude-code":
        # `claude mcp add` takes the server name before `-e` (its variadic -e would swallow the name).
        envs = " ".join(f"-e {k}={shlex.quote(v)}" for k, v in env.items())
        return f"claude mcp add {SERVER_NAME} {envs} -- {shlex.quote(exe)} mcp --workspace {shlex.quote(ws)}"
    if host in ("claude-desktop", "cursor"):
        entry = {"command": exe, "args": ["mcp", "--workspace", ws], "env": env}
        return json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2)
    if host == "claude-code-hooks":
        return json.dumps(hooks_config(Path(ws)), indent=2)
    raise ValueError(
        f"unknown host {host!r}; choose claude-code, claude-desktop, cursor or claude-code-hooks"
    )


def hooks_config(workspace: Path | None) -> dict[str, Any]:
    """Claude Code hooks (`.claude/settings.json` or a plugin's hooks/hooks.json): the gate on Stop."""
    return {
        "hooks": {
            "Stop": [
                {"hooks": [{"type": "command", "command": gate_hook_command(workspace), "timeout": 120}]}
            ]
        }
    }


def build_plugin(out: Path) -> list[Path]:
    """Write a Claude Code plugin bundle into `out` and return the files written.

    `.claude-plugin/plugin.json`, the skill as exported by `warpgrad skill export`
    (`skills/warp-debug-gradients/SKILL.md` + `references/`), `.mcp.json` starting `warpgrad mcp`, and
    `hooks/hooks.json` with the Stop hook. The server and the hook take the workspace from the host's
    working directory (the project).
    """
    from .. import __version__ as warpgrad_version

    out = Path(out)
    files: dict[Path, str] = {
        out / ".claude-plugin" / "plugin.json": json.dumps(
            {
                "name": "warpgrad",
                "version": warpgrad_version,
                "description": "Find and fix wrong gradients in NVIDIA Warp programs, with finite-difference "
                "evidence.",
                "license": "Apache-2.0",
            },
            indent=2,
        ),
        out / ".mcp.json": json.dumps(
            {"mcpServers": {SERVER_NAME: {"command": _executable(), "args": ["mcp"]}}}, indent=2
        ),
        out / "hooks" / "hooks.json": json.dumps(hooks_config(None), indent=2),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    skill_dir = prompt.export_skill(out / "skills")
    return [*files, *sorted(Path(skill_dir).rglob("*.md"))]
