"""Gradient hazards of one recorded tape, from its description (pure: no Warp, no I/O).

The description is what `warpgrad.tools.harness.tape_listener.TapeInspectListener.describe` writes
(validated as `warpgrad.tools.harness.protocol.RecordedTape`):
launches in order, each with the arrays it passes (struct fields included) and whether the kernel's
source reads or writes them, array identity (`id`, `ptr`, byte span), content fingerprints before each
launch compared before `backward`, and writes made while the tape was open but not recorded on it.

Each hazard names its evidence and the user's code location; none decides the root cause alone.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from pydantic import BaseModel, Field

from .harness.protocol import LaunchArray, RecordedArray, RecordedLaunch, RecordedTape, UntapedWriteRecord

HazardKind = Literal[
    "write_after_read", "within_kernel_overwrite", "inplace_update", "mutated_before_backward", "not_feeding_loss",
    "recorded_twice", "stale_launches", "chain_cut_requires_grad", "chain_cut_backward_disabled",
    "retain_grad_rewritten", "copy_on_tape",
]
Severity = Literal["error", "warning", "info"]
_ORDER = {"error": 0, "warning": 1, "info": 2}
REFERENCES: dict[str, str] = {
    "write_after_read": "references/quick-checks.md §1",
    "within_kernel_overwrite": "references/quick-checks.md §1",
    "inplace_update": "references/quick-checks.md §5",
    "mutated_before_backward": "references/quick-checks.md §1",
    "not_feeding_loss": "references/quick-checks.md §8",
    "recorded_twice": "references/quick-checks.md §7",
    "stale_launches": "references/quick-checks.md §4",
    "chain_cut_requires_grad": "references/quick-checks.md §2",
    "chain_cut_backward_disabled": "references/quick-checks.md §3",
    "retain_grad_rewritten": "references/quick-checks.md §7",
    "copy_on_tape": "references/quick-checks.md §1",
}


class Hazard(BaseModel):
    kind: HazardKind
    severity: Severity = Field(description="error: the recorded values prove it corrupts this run's gradient, or it "
                               "always does; warning: it can; info: worth knowing.")
    rule: str | None = Field(None, description="The quick-check rule id covering the same pattern (WGnnn).")
    message: str
    file: str | None = Field(None, description="Where to look (the offending launch or copy call).")
    line: int | None = None
    launches: list[int] = Field(default_factory=list, description="Tape indices involved (first occurrence).")
    arrays: list[str] = Field(default_factory=list, description="User names (or ids) of the arrays involved.")
    evidence: list[str] = []
    count: int = Field(1, description="Occurrences merged into this hazard.")
    tape: int | None = Field(None, description="Which described tape (0-based) when an iteration has several.")
    reference: str | None = Field(None, description="Where the skill's references explain the pattern and its fix.")


Key = tuple[object, ...]
Use = tuple[RecordedLaunch, LaunchArray]  # a launch and one array it passes


def _site(d: RecordedLaunch) -> str:
    return f"{d.site.file}:{d.site.line}" if d.site.file else "unknown site"


def _loc(d: RecordedLaunch) -> tuple[str | None, int | None]:
    return d.site.file, d.site.line


def _version_tuple(v: str) -> tuple[int, ...]:
    out = []
    for p in v.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def _severity(changed: bool | None) -> Severity:
    """How bad a read whose values may have changed is: proven (error), proven harmless (info), unknown (warning)."""
    return "error" if changed else "info" if changed is False else "warning"


class _Memory:
    """Groups array ids that share memory (same object, or overlapping byte ranges on one device)."""

    def __init__(self, arrays: dict[str, RecordedArray]) -> None:
        self.parent = {k: k for k in arrays}
        spans = sorted((a.device, a.ptr, a.ptr + max(a.nbytes or 0, 1), k) for k, a in arrays.items() if a.ptr)
        # Sweep: anything starting before the running end on the same device overlaps.
        cur_dev: str | None = None
        cur_end, cur_key = -1, ""
        for dev, start, end, key in spans:
            if dev == cur_dev and start < cur_end:
                self._union(key, cur_key)
                cur_end = max(cur_end, end)
            else:
                cur_dev, cur_end, cur_key = dev, end, key

    def _find(self, k: str) -> str:
        while self.parent.setdefault(k, k) != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def _union(self, a: str, b: str) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self.parent[ra] = rb

    def group(self, k: str) -> str:
        return self._find(k)


def _arg_label(entry: LaunchArray) -> str:
    return f"{entry.arg}.{entry.field}" if entry.field else entry.arg


class _Tape:
    """One tape description as the hazard rules read it: memory groups, liveness from the loss, and the
    hazards found so far (a repeat of a hazard's key counts instead of adding one)."""

    def __init__(self, desc: RecordedTape) -> None:
        self.desc = desc
        self.launches = list(desc.launches)
        self.mem = _Memory(desc.arrays)
        self.found: dict[Key, Hazard] = {}
        self.feeds: dict[int, bool] = {}
        self.have_loss = False

    def g(self, array_id: str) -> str:
        """The memory group of an array id."""
        return self.mem.group(array_id)

    def array(self, array_id: str) -> RecordedArray:
        return self.desc.array(array_id)

    def name(self, entry: LaunchArray) -> str:
        # Arrays reached through containers the name search cannot see (pool[t], self.buf[k]) keep their role.
        return entry.user_name or self.array(entry.array).name or f"{_arg_label(entry)} ({entry.array})"

    def repeat(self, key: Key) -> bool:
        """True (and counted) when a hazard with this key was already found."""
        h = self.found.get(key)
        if h is None:
            return False
        h.count += 1
        return True

    def add(self, key: Key, hazard: Hazard) -> None:
        if not self.repeat(key):
            self.found[key] = hazard

    def writers(self) -> dict[str, list[Use]]:
        """Memory group -> the launches that write it, in tape order."""
        out: dict[str, list[Use]] = defaultdict(list)
        for d in self.launches:
            for e in d.arrays:
                if e.written:
                    out[self.g(e.array)].append((d, e))
        return out


def hazards(desc: RecordedTape) -> list[Hazard]:
    """All hazards of one tape description, most severe first."""
    t = _Tape(desc)
    _stale_launches(t)  # first: the other rules look at this iteration's launches only
    _liveness(t)
    _write_after_read(t)
    _within_kernel(t)
    _mutated_before_backward(t)
    _not_feeding_loss(t)
    _recorded_twice(t)
    _backward_disabled(t)
    writers = t.writers()
    _requires_grad_cut(t, writers)
    _untaped_copy_cut(t)
    _retain_grad_rewritten(t, writers)
    _copies_on_tape(t)
    for h in t.found.values():
        h.reference = REFERENCES.get(h.kind)
    return sorted(t.found.values(), key=lambda h: (_ORDER[h.severity], h.launches[:1] or [10**9]))


def _stale_launches(t: _Tape) -> None:
    """A tape reused without reset() replays launches recorded before an earlier backward."""
    bi = t.desc.backward_index
    stale = [d for d in t.launches if d.recorded_backward_index is not None and bi is not None
             and d.recorded_backward_index < bi]
    if not stale:
        return
    first = stale[0]
    file, line = _loc(first)
    t.found[("stale",)] = Hazard(
        kind="stale_launches", severity="error", rule="WG003", file=file, line=line,
        message=f"the tape still holds {len(stale)} launches recorded before an earlier backward: it is reused "
                "without tape.reset() (or a new wp.Tape()), so backward replays old launches again",
        launches=[d.index for d in stale[:10]],
        evidence=[(f"{len(stale)} of {len(t.launches)} launches were recorded before backward call "
                   f"{first.recorded_backward_index}; this backward is call {bi}")])
    # The old launches' own hazards are consequences of the reuse; analyse this iteration's launches.
    stale_idx = {d.index for d in stale}
    t.launches = [d for d in t.launches if d.index not in stale_idx]


def _liveness(t: _Tape) -> None:
    """Which launches write something the loss depends on (backwards from the seeded arrays)."""
    loss_groups = {t.g(a) for a in t.desc.loss}
    live = set(loss_groups)
    for d in reversed(t.launches):
        writes = {t.g(e.array) for e in d.arrays if e.written}
        reads = {t.g(e.array) for e in d.arrays if e.read}
        f = bool(writes & live)
        t.feeds[d.index] = f
        if f:
            live |= reads
    t.have_loss = bool(loss_groups)


def _write_after_read(t: _Tape) -> None:
    """A taped launch overwrites memory an earlier taped launch read: that launch's backward reads the new values."""
    reads_so_far: dict[str, list[Use]] = defaultdict(list)
    for d in t.launches:
        for w in d.arrays:
            if not w.written:
                continue
            for rd, re_ in reads_so_far.get(t.g(w.array), []):
                if rd.index == d.index:
                    continue
                key = ("war", rd.kernel, _site(rd), re_.arg, re_.field, d.kernel, _site(d), w.arg, w.field)
                if not t.repeat(key):
                    t.found[key] = _war_hazard(t, (rd, re_), (d, w))
        # Reads before this write were reported against it; a later write clobbers only what this one
        # wrote, which keeps the pairing linear in the tape length.
        written_groups = {t.g(w.array) for w in d.arrays if w.written}
        for grp in written_groups:
            reads_so_far.pop(grp, None)
        for e in d.arrays:
            if e.read and t.g(e.array) not in written_groups:
                lst = reads_so_far[t.g(e.array)]
                if not lst or lst[-1][0].index != d.index:
                    lst.append((d, e))


def _war_rule(same_obj: bool, struct: bool, copy: bool, renamed: bool) -> str | None:
    """The quick-check rule that covers this shape of write-after-read (None: plain, Warp's tracker sees it)."""
    if struct:
        return "WG019"
    if not same_obj:
        return "WG017"
    if copy:
        return "WG006"
    return "WG005" if renamed else None


def _war_hazard(t: _Tape, read: Use, write: Use) -> Hazard:
    (rd, re_), (d, w) = read, write
    same_obj = re_.array == w.array
    rname, wname = t.name(re_), t.name(w)
    struct = bool(re_.field or w.field)
    changed = re_.changed_since_launch
    ev = [(f"launch {rd.index} ({rd.kernel} at {_site(rd)}) reads {rname} as argument {_arg_label(re_)}"),
          (f"launch {d.index} ({d.kernel} at {_site(d)}) later writes {wname} as argument {_arg_label(w)}"
           + (" (a copy)" if d.type == "copy" else ""))]
    if not same_obj:
        a, b = t.array(re_.array), t.array(w.array)
        ev.append(f"{rname} and {wname} are different array objects sharing memory (ptr {a.ptr} [{a.nbytes} B] and "
                  f"{b.ptr} [{b.nbytes} B]): a ptr= alias or a view")
    elif rname != wname:
        ev.append(f"one buffer under two names ({rname}, {wname}): Python rebinding, e.g. ping-pong buffers swapped "
                  "inside the tape")
    if struct:
        ev.append("the array is held in a wp.struct field: Warp's overwrite tracker cannot see it")
    if not struct and not re_.tracker_sees_read:
        ev.append("the read is invisible to Warp's tracker (left operand of a binary op, in-place op or struct field)")
    if changed:
        ev.append(f"its values changed between that read and backward: the backward replay of launch {rd.index} "
                  "reads the overwritten values")
    elif changed is False:
        ev.append("its values at backward equal those read (harmless in this run)")
    file, line = _loc(d)
    return Hazard(kind="write_after_read", severity=_severity(changed),
                  rule=_war_rule(same_obj, struct, d.type == "copy", rname != wname), file=file, line=line,
                  message=f"{d.kernel} at {_site(d)} overwrites {wname}, which {rd.kernel} at {_site(rd)} read "
                          "earlier on the same tape",
                  launches=[rd.index, d.index], arrays=sorted({rname, wname}), evidence=ev)


def _within_kernel(t: _Tape) -> None:
    """A kernel updates an argument in place (`*=`), or writes it after reading it: its own backward is wrong."""
    for d in t.launches:
        if d.type != "kernel":
            continue
        for e in d.arrays:
            if e.inplace:
                t.add(("inplace", d.kernel, e.arg, e.field), Hazard(
                    kind="inplace_update", severity="warning", rule="WG007", file=_site_file(d, e),
                    line=_site_line(d, e),
                    message=f"kernel {d.kernel} updates {_arg_label(e)} in place (*=, /=): Warp does not "
                            "differentiate it, so the gradient of the other factor is wrong",
                    launches=[d.index], arrays=[t.name(e)],
                    evidence=[f"write lines {e.write_lines} in {d.kernel_def}",
                              "Warp's tracker treats it as a pure write and does not warn"]))
            elif e.write_after_read:
                t.add(("within", d.kernel, e.arg, e.field), _overwrite_hazard(t, d, e))


def _overwrite_hazard(t: _Tape, d: RecordedLaunch, e: LaunchArray) -> Hazard:
    # `x[i] = x[i] + c` reads only as a left operand (Warp exempts it; a linear update needs no value in
    # backward); any other read before the write is replayed from the overwritten value.
    value_read = e.value_read
    return Hazard(
        kind="within_kernel_overwrite", severity="error" if value_read else "warning",
        rule="WG019" if e.field else None, file=_site_file(d, e), line=_site_line(d, e),
        message=f"kernel {d.kernel} writes {_arg_label(e)} after reading it in the same kernel",
        launches=[d.index], arrays=[t.name(e)],
        evidence=[f"reads at lines {e.read_lines}, writes at lines {e.write_lines} ({d.kernel_def})",
                  ("the backward replay reads the overwritten value" if value_read else
                   "the reads are left operands only (x[i] = x[i] + ...): harmless when the update is linear")]
        + ([] if e.tracker_sees_read else ["Warp's tracker does not see this read"]))


def _mutated_before_backward(t: _Tape) -> None:
    """An array a taped launch read changed before backward with no taped writer: an untaped launch, a copy or a
    host write."""
    taped_writes: dict[str, list[int]] = defaultdict(list)
    for d in t.launches:
        for e in d.arrays:
            if e.written:
                taped_writes[t.g(e.array)].append(d.index)
    for d in t.launches:
        own_writes = {t.g(e.array) for e in d.arrays if e.written}
        for e in d.arrays:
            # An array the launch rewrites itself is the in-kernel hazard; one a later taped launch rewrites is
            # write-after-read. Only what changed with no taped writer is a mutation outside the tape.
            if not e.read or t.g(e.array) in own_writes:
                continue
            if any(k > d.index for k in taped_writes.get(t.g(e.array), [])):
                continue
            culprits = [u for u in t.desc.untaped_writes if u.after_launch >= d.index
                        and any(t.g(a) == t.g(e.array) for a in u.arrays)]
            if culprits or e.changed_since_launch:
                _add_mutation(t, d, e, culprits[0] if culprits else None)


def _add_mutation(t: _Tape, d: RecordedLaunch, e: LaunchArray, u: UntapedWriteRecord | None) -> None:
    name = t.name(e)
    key: Key
    if u is not None:
        key = ("mut", t.g(e.array), u.kernel, u.site.line)
        where = f"{u.kernel} at {u.site.file}:{u.site.line}"
        file, line = u.site.file, u.site.line
        ev = [f"launch {d.index} ({d.kernel} at {_site(d)}) read {name}",
              f"then {where} wrote it without being recorded ({u.why})"]
    else:
        key = ("mut", t.g(e.array), "host")
        where = "a host write (assign, fill_, zero_, a numpy view, or a launch warpgrad did not see)"
        file, line = _loc(d)
        ev = [f"launch {d.index} ({d.kernel} at {_site(d)}) read {name}",
              "no recorded launch or copy wrote it afterwards"]
    changed = e.changed_since_launch
    if changed:
        ev.append("its values changed between that read and backward (fingerprint)")
    elif changed is False:
        ev.append("its values at backward equal those read (harmless in this run)")
    t.add(key, Hazard(kind="mutated_before_backward", severity=_severity(changed), rule=None, file=file, line=line,
                      message=f"{name} was read by a taped launch and then changed by {where} before backward",
                      launches=[d.index], arrays=[name], evidence=ev))


def _not_feeding_loss(t: _Tape) -> None:
    """A recorded launch whose writes never reach the loss (its adjoint still runs)."""
    if not t.have_loss:
        return
    for d in t.launches:
        if t.feeds.get(d.index) or d.type == "func":
            continue
        file, line = _loc(d)
        t.add(("nofeed", d.kernel, _site(d)), Hazard(
            kind="not_feeding_loss", severity="info", file=file, line=line,
            message=f"{d.kernel} at {_site(d)} is recorded on the tape but nothing it writes reaches the "
                    "loss (housekeeping inside the tape scope?)",
            launches=[d.index],
            arrays=[t.name(e) for e in d.arrays if e.written][:4],
            evidence=[("its adjoint still runs in backward; move it out of the `with tape:` block or launch it "
                       "with record_tape=False if it is not part of the objective")]))


def _recorded_twice(t: _Tape) -> None:
    """The same launch (kernel, arrays, arguments) recorded twice with nothing in between changing its inputs."""
    last_by_sig: dict[str, RecordedLaunch] = {}
    for d in t.launches:
        sig = d.signature
        prev = last_by_sig.get(sig) if sig else None
        if prev is not None:
            touched = {t.g(e.array) for e in prev.arrays}
            between = [x for x in t.launches if prev.index < x.index < d.index
                       if any(e.written and t.g(e.array) in touched for e in x.arrays)]
            own_writes = any(e.written and e.read for e in d.arrays)
            if not between and not own_writes:
                t.add(("twice", d.kernel, _site(prev), _site(d)), _twice_hazard(t, prev, d))
        if sig:
            last_by_sig[sig] = d


def _twice_hazard(t: _Tape, prev: RecordedLaunch, d: RecordedLaunch) -> Hazard:
    """Graded by what the duplicate adjoint does: counts twice (error), doubles value and gradient (warning),
    or nothing since Warp 1.13 consumes store gradients (info)."""
    outs = [e for e in d.arrays if e.written]
    retained = [t.name(e) for e in outs if t.array(e.array).retain_grad]
    accumulating = [t.name(e) for e in outs if e.accumulate_only]
    old_warp = _version_tuple(t.desc.warp_version or "0") < (1, 13)
    sev: Severity
    if retained or old_warp:
        sev = "error"
        why = (f"{', '.join(retained)} keep(s) retain_grad=True, so the gradient is not consumed by the first "
               "adjoint and is counted twice" if retained else
               f"Warp {t.desc.warp_version} < 1.13 does not consume store gradients: counted twice")
    elif accumulating:
        sev = "warning"
        why = (f"{', '.join(accumulating)} accumulate(s) (+=/atomic): the value and its gradient are both "
               "doubled (consistent with each other, but the objective is not the intended one)")
    else:
        sev = "info"
        why = ("plain stores only: since Warp 1.13 the first adjoint consumes the output gradient, so the "
               "duplicate is inert for gradients (it still costs a launch)")
    file, line = _loc(d)
    return Hazard(kind="recorded_twice", severity=sev, rule="WG018" if sev == "error" else None, file=file, line=line,
                  message=f"{d.kernel} is recorded twice with the same arrays and arguments "
                          f"(launches {prev.index} and {d.index})",
                  launches=[prev.index, d.index], evidence=[f"first at {_site(prev)}, again at {_site(d)}", why])


def _reaches(t: _Tape, d: RecordedLaunch) -> bool | None:
    """Whether the launch feeds the loss (None: no loss array was identified)."""
    return t.feeds.get(d.index) if t.have_loss else None


def _backward_disabled(t: _Tape) -> None:
    """A kernel with enable_backward=False on the tape: backward skips it and the chain stops there."""
    for d in t.launches:
        if d.type != "kernel" or d.backward_enabled:
            continue
        diff_in = [e for e in d.arrays if e.read and t.array(e.array).requires_grad]
        reaches = _reaches(t, d)
        sev: Severity = "error" if diff_in and reaches is not False else "info"
        file, line = _loc(d)
        by = d.backward_disabled_by or "kernel"
        t.add(("bwd_off", d.kernel), Hazard(
            kind="chain_cut_backward_disabled", severity=sev, rule="WG002", file=file, line=line,
            message=f"kernel {d.kernel} has its backward disabled ({'module option' if by == 'module' else 'kernel option'} "
                    "enable_backward=False): backward skips it and the gradient stops there",
            launches=[d.index], arrays=[t.name(e) for e in diff_in][:4],
            evidence=[f"defined at {d.kernel_def}",
                      f"reads arrays that require grad: {', '.join(t.name(e) for e in diff_in) or 'none'}",
                      "it feeds the loss" if reaches else "it does not feed the loss" if reaches is False
                      else "no loss array was identified"]))


def _requires_grad_cut(t: _Tape, writers: dict[str, list[Use]]) -> None:
    """An array computed from arrays that require grad, read by a later launch, but itself without requires_grad."""
    for d in t.launches:
        for e in d.arrays:
            if not e.read:
                continue
            a = t.array(e.array)
            if a.requires_grad or not differentiable_dtype(a.dtype):
                continue
            ws = [(w, we) for w, we in writers.get(t.g(e.array), []) if w.index < d.index
                  and any(x.read and t.array(x.array).requires_grad for x in w.arrays)]
            reaches = _reaches(t, d)
            if not ws or reaches is False:
                continue
            w, we = ws[-1]
            name = t.name(e)
            file, line = _loc(w)
            # One hazard per writer/reader pair of call sites: a per-step buffer allocated in a loop is one bug.
            t.add(("cut_rg", w.kernel, _site(w), we.arg, d.kernel, _site(d), e.arg), Hazard(
                kind="chain_cut_requires_grad", severity="error" if reaches else "warning", rule="WG001",
                file=file, line=line,
                message=f"{name} is computed from arrays that require grad ({w.kernel} at {_site(w)}) and read "
                        f"by {d.kernel} at {_site(d)}, but it has requires_grad=False: the gradient stops there",
                launches=[w.index, d.index], arrays=[name],
                evidence=[f"{name}: shape {a.shape}, requires_grad=False, no .grad",
                          "the reading launch feeds the loss" if reaches else "no loss array was identified"]))


def _untaped_copy_cut(t: _Tape) -> None:
    """A wp.copy inside the tape that Warp did not record, whose result a later taped launch reads."""
    for u in t.desc.untaped_writes:
        if u.kind != "copy" or "did not record" not in u.why or not u.src_requires_grad:
            continue
        # Only a copy whose result a later taped launch reads can cut a chain (wp.array(list) copies internally).
        groups = {t.g(a) for a in u.arrays}
        if not any(d.index > u.after_launch and any(e.read and t.g(e.array) in groups for e in d.arrays)
                   for d in t.launches):
            continue
        file, line = u.site.file, u.site.line
        t.add(("cut_copy", file, line), Hazard(
            kind="chain_cut_requires_grad", severity="warning", rule="WG001", file=file, line=line,
            message=f"wp.copy at {file}:{line} ran inside the tape but was not recorded (source or destination has no "
                    ".grad): no gradient flows through it",
            arrays=[t.array(a).name or a for a in u.arrays], evidence=[u.why]))


def _retain_grad_rewritten(t: _Tape, writers: dict[str, list[Use]]) -> None:
    """An array with retain_grad=True written by several launches: each write's adjoint adds the gradient again."""
    for grp, ws in writers.items():
        rg = [(w, we) for w, we in ws if t.array(we.array).retain_grad]
        if len(ws) < 2 or not rg or all(we.accumulate_only for _, we in ws):
            continue
        name = t.name(rg[0][1])
        file, line = _loc(ws[-1][0])
        t.found[("retain", grp)] = Hazard(
            kind="retain_grad_rewritten", severity="warning", rule="WG018", file=file, line=line,
            message=f"{name} has retain_grad=True and is written by {len(ws)} launches on the tape: retained "
                    "gradients are not consumed, so each write's adjoint adds the same gradient again",
            launches=[x.index for x, _ in ws][:10], arrays=[name],
            evidence=[f"written at {', '.join(_site(x) for x, _ in ws[:5])}"])


def _copies_on_tape(t: _Tape) -> None:
    """wp.copy/clone recorded on the tape: before Warp 1.17 its adjoint overwrites the source's gradient."""
    version = _version_tuple(t.desc.warp_version or "0")
    readers_of: dict[str, list[RecordedLaunch]] = defaultdict(list)
    for d in t.launches:
        for e in d.arrays:
            if e.read:
                readers_of[t.g(e.array)].append(d)
    for d in t.launches:
        if d.type != "copy":
            continue
        src = next(e for e in d.arrays if e.arg == "src")
        dst = next(e for e in d.arrays if e.arg == "dest")
        others = [x for x in readers_of.get(t.g(src.array), []) if x.index != d.index]
        old = version < (1, 17)
        sev: Severity = "error" if old and others else "info"
        file, line = _loc(d)
        ev = [f"copies {t.name(src)} into {t.name(dst)}"]
        if old:
            ev.append(f"Warp {t.desc.warp_version} < 1.17: the copy adjoint overwrites the source gradient "
                      "instead of accumulating, so other readers of the source lose their gradient"
                      if others else f"Warp {t.desc.warp_version} < 1.17, but the copy is the only reader of its "
                      "source, which is the case old versions get right")
        else:
            ev.append(f"Warp {t.desc.warp_version} ≥ 1.17 accumulates copy adjoints correctly")
        if others:
            ev.append(f"the source is also read by {', '.join(str(x.kernel) for x in others[:3])}")
        t.add(("copy", file, line), Hazard(
            kind="copy_on_tape", severity=sev, rule="WG006" if sev == "error" else None, file=file, line=line,
            message=f"wp.copy/clone recorded on the tape at {_site(d)}",
            launches=[d.index], arrays=[t.name(src), t.name(dst)], evidence=ev))


def differentiable_dtype(name: str) -> bool:
    """Float scalars, vectors, matrices... (integer and bool arrays never carry gradients)."""
    n = name.lower()
    if n.startswith(("int", "uint", "bool")):
        return False
    if n.startswith(("vec", "mat", "quat", "transform", "spatial")):
        return not n.endswith(("i", "ui", "b", "ub", "s", "us", "l", "ul"))
    return True


def _site_file(d: RecordedLaunch, e: LaunchArray) -> str | None:
    kd = d.kernel_def or ""
    if e.write_lines and kd:
        return kd.rpartition(":")[0]
    return d.site.file


def _site_line(d: RecordedLaunch, e: LaunchArray) -> int | None:
    if e.write_lines and d.kernel_def:
        return e.write_lines[0]
    return d.site.line
