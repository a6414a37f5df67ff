"""A ledger written by the code before the typed record kinds still verifies, and today's code writes the
same payloads to the same bytes (the record hashes and signatures of existing ledgers depend on it).

The fixture and how it was made: `tests/ledger_samples.py`.
"""

import json
import shutil
from pathlib import Path

import pytest
from ledger_samples import samples

from warpgrad.tools.ledger import Ledger, canonical_json, payload_json
from warpgrad.tools.records import InvalidEvent, OtherEvent

FIXTURE = Path(__file__).parent / "fixtures" / "ledger_v1"
# Fields the result models gained after the fixture was written: a new field adds a key to a new record, it
# does not change how the old fields serialise. Each is named here on purpose, so an unplanned one still fails.
ADDED_SINCE = {"gradcheck": {"rerun_mismatch", "evaluations_from_hub", "per_iteration", "fd_unconverged",
                             "next_steps", "tape_gradient_passed"},
               "run": {"files_changed", "metric_error"}}
# Fields added since inside the items of a payload's lists: kind -> list field -> item fields.
ADDED_IN_ITEMS = {"gradcheck": {"directions": {"status", "rounding_band", "truncation", "steps"},
                                "elements": {"status", "pick"}}}


def _old_fields(kind: str, text: str) -> str:
    """`text` (a canonical payload) without the fields `kind` gained since the fixture."""
    added = ADDED_SINCE.get(kind, set())
    payload = {k: v for k, v in json.loads(text).items() if k not in added}
    for field, item_added in ADDED_IN_ITEMS.get(kind, {}).items():
        if isinstance(payload.get(field), list):
            payload[field] = [{k: v for k, v in item.items() if k not in item_added} if isinstance(item, dict) else item
                              for item in payload[field]]
    return canonical_json(payload)


@pytest.fixture
def old_ledger(tmp_path, monkeypatch):
    # A copy of the key folder: appending writes the workspace's id and head beside the key.
    shutil.copytree(FIXTURE / "key", tmp_path / "key")
    monkeypatch.setenv("WARPGRAD_KEY_DIR", str(tmp_path / "key"))
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURE / "ws", ws)
    return Ledger(ws)


def test_a_ledger_written_by_the_previous_code_verifies_and_is_signed(old_ledger):
    records, check = old_ledger.read()
    assert check.ok and check.signed and not check.problems
    assert [r.kind for r in records] == [kind for kind, *_ in samples()]


def test_every_record_of_the_old_ledger_reads_back_as_its_typed_kind(old_ledger):
    for r in old_ledger.records():
        assert not isinstance(r.event, InvalidEvent), (r.kind, r.event)
        assert isinstance(r.event, OtherEvent) == (r.kind in ("bisect", "diagnose")), r.kind


def test_todays_serialisation_of_the_same_payloads_is_byte_identical(old_ledger):
    for rec, (kind, payload, _, _) in zip(old_ledger.records(), samples(), strict=True):
        assert _old_fields(kind, payload_json(payload)) == canonical_json(rec.payload), kind


def test_records_appended_today_store_the_same_payload_bytes_as_the_old_ledger(old_ledger, tmp_path):
    fresh = Ledger(tmp_path / "fresh")
    for old, (kind, payload, tool, files) in zip(old_ledger.records(), samples(), strict=True):
        new = fresh.append(kind, payload, tool=tool, files=files)
        assert _old_fields(kind, canonical_json(new.payload)) == canonical_json(old.payload), kind
        assert (new.tool, new.files) == (old.tool, old.files)
    assert fresh.verify().ok


def test_nan_and_inf_stay_in_the_stored_payload(old_ledger):
    line = (old_ledger.path.read_bytes().splitlines())[0]
    payload = json.loads(line)["payload"]
    assert str(payload["max_rel_error"]) == "nan" and payload["max_abs_error"] == float("inf")
