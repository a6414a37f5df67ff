"""The gate's validity rules: each false acceptance found by role-playing a model over MCP is reproduced
here and must now be refused; the refused-but-right fix (a script that prints a metric, not a loss) now
passes by naming the metric, without editing the user's print line."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_gate import (
    _CLI,
    PROBE,
    SIM,
    build_fixed_chain,
    check_payload,
    files_of,
    run_payload,
    the_fix,
    tracker_payload,
)

from warpgrad.tools.finish import FinishArgs, finish
from warpgrad.tools.gate import RULES, check_finish
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.run_script import RunScriptArgs, run_script
from warpgrad.tools.workspace import WriteFileArgs, write_file


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "sim.py").write_text(SIM, encoding="utf-8")
    write_file(WriteFileArgs(path="probe.py", content=PROBE, purpose="FD probe of sim.loss_and_grad"), tmp_path)
    return tmp_path


def _gate(ws: Path, outcome: str):
    return check_finish(ws, outcome)


def _refused_by(ws: Path, outcome: str, rule: str, *needles: str) -> str:
    gate = check_finish(ws, outcome)
    text = "\n".join(gate.missing)
    assert not gate.accepted, "accepted, but the evidence does not say what the outcome claims"
    assert f"[{rule} " in text, text
    for n in needles:
        assert n in text, text
    return text


def test_every_rule_is_documented_like_a_linter_rule_and_listed_by_the_gate_command():
    assert len(RULES) >= 10
    for rid, rule in RULES.items():
        assert rid == rule.id and rid.startswith("G") and rule.name and "-" in rule.name
        assert rule.summary and rule.why and rule.satisfied_by
    p = subprocess.run([sys.executable, "-c", _CLI, "gate", "--rules", "--json"], capture_output=True, text=True,
                       timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    assert [r["id"] for r in json.loads(p.stdout)] == list(RULES)


# -- false acceptance 1: one iteration-0 capture pass, no workflow run --------------------------------------


def test_gradients_correct_after_one_iteration_0_check_and_no_workflow_run_is_refused(ws):
    Ledger(ws).append("gradcheck", check_payload(ws, True, max_rel=1e-5, iterations=[0]))
    text = _refused_by(ws, "gradients_correct", "G006", "cover iteration(s) 0 only")
    assert "[G007 workflow-run]" in text
    # a later iteration and a run of the workflow on the same files: now it stands
    Ledger(ws).append("gradcheck", check_payload(ws, True, max_rel=1e-5, iterations=[3]))
    Ledger(ws).append("run", run_payload(ws, [8.0, 8.0]))
    gate = check_finish(ws, "gradients_correct")
    assert gate.accepted, gate.missing
    assert gate.evidence["workflow_run"] == 3


def test_an_old_record_without_iterations_covers_only_its_own_iteration(ws):
    p = check_payload(ws, True, max_rel=1e-5)
    del p["iterations"]  # written before capture filled `iterations`
    p["iteration"] = 1
    Ledger(ws).append("gradcheck", p)
    Ledger(ws).append("run", run_payload(ws, [8.0]))
    _refused_by(ws, "gradients_correct", "G006", "cover iteration(s) 1 only", "iteration 0")


# -- false acceptance 2: the objective was a sub-array, not what the script reports ---------------------


def test_gradients_correct_on_a_partial_objective_check_is_refused(ws):
    Ledger(ws).append("gradcheck", check_payload(ws, True, max_rel=1e-5, objective_kind="partial"))
    Ledger(ws).append("run", run_payload(ws, [8.0]))
    _refused_by(ws, "gradients_correct", "G003", "partial evidence")


def test_a_legacy_check_of_a_named_objective_variable_counts_as_partial(ws):
    p = check_payload(ws, True, max_rel=1e-5)
    del p["objective_kind"]
    p["harness"] = {"objective": "terms", "iteration": 0}
    Ledger(ws).append("gradcheck", p)
    Ledger(ws).append("run", run_payload(ws, [8.0]))
    _refused_by(ws, "gradients_correct", "G003", "the named variable 'terms'")


def test_a_partial_passing_check_does_not_prove_a_fix(ws):
    build_fixed_chain(ws, passing=None, skip={"passing", "tracker", "rerun"})
    Ledger(ws).append("gradcheck", check_payload(ws, True, max_rel=1e-5, objective_kind="partial"))
    Ledger(ws).append("tracker", tracker_payload(ws))
    Ledger(ws).append("run", run_payload(ws, [8.0, 2.0, 1.0]))
    _refused_by(ws, "fixed", "G003", "is not a pass of the workflow's objective")


def test_a_probe_or_named_variable_check_labelled_script_is_still_partial(ws):
    probe = {**check_payload(ws, True, max_rel=1e-5), "mode": "probe"}  # objective_kind "script" by default
    named = {**check_payload(ws, True, max_rel=1e-5), "harness": {"mode": "capture", "objective": "terms"}}
    for payload, rule, needle in ((probe, "G004", "never compared with the gradient the script's update applies"),
                                  (named, "G003", "the named variable 'terms'")):
        Ledger(ws).start_fresh()  # deleting the files is a truncation now: the head outside remembers them
        Ledger(ws).append("gradcheck", payload)
        Ledger(ws).append("run", run_payload(ws, [8.0]))
        _refused_by(ws, "gradients_correct", rule, needle)


def test_a_probe_is_localization_even_when_declared_and_its_loss_agrees_with_the_printed_one(ws):
    """False acceptance 7 of issue 23: agreement of loss() with a print line ties nothing to the gradient the
    script's update applies; warpgrad makes no probe-vs-update comparison, so no probe check is proof."""
    led = Ledger(ws)
    led.append("run", run_payload(ws, [8.0, 8.0]))
    for kind in ("probe", "probe_declared"):
        led.append("gradcheck", check_payload(ws, True, max_rel=1e-5, objective_kind=kind, objective_value=8.0))
        _refused_by(ws, "gradients_correct", "G004", "localization evidence", "probe.py")


