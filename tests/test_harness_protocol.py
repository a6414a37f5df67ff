"""The harness protocol: one set of models both processes validate against, no evidence lost in the JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from warpgrad.tools.child_process import ProcessResult, parse_result
from warpgrad.tools.diagnose import _tape_of_iteration
from warpgrad.tools.harness.main import checked_result
from warpgrad.tools.harness.protocol import (
    HARNESS_CONFIG,
    PROTOCOL_VERSION,
    BatchConfig,
    CaptureResult,
    FdConfig,
    FdOptions,
    FdResult,
    GradcheckRun,
    GradcheckTableRow,
    LaunchGradchecks,
    RecordedArray,
    RecordedLaunch,
    RecordedTape,
    RunConfig,
    TapeInspectReport,
    TapeLocalization,
)
from warpgrad.tools.tape import describe_inspection


def test_the_child_writes_numpy_values_as_numbers_and_keeps_nan_and_inf():
    doc = checked_result({"status": "completed", "files": {"a.py": "0" * 64}, "path": Path("/w/a.py"),
                          "capture": {"iteration": np.int64(1), "objective": float("nan"),
                                      "seeded_trajectory": [np.float32(1.5), float("inf")],
                                      "stale_grads": {"x": np.float64(0.25)}, "grad": np.arange(3)}}, "capture")
    back = json.loads(json.dumps(doc))  # what the parent reads
    cap = CaptureResult.model_validate(back).capture
    assert cap is not None and cap.iteration == 1 and math.isnan(cap.objective or 0.0)
    assert cap.seeded_trajectory == [1.5, math.inf] and cap.stale_grads == {"x": 0.25}
    assert back["path"] == "/w/a.py" and back["capture"]["grad"] == [0, 1, 2] and back["version"] == PROTOCOL_VERSION


def test_a_result_that_breaks_the_protocol_is_written_as_our_error():
    doc = checked_result({"status": "completed", "files": {"a.py": "0" * 64},
                          "capture": {"reached": "not a bool", "applied": []}}, "fd")
    assert doc["status"] == "harness_error" and doc["error"]["kind"] == "harness_failed"
    assert doc["files"] == {"a.py": "0" * 64}  # what the run imported is still named
    assert FdResult.model_validate(doc).capture is None


def test_configs_round_trip_by_mode_and_unknown_keys_are_refused():
    fd_cfg = FdConfig(workspace="/w", script="/w/s.py", result="/t/r.json", stderr="/t/e.txt",
                      capture=FdOptions(iteration=1))
    for cfg in (RunConfig(workspace="/w"), fd_cfg, BatchConfig(batch=[fd_cfg])):
        assert HARNESS_CONFIG.validate_json(cfg.model_dump_json()) == cfg
    with pytest.raises(ValidationError):
        RunConfig.model_validate({"workspace": "/w", "mode": "run", "captur": {}})
    with pytest.raises(ValidationError, match="needs `result` and `stderr`"):
        BatchConfig(batch=[RunConfig(workspace="/w")])


def test_a_tape_description_the_parent_cannot_read_fails_the_inspection_not_the_run(tmp_path):
    raw = {"version": PROTOCOL_VERSION, "status": "completed", "tape_inspect": {"tapes": [{"launches": [{"index": "x"}]}]}}
    res = describe_inspection(ProcessResult(argv=["python"], returncode=0), parse_result(raw, CaptureResult),
                              tmp_path, tmp_path / "s.py", [])
    assert not res.ok and "cannot read" in res.reason and res.error is None


def test_the_typed_tape_section_crosses_the_wire_with_its_iterations_and_localization():
    # As the child writes it: the listener's typed report dumped by field name (`passed`, not the alias `pass`).
    row = GradcheckTableRow(input="x", output="y", max_abs_error=0.5, max_rel_error=0.5, ad=1.0, fd=1.5, passed="FAIL")
    loc = TapeLocalization(gradcheck=LaunchGradchecks(checked=[GradcheckRun(index=0, kernel="k", status="failed",
                                                                            rows=[row])]))

    def tape(it: int) -> RecordedTape:
        return RecordedTape(iteration=it, launches=[RecordedLaunch(index=0, type="kernel", kernel="k")],
                            arrays={"a0": RecordedArray(id="a0", name="x")}, localize=loc if it == 0 else None)

    groups = {str(i): TapeInspectReport(scheme="consume", iteration=i, tapes=[tape(i)], tapes_in_iteration=1)
              for i in (0, 1)}
    section = TapeInspectReport(scheme="consume", iteration=1, tapes=[tape(1)], tapes_in_iteration=1,
                                by_iteration=groups)
    doc = json.loads(json.dumps(checked_result({"status": "completed", "tape_inspect": section.model_dump()},
                                               "capture")))
    data = CaptureResult.model_validate(doc)
    assert data.tape_inspect == section and data.tape_inspect.unreadable is None
    assert _tape_of_iteration(data, 1) is data and _tape_of_iteration(data, 5) is None
    first = _tape_of_iteration(data, 0)
    assert first is not None and first.tape_inspect is not None and first.tape_inspect.iteration == 0
    gc = first.tape_inspect.tapes[0].localize
    assert gc is not None and gc.gradcheck is not None and gc.gradcheck.checked[0].rows == [row]


def test_warp_log_keeps_typed_records_and_writes_only_warnings_and_errors_as_evidence():
    from warpgrad.tools.harness.main import WarpLog

    log = WarpLog()
    log.info("Module __main__ 1a2b3c4 load on device 'cpu' took 1.00 ms  (compiled)")
    log.warning("Array x is being written to but has already been read from in a previous launch.",
                category=UserWarning)
    log.debug("chatter")
    assert log.compiled == ["__main__"] and [r.level for r in log.records] == ["info", "warning", "debug"]
    assert log.evidence() == [{"level": "warning", "message": "Array x is being written to but has already been read "
                               "from in a previous launch.", "category": "UserWarning", "site": None}]
    assert CaptureResult.model_validate({"status": "completed", "warp_log": log.evidence()}).warp_log == log.records[1:2]
