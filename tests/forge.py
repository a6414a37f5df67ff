"""What a process that can write the workspace but not read the user's key folder can do to the ledger:
append records that chain and hash correctly and name the workspace (its id is in every record, not a
secret), but carry no valid signature and cannot move the head kept outside the workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from warpgrad.tools.ledger import GENESIS, Ledger, LedgerRecord, canonical_json, payload_json


def forge_append(ws: Path, kind: str, payload: Any, files: dict[str, str] | None = None) -> int:
    """Append one unsigned record to `ws`'s ledger by writing the file directly; returns its seq."""
    led = Ledger(ws)
    records = led.records()
    body = json.loads(payload_json(payload))
    if files is None:
        files = body.get("files") if isinstance(body.get("files"), dict) else {}
    rec = LedgerRecord(seq=len(records), time="2026-01-01T00:00:00+00:00", kind=kind, tool=kind, payload=body,
                       files=files, prev_hash=records[-1].hash if records else GENESIS,
                       workspace=records[-1].workspace if records else None, hash="")
    rec.hash = rec.compute_hash()
    with open(led.path, "ab") as f:
        f.write(canonical_json(rec.model_dump()).encode("utf-8") + b"\n")
    return rec.seq
