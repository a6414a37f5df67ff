"""Ledger record kinds: each record is read as its typed kind; a malformed payload proves nothing.

And the signature names: one enum whose values are the wire strings every other place uses.
"""

import json
from pathlib import Path

from warpgrad.evals.suite import CaseMeta
from warpgrad.tools.gate import GateResult, check_finish
from warpgrad.tools.gradcheck import GradcheckResult
from warpgrad.tools.ledger import Ledger, sha256_file
from warpgrad.tools.quickchecks import RULES
from warpgrad.tools.records import (
    FinishEvent,
    GradcheckEvent,
    InvalidEvent,
    OtherEvent,
    RunEvent,
    read_event,
)
from warpgrad.tools.signatures import TABLE, Signature


def test_each_known_kind_reads_as_its_event_and_others_keep_their_payload():
    assert isinstance(read_event("gradcheck", {"ok": True, "passed": True, "signature": "correct"}), GradcheckEvent)
    assert isinstance(read_event("run", {"script": "sim.py", "loss_trajectory": [1.0, None]}), RunEvent)
    assert isinstance(read_event("finish", {"outcome": "fixed"}), FinishEvent)
    other = read_event("note", {"text": "hi", "n": [1, 2]})
    assert isinstance(other, OtherEvent) and other.payload == {"text": "hi", "n": [1, 2]}


def test_old_records_without_newer_fields_still_read_and_unknown_fields_are_ignored():
    e = read_event("gradcheck", {"ok": True, "passed": False, "iteration": 2, "field_from_the_future": 1})
    assert isinstance(e, GradcheckEvent)
    assert e.payload.objective_kind is None and e.payload.covered_iterations() == [2]
    assert e.payload.signature is None


def test_a_malformed_payload_is_an_invalid_event_not_an_error():
    e = read_event("gradcheck", {"ok": True, "passed": "perhaps", "signature": "wrongish"})
    assert isinstance(e, InvalidEvent) and "passed" in e.problem and "signature" in e.problem


def test_the_gate_does_not_count_a_malformed_check(tmp_path):
    def gate(passed: object, ws: Path) -> GateResult:
        ws.mkdir()
        (ws / "sim.py").write_text("x = 1\n")
        Ledger(ws).append("gradcheck", {"ok": True, "passed": passed, "full_horizon": True,
                                        "files": {"sim.py": sha256_file(ws / "sim.py")}})
        return check_finish(ws, "diagnosis_only")

    assert gate(True, tmp_path / "good").accepted
    bad = gate("perhaps", tmp_path / "bad")
    assert isinstance(Ledger(tmp_path / "bad").records()[0].event, InvalidEvent)
    assert not bad.accepted and "check" not in bad.evidence


def test_signature_values_are_the_wire_strings():
    assert [s.value for s in Signature] == ["correct", "zero", "nan_inf", "exact_factor", "subtly_wrong",
                                            "sparse_subset", "grows_across_iterations", "truncation",
                                            "inconclusive"]
    assert set(TABLE) == set(Signature)
    dumped = GradcheckResult(ok=True, signature=Signature.EXACT_FACTOR).model_dump_json()
    assert json.loads(dumped)["signature"] == "exact_factor"
    assert GradcheckResult.model_validate({"ok": True, "signature": "nan_inf"}).signature is Signature.NAN_INF


def test_rules_and_eval_cases_name_signatures_of_the_enum():
    assert all(isinstance(s, Signature) for r in RULES.values() for s in r.signatures)
    meta = CaseMeta(id="c", prompt="p", expected_output="o", expected_verdict="gradients_wrong",
                    expected_signature="exact_factor", expected_factor=2.0, entry="sim.py", params=["v"],
                    files=["sim.py"], root_cause=[{"file": "sim.py", "line": 1}])
    assert meta.expected_signature is Signature.EXACT_FACTOR
    assert json.loads(meta.model_dump_json())["expected_signature"] == "exact_factor"
