"""Workspace tools on real temporary workspaces: path safety, reading, writing, patching, undo."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warpgrad.tools.ledger import Ledger
from warpgrad.tools.registry import ToolError, load_tools
from warpgrad.tools.workspace import (
    ApplyPatchArgs,
    EditFileArgs,
    ReadFileArgs,
    SearchCodeArgs,
    WorkspaceOverviewArgs,
    WriteFileArgs,
    apply_patch,
    edit_file,
    read_file,
    resolve_path,
    search_code,
    undo,
    workspace_overview,
    write_file,
)

SIM = """import warp as wp

N_PARTICLES = 64
STEPS = 20


@wp.kernel
def step(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


def loss(x):
    y = wp.zeros(N_PARTICLES, dtype=float)
    wp.launch(step, dim=N_PARTICLES, inputs=[x], outputs=[y])
    return y


if __name__ == "__main__":
    tape = wp.Tape()
"""


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    (w / "pkg").mkdir(parents=True)
    (w / "sim.py").write_text(SIM, encoding="utf-8")
    (w / "pkg" / "model.py").write_text("SCALE = 2.0\n\ndef f(x):\n    return x * SCALE\n", encoding="utf-8")
    (tmp_path / "outside.py").write_text("SECRET = 1\n", encoding="utf-8")
    return w


# -- path safety --------------------------------------------------------------------------------------


def test_relative_and_absolute_paths_inside_the_workspace_resolve(ws):
    assert resolve_path(ws, "pkg/model.py") == (ws / "pkg" / "model.py").resolve()
    assert resolve_path(ws, str(ws / "sim.py")) == (ws / "sim.py").resolve()
    assert resolve_path(ws, "pkg/../sim.py") == (ws / "sim.py").resolve()


@pytest.mark.parametrize("path", ["../outside.py", "pkg/../../outside.py", "/etc/passwd"])
def test_paths_that_leave_the_workspace_are_refused(ws, path):
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_path(ws, path)
    with pytest.raises(ToolError, match="outside the workspace"):
        read_file(ReadFileArgs(path=path), ws)


def test_symbolic_links_that_lead_out_are_refused_for_files_and_directories(ws):
    os.symlink(ws.parent / "outside.py", ws / "link.py")
    os.symlink(ws.parent, ws / "up")
    for path in ("link.py", "up/outside.py", "up/new_file.py"):
        with pytest.raises(ToolError, match="symbolic link"):
            resolve_path(ws, path)
    with pytest.raises(ToolError, match="symbolic link"):
        write_file(WriteFileArgs(path="up/evil.py", content="x = 1\n"), ws)
    assert not (ws.parent / "evil.py").exists()
    with pytest.raises(ToolError, match="symbolic link"):
        edit_file(EditFileArgs(path="link.py", old_text="SECRET = 1", new_text="SECRET = 2"), ws)
    assert (ws.parent / "outside.py").read_text(encoding="utf-8") == "SECRET = 1\n"


def test_a_symbolic_link_that_stays_inside_is_followed(ws):
    os.symlink(ws / "sim.py", ws / "alias.py")
    assert read_file(ReadFileArgs(path="alias.py", max_lines=1), ws).text == "1\timport warp as wp"


def test_warpgrads_own_state_is_not_reachable_through_the_tools(ws):
    Ledger(ws).append("run", {})
    with pytest.raises(ToolError, match=r"\.warpgrad/"):
        write_file(WriteFileArgs(path=".warpgrad/ledger.jsonl", content="{}"), ws)
    with pytest.raises(ToolError, match=r"\.warpgrad/"):
        read_file(ReadFileArgs(path=".warpgrad/ledger.head"), ws)


# -- reading ------------------------------------------------------------------------------------------


def test_read_file_returns_a_numbered_window_and_says_where_to_continue(ws):
    r = read_file(ReadFileArgs(path="sim.py", start_line=3, max_lines=2), ws)
    assert r.text == "3\tN_PARTICLES = 64\n4\tSTEPS = 20"
    assert r.truncated and r.next_start_line == 5 and r.total_lines == len(SIM.splitlines())
    last = read_file(ReadFileArgs(path="sim.py", start_line=20), ws)
    assert not last.truncated and last.end_line == last.total_lines
    with pytest.raises(ToolError, match="past the end"):
        read_file(ReadFileArgs(path="sim.py", start_line=500), ws)


def test_read_file_refuses_missing_and_binary_files(ws):
    (ws / "data.bin").write_bytes(b"\0\1\2")
    with pytest.raises(ToolError, match="binary"):
        read_file(ReadFileArgs(path="data.bin"), ws)
    with pytest.raises(ToolError, match="does not exist"):
        read_file(ReadFileArgs(path="nope.py"), ws)


def test_search_code_finds_lines_and_asks_to_narrow_past_the_limit(ws):
    r = search_code(SearchCodeArgs(pattern="N_PARTICLES"), ws)
    assert [(h.path, h.line) for h in r.hits] == [("sim.py", 3), ("sim.py", 14), ("sim.py", 15)]
    many = "\n".join(f"v{i} = wp.zeros(3)" for i in range(30)) + "\n"
    (ws / "many.py").write_text(many, encoding="utf-8")
    r = search_code(SearchCodeArgs(pattern=r"wp\.zeros", regex=True, max_results=10), ws)
    assert r.truncated and len(r.hits) == 10 and "narrow the query" in r.message
    r = search_code(SearchCodeArgs(pattern="scale", case_sensitive=False, glob="pkg/*.py"), ws)
    assert {h.path for h in r.hits} == {"pkg/model.py"}


def test_search_code_skips_warpgrad_state_and_rejects_a_bad_regex(ws):
    Ledger(ws).append("run", {"note": "N_PARTICLES"})
    assert all(
        not h.path.startswith(".warpgrad")
        for h in search_code(SearchCodeArgs(pattern="N_PARTICLES"), ws).hits
    )
    with pytest.raises(ToolError, match="bad regular expression"):
        search_code(SearchCodeArgs(pattern="(", regex=True), ws)


# -- write_file ---------------------------------------------------------------------------------------


def test_write_file_creates_a_diagnostic_file_and_records_it(ws):
    r = write_file(WriteFileArgs(path="probes/probe.py", content="import sim\n", purpose="FD probe"), ws)
    assert (ws / "probes" / "probe.py").read_text(encoding="utf-8") == "import sim\n"
    rec = Ledger(ws).records()[r.seq]
    assert (
        rec.kind == "file"
        and rec.payload["purpose"] == "FD probe"
        and rec.files == {"probes/probe.py": r.sha256}
    )


def test_write_file_never_overwrites_a_users_file(ws):
    before = (ws / "sim.py").read_bytes()
    with pytest.raises(ToolError, match="user's file"):
        write_file(WriteFileArgs(path="sim.py", content="x = 1\n"), ws)
    assert (ws / "sim.py").read_bytes() == before


def test_write_file_may_rewrite_its_own_file_unless_someone_changed_it(ws):
    write_file(WriteFileArgs(path="probe.py", content="a = 1\n"), ws)
    write_file(WriteFileArgs(path="probe.py", content="a = 2\n"), ws)
    assert (ws / "probe.py").read_text(encoding="utf-8") == "a = 2\n"
    (ws / "probe.py").write_text("a = 3  # the user's edit\n", encoding="utf-8")
    with pytest.raises(ToolError, match="changed since"):
        write_file(WriteFileArgs(path="probe.py", content="a = 4\n"), ws)


def test_write_file_refuses_python_that_does_not_parse(ws):
    with pytest.raises(ToolError, match=r"line 2"):
        write_file(WriteFileArgs(path="probe.py", content="x = 1\ndef f(:\n"), ws)
    assert not (ws / "probe.py").exists()


# -- edit_file ----------------------------------------------------------------------------------------


def test_edit_file_patches_exact_text_backs_up_and_records_the_diff(ws):
    before_sha = _sha(ws / "sim.py")
    r = edit_file(
        EditFileArgs(
            path="sim.py",
            old_text="wp.zeros(N_PARTICLES, dtype=float)",
            new_text="wp.zeros(N_PARTICLES, dtype=float, requires_grad=True)",
            reason="y must carry a gradient",
        ),
        ws,
    )
    assert "requires_grad=True" in (ws / "sim.py").read_text(encoding="utf-8")
    assert r.before == {"sim.py": before_sha} and r.after == {"sim.py": _sha(ws / "sim.py")}
    assert "-    y = wp.zeros(N_PARTICLES, dtype=float)\n" in r.diff and r.diff.startswith("--- a/sim.py")
    rec = Ledger(ws).records()[r.seq]
    assert rec.kind == "patch" and rec.tool == "edit_file" and rec.payload["diff"] == r.diff
    assert rec.files == r.after and rec.payload["reason"] == "y must carry a gradient"
    backup = ws / ".warpgrad" / "backups" / r.backup_op / "sim.py"
    assert backup.read_text(encoding="utf-8") == SIM


def test_edit_file_requires_exactly_one_match_unless_replace_all(ws):
    with pytest.raises(ToolError, match=r"occurs 3 times in sim.py \(lines 3, 14, 15\)"):
        edit_file(EditFileArgs(path="sim.py", old_text="N_PARTICLES", new_text="N"), ws)
    with pytest.raises(ToolError, match="not found"):
        edit_file(EditFileArgs(path="sim.py", old_text="y[i] = x[i] * 3.0", new_text="y"), ws)
    edit_file(EditFileArgs(path="sim.py", old_text="N_PARTICLES", new_text="N_P", replace_all=True), ws)
    assert (ws / "sim.py").read_text(encoding="utf-8").count("N_P") == 3


def test_an_edit_that_breaks_python_syntax_is_refused_and_the_file_stays_as_it_was(ws):
    with pytest.raises(ToolError, match=r"breaks Python syntax.*sim\.py.*line 10"):
        edit_file(
            EditFileArgs(path="sim.py", old_text="    y[i] = x[i] * 2.0", new_text="    y[i] = (x[i] * 2.0"),
            ws,
        )
    assert (ws / "sim.py").read_text(encoding="utf-8") == SIM
    assert Ledger(ws).records() == []
    assert not (ws / ".warpgrad" / "backups" / "index.jsonl").exists()


def test_no_change_is_made_while_the_ledger_is_damaged(ws):
    Ledger(ws).append("run", {"final_loss": 1.0})
    led = ws / ".warpgrad" / "ledger.jsonl"
    led.write_bytes(led.read_bytes().replace(b"1.0", b"0.5"))
    with pytest.raises(ToolError, match="ledger failed verification"):
        edit_file(EditFileArgs(path="sim.py", old_text="STEPS = 20", new_text="STEPS = 2"), ws)
    with pytest.raises(ToolError, match="ledger failed verification"):
        write_file(WriteFileArgs(path="probe.py", content="x = 1\n"), ws)
    assert (ws / "sim.py").read_text(encoding="utf-8") == SIM and not (ws / "probe.py").exists()


# -- apply_patch --------------------------------------------------------------------------------------


def _diff(rel: str, old: str, new: str, n: int = 3) -> str:
    return "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}", n=n)
    )


def test_apply_patch_applies_a_multi_file_multi_hunk_diff_as_one_patch(ws):
    new_sim = SIM.replace("N_PARTICLES = 64", "N_PARTICLES = 32").replace(
        "tape = wp.Tape()", "tape = wp.Tape()\n    x = 1"
    )
    model = (ws / "pkg" / "model.py").read_text(encoding="utf-8")
    new_model = model.replace("SCALE = 2.0", "SCALE = 3.0")
    diff = _diff("sim.py", SIM, new_sim, n=1) + _diff("pkg/model.py", model, new_model)
    r = apply_patch(ApplyPatchArgs(diff=diff), ws)
    assert sorted(r.paths) == ["pkg/model.py", "sim.py"]
    assert (ws / "sim.py").read_text(encoding="utf-8") == new_sim
    assert (ws / "pkg" / "model.py").read_text(encoding="utf-8") == new_model
    assert Ledger(ws).records()[r.seq].payload["backup_op"] == r.backup_op


def test_apply_patch_tolerates_line_drift_but_not_wrong_context(ws):
    new_sim = SIM.replace("    y[i] = x[i] * 2.0", "    y[i] = x[i] * 4.0")
    diff = _diff("sim.py", SIM, new_sim)
    (ws / "sim.py").write_text("# a header line the diff does not know about\n" + SIM, encoding="utf-8")
    apply_patch(ApplyPatchArgs(diff=diff), ws)
    assert "x[i] * 4.0" in (ws / "sim.py").read_text(encoding="utf-8")
    stale = _diff("sim.py", SIM, SIM.replace("STEPS = 20", "STEPS = 5"))
    (ws / "sim.py").write_text(SIM.replace("STEPS = 20", "STEPS = 21"), encoding="utf-8")
    with pytest.raises(ToolError, match="does not match the file"):
        apply_patch(ApplyPatchArgs(diff=stale), ws)
    assert "STEPS = 21" in (ws / "sim.py").read_text(encoding="utf-8")


def test_apply_patch_is_all_or_nothing_when_one_file_would_break_syntax(ws):
    model = (ws / "pkg" / "model.py").read_text(encoding="utf-8")
    diff = _diff("pkg/model.py", model, model.replace("SCALE = 2.0", "SCALE = 3.0")) + _diff(
        "sim.py", SIM, SIM.replace("def loss(x):", "def loss(x)")
    )
    with pytest.raises(ToolError, match=r"sim\.py.*line 13"):
        apply_patch(ApplyPatchArgs(diff=diff), ws)
    assert (ws / "pkg" / "model.py").read_text(encoding="utf-8") == model


def test_apply_patch_can_create_a_file_but_never_deletes_or_escapes(ws):
    r = apply_patch(
        ApplyPatchArgs(
            diff="--- /dev/null\n+++ b/probe.py\n@@ -0,0 +1,2 @@\n+import sim\n+print(sim.STEPS)\n"
        ),
        ws,
    )
    assert (ws / "probe.py").read_text(encoding="utf-8") == "import sim\nprint(sim.STEPS)\n"
    assert r.before == {"probe.py": None}
    with pytest.raises(ToolError, match="never deletes"):
        apply_patch(
            ApplyPatchArgs(diff="--- a/sim.py\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-import warp as wp\n"), ws
        )
    with pytest.raises(ToolError, match="outside the workspace"):
        apply_patch(ApplyPatchArgs(diff="--- /dev/null\n+++ b/../evil.py\n@@ -0,0 +1 @@\n+x = 1\n"), ws)
    assert not (ws.parent / "evil.py").exists()
    with pytest.raises(ToolError, match="no file patches"):
        apply_patch(ApplyPatchArgs(diff="just words"), ws)


def test_apply_patch_honours_no_newline_at_end_of_file(ws):
    (ws / "t.py").write_text("a = 1\nb = 2", encoding="utf-8")
    diff = "--- a/t.py\n+++ b/t.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n\\ No newline at end of file\n+b = 3\n"
    apply_patch(ApplyPatchArgs(diff=diff), ws)
    assert (ws / "t.py").read_text(encoding="utf-8") == "a = 1\nb = 3\n"


# -- undo ---------------------------------------------------------------------------------------------


def test_undo_restores_the_last_patch_and_undo_all_restores_every_one(ws):
    edit_file(EditFileArgs(path="sim.py", old_text="STEPS = 20", new_text="STEPS = 2"), ws)
    after_first = (ws / "sim.py").read_text(encoding="utf-8")
    edit_file(EditFileArgs(path="sim.py", old_text="N_PARTICLES = 64", new_text="N_PARTICLES = 8"), ws)
    apply_patch(ApplyPatchArgs(diff="--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x = 1\n"), ws)
    r = undo(ws)
    assert r.removed == ["new.py"] and not (ws / "new.py").exists()  # it created that file itself
    r = undo(ws)
    assert r.restored == ["sim.py"] and (ws / "sim.py").read_text(encoding="utf-8") == after_first
    r = undo(ws, all_patches=True)
    assert (ws / "sim.py").read_text(encoding="utf-8") == SIM
    with pytest.raises(ToolError, match="nothing to undo"):
        undo(ws)
    assert [rec.kind for rec in Ledger(ws).records()].count("undo") == 3


def test_undo_does_not_overwrite_a_change_made_after_the_patch(ws):
    edit_file(EditFileArgs(path="sim.py", old_text="STEPS = 20", new_text="STEPS = 2"), ws)
    (ws / "sim.py").write_text(SIM + "# the user's later work\n", encoding="utf-8")
    with pytest.raises(ToolError, match="changed after patch"):
        undo(ws)
    assert (ws / "sim.py").read_text(encoding="utf-8").endswith("# the user's later work\n")
    undo(ws, force=True)
    assert (ws / "sim.py").read_text(encoding="utf-8") == SIM


_CLI = "import typer; from warpgrad.cli.workspace import register; app = typer.Typer(); register(app); app()"


def test_the_undo_command_restores_from_a_real_process(ws):
    edit_file(EditFileArgs(path="sim.py", old_text="STEPS = 20", new_text="STEPS = 2"), ws)
    p = subprocess.run(
        [sys.executable, "-c", _CLI, "undo", "--all", "--json", "-w", str(ws)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["restored"] == ["sim.py"]
    assert (ws / "sim.py").read_text(encoding="utf-8") == SIM
    p = subprocess.run(
        [sys.executable, "-c", _CLI, "undo", "-w", str(ws)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )
    assert p.returncode == 1 and "nothing to undo" in p.stderr


# -- overview and schemas -----------------------------------------------------------------------------


def test_workspace_overview_lists_files_entry_points_knobs_version_and_prior_evidence(ws):
    write_file(WriteFileArgs(path="probe.py", content="import sim\n"), ws)
    (ws / "lib.py").write_text("def helper():\n    pass\n", encoding="utf-8")
    (ws / "taped.py").write_text("import warp as wp\ntape = wp.Tape()\ntape.backward()\n", encoding="utf-8")
    r = workspace_overview(WorkspaceOverviewArgs(), ws)
    paths = {f.path: f for f in r.files}
    assert {"sim.py", "pkg/model.py", "probe.py", "lib.py"} <= set(paths) and paths[
        "probe.py"
    ].created_by_warpgrad
    assert not any(p.startswith(".warpgrad") for p in paths)
    eps = {e.path: e.reasons for e in r.entry_points}
    assert set(eps) == {"sim.py", "taped.py"}
    assert "module-level wp.Tape" in eps["taped.py"] and "module-level backward()" in eps["taped.py"]
    assert {k["id"]: k["value"] for k in r.size_knobs["sim.py"]} == {"N_PARTICLES": 64, "STEPS": 20}
    assert r.warp_version and r.warp_version.startswith("1.")
    assert r.ledger["kinds"] == {"file": 1} and r.ledger["verified"]


def test_every_workspace_tool_is_registered_with_described_arguments():
    tools = load_tools()
    mine = [
        "workspace_overview",
        "read_file",
        "search_code",
        "write_file",
        "edit_file",
        "apply_patch",
        "shrink",
        "finish",
    ]
    for name in mine:
        spec = tools[name]
        for field, info in spec.args.model_fields.items():
            assert info.description, f"{name}.{field} has no description"
        assert spec.anthropic_param()["input_schema"]["type"] == "object"
    assert (
        not tools["write_file"].read_only
        and not tools["edit_file"].read_only
        and tools["read_file"].read_only
    )


SNAPSHOT = Path(__file__).parent / "snapshots" / "tool_schemas.json"


def _schemas(names: list[str]) -> dict:
    tools = load_tools()
    return {
        n: {
            "description": tools[n].description,
            "read_only": tools[n].read_only,
            "long_running": tools[n].long_running,
            "input": tools[n].input_schema(),
            "output": tools[n].output_schema(),
        }
        for n in names
    }


def test_tool_schemas_match_the_pinned_snapshot():
    """A schema change is an API change for the model, MCP clients and the CLI: it must be deliberate.

    Every registered tool is pinned. Regenerate with
    `WARPGRAD_UPDATE_SNAPSHOTS=1 pytest tests/test_workspace.py -k snapshot`.
    """
    current = _schemas(sorted(load_tools()))
    if os.environ.get("WARPGRAD_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    pinned = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert sorted(current) == sorted(pinned), "a tool was added or removed: regenerate the snapshot deliberately"
    assert current == pinned
