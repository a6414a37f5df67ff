"""The gate is written the way a linter's rules are (issue 23): each rule in its own module beside its check,
the catalog lists them, the README's table is generated from the catalog, and a refusal names its rule and
the call that supplies what is missing."""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

from test_gate import _CLI
from test_gate_workflow import _check, _edit, _files, _first_run, _run
from test_gate_workflow import ws as ws

from warpgrad.tools import gate
from warpgrad.tools.gate.catalog import RULE_MODULES, RULES, TABLE_BEGIN, TABLE_END, rules_markdown
from warpgrad.tools.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tools" / "gate"
RULE_ID = re.compile(r"G\d{3}")


def test_each_rule_lives_in_its_own_module_beside_its_check_and_the_catalog_lists_them_in_order():
    assert not (ROOT / "tools" / "gate.py").exists(), "the old single-file gate must be gone"
    assert list(RULES) == [f"G{i:03d}" for i in range(1, len(RULES) + 1)]
    homes = set()
    for module in RULE_MODULES:
        rule = module.RULE
        stem = module.__name__.rsplit(".", 1)[1]
        assert stem == f"{rule.id.lower()}_{rule.name.replace('-', '_')}", stem
        assert rule.check.__module__ == module.__name__, f"{rule.id}'s check lives elsewhere"
        assert rule.summary and rule.refuses and rule.why and rule.satisfied_by and rule.call
        homes.add(stem)
    on_disk = {p.stem for p in PACKAGE.glob("g0*.py")}
    assert on_disk == homes, "a rule module the catalog does not list (or the reverse)"


def _string_constants(path: Path) -> list[str]:
    return [n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_a_rule_id_is_written_in_its_own_module_only():
    """No rule is joined to its logic by a string id spread over helpers: outside its module, code reaches a
    rule through its module's RULE."""
    for path in sorted(PACKAGE.glob("*.py")):
        own = {m.RULE.id for m in RULE_MODULES if m.__name__.endswith("." + path.stem)}
        ids = {s for s in _string_constants(path) if RULE_ID.fullmatch(s)}
        assert ids <= own, f"{path.name} names {sorted(ids - own)} by its id"
    # and nothing outside the package looks a rule up by id to tag a refusal
    for path in (ROOT / "tools").glob("*.py"):
        assert "tagged(" not in path.read_text(encoding="utf-8"), path.name


def test_the_readme_gate_table_is_the_catalog_s():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count(TABLE_BEGIN) == 1 and readme.count(TABLE_END) == 1
    table = readme.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].lstrip("\n")
    assert table == rules_markdown(), "regenerate the README's gate table from catalog.rules_markdown()"
    for rule in RULES.values():
        assert f"| {rule.id} {rule.name} | {rule.refuses} |" in table


def test_the_gate_command_lists_what_each_rule_refuses_and_the_call_that_supplies_it():
    p = subprocess.run([sys.executable, "-c", _CLI, "gate", "--rules"], capture_output=True, text=True, timeout=60,
                       check=False)
    assert p.returncode == 0, p.stderr
    for rule in RULES.values():
        assert f"{rule.id} {rule.name}: {rule.summary}" in p.stdout
        assert f"supplied by: {rule.call}" in p.stdout


def test_the_package_keeps_the_names_its_callers_import():
    for name in ("check_finish", "GateResult", "OUTCOMES", "RULES", "Outcome", "OtherCause", "gather_plan",
                 "localization", "objective_improves"):
        assert hasattr(gate, name), name
    assert importlib.import_module("warpgrad.tools.finish").check_finish is gate.check_finish


def test_every_refusal_of_a_fix_names_its_rule_and_a_call(ws):
    """A patch with no failing check before it, no pass after it, nothing else: each line is tagged with a rule
    of the catalog and names a call the model can make."""
    _first_run(ws)
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")
    Ledger(ws).append("gradcheck", _check(ws, False))
    result = gate.check_finish(ws, "fixed")
    assert not result.accepted and result.missing
    calls = ("gradcheck", "run_script", "edit_file", "apply_patch", "undo", "finish", "instrument", "diagnose")
    for line in result.missing:
        tag = re.match(r"\[(G\d{3}) ([a-z-]+)\] ", line)
        assert tag and RULES[tag.group(1)].name == tag.group(2), line
        assert any(c in line for c in calls), line


