"""The user's workflow: fixed once per workspace, then every check and run is judged against it.

The first completed run (`run_script`, or the plain run `diagnose` makes) fixes the workflow: the script,
its arguments, the environment variables the program reads, the quantity it reports (its loss or the
named metric), and the module-level constants of the program's files. The constants are read with `ast`
(never by importing the user's code, which runs only in a sandbox): every top-level `NAME = <literal>`.
All of them are kept, not only those the objective provably depends on: a static dependence analysis
would miss a constant read through a function, and keeping one too many only makes a check with it
changed count as localization instead of proof, never the reverse.

A check or run of anything else (a wrapper script, `--small`, a horizon cut from 60 to 1 in a constant)
is localization evidence: the gate shows it as such and it never satisfies `gradients_correct` or `fixed`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from .ledger import Ledger, LedgerRecord
from .paths import resolve_path
from .records import RunEvent, RunPayload, WorkflowEvent, WorkflowPayload


def module_constants(source: str) -> dict[str, str]:
    """NAME -> repr(value) of every module-level assignment of a literal (`T = 60`, `LR = 1e-3`, `-2.0`,
    tuples of literals); an unparsable source has none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, str] = {}
    for node in tree.body:
        targets: list[ast.expr]
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            lit = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        for t in targets:
            if isinstance(t, ast.Name):
                out[t.id] = repr(lit)
    return out


def env_reads(source: str) -> list[str]:
    """Names of the environment variables the source reads by a literal name (`os.environ["X"]`,
    `os.environ.get("X")`, `os.getenv("X")`)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names: set[str] = set()
    for node in ast.walk(tree):
        arg: ast.expr | None = None
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
            arg = node.slice
        elif isinstance(node, ast.Call) and node.args and ast.unparse(node.func).endswith(("environ.get", "getenv")):
            arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            names.add(arg.value)
    return sorted(names)


def _sources(workspace: Path, files: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for rel in sorted(set(files)):
        if not rel.endswith(".py"):
            continue
        try:
            out[rel] = resolve_path(workspace, rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            continue  # unreadable or outside the workspace: it contributes no constants
    return out


def program_constants(workspace: Path, files: Iterable[str]) -> dict[str, str]:
    """'path:NAME' -> repr of the module constants of the program files as they are on disk now."""
    return {f"{rel}:{name}": v for rel, src in _sources(workspace, files).items()
            for name, v in module_constants(src).items()}


def workflow_of_run(workspace: Path, run: RunPayload, seq: int | None, environ: dict[str, str]) -> WorkflowPayload:
    """The workflow a run exercised, with the constants and environment read now."""
    files = set(run.files) | ({run.script} if run.script else set())
    srcs = _sources(workspace, files)
    env = {name: environ.get(name) for src in srcs.values() for name in env_reads(src)}
    objective = run.metric.label() if run.metric is not None else "final loss"
    return WorkflowPayload(script=run.script or "", args=list(run.args), env=env, objective=objective,
                           metric=run.metric, constants=program_constants(workspace, files), run_seq=seq)


def fix_workflow(workspace: Path, run_record: LedgerRecord, environ: dict[str, str]) -> LedgerRecord | None:
    """Append the workflow record if the ledger has none yet and `run_record` is a run that completed
    (or was cut short once its trend was read); the record appended, or None."""
    ev = run_record.event
    if not isinstance(ev, RunEvent) or ev.payload.failed() or not ev.payload.script:
        return None
    led = Ledger(workspace)
    if any(isinstance(r.event, WorkflowEvent) for r in led.records()):
        return None
    wf = workflow_of_run(workspace, ev.payload, run_record.seq, environ)
    return led.append("workflow", wf, tool="workflow", files=dict(run_record.files.items()))


def the_workflow(records: list[LedgerRecord]) -> tuple[WorkflowPayload, int | None] | None:
    """The workflow record (the first one), else the one the first completed run implies (script and
    arguments only: a ledger from before workflow records), else None."""
    for r in records:
        if isinstance(r.event, WorkflowEvent):
            return r.event.payload, r.seq
    for r in records:
        if isinstance(r.event, RunEvent) and not r.event.payload.failed() and r.event.payload.script:
            p = r.event.payload
            return WorkflowPayload(script=p.script or "", args=list(p.args), metric=p.metric, run_seq=r.seq), None
    return None


def constant_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """'path:NAME a -> b' for each constant that differs (added or removed ones included)."""
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key, "(absent)"), after.get(key, "(absent)")
        if a != b:
            out.append(f"{key} {a} -> {b}")
    return out


def departures(wf: WorkflowPayload, script: str | None, args: list[str], constants: dict[str, str] | None) -> list[str]:
    """How a check or run departs from the workflow, in words (empty: it exercised the workflow).

    `constants` are those of the files it ran as they are now (None: not known, e.g. the files changed
    since; then only the script and arguments are compared). Constants of files the workflow did not
    read are not compared.
    """
    out = []
    if script != wf.script:
        out.append(f"it ran {script or 'a probe'} where the workflow runs {wf.script}")
    if list(args) != list(wf.args):
        out.append(f"it ran with arguments {list(args)} where the workflow has {list(wf.args)}")
    if constants is not None and wf.constants:
        common = {k.split(":", 1)[0] for k in wf.constants} & {k.split(":", 1)[0] for k in constants}
        changed = constant_changes({k: v for k, v in wf.constants.items() if k.split(":", 1)[0] in common},
                                   {k: v for k, v in constants.items() if k.split(":", 1)[0] in common})
        if changed:
            out.append("module constants differ from the workflow's: " + "; ".join(changed))
    return out