# -- false acceptance 3: the latest check on the files on disk failed ------------------------------------


def test_fixed_is_refused_while_a_check_on_the_current_files_fails_whatever_its_harness(ws):
    build_fixed_chain(ws, skip={"tracker", "rerun"})  # fail (harness A), patch, pass (harness A)
    Ledger(ws).append("gradcheck", check_payload(ws, False, harness="default-capture-iterations-0-2"))
    Ledger(ws).append("tracker", tracker_payload(ws))
    Ledger(ws).append("run", run_payload(ws, [8.0, 2.88, 1.04]))
    _refused_by(ws, "fixed", "G002", "the check at record 5", "FAILED on the files as they are now")
    _refused_by(ws, "gradients_correct", "G002", "the check at record 5")


def test_a_later_check_that_only_claims_to_supersede_a_failure_does_not_explain_it(ws):
    led = Ledger(ws)
    led.append("gradcheck", check_payload(ws, False, harness="capture"))  # record 1
    led.append("run", run_payload(ws, [8.0, 8.0]))
    led.append("gradcheck", {**check_payload(ws, True, max_rel=1e-5), "supersedes": [1]})
    _refused_by(ws, "gradients_correct", "G002", "the check at record 1", "did not mark the failing check unreliable")


def test_a_failure_the_engine_marked_unreliable_is_explained_by_a_later_check_that_supersedes_it(ws):
    led = Ledger(ws)
    led.append("gradcheck", {**check_payload(ws, False, harness="capture"),
                             "unreliable_reason": "the gradient was read before backward (stale)"})  # record 1
    led.append("run", run_payload(ws, [8.0, 8.0]))
    led.append("gradcheck", check_payload(ws, True, max_rel=1e-5))
    _refused_by(ws, "gradients_correct", "G002", "marked it unreliable", "no later passing check")
    led.append("gradcheck", {**check_payload(ws, True, max_rel=1e-5, objective_kind="partial"), "supersedes": [1]})
    _refused_by(ws, "gradients_correct", "G002", "the check at record 1")  # a partial check explains nothing
    led.append("gradcheck", {**check_payload(ws, True, max_rel=1e-5), "supersedes": [1]})
    gate = check_finish(ws, "gradients_correct")
    assert gate.accepted, gate.missing


def test_a_nondeterministic_failing_check_is_explained_by_a_later_check_that_supersedes_it(ws):
    led = Ledger(ws)
    led.append("gradcheck", {**check_payload(ws, False, harness="capture"), "nondeterministic": True})  # record 1
    led.append("run", run_payload(ws, [8.0, 8.0]))
    _refused_by(ws, "gradients_correct", "G002", "the objective is not deterministic")
    led.append("gradcheck", {**check_payload(ws, True, max_rel=1e-5), "supersedes": [1]})
    assert check_finish(ws, "gradients_correct").accepted


# -- false acceptance 4: the run before the patch showed nothing to compare ------------------------------


