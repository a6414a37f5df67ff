"""G009 clean-tracker. `check(ev, last_patch, patched)`: a clean overwrite-tracker run after the fix's last patch
on the patched files as they are now."""

from __future__ import annotations

from ..ledger import LedgerRecord
from ..records import TrackerEvent
from .evidence import Evidence, Findings
from .rule import Rule


def check(ev: Evidence, last_patch: LedgerRecord, patched: set[str]) -> Findings:
    out = Findings()
    trackers = [(r, e.payload) for r in ev.records
                if isinstance(e := r.event, TrackerEvent) and r.seq > last_patch.seq]
    clean = [r for r, v in trackers if v.is_clean()]
    good = [t for t in clean if ev.current(t) and (not patched or patched & set(t.files))]
    if good:
        out.evidence["tracker"] = good[-1].seq
    elif clean:
        t = clean[-1]
        why = ("lists no files" if not t.files else "is stale (files changed since)" if ev.stale(t)
               else "never imported a patched file")
        out.missing.append(RULE.refusal(
            f"a clean overwrite-tracker run on the patched files as they are now: the clean tracker run (record "
            f"{t.seq}) {why}; rerun the tracker"))
    elif trackers:
        out.missing.append(RULE.refusal(
            f"a clean overwrite-tracker run after the patch: the tracker run (record {trackers[-1][0].seq}) reported "
            "warnings or failed; fix them or explain them, then rerun the tracker"))
    else:
        out.missing.append(RULE.refusal(
            f"a clean overwrite-tracker run after the patch (record {last_patch.seq}): run the tracker (instrument) "
            "on the patched program"))
    return out


RULE = Rule(
    id="G009", name="clean-tracker",
    summary="fixed needs a clean overwrite-tracker run on the patched files.",
    refuses="`fixed` when the tracker after the patch reported overwrites",
    why="A passing FD check can hide an overwrite the tracker sees.",
    satisfied_by="instrument (the tracker) after the last patch, with no warnings; finish runs it itself when it "
                 "is missing.",
    call="finish runs the tracker itself when it is missing (instrument from the command line); warnings need a fix "
         "(edit_file)",
    check=check,
)
