"""`warpgrad chat`: the agent loop at a terminal, and `warpgrad replay`: a recorded session re-run.

The person sees streamed text, each tool call with its arguments and a one-line result, a spinner
while a long check runs, and the diff of every change to their program before it is applied (unless
`--yes`). Ctrl-C stops the current turn and keeps the trajectory; a second Ctrl-C (or an empty line,
`exit`, end of input) ends the session.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from ..tools.registry import ToolSpec
from ..tools.worker import worker_pool
from .context import agent_tools, run_tool
from .loop import Agent, AgentConfig, Events, LimitsExceeded
from .trajectory import Trajectory, messages_of, read_events, totals_of

NO_KEY_MESSAGE = (
    "warpgrad chat talks to Claude and needs an API key in ANTHROPIC_API_KEY (it is read from the "
    "environment only and never written to disk).\n"
    "Without a key, `warpgrad diagnose SCRIPT` runs the whole measured pipeline (FD check, overwrite "
    "tracker, tape inspection, quick checks) with no LLM, and `warpgrad mcp` serves the same tools to an "
    "MCP host such as Claude Code."
)
DEFAULT_TASK = (
    "My Warp program {script} trains badly and I suspect its gradients. Measure them against finite "
    "differences, find the cause, fix it, and prove the fix with before/after evidence."
)
# Result fields worth a place in the one-line summary, in order of interest.
SUMMARY_KEYS = (
    "passed",
    "signature",
    "ok",
    "outcome",
    "accepted",
    "max_rel_error",
    "factor",
    "reason",
    "paths",
    "path",
    "message",
    "error",
)
VOLATILE_KEYS = frozenset(
    {
        "seconds",
        "elapsed",
        "elapsed_s",
        "wall_s",
        "duration",
        "duration_s",
        "timestamp",
        "time",
        "created",
        "ts",
        "seq",
        "backup_op",
        "prev_hash",
        "hash",
        "record_id",
    }
)


class NoApiKey(Exception):
    """ANTHROPIC_API_KEY is not set."""


def make_client(**kwargs: Any) -> Any:
    """An `anthropic.Anthropic` client; the key comes only from the environment."""
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise NoApiKey(NO_KEY_MESSAGE)
    return anthropic.Anthropic(**kwargs)


def one_line(record: dict[str, Any], width: int = 100) -> str:
    """A tool result in one line: the error text, or the most telling fields of the result."""
    text = record["output"]
    if not record["is_error"]:
        data = record.get("result")
        if data is None:
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                data = None
        if isinstance(data, dict):
            picked = [(k, data[k]) for k in SUMMARY_KEYS if k in data and data[k] not in (None, "", [], {})]
            text = ", ".join(f"{k}={v}" for k, v in picked[:5]) or ", ".join(data)[:width]
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def preview_diff(name: str, args: dict[str, Any], workspace: Path) -> str:
    """The change an edit tool call would make, as a unified diff (best effort: the tool decides)."""
    if isinstance(args.get("diff"), str):
        return args["diff"]
    try:
        from ..tools.patch import unified_diff
        from ..tools.workspace import resolve_path

        target = resolve_path(workspace, args["path"])
        old = target.read_text(encoding="utf-8")
        new = (
            old.replace(args["old_text"], args["new_text"])
            if args.get("replace_all")
            else old.replace(args["old_text"], args["new_text"], 1)
        )
        return unified_diff(args["path"], old, new) or "(no change: old_text not found)"
    except Exception as e:  # noqa: BLE001 -- the tool itself reports the real problem when it runs
        return f"(no preview: {type(e).__name__}: {e})\n" + json.dumps(args, indent=2)


class TerminalEvents(Events):
    """Rich output for a person; `ask` answers the edit confirmations (None: always allow)."""

    def __init__(self, console: Console, workspace: Path, ask: Callable[[str], bool] | None = None) -> None:
        self.console, self.workspace, self.ask = console, workspace, ask
        self._status: Any = None
        self._streaming = False

    def on_text(self, delta: str) -> None:
        self._streaming = True
        self.console.print(delta, end="", markup=False, highlight=False, soft_wrap=True)

    def on_message(self, message: dict[str, Any]) -> None:
        if message["role"] != "assistant":
            return
        if self._streaming:
            self.console.print()
            self._streaming = False
        else:  # not streamed: show the text now
            for block in message["content"]:
                if block["type"] == "text" and block["text"].strip():
                    self.console.print(block["text"], markup=False, highlight=False)

    def on_tool_start(self, spec: ToolSpec | None, call: dict[str, Any]) -> None:
        args = ", ".join(f"{k}={_short(v)}" for k, v in call["input"].items())
        self.console.print(f"[bold cyan]▶ {escape(call['name'])}[/]({escape(args)})", highlight=False)
        if spec is not None and spec.long_running:
            self._status = self.console.status(f"running {call['name']} (user code in a subprocess)…")
            self._status.start()

    def stop_progress(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def on_tool_end(self, spec: ToolSpec | None, call: dict[str, Any], record: dict[str, Any]) -> None:
        self.stop_progress()
        mark = "[red]✗[/]" if record["is_error"] else "[green]✓[/]"
        self.console.print(
            f"  {mark} {escape(one_line(record))} [dim]({record['seconds']:.1f} s)[/]", highlight=False
        )

    def confirm(self, spec: ToolSpec, call: dict[str, Any]) -> str | None:
        if self.ask is None:
            return None
        diff = preview_diff(spec.name, call["input"], self.workspace)
        self.console.print(Syntax(diff, "diff", theme="ansi_dark", word_wrap=True))
        if call["input"].get("reason"):
            self.console.print(f"[dim]reason: {escape(str(call['input']['reason']))}[/]")
        try:
            allowed = self.ask("Apply this change?")
        except EOFError:  # input closed (a pipe, CI): nobody can say yes
            return "Nobody could confirm it (input is closed; `warpgrad chat --yes` allows edits)."
        return None if allowed else "Ask before trying another change."


def _short(v: Any, width: int = 60) -> str:
    s = v if isinstance(v, str) else json.dumps(v)
    s = s.replace("\n", "⏎")
    return repr(s) if len(s) <= width else repr(s[: width - 1] + "…")


def session_report(workspace: Path) -> str:
    """The report of what was found so far, rendered from the evidence ledger alone."""
    from ..tools.report import build_report, render_markdown

    return render_markdown(build_report(workspace))


def start_agent(
    workspace: Path,
    client: Any,
    config: AgentConfig,
    events: Events,
    resume: Path | None = None,
    **agent_kwargs: Any,
) -> Agent:
    """A fresh agent, or one continuing the trajectory at `resume` (appending to the same file)."""
    if resume is None:
        return Agent(client, config, workspace, events=events, **agent_kwargs)
    recorded = read_events(resume)
    return Agent(
        client,
        config,
        workspace,
        events=events,
        trajectory=Trajectory(resume),
        messages=messages_of(recorded),
        totals=totals_of(recorded),
        **agent_kwargs,
    )


def chat(
    workspace: Path,
    client: Any,
    config: AgentConfig,
    *,
    console: Console,
    task: str | None,
    read_input: Callable[[], str],
    ask: Callable[[str], bool] | None,
    resume: Path | None = None,
    tools: dict[str, ToolSpec] | None = None,
    system: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run a chat session until the person stops or a limit is hit; returns a summary.

    Args:
        workspace: The user's folder; tools act only inside it.
        client: `anthropic.Anthropic` (or a `ScriptedClient`).
        config: Model and limits.
        console: Where the person reads the session.
        task: The first request; None asks for it through `read_input`.
        read_input: Reads the person's next message (raises EOFError/KeyboardInterrupt to leave).
        ask: Answers "Apply this change?" after the diff is shown; None applies edits without asking.
        resume: A trajectory to continue.
        tools: Tool set (default: the registry plus `read_reference`).
        system: System prompt blocks (default: the rendered skill).
    """
    events = TerminalEvents(console, workspace, ask)
    agent = start_agent(workspace, client, config, events, resume, tools=tools, system=system)
    console.print(
        f"[dim]warpgrad chat · {config.model} · workspace {workspace} · "
        f"trajectory {agent.trajectory.path}[/]",
        highlight=False,
    )
    stop, answer = "ended by user", ""
    # The session's harness runs fork from one warm worker instead of booting Python and Warp each time
    # (tools/worker.py); the tools run in this process, so the pool is opened here.
    with worker_pool() as pool:
        while True:
            if task is None:
                try:
                    task = read_input().strip()
                except (EOFError, KeyboardInterrupt):
                    task = ""
                if task.lower() in ("", "exit", "quit"):
                    break
            try:
                answer, stop = agent.run(task), "ended by user"
            except KeyboardInterrupt:
                events.stop_progress()
                console.print(
                    "\n[yellow]Stopped.[/] The trajectory is kept; type a follow-up, or press Enter to leave."
                )
            except anthropic.APIError as e:  # overloaded, rate-limited, bad key: the person decides
                events.stop_progress()
                stop = f"API error: {e}"
                console.print(
                    f"\n[red]API error:[/] {escape(str(e))}\nThe trajectory is kept; type a follow-up to retry, "
                    "or press Enter to leave."
                )
            except LimitsExceeded as e:
                events.stop_progress()
                stop = str(e)
                console.print(f"\n[yellow]{escape(stop)}.[/] What was found so far:")
                console.print(session_report(workspace), markup=False)
                break
            task = None
            if agent.finished is not None:
                stop = "finished"
                console.print(session_report(workspace), markup=False)
                break
    console.print(
        f"[dim]Trajectory: {agent.trajectory.path} (resume with `warpgrad chat --resume`)[/]", highlight=False
    )
    return {
        "stop": stop,
        "answer": answer,
        "finished": agent.finished,
        "trajectory": str(agent.trajectory.path),
        "totals": agent.totals,
        "warm_runs": pool.served if pool is not None else 0,
    }