def test_fixed_is_refused_when_the_run_before_shows_no_parsed_objective(ws):
    led = Ledger(ws)
    led.append("run", {**run_payload(ws, [1.0]), "final_loss": None, "loss_trajectory": [],
                       "stdout_tail": "done\n"})
    led.append("gradcheck", check_payload(ws, False))
    the_fix(ws)
    led.append("gradcheck", check_payload(ws, True, max_rel=1e-5))
    led.append("tracker", tracker_payload(ws))
    led.append("run", run_payload(ws, [8.0, 2.0, 1.0]))
    _refused_by(ws, "fixed", "G010", "no loss that could be parsed")


def test_fixed_is_refused_when_every_value_of_the_run_before_is_non_finite(ws):
    led = Ledger(ws)
    led.append("run", run_payload(ws, [math.nan, math.nan, math.nan]))
    led.append("gradcheck", check_payload(ws, False, signature="nan_inf", max_rel=math.nan))
    the_fix(ws)
    led.append("gradcheck", check_payload(ws, True, max_rel=1e-5))
    led.append("tracker", tracker_payload(ws))
    led.append("run", run_payload(ws, [8.0, 2.0, 1.0]))
    _refused_by(ws, "fixed", "G010", "is non-finite: nothing was measured")


def test_the_accepted_fix_states_the_objective_before_and_after_in_the_report(ws):
    build_fixed_chain(ws)
    res = finish(FinishArgs(outcome="fixed", summary="y lacked requires_grad on the taped path"), ws)
    assert res.comparison is not None
    assert (res.comparison.before, res.comparison.after) == (8.0, 1.04)
    assert "Workflow objective before -> after (records 1 -> 6): final loss 8.0 -> 1.04" in res.report_markdown
    assert res.report_markdown == (ws / res.report_path).read_text(encoding="utf-8")


# -- G005: zeros agree trivially -------------------------------------------------------------------------


def test_a_check_with_zero_objective_zero_ad_and_zero_fd_is_not_a_pass(ws):
    p = check_payload(ws, True, max_rel=0.0, objective_value=0.0)
    p["directions"] = [{"direction": 0, "scope": "all", "step": 1e-3, "ad": 0.0, "fd": 0.0, "band": 1e-7,
                        "agree": True}]
    Ledger(ws).append("gradcheck", p)
    Ledger(ws).append("run", run_payload(ws, [0.0, 0.0]))
    _refused_by(ws, "gradients_correct", "G005", "zero objective, zero AD and zero FD")
    p["directions"][0]["fd"] = p["directions"][0]["ad"] = 1e-3  # something was measured: a real pass
    Ledger(ws).append("gradcheck", p)
    assert check_finish(ws, "gradients_correct").accepted


# -- false acceptance 5: records appended by a process that cannot read the key ---------------------------

_FORGE = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_gate import check_payload, run_payload, tracker_payload
from warpgrad.tools.ledger import Ledger
ws = Path({ws!r})
from forge import forge_append
append = (lambda kind, payload: forge_append(ws, kind, payload)) if {forge!r} else Ledger(ws).append
append("gradcheck", check_payload(ws, True, max_rel=1e-5))
append("tracker", tracker_payload(ws))
append("run", run_payload(ws, [8.0, 2.0, 1.0]))
"""


def _gate_cli(ws: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CLI, "gate", "--outcome", "fixed", "-w", str(ws)],
                          capture_output=True, text=True, encoding="utf-8", timeout=60, check=False)


def test_records_forged_by_a_process_without_the_key_are_rejected(ws, tmp_path_factory):
    led = Ledger(ws)
    led.append("run", run_payload(ws, [8.0, 8.0, 8.0]))
    led.append("gradcheck", check_payload(ws, False))
    the_fix(ws)
    led.append("gradcheck", check_payload(ws, False))  # the real check after the patch still fails
    with open(ws / "sim.py", "a", encoding="utf-8") as f:
        f.write("# a trivial comment edit\n")  # makes that failing check stale
    other = tmp_path_factory.mktemp("no-access-to-the-real-key")
    env = {**os.environ, "WARPGRAD_KEY_DIR": str(other)}  # a process that cannot read the user's key
    honest = Ledger(ws).path.read_bytes()
    src = _FORGE.format(tests=str(Path(__file__).parent), ws=str(ws), forge=True)
    p = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True, text=True, timeout=120,
                       check=False)
    assert p.returncode == 0, p.stderr
    check = Ledger(ws).verify()
    assert not check.signed and check.unsigned == [5, 6, 7]  # the chain itself is intact
    assert "records behind" in " ".join(check.problems)  # and the head outside the workspace never moved
    _refused_by(ws, "fixed", "G001", "record(s) 5, 6, 7 carry no valid signature")
    cli = _gate_cli(ws)
    assert cli.returncode == 2 and "G001" in cli.stderr
    # the same records written by a holder of the key are accepted: the refusal is the signature alone
    Ledger(ws).path.write_bytes(honest)
    src = _FORGE.format(tests=str(Path(__file__).parent), ws=str(ws), forge=False)
    p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    gate = check_finish(ws, "fixed")
    assert [m for m in gate.missing if "G001" not in m] == []


def test_the_key_is_made_0600_outside_the_workspace_and_every_record_is_signed(ws):
    from warpgrad.tools.ledger import KEY_NAME, key_dir

    Ledger(ws).append("run", run_payload(ws, [1.0]))
    key = key_dir() / KEY_NAME
    assert key.is_file() and (key.stat().st_mode & 0o777) == 0o600
    assert ws.resolve() not in key.resolve().parents
    check = Ledger(ws).verify()
    assert check.signed and check.unsigned == [] and check.key_id
    assert all(r.sig and r.key_id == check.key_id for r in Ledger(ws).records())


# -- the refused-but-right fix: the script prints a metric, not a loss -----------------------------------

METRIC_SIM = SIM.replace('''def train():
    v = wp.array(np.zeros(N, dtype=np.float32), dtype=float, requires_grad=True)
    losses = []
    for _ in range(ITERS):
        value, g = loss_and_grad(v)
        losses.append(value)
        v.assign(v.numpy() - 0.05 * g)
    return losses


if __name__ == "__main__":
    losses = train()
    for it, value in enumerate(losses):
        print(f"iter {it} loss {value}")
    print(json.dumps({"losses": losses}))
''', '''def train():
    v = wp.array(np.zeros(N, dtype=np.float32), dtype=float, requires_grad=True)
    for _ in range(ITERS):
        value, g = loss_and_grad(v)
        v.assign(v.numpy() - 0.05 * g)
    return v


if __name__ == "__main__":
    v = train()
    print(f"x_T = {float(np.mean(2.0 * v.numpy())):+.5f}")
''')
DRIVER = """import numpy as np
import warp as wp