def test_every_refusal_of_every_outcome_names_a_rule_of_the_catalog(ws):
    """An empty ledger refuses every outcome; not one missing piece is untagged."""
    for outcome in gate.OUTCOMES:
        result = gate.check_finish(ws, outcome)
        assert not result.accepted and result.missing, outcome
        for line in result.missing:
            tag = re.match(r"\[(G\d{3}) ([a-z-]+)\] ", line)
            assert tag and RULES[tag.group(1)].name == tag.group(2), (outcome, line)
    misplaced = gate.check_finish(ws, "gradients_correct", also="learning_rate_too_high").missing
    assert any(m.startswith("[G013 second-cause-evidence]") and "beside a fix" in m for m in misplaced), misplaced


# -- G012 compares what the script reports: the objective times the factor the check reports ----------------


def _chain_with_factors(ws: Path, before: tuple[float, float | None], after: tuple[float, float | None]) -> None:
    """Fail (seeded objective, reported factor) -> a right patch -> pass (seeded objective, reported factor)."""
    _first_run(ws)
    Ledger(ws).append("gradcheck", {**_check(ws, False, objective=before[0]), "reported_factor": before[1]})
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")
    Ledger(ws).append("gradcheck", {**_check(ws, True, objective=after[0]), "reported_factor": after[1]})
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "glider.py")})
    Ledger(ws).append("run", _run(ws, [12.5, 0.5, 0.1]))


def test_a_fix_of_a_seed_that_was_a_multiple_of_the_printed_loss_leaves_the_objective_where_it_was(ws):
    # Before: the script printed 8x the loss it seeded (a mean printed, a sum seeded); the fix seeds what it prints.
    _chain_with_factors(ws, before=(1.5625, 8.0), after=(12.5, None))
    result = gate.check_finish(ws, "fixed")
    assert result.accepted, result.missing
    assert result.objective_shift is not None
    assert (result.objective_shift.before, result.objective_shift.after) == (12.5, 12.5)


def test_a_patch_that_keeps_the_seeded_value_but_halves_what_the_script_reports_moves_the_objective(ws):
    _chain_with_factors(ws, before=(12.5, 2.0), after=(12.5, None))
    result = gate.check_finish(ws, "fixed")
    assert not result.accepted
    text = "\n".join(result.missing)
    assert "[G012 objective-invariant]" in text and "it was 25.0 before the patch" in text, text


# -- an unresolved direction: finish plans a check with more directions instead of refusing ----------------


def _specced(payload: dict, *, directions: int = 3, seed: int = 0) -> dict:
    """The payload with the full harness spec gradcheck writes, its harness_id the hash of that spec."""
    spec = {"mode": "capture", "script": payload["script"], "args": payload["harness"]["args"], "iteration": None,
            "scheme": "hub", "params": ["w"], "objective": None, "eps_policy": "central", "directions": directions,
            "seed": seed}
    return {**payload, "harness": spec, "harness_id": hashlib.sha256(json.dumps(spec, sort_keys=True).encode())
            .hexdigest()}


def _fail_then_patch(ws: Path) -> None:
    _first_run(ws)
    Ledger(ws).append("gradcheck", _specced(_check(ws, False)))
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")


