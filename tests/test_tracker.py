"""The overwrite tracker, parsed: Warp's messages become deduplicated records at the user's call sites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warpgrad.tools import tracker_parse as tracker
from warpgrad.tools.harness.protocol import WarpLogRecord
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.tracker import InstrumentArgs, instrument, run_tracker

WITHIN = (
    "Array passed to argument a in kernel readwrite_kernel at /w/sim.py:27 is being written to after it has been "
    "read from within the same kernel. This may corrupt gradient computation in the backward pass."
)
ACROSS = (
    "Array [-1. -2.\n -3.] passed to argument x in kernel overwrite_kernel at /w/sim.py:13 is being written to but "
    "has already been read from in a previous launch. This may corrupt gradient computation in the backward pass."
)
COPY = (
    "Array [0. 0. 0.] is being written to by an array copy at /w/sim.py:112 but has already been read from in a "
    "previous launch. This may corrupt gradient computation in the backward pass."
)


def test_the_three_tracker_messages_parse_into_kind_kernel_argument_and_location():
    w, a, c = (tracker.parse_message(m) for m in (WITHIN, ACROSS, COPY))
    assert (w.kind, w.kernel, w.argument, w.file, w.line) == (
        "within_kernel",
        "readwrite_kernel",
        "a",
        "/w/sim.py",
        27,
    )
    assert (a.kind, a.kernel, a.argument, a.line) == ("across_launches", "overwrite_kernel", "x", 13)
    assert a.values == "[-1. -2.\n -3.]"
    assert (c.kind, c.file, c.line, c.operation) == ("copy", "/w/sim.py", 112, "an array copy")
    assert (
        tracker.parse_message("Running the tape backwards may produce incorrect gradients because ...")
        is None
    )


def test_across_launch_records_take_the_launch_site_not_the_kernel_def_and_repeats_are_counted():
    site = {"file": "/w/train.py", "line": 40, "func": "step", "kernel": "overwrite_kernel"}
    log = [{"level": "warning", "message": ACROSS, "site": site}] * 3 + [
        {"level": "warning", "message": ACROSS.replace("[-1. -2.\n -3.]", "[5. 6. 7.]"), "site": site},
        {"level": "info", "message": "Module x load", "site": None},
    ]
    recs = tracker.parse_log([WarpLogRecord.model_validate(r) for r in log])
    assert len(recs) == 1
    r = recs[0]
    assert (r.file, r.line, r.func, r.count) == ("/w/train.py", 40, "step", 4)
    assert r.kernel_def == "/w/sim.py:13"
    assert "train.py:40" in tracker.describe(r)


PROGRAM = """
import numpy as np
import warp as wp


@wp.kernel
def wave(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i])


@wp.kernel
def fill(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = 1.0


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])

#BUG_KERNEL

x = wp.array(np.array([0.5, 1.0, 1.5]), dtype=float, requires_grad=True)
for it in range(3):
    a = wp.zeros(3, dtype=float, requires_grad=True)
    b = wp.zeros(3, dtype=float, requires_grad=True)
    c = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(wave, 3, inputs=[x], outputs=[a])
        wp.launch(wave, 3, inputs=[a], outputs=[b])
        wp.launch(fill, 3, inputs=[TARGET])
        COPY_LINE
        wp.launch(total, 3, inputs=[b], outputs=[loss])
    tape.backward(loss)
    g = x.grad.numpy().copy()
    x.assign(x.numpy() - 0.1 * g)