import sim

v = wp.array(np.zeros(sim.N, dtype=np.float32), dtype=float, requires_grad=True)
for it in range(sim.ITERS):
    value, g = sim.loss_and_grad(v)
    print(f"iter {it} loss {value}")
    v.assign(v.numpy() - 0.05 * g)
"""
FAKE_DRIVER = """for it, value in enumerate([8.0, 4.0, 2.0]):
    print(f"iter {it} loss {value}")
"""


@pytest.fixture
def metric_ws(tmp_path: Path) -> Path:
    assert METRIC_SIM != SIM
    (tmp_path / "sim.py").write_text(METRIC_SIM, encoding="utf-8")
    return tmp_path


def _checks_around_the_fix(ws: Path, script: str = "sim.py") -> None:
    """A failing check of the workflow's script, the fix, a passing check, a clean tracker run."""
    files = ("sim.py",) if script == "sim.py" else (script, "sim.py")
    Ledger(ws).append("gradcheck", {**check_payload(ws, False, files=files_of(ws, *files)), "script": script})
    the_fix(ws)
    Ledger(ws).append("gradcheck", {**check_payload(ws, True, max_rel=1e-5, files=files_of(ws, *files)),
                                    "script": script})
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": files_of(ws, "sim.py")})


@pytest.mark.warp
def test_naming_the_metric_lets_a_right_fix_through_without_touching_the_users_print_line(metric_ws):
    ws = metric_ws
    before = run_script(RunScriptArgs(script="sim.py", device="cpu"), ws)  # before anyone named the metric
    assert before.ok and before.final_loss is None and "x_T = +0.00000" in before.stdout_tail
    _checks_around_the_fix(ws)
    after = run_script(RunScriptArgs(script="sim.py", device="cpu"), ws)
    _refused_by(ws, "fixed", "G010", "reports no final_loss or loss_trajectory", "metric")
    # the wrong direction refuses: moving toward 1.0 is not "lower"
    run_script(RunScriptArgs(script="sim.py", device="cpu", metric="x_T", metric_direction="lower"), ws)
    _refused_by(ws, "fixed", "G010", "does not improve on 0.0")
    after = run_script(RunScriptArgs(script="sim.py", device="cpu", metric="x_T", metric_direction="closer",
                                     metric_target=1.0), ws)
    assert after.metric_values and 0.5 < after.metric_final < 1.0, after.stdout_tail
    gate = check_finish(ws, "fixed")
    assert gate.accepted, gate.missing
    assert gate.comparison.before == 0.0 and gate.comparison.after == after.metric_final
    assert "metric x_T (closer to 1.0 is better)" in gate.comparison.quantity
    assert 'print(f"x_T = {' in (ws / "sim.py").read_text(encoding="utf-8")  # the user's print line, untouched


