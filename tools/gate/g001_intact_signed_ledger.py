"""G001 intact-signed-ledger. `check(verification, evidence)`: the ledger's own verification (its chain, its
signatures, the records written before ledgers named their workspace) and the records an outcome rests on."""

from __future__ import annotations

from ..ledger import LedgerCheck
from .rule import Rule


def check(verification: LedgerCheck, evidence: dict[str, int]) -> list[str]:
    """Refusals for a broken chain, unsigned records, and evidence that is not bound to this workspace."""
    return ledger_missing(verification) + unbound_missing(evidence, verification.unbound)


def ledger_missing(verification: LedgerCheck) -> list[str]:
    """A broken chain or unsigned records: nothing in the ledger can be trusted."""
    missing = [RULE.refusal(f"an intact ledger: {p}; the evidence cannot be trusted until a person resolves this")
               for p in verification.problems]
    if verification.unsigned:
        shown = ", ".join(map(str, verification.unsigned[:10])) + (", ..." if len(verification.unsigned) > 10 else "")
        missing.append(RULE.refusal(
            f"records signed with this machine's warpgrad key: record(s) {shown} carry no valid signature "
            f"(key {verification.key_id or 'missing'}), so they were written by something that cannot read the key "
            "(forged, or copied from another machine); a person must inspect the ledger and start a fresh one"))
    return missing


def unbound_missing(evidence: dict[str, int], unbound: list[int]) -> list[str]:
    """Evidence written before ledgers named their workspace: such a record verifies, but nothing ties it to this
    workspace (a signed old-format ledger copied from another workspace reads the same), so it cannot prove an
    outcome here. The user's old history stays readable; the checks are rerun."""
    stale = sorted(seq for seq in set(evidence.values()) if seq in set(unbound))
    if not stale:
        return []
    return [RULE.refusal(f"evidence bound to this workspace: record(s) {', '.join(map(str, stale))} were written "
                         "before ledgers named their workspace, so nothing shows they were made here; rerun the "
                         "check and the runs (gradcheck, run_script) so the evidence is this workspace's own")]


RULE = Rule(
    id="G001", name="intact-signed-ledger",
    summary="The ledger's hash chain verifies and every record is signed with this machine's key.",
    refuses="any outcome while the ledger's chain or a signature does not verify",
    why="Records appended or rewritten by something that cannot read the key (a script in the workspace, a "
        "collaborator, a copied ledger) would otherwise prove anything.",
    satisfied_by="A ledger written only through warpgrad's tools on this machine.",
    call="none the model can make: a person inspects .warpgrad/ and starts a fresh ledger (evidence from before "
         "ledgers named their workspace: rerun gradcheck and run_script)",
    check=check,
)