"""

BUG_KERNEL = """
@wp.kernel
def negate(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = -a[i]
"""


def _write(ws: Path, name: str, bug: bool) -> str:
    src = PROGRAM.replace("#BUG_KERNEL", BUG_KERNEL if bug else "").replace("TARGET", "a" if bug else "c")
    src = src.replace("COPY_LINE", "wp.copy(a, c)" if bug else "pass")
    (ws / name).write_text(src, encoding="utf-8")
    return src


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    ws = tmp_path_factory.mktemp("tracker_ws")
    srcs = {"bug": _write(ws, "bug.py", True), "fix": _write(ws, "fix.py", False)}
    res = {k: run_tracker(ws, f"{k}.py", []) for k in ("bug", "fix")}
    res["bug_first"] = run_tracker(ws, "bug.py", [], iterations=1)
    return ws, srcs, res


@pytest.mark.warp
def test_a_buggy_program_gives_one_record_per_overwrite_at_the_users_lines(runs):
    _, srcs, res = runs
    r = res["bug"]
    assert r.ok and not r.clean, r.error
    lines = srcs["bug"].splitlines()
    by_kind = {rec.kind: rec for rec in r.records}
    # `negate` overwrites its argument in place but is never launched on a tape: its backward never runs,
    # so its codegen warning is set aside (tests/test_tracker_relevance.py covers a taped one).
    assert set(by_kind) == {"across_launches", "copy"}
    assert any("negate" in n for n in r.notes)
    across = by_kind["across_launches"]
    assert (across.kernel, across.argument, across.array, across.file) == ("fill", "a", "a", "bug.py")
    assert lines[across.line - 1].strip() == "wp.launch(fill, 3, inputs=[a])"
    assert across.count == 3 and across.first_iteration == 0  # once per iteration, one record
    assert across.read_by is not None and lines[across.read_by.line - 1].strip().startswith(
        "wp.launch(wave, 3, inputs=[a]"
    )
    copy = by_kind["copy"]
    assert (copy.array, copy.file) == ("a", "bug.py") and lines[copy.line - 1].strip() == "wp.copy(a, c)"
    assert r.n_warnings == sum(rec.count for rec in r.records)
    assert r.compiled_with_tracker and "__main__" in r.modules_compiled
    assert r.files and "bug.py" in r.files


@pytest.mark.warp
def test_the_fixed_program_is_clean(runs):
    _, _, res = runs
    r = res["fix"]
    assert r.ok and r.clean and r.records == [] and r.taped_launches == 12 and r.backward_calls == 3


@pytest.mark.warp
def test_the_instrument_tool_records_a_tracker_entry_in_the_ledger(tmp_path):
    (tmp_path / "broken.py").write_text(
        "import warp as wp\nwp.init()\nraise ValueError('nope')\n", encoding="utf-8"
    )
    r = instrument(InstrumentArgs(script="broken.py", timeout_s=60), tmp_path)
    assert not r.ok and not r.clean
    assert r.error is not None and r.error.kind == "script_raised" and "nope" in r.error.message
    rec = Ledger(tmp_path).records()[-1]
    assert rec.kind == "tracker" and rec.payload["clean"] is False
    json.dumps(rec.payload)


@pytest.mark.warp
def test_iterations_stops_the_run_after_that_many_training_iterations(runs):
    _, _, res = runs
    r = res["bug_first"]
    assert r.ok and r.backward_calls == 1
    across = next(rec for rec in r.records if rec.kind == "across_launches")
    assert across.count == 1


@pytest.mark.warp
def test_a_second_tracker_run_reuses_the_tracker_build_and_reports_the_same_overwrites(tmp_path, monkeypatch):
    monkeypatch.setenv("WARP_CACHE_PATH", str(tmp_path / "cache"))  # a cold cache: the first run must build
    monkeypatch.setenv("WARPGRAD_SHARED_KERNEL_CACHE", str(tmp_path / "cache"))  # the suite's shared one is warm
    ws = tmp_path / "ws"
    ws.mkdir()
    _write(ws, "bug.py", True)
    first, second = (run_tracker(ws, "bug.py", [], iterations=2) for _ in range(2))
    assert first.ok and second.ok, (first.error, second.error)
    assert not any("reused from the kernel cache" in n for n in first.notes)
    assert any("reused from the kernel cache" in n and "__main__" in n for n in second.notes), second.notes
    # The evidence comes from codegen, which ran again: the same records, and the within-kernel warning of
    # the untaped `negate` was seen again (and set aside) in the reused build.
    assert [r.model_dump() for r in second.records] == [r.model_dump() for r in first.records]
    assert {r.kind for r in second.records} == {"across_launches", "copy"}
    assert any("negate" in n for n in second.notes) and any("negate" in n for n in first.notes)
    assert second.compiled_with_tracker and "__main__" in second.modules_compiled


@pytest.mark.warp
def test_a_taped_in_kernel_overwrite_is_reported_once_from_a_reused_build_too(tmp_path, monkeypatch):
    from programs import HEADER

    monkeypatch.setenv("WARP_CACHE_PATH", str(tmp_path / "cache"))
    monkeypatch.setenv("WARPGRAD_SHARED_KERNEL_CACHE", str(tmp_path / "cache"))
    body = """
v = wp.array(init_v(), dtype=float, requires_grad=True)
x = wp.zeros(N, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(step_inplace, N, inputs=[x, v, 0.1])
    wp.launch(loss_k, N, inputs=[x, target], outputs=[loss])
tape.backward(loss)
"""
    (tmp_path / "train.py").write_text(HEADER + body, encoding="utf-8")
    first, second = (run_tracker(tmp_path, "train.py") for _ in range(2))
    assert any("reused from the kernel cache" in n for n in second.notes), second.notes
    for r in (first, second):
        within = [(x.kernel, x.argument, x.line, x.count) for x in r.records if x.kind == "within_kernel"]
        assert within == [("step_inplace", "x", within[0][2], 1)], r.records
    assert [r.model_dump() for r in second.records] == [r.model_dump() for r in first.records]
