"""The eval suite is consistent on disk, and its cases really carry the bugs they claim."""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from warpgrad.evals.suite import CaseMeta, SuiteError, load_suite, main, write_evals_json

# The checkout's suite: the graders (expected answers) are not in the wheel, so never the installed copy.
SUITE_DIR = Path(__file__).resolve().parents[1] / "evals"

# The FD checker is a grader helper that lives next to the graders, not a package module.
_spec = importlib.util.spec_from_file_location("warpgrad_evals_fdcheck", SUITE_DIR / "graders" / "fdcheck.py")
fdcheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fdcheck)

try:
    SUITE = load_suite(SUITE_DIR)
    LOAD_ERROR = None
except SuiteError as exc:  # reported by the first test instead of breaking collection of the whole file
    SUITE, LOAD_ERROR = None, exc
GRADED_WRONG = (
    [c for c in SUITE.cases if c.should_trigger and c.expected_verdict == "gradients_wrong"] if SUITE else []
)


def test_the_shipped_suite_loads_and_validates():
    assert LOAD_ERROR is None, str(LOAD_ERROR)
    assert len(SUITE.cases) >= 16


def test_evals_json_is_regenerated_from_the_meta_files_and_up_to_date():
    on_disk = json.loads((SUITE_DIR / "evals.json").read_text(encoding="utf-8"))
    assert on_disk == SUITE.evals_json()
    assert on_disk["skill_name"] == "warp-debug-gradients"
    ids = [str(e["id"]) for e in on_disk["evals"]]
    assert ids == sorted(ids)
    assert set(on_disk["evals"][0]) == {
        "id",
        "prompt",
        "expected_output",
        "assertions",
        "files",
        "should_trigger",
    }


def test_the_shipped_suite_has_no_problems():
    assert SUITE.problems() == []


def test_every_listed_fixture_file_exists():
    for case in SUITE.cases:
        for rel in case.files:
            assert (SUITE_DIR / rel).is_file(), f"{case.id}: {rel}"


def test_at_least_four_negative_prompts_exist_and_none_of_them_triggers():
    negatives = [c for c in SUITE.cases if c.expected_verdict == "not_applicable"]
    assert len(negatives) >= 4
    assert all(not c.should_trigger for c in negatives)


def test_hidden_grader_fields_never_leak_into_evals_json():
    text = (SUITE_DIR / "evals.json").read_text(encoding="utf-8")
    for field in ("expected_verdict", "expected_signature", "root_cause", "quick_checks"):
        assert f'"{field}"' not in text


def test_fixtures_never_mention_the_bug_they_carry():
    words = re.compile(r"\b(bug|buggy|wrong gradient|fixme|todo)\b", re.IGNORECASE)
    for case in SUITE.cases:
        for rel in case.files:
            assert not words.search((SUITE_DIR / rel).read_text(encoding="utf-8")), f"{case.id}: {rel}"


@pytest.mark.parametrize("case", GRADED_WRONG, ids=lambda c: str(c.id))
def test_a_root_cause_line_is_among_the_lines_the_reference_fix_changes(case: CaseMeta):
    fixed = SUITE.fixed_dir(str(case.id))
    hits = []
    for rc in case.root_cause:
        patched = fixed / rc.file
        if not patched.is_file():
            continue
        before = (SUITE.workspace(str(case.id)) / rc.file).read_text(encoding="utf-8").splitlines()
        after = patched.read_text(encoding="utf-8").splitlines()
        for tag, i1, i2, _, _ in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
            # Lines are 1-based; a pure insertion sits between lines i1 and i1 + 1.
            if tag != "equal" and i1 <= rc.line <= max(i2, i1 + 1):
                hits.append(rc)
    assert hits, f"no root_cause of {case.id} lies in a hunk of its fixed/ copy"


def _write_meta(root: Path, case_id: str, **fields) -> None:
    d = root / "graders" / case_id
    d.mkdir(parents=True)
    base = {"id": case_id, "prompt": "p", "expected_output": "o", "assertions": [], "files": []}
    (d / "meta.json").write_text(json.dumps(base | fields), encoding="utf-8")


def test_load_suite_rejects_a_negative_prompt_that_claims_a_verdict(tmp_path):
    _write_meta(tmp_path, "neg", should_trigger=False, expected_verdict="gradients_wrong")
    with pytest.raises(SuiteError, match="not_applicable"):
        load_suite(tmp_path)


def test_load_suite_rejects_a_meta_whose_id_differs_from_its_folder(tmp_path):
    _write_meta(tmp_path, "a", should_trigger=False, expected_verdict="not_applicable")
    meta = tmp_path / "graders" / "a" / "meta.json"
    meta.write_text(meta.read_text(encoding="utf-8").replace('"a"', '"b"'), encoding="utf-8")
    with pytest.raises(SuiteError, match="folder name"):
        load_suite(tmp_path)


def test_check_reports_a_stale_evals_json_and_write_repairs_it(tmp_path, capsys):
    _write_meta(tmp_path, "neg", should_trigger=False, expected_verdict="not_applicable")
    assert main(["--suite", str(tmp_path), "--check"]) == 1
    assert "evals.json is missing" in capsys.readouterr().err
    assert main(["--suite", str(tmp_path), "--write", "--check"]) == 0
    assert load_suite(tmp_path).problems() == []


def test_a_suite_with_only_evals_json_loads_as_ungraded_cases(tmp_path):
    _write_meta(tmp_path, "neg", should_trigger=False, expected_verdict="not_applicable")
    write_evals_json(load_suite(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    (tmp_path / "evals.json").rename(plain / "evals.json")
    suite = load_suite(plain)
    assert not suite.graded
    assert [c.expected_verdict for c in suite.cases] == [None]


REPRESENTATIVE = {
    "heat_rod_conductivity": "zero",
    "projectile_launch_velocity": "grows_across_iterations",
    "vortex_tracer_release": "subtly_wrong",
}


@pytest.mark.warp
@pytest.mark.parametrize("case_id", sorted(REPRESENTATIVE))
def test_the_bug_shows_in_fd_and_the_reference_fix_agrees_with_fd(case_id):
    ws, probe = SUITE.workspace(case_id), SUITE.probe(case_id)
    broken = fdcheck.check(ws, probe)
    assert not broken["passed"]
    assert broken["signature"] == REPRESENTATIVE[case_id]
    assert broken["loss_repeatable"]
    fixed = fdcheck.check(ws, probe, overlay=SUITE.fixed_dir(case_id))
    assert fixed["passed"], fixed
    assert fixed["signature"] == "correct"
    assert fixed["max_rel_error"] < 1e-2
    # The fix changes gradients, not the objective the user reports.
    assert fixed["loss"] == pytest.approx(broken["loss"], rel=1e-5)


@pytest.mark.warp
def test_a_fixture_runs_and_prints_a_loss_trajectory(tmp_path):
    case = SUITE.case("heat_rod_conductivity")
    proc = subprocess.run(
        [sys.executable, case.entry],
        check=False,
        cwd=SUITE.workspace(str(case.id)),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        env=os.environ | {"PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    losses = [float(m.group(1)) for m in re.finditer(r"misfit ([0-9.eE+-]+)", proc.stdout)]
    assert len(losses) >= 10


def test_the_suite_covers_every_signature_table_row_with_at_least_24_positive_cases():
    positives = [c for c in SUITE.cases if c.should_trigger]
    assert len(positives) >= 24
    rows = {"zero", "nan_inf", "exact_factor", "subtly_wrong", "sparse_subset"}
    rows |= {"grows_across_iterations", "truncation", "correct"}
    assert rows <= {c.expected_signature for c in positives}