def test_a_check_left_open_by_an_unresolved_direction_makes_finish_plan_one_with_more_directions(ws):
    _fail_then_patch(ws)
    open_check = _specced(_check(ws, True, iterations={0: (True, 3), 2: (None, 2)}))
    open_check.update(passed=None, directions=[{"ad": 1.0, "fd": 1.0, "status": "agree"},
                                               {"ad": 1.0, "fd": 1.0, "status": "agree"},
                                               {"ad": 1e-9, "fd": 3e-9, "status": "unresolved"}])
    Ledger(ws).append("gradcheck", open_check)
    plan = gate.gather_plan(ws)
    assert plan is not None and plan.check is not None, "refusing would cost the model a call finish can make"
    assert plan.check.directions == 6 and plan.check.seed == 0 and plan.check.iteration is None
    # The check with more directions is like-for-like with the failing one: the chain goes through.
    Ledger(ws).append("gradcheck", _specced(_check(ws, True, iterations={0: (True, 6), 2: (True, 5)}), directions=6))
    assert gate.gather_plan(ws).check is None
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "glider.py")})
    Ledger(ws).append("run", _run(ws, [12.5, 0.5, 0.1]))
    result = gate.check_finish(ws, "fixed")
    assert result.accepted, result.missing


def test_a_pass_short_of_three_agreeing_directions_plans_more_and_a_failure_plans_nothing(ws):
    _fail_then_patch(ws)
    Ledger(ws).append("gradcheck", _specced(_check(ws, True, iterations={0: (True, 3), 2: (True, 2)})))
    plan = gate.gather_plan(ws)
    assert plan is not None and plan.check is not None and "fewer than 3" in plan.check.why
    Ledger(ws).append("gradcheck", _specced(_check(ws, False)))
    plan = gate.gather_plan(ws)
    assert plan is None or plan.check is None, "a failure after the patch is the model's to answer"


def test_a_pass_with_another_seed_or_fewer_directions_is_not_like_for_like(ws):
    _fail_then_patch(ws)
    Ledger(ws).append("gradcheck", _specced(_check(ws, True), seed=1))
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "glider.py")})
    Ledger(ws).append("run", _run(ws, [12.5, 0.5, 0.1]))
    text = "\n".join(gate.check_finish(ws, "fixed").missing)
    assert "[G008 fix-evidence-chain] a passing FD check after the patch with the same harness" in text, text


def test_gradients_correct_short_of_a_resolved_direction_plans_the_check_too_and_nothing_else(ws):
    _first_run(ws)
    Ledger(ws).append("gradcheck", _specced(_check(ws, True, iterations={0: (True, 3), 1: (True, 2)})))
    assert "[G006 first-and-later-iteration]" in "\n".join(gate.check_finish(ws, "gradients_correct").missing)
    plan = gate.gather_plan(ws, "gradients_correct")
    assert plan is not None and plan.check is not None and plan.check.directions == 6
    assert not plan.tracker and not plan.rerun, "an unmodified program needs no tracker or rerun from finish"
    Ledger(ws).append("gradcheck", _specced(_check(ws, True, iterations={0: (True, 6), 1: (True, 6)}), directions=6))
    assert gate.gather_plan(ws, "gradients_correct") is None
    assert gate.check_finish(ws, "gradients_correct").accepted


# -- G010 where diagnose cut the run before short ------------------------------------------------------------


def test_a_right_fix_slower_at_first_than_the_cut_short_buggy_run_counts_when_it_ends_below_its_best(ws):
    """The wrong gradient overshoots: it is ahead at the point where diagnose stopped it. The rerun is behind
    there, but ends below anything the buggy run reached."""
    _first_run(ws, [12.5, 9.0], cut_short_at=1)
    Ledger(ws).append("gradcheck", _check(ws, False))
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")
    Ledger(ws).append("gradcheck", _check(ws, True))
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "glider.py")})
    Ledger(ws).append("run", _run(ws, [12.5, 10.0, 9.2]))
    text = "\n".join(gate.check_finish(ws, "fixed").missing)
    assert "[G010 objective-before-after]" in text and "does not improve on 9.0" in text, text
    Ledger(ws).append("run", _run(ws, [12.5, 10.0, 4.0, 1.0]))
    result = gate.check_finish(ws, "fixed")
    assert result.accepted, result.missing
    assert (result.comparison.before, result.comparison.after) == (9.0, 1.0)
    assert "best of the run before" in result.comparison.quantity