@pytest.mark.warp
def test_when_a_driver_script_is_the_workflow_only_its_rerun_counts(metric_ws):
    ws = metric_ws
    (ws / "drive.py").write_text(DRIVER, encoding="utf-8")
    (ws / "fake.py").write_text(FAKE_DRIVER, encoding="utf-8")
    run_script(RunScriptArgs(script="drive.py", device="cpu"), ws)  # the first run fixes the workflow
    run_script(RunScriptArgs(script="fake.py", device="cpu"), ws)
    _checks_around_the_fix(ws, script="drive.py")
    fake = run_script(RunScriptArgs(script="fake.py", device="cpu"), ws)
    assert "sim.py" not in fake.files
    _refused_by(ws, "fixed", "G010", "never imported a patched file")
    drive = run_script(RunScriptArgs(script="drive.py", device="cpu"), ws)
    assert "sim.py" in drive.files and drive.final_loss < 8.0
    gate = check_finish(ws, "fixed")
    assert gate.accepted, gate.missing
    assert gate.evidence["run_after"] == Ledger(ws).records()[-1].seq


def test_a_metric_needs_a_name_or_a_valid_regex_and_a_target_for_closer():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="needs a finite `target`"):
        RunScriptArgs(script="s.py", metric="x_T", metric_direction="closer")
    with pytest.raises(ValidationError, match="exactly one of"):
        RunScriptArgs(script="s.py", metric="x", metric_regex="x=(\\S+)")
    with pytest.raises(ValidationError, match="does not compile"):
        RunScriptArgs(script="s.py", metric_regex="x=(")
    with pytest.raises(ValidationError, match="need `metric` or `metric_regex`"):
        RunScriptArgs(script="s.py", metric_target=1.0)
    spec = RunScriptArgs(script="s.py", metric_regex=r"final pos: \(([-+.\de]+),").metric_spec()
    assert spec.values("final pos: (0.5, 2)\nfinal pos: (-1e-3, 2)") == [0.5, -0.001]
    named = RunScriptArgs(script="s.py", metric="x_T", metric_direction="higher").metric_spec()
    assert named.values("x_T = +0.98724\nmax_x_T = 5\nx_T: nan") [:1] == [0.98724]


@pytest.mark.warp
def test_gradients_correct_through_the_real_tools_on_a_correct_program(tmp_path):
    """Capture's default check covers the first and a later iteration; with a workflow run the outcome
    stands (the contract between capture and the gate, end to end)."""
    from warpgrad.tools.registry import load_tools

    tools = load_tools()
    (tmp_path / "sim.py").write_text(SIM.replace("y = wp.zeros(N, dtype=float)",
                                                 "y = wp.zeros(N, dtype=float, requires_grad=True)"), encoding="utf-8")
    check = tools["gradcheck"].call({"script": "sim.py"}, tmp_path)
    assert check.passed is True and check.objective_kind == "script", check.reason
    assert 0 in check.iterations and any(i > 0 for i in check.iterations), check.iterations
    _refused_by(tmp_path, "gradients_correct", "G007")
    tools["run_script"].call({"script": "sim.py"}, tmp_path)
    gate = check_finish(tmp_path, "gradients_correct")
    assert gate.accepted, gate.missing


@pytest.mark.warp
def test_warpgrad_run_takes_the_metric_and_refuses_a_bad_direction(metric_ws):
    base = [sys.executable, "-m", "warpgrad", "run", "sim.py", "--workspace", str(metric_ws), "--device", "cpu"]
    p = subprocess.run([*base, "--metric", "x_T", "--metric-direction", "closer", "--metric-target", "1.0", "--json"],
                       capture_output=True, text=True, timeout=300, check=False, cwd=metric_ws)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["metric"] == {"name": "x_T", "regex": None, "direction": "closer", "target": 1.0}
    assert out["metric_values"] == [0.0] and out["metric_final"] == 0.0
    rec = Ledger(metric_ws).records()[-1]
    rec = next(r for r in reversed(Ledger(metric_ws).records()) if r.kind == "run")  # then the workflow it fixed
    assert rec.payload["metric"]["name"] == "x_T" and rec.payload["metric_final"] == 0.0
    bad = subprocess.run([*base, "--metric", "x_T", "--metric-direction", "sideways"], capture_output=True,
                         text=True, timeout=300, check=False, cwd=metric_ws)
    assert bad.returncode == 2 and "metric_direction" in (bad.stdout + bad.stderr)
    assert [r.kind for r in Ledger(metric_ws).records()] == ["run", "workflow"]  # the refused call recorded nothing