def replay(
    path: Path, workspace: Path, *, rtol: float = 1e-6, ignore: frozenset[str] = VOLATILE_KEYS
) -> list[dict[str, Any]]:
    """Re-run every tool call recorded in a trajectory against `workspace`, in order.

    Calls the person declined are skipped. Returns one entry per call: `same`, and for a difference
    the JSON paths that changed (volatile keys such as timings and ledger sequence numbers ignored).
    """
    tools = agent_tools()
    out = []
    for e in read_events(path):
        if e.get("type") != "tool_call" or e.get("declined"):
            continue
        output, is_error, result = run_tool(tools, e["name"], e["input"], workspace)
        if is_error != e["is_error"]:
            diffs = [f"is_error: {e['is_error']} -> {is_error}: {output[:300]}"]
        elif is_error:
            same = _ledger_refs(output) == _ledger_refs(e["output"])
            diffs = [] if same else [f"error text: {e['output'][:150]!r} -> {output[:150]!r}"]
        else:
            # Trajectories keep the whole record under "result"; older ones had it as the output text.
            before = e["result"] if e.get("result") is not None else json.loads(e["output"])
            now = result.model_dump(mode="json") if result is not None else json.loads(output)
            diffs = _json_diff(before, now, "", rtol, ignore)
        out.append({"id": e["id"], "name": e["name"], "same": not diffs, "differences": diffs})
    return out


def _ledger_refs(text: str) -> str:
    """Error text with ledger record numbers blanked: a replay appends to the same ledger, so they shift."""
    return re.sub(r"\brecords? \d+", "record N", text)


def _json_diff(a: Any, b: Any, where: str, rtol: float, ignore: frozenset[str]) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in sorted(set(a) | set(b), key=str)
            if k not in ignore
            for d in _json_diff(a.get(k), b.get(k), f"{where}.{k}", rtol, ignore)
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b)) for d in _json_diff(x, y, f"{where}[{i}]", rtol, ignore)
        ]
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return (
            []
            if math.isclose(a, b, rel_tol=rtol) or (math.isnan(a) and math.isnan(b))
            else [f"{where or '.'}: {a} -> {b}"]
        )
    return [] if a == b else [f"{where or '.'}: {_short(a)} -> {_short(b)}"]
