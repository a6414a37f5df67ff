"""A ready edit that repairs one of two independent gradient bugs says it is partial.

Shape: a buffer without `requires_grad` on the gradient path (a mechanical repair, offered as a ready edit) and,
elsewhere, an in-place `*=`/`/=` on an array element (no mechanical repair: the result needs its own output), or a
second buffer without `requires_grad` that comes from a helper (no mechanical repair: the helper is the user's).
The first bug stops the gradient before the second matters, so the check after the ready edit alone still
fails. Diagnose must not offer that edit as the whole fix: it names what the edit leaves, and the check stays
strict (the partial repair is refused; the whole repair passes).

The programs (tests/fixtures/partial_fix/) rebuild their buffers every iteration, update the parameters on the
host and span several files; `fixed/` holds each one's whole repair, written by hand.
"""

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from warpgrad.cli.diagnose import render
from warpgrad.tools.diagnose import DiagnoseArgs, run_diagnose
from warpgrad.tools.quickchecks.base import Finding
from warpgrad.tools.ready_fix import EditCall, ReadyFix, mark_partial
from warpgrad.tools.registry import load_tools

pytestmark = pytest.mark.warp

PROGRAMS = Path(__file__).parent / "fixtures" / "partial_fix"
# program folder, entry script, the rule hit the ready edit does not touch
CASES = [("kiln_rod", "fit_conductivity.py", "WG007 inplace-mul-div at rod/model.py:27"),
         ("drifter_drag", "track_drifters.py", "WG007 inplace-mul-div at drift/physics.py:22"),
         # two buffers without requires_grad, one from a helper returning a per-pass list: the tape sees only the
         # first cut (the second is masked), the ready edit repairs only the second
         ("nozzle_sprayer", "tune_nozzles.py", "WG001 missing-requires-grad at tune_nozzles.py:19")]


@pytest.mark.parametrize(("program", "script", "left"), CASES)
def test_the_ready_edit_for_one_of_two_bugs_says_what_it_leaves_and_the_check_stays_strict(
        tmp_path, program, script, left):
    ws = tmp_path / program
    shutil.copytree(PROGRAMS / program, ws)
    tools = load_tools()
    res = run_diagnose(DiagnoseArgs(script=script, bisect="never", record=False), ws)
    assert res.gradients_wrong is True
    offered = next(h.ready_fix for h in res.hypotheses[:3] if h.ready_fix is not None)
    assert offered.rule == "WG001"
    assert offered.leaves == [left]
    text = tools["diagnose"].answer(res, "summary")
    assert len(text) <= 4000
    next_call = next(line for line in text.splitlines() if line.startswith("next: "))
    assert "only part of the repair: also fix " + left in next_call
    screen = io.StringIO()
    render(res, Console(file=screen, width=400))  # what `warpgrad diagnose` prints on a terminal
    assert "partial: it does not touch " + left in screen.getvalue()

    tools["edit_file"].call(offered.arguments.model_dump(), ws)  # the offered edit, exactly as offered
    # The edit is part of the by-hand repair: its new lines are in the repaired file.
    assert offered.arguments.new_text in (PROGRAMS / "fixed" / program / offered.arguments.path).read_text(
        encoding="utf-8")
    partial = tools["gradcheck"].call({"script": script, "record": False}, ws)
    assert partial.passed is False  # what the note warned of: the second bug is still there

    shutil.copytree(PROGRAMS / "fixed" / program, ws, dirs_exist_ok=True)  # the rest, as a user writes it
    whole = tools["gradcheck"].call({"script": script, "record": False}, ws)
    assert whole.passed is True


def _hit(code: str, path: str, line: int, severity: str = "error", confidence: str = "high") -> Finding:
    return Finding(code=code, name=f"rule-{code}", path=path, line=line, col=0, message="", reference="",
                   signatures=[], severity=severity, confidence=confidence)


def _fix(hit: Finding) -> ReadyFix:
    return ReadyFix(rule=hit.code, arguments=EditCall(path=hit.path, old_text="a", new_text="b"))


def test_only_other_error_hits_ranked_as_causes_make_an_edit_partial():
    own = _hit("WG001", "sim/buffers.py", 11)
    second_site = _hit("WG001", "sim/run.py", 40)  # the same rule at another allocation: this edit leaves it
    inplace = _hit("WG007", "sim/kernels.py", 22)
    smell = _hit("WG014", "sim/kernels.py", 30, severity="warning")
    unsure = _hit("WG009", "sim/kernels.py", 35, confidence="low")
    fix, other = _fix(own), _fix(second_site)
    mark_partial([(own, fix), (second_site, other)], [own, own, second_site, inplace, smell, unsure])
    assert fix.leaves == ["WG001 rule-WG001 at sim/run.py:40", "WG007 rule-WG007 at sim/kernels.py:22"]
    assert other.leaves == ["WG001 rule-WG001 at sim/buffers.py:11", "WG007 rule-WG007 at sim/kernels.py:22"]
    alone = _fix(own)
    mark_partial([(own, alone)], [own, smell, unsure])
    assert alone.leaves == []  # the one serious cause: the edit is the whole repair
