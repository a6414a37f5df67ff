"""Gradient hazards of one recorded tape, from its description (pure: no Warp, no I/O).

The description is what `warpgrad.tools.harness.tape_listener.TapeInspectListener.describe` writes:
launches in order, each with the arrays it passes (struct fields included) and whether the kernel's
source reads or writes them, array identity (`id`, `ptr`, byte span), content fingerprints before each
launch compared before `backward`, and writes made while the tape was open but not recorded on it.

Each hazard names its evidence and the user's code location; none decides the root cause alone.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

from pydantic import BaseModel, Field

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


def _site(d: dict[str, Any]) -> str:
    s = d.get("site") or {}
    return f"{s.get('file')}:{s.get('line')}" if s.get("file") else "unknown site"


def _loc(d: dict[str, Any]) -> tuple[str | None, int | None]:
    s = d.get("site") or {}
    return s.get("file"), s.get("line")


def _version_tuple(v: str) -> tuple[int, ...]:
    out = []
    for p in v.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


class _Memory:
    """Groups array ids that share memory (same object, or overlapping byte ranges on one device)."""

    def __init__(self, arrays: dict[str, dict[str, Any]]) -> None:
        self.parent = {k: k for k in arrays}
        spans = sorted((a["device"], a["ptr"], a["ptr"] + max(a.get("nbytes") or 0, 1), k)
                       for k, a in arrays.items() if a.get("ptr"))
        # Sweep: anything starting before the running end on the same device overlaps.
        cur_dev, cur_end, cur_key = None, -1, None
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


def _name(desc: dict[str, Any], entry: dict[str, Any]) -> str:
    arr = desc["arrays"].get(entry["array"], {})
    # Arrays reached through containers the name search cannot see (pool[t], self.buf[k]) keep their role.
    return entry.get("user_name") or arr.get("name") or f"{_arg_label(entry)} ({entry['array']})"


def _arg_label(entry: dict[str, Any]) -> str:
    return f"{entry['arg']}.{entry['field']}" if entry.get("field") else entry["arg"]


def hazards(desc: dict[str, Any]) -> list[Hazard]:
    """All hazards of one tape description, most severe first."""
    launches: list[dict[str, Any]] = desc.get("launches", [])
    arrays: dict[str, dict[str, Any]] = desc.get("arrays", {})
    mem = _Memory(arrays)
    g = mem.group
    out: dict[tuple, Hazard] = {}

    def add(key: tuple, make) -> None:
        if key in out:
            out[key].count += 1
        else:
            out[key] = make()

    # ---------------------------------------------------------------- stale launches (tape reused)
    bi = desc.get("backward_index")
    stale = [d for d in launches if d.get("recorded_backward_index") is not None and bi is not None
             and d["recorded_backward_index"] < bi]
    if stale:
        first = stale[0]
        file, line = _loc(first)
        out[("stale",)] = Hazard(
            kind="stale_launches", severity="error", rule="WG003", file=file, line=line,
            message=f"the tape still holds {len(stale)} launches recorded before an earlier backward: it is reused "
                    "without tape.reset() (or a new wp.Tape()), so backward replays old launches again",
            launches=[d["index"] for d in stale[:10]],
            evidence=[(f"{len(stale)} of {len(launches)} launches were recorded before backward call "
                       f"{first.get('recorded_backward_index')}; this backward is call {bi}")])

        # The old launches' own hazards are consequences of the reuse; analyse this iteration's launches.
        stale_idx = {d["index"] for d in stale}
        launches = [d for d in launches if d["index"] not in stale_idx]

    # ---------------------------------------------------------------- liveness from the loss
    loss_groups = {g(a) for a in desc.get("loss", [])}
    feeds: dict[int, bool] = {}
    live = set(loss_groups)
    for d in reversed(launches):
        writes = {g(e["array"]) for e in d["arrays"] if e["written"]}
        reads = {g(e["array"]) for e in d["arrays"] if e["read"]}
        f = bool(writes & live)
        feeds[d["index"]] = f
        if f:
            live |= reads
    have_loss = bool(loss_groups)

    # ---------------------------------------------------------------- write-after-read across launches
    reads_so_far: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    for d in launches:
        for w in d["arrays"]:
            if not w["written"]:
                continue
            for rd, re_ in reads_so_far.get(g(w["array"]), []):
                if rd["index"] == d["index"]:
                    continue
                same_obj = re_["array"] == w["array"]
                rname, wname = _name(desc, re_), _name(desc, w)
                struct = bool(re_.get("field") or w.get("field"))
                if struct:
                    rule = "WG019"
                elif not same_obj:
                    rule = "WG017"
                elif d["type"] == "copy":
                    rule = "WG006"
                elif rname != wname:
                    rule = "WG005"
                else:
                    rule = None
                changed = re_.get("changed_since_launch")
                sev: Severity = "error" if changed else "info" if changed is False else "warning"
                key = ("war", rd.get("kernel"), _site(rd), re_["arg"], re_.get("field"), d.get("kernel"), _site(d),
                       w["arg"], w.get("field"))

                def make(d=d, rd=rd, re_=re_, w=w, rname=rname, wname=wname, same_obj=same_obj, struct=struct,
                         rule=rule, changed=changed, sev=sev) -> Hazard:
                    ev = [(f"launch {rd['index']} ({rd.get('kernel')} at {_site(rd)}) reads {rname} as argument "
                           f"{_arg_label(re_)}"),
                          (f"launch {d['index']} ({d.get('kernel')} at {_site(d)}) later writes {wname} as argument "
                           f"{_arg_label(w)}" + (" (a copy)" if d["type"] == "copy" else ""))]
                    if not same_obj:
                        a, b = arrays.get(re_["array"], {}), arrays.get(w["array"], {})
                        ev.append(f"{rname} and {wname} are different array objects sharing memory (ptr {a.get('ptr')} "
                                  f"[{a.get('nbytes')} B] and {b.get('ptr')} [{b.get('nbytes')} B]): a ptr= alias or a view")
                    elif rname != wname:
                        ev.append(f"one buffer under two names ({rname}, {wname}): Python rebinding, e.g. ping-pong "
                                  "buffers swapped inside the tape")
                    if struct:
                        ev.append("the array is held in a wp.struct field: Warp's overwrite tracker cannot see it")
                    if not struct and not re_.get("tracker_sees_read", True):
                        ev.append("the read is invisible to Warp's tracker (left operand of a binary op, in-place op "
                                  "or struct field)")
                    if changed:
                        ev.append("its values changed between that read and backward: the backward replay of launch "
                                  f"{rd['index']} reads the overwritten values")
                    elif changed is False:
                        ev.append("its values at backward equal those read (harmless in this run)")
                    file, line = _loc(d)
                    return Hazard(kind="write_after_read", severity=sev, rule=rule, file=file, line=line,
                                  message=f"{d.get('kernel')} at {_site(d)} overwrites {wname}, which "
                                          f"{rd.get('kernel')} at {_site(rd)} read earlier on the same tape",
                                  launches=[rd["index"], d["index"]], arrays=sorted({rname, wname}), evidence=ev)

                add(key, make)
        # Reads before this write were reported against it; a later write clobbers only what this one
        # wrote, which keeps the pairing linear in the tape length.
        written_groups = {g(w["array"]) for w in d["arrays"] if w["written"]}
        for grp in written_groups:
            reads_so_far.pop(grp, None)
        for e in d["arrays"]:
            if e["read"] and g(e["array"]) not in written_groups:
                lst = reads_so_far[g(e["array"])]
                if not lst or lst[-1][0]["index"] != d["index"]:
                    lst.append((d, e))

    # ---------------------------------------------------------------- within one kernel
    for d in launches:
        if d["type"] != "kernel":
            continue
        for e in d["arrays"]:
            if e.get("inplace"):
                key = ("inplace", d.get("kernel"), e["arg"], e.get("field"))
                add(key, lambda d=d, e=e: Hazard(
                    kind="inplace_update", severity="warning", rule="WG007", file=_site_file(d, e), line=_site_line(d, e),
                    message=f"kernel {d.get('kernel')} updates {_arg_label(e)} in place (*=, /=): Warp does not "
                            "differentiate it, so the gradient of the other factor is wrong",
                    launches=[d["index"]], arrays=[_name(desc, e)],
                    evidence=[f"write lines {e.get('write_lines')} in {d.get('kernel_def')}",
                              "Warp's tracker treats it as a pure write and does not warn"]))
            elif e.get("write_after_read"):
                key = ("within", d.get("kernel"), e["arg"], e.get("field"))
                # `x[i] = x[i] + c` reads only as a left operand (Warp exempts it; a linear update needs no
                # value in backward); any other read before the write is replayed from the overwritten value.
                value_read = e.get("value_read", True)
                add(key, lambda d=d, e=e, value_read=value_read: Hazard(
                    kind="within_kernel_overwrite", severity="error" if value_read else "warning",
                    rule="WG019" if e.get("field") else None, file=_site_file(d, e), line=_site_line(d, e),
                    message=f"kernel {d.get('kernel')} writes {_arg_label(e)} after reading it in the same kernel",
                    launches=[d["index"]], arrays=[_name(desc, e)],
                    evidence=[(f"reads at lines {e.get('read_lines')}, writes at lines {e.get('write_lines')} "
                               f"({d.get('kernel_def')})"),
                              ("the backward replay reads the overwritten value" if value_read else
                               "the reads are left operands only (x[i] = x[i] + ...): harmless when the update is linear")]
                    + ([] if e.get("tracker_sees_read") else ["Warp's tracker does not see this read"])))

    # ---------------------------------------------------------------- mutation between recording and backward
    untaped = desc.get("untaped_writes", [])
    taped_writes: dict[str, list[int]] = defaultdict(list)
    for d in launches:
        for e in d["arrays"]:
            if e["written"]:
                taped_writes[g(e["array"])].append(d["index"])
    for d in launches:
        own_writes = {g(e["array"]) for e in d["arrays"] if e["written"]}
        for e in d["arrays"]:
            # An array the launch rewrites itself is the in-kernel hazard; one a later taped launch rewrites is
            # write-after-read. Only what changed with no taped writer is a mutation outside the tape.
            if not e["read"] or g(e["array"]) in own_writes:
                continue
            if any(k > d["index"] for k in taped_writes.get(g(e["array"]), [])):
                continue
            culprits = [u for u in untaped if u.get("after_launch", -1) >= d["index"]
                        and any(g(a) == g(e["array"]) for a in u["arrays"])]
            changed = e.get("changed_since_launch")
            if not culprits and not changed:
                continue
            name = _name(desc, e)
            if culprits:
                u = culprits[0]
                key = ("mut", g(e["array"]), u["kernel"], (u.get("site") or {}).get("line"))
                where = f"{u['kernel']} at {(u.get('site') or {}).get('file')}:{(u.get('site') or {}).get('line')}"
                file, line = (u.get("site") or {}).get("file"), (u.get("site") or {}).get("line")
                ev = [f"launch {d['index']} ({d.get('kernel')} at {_site(d)}) read {name}",
                      f"then {where} wrote it without being recorded ({u.get('why')})"]
            else:
                key = ("mut", g(e["array"]), "host")
                where = "a host write (assign, fill_, zero_, a numpy view, or a launch warpgrad did not see)"
                file, line = _loc(d)
                ev = [f"launch {d['index']} ({d.get('kernel')} at {_site(d)}) read {name}",
                      "no recorded launch or copy wrote it afterwards"]
            if changed:
                ev.append("its values changed between that read and backward (fingerprint)")
            elif changed is False:
                ev.append("its values at backward equal those read (harmless in this run)")
            sev: Severity = "error" if changed else "info" if changed is False else "warning"
            add(key, lambda sev=sev, file=file, line=line, name=name, where=where, d=d, ev=ev: Hazard(
                kind="mutated_before_backward", severity=sev, rule=None, file=file, line=line,
                message=f"{name} was read by a taped launch and then changed by {where} before backward",
                launches=[d["index"]], arrays=[name], evidence=ev))

    # ---------------------------------------------------------------- launches that do not feed the loss
    if have_loss:
        for d in launches:
            if feeds.get(d["index"]) or d["type"] == "func":
                continue
            key = ("nofeed", d.get("kernel"), _site(d))
            file, line = _loc(d)
            add(key, lambda d=d, file=file, line=line: Hazard(
                kind="not_feeding_loss", severity="info", file=file, line=line,
                message=f"{d.get('kernel')} at {_site(d)} is recorded on the tape but nothing it writes reaches the "
                        "loss (housekeeping inside the tape scope?)",
                launches=[d["index"]],
                arrays=[_name(desc, e) for e in d["arrays"] if e["written"]][:4],
                evidence=[("its adjoint still runs in backward; move it out of the `with tape:` block or launch it "
                           "with record_tape=False if it is not part of the objective")]))

    # ---------------------------------------------------------------- recorded twice / stale launches
    last_by_sig: dict[str, dict] = {}
    for d in launches:
        sig = d.get("signature")
        prev = last_by_sig.get(sig) if sig else None
        if prev is not None:
            touched = {g(e["array"]) for e in prev["arrays"]}
            between = [x for x in launches if prev["index"] < x["index"] < d["index"]
                       if any(e["written"] and g(e["array"]) in touched for e in x["arrays"])]
            own_writes = any(e["written"] and e["read"] for e in d["arrays"])
            if not between and not own_writes:
                key = ("twice", d.get("kernel"), _site(prev), _site(d))
                file, line = _loc(d)
                outs = [e for e in d["arrays"] if e["written"]]
                retained = [_name(desc, e) for e in outs if arrays.get(e["array"], {}).get("retain_grad")]
                accumulating = [_name(desc, e) for e in outs if e.get("accumulate_only")]
                old_warp = _version_tuple(desc.get("warp_version") or "0") < (1, 13)
                if retained or old_warp:
                    sev2: Severity = "error"
                    why = (f"{', '.join(retained)} keep(s) retain_grad=True, so the gradient is not consumed by the first "
                           "adjoint and is counted twice" if retained else
                           f"Warp {desc.get('warp_version')} < 1.13 does not consume store gradients: counted twice")
                elif accumulating:
                    sev2 = "warning"
                    why = (f"{', '.join(accumulating)} accumulate(s) (+=/atomic): the value and its gradient are both "
                           "doubled (consistent with each other, but the objective is not the intended one)")
                else:
                    sev2 = "info"
                    why = ("plain stores only: since Warp 1.13 the first adjoint consumes the output gradient, so the "
                           "duplicate is inert for gradients (it still costs a launch)")
                add(key, lambda d=d, prev=prev, file=file, line=line, sev2=sev2, why=why: Hazard(
                    kind="recorded_twice", severity=sev2, rule="WG018" if sev2 == "error" else None, file=file,
                    line=line,
                    message=f"{d.get('kernel')} is recorded twice with the same arrays and arguments "
                            f"(launches {prev['index']} and {d['index']})",
                    launches=[prev["index"], d["index"]],
                    evidence=[f"first at {_site(prev)}, again at {_site(d)}", why]))
        if sig:
            last_by_sig[sig] = d
    # ---------------------------------------------------------------- gradient chain cut
    for d in launches:
        if d["type"] != "kernel" or d.get("backward_enabled", True):
            continue
        diff_in = [e for e in d["arrays"] if e["read"] and arrays.get(e["array"], {}).get("requires_grad")]
        reaches = feeds.get(d["index"]) if have_loss else None
        sev: Severity = "error" if diff_in and reaches is not False else "info"
        key = ("bwd_off", d.get("kernel"))
        file, line = _loc(d)
        by = d.get("backward_disabled_by") or "kernel"
        add(key, lambda d=d, sev=sev, file=file, line=line, by=by, diff_in=diff_in, reaches=reaches: Hazard(
            kind="chain_cut_backward_disabled", severity=sev, rule="WG002", file=file, line=line,
            message=f"kernel {d.get('kernel')} has its backward disabled ({'module option' if by == 'module' else 'kernel option'} "
                    "enable_backward=False): backward skips it and the gradient stops there",
            launches=[d["index"]], arrays=[_name(desc, e) for e in diff_in][:4],
            evidence=[f"defined at {d.get('kernel_def')}",
                      f"reads arrays that require grad: {', '.join(_name(desc, e) for e in diff_in) or 'none'}",
                      "it feeds the loss" if reaches else "it does not feed the loss" if reaches is False
                      else "no loss array was identified"]))
    writers: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    for d in launches:
        for e in d["arrays"]:
            if e["written"]:
                writers[g(e["array"])].append((d, e))
    for d in launches:
        for e in d["arrays"]:
            if not e["read"]:
                continue
            a = arrays.get(e["array"], {})
            if a.get("requires_grad") or not differentiable_dtype(a.get("dtype", "")):
                continue
            ws = [(w, we) for w, we in writers.get(g(e["array"]), []) if w["index"] < d["index"]
                  and any(x["read"] and arrays.get(x["array"], {}).get("requires_grad") for x in w["arrays"])]
            if not ws:
                continue
            reaches = feeds.get(d["index"]) if have_loss else None
            if reaches is False:
                continue
            w, we = ws[-1]
            name = _name(desc, e)
            # One hazard per writer/reader pair of call sites: a per-step buffer allocated in a loop is one bug.
            key = ("cut_rg", w.get("kernel"), _site(w), we["arg"], d.get("kernel"), _site(d), e["arg"])
            file, line = _loc(w)
            add(key, lambda d=d, e=e, w=w, name=name, file=file, line=line, reaches=reaches: Hazard(
                kind="chain_cut_requires_grad", severity="error" if reaches else "warning", rule="WG001",
                file=file, line=line,
                message=f"{name} is computed from arrays that require grad ({w.get('kernel')} at {_site(w)}) and read "
                        f"by {d.get('kernel')} at {_site(d)}, but it has requires_grad=False: the gradient stops there",
                launches=[w["index"], d["index"]], arrays=[name],
                evidence=[f"{name}: shape {arrays.get(e['array'], {}).get('shape')}, requires_grad=False, no .grad",
                          "the reading launch feeds the loss" if reaches else "no loss array was identified"]))
    for u in untaped:
        if u["kind"] != "copy" or "did not record" not in u.get("why", "") or not u.get("src_requires_grad"):
            continue
        # Only a copy whose result a later taped launch reads can cut a chain (wp.array(list) copies internally).
        if not any(d["index"] > u.get("after_launch", -1) and any(e["read"] and g(e["array"]) in
                                                                  {g(a) for a in u["arrays"]} for e in d["arrays"])
                   for d in launches):
            continue
        file, line = (u.get("site") or {}).get("file"), (u.get("site") or {}).get("line")
        names = [arrays.get(a, {}).get("name") or a for a in u["arrays"]]
        add(("cut_copy", file, line), lambda file=file, line=line, names=names, u=u: Hazard(
            kind="chain_cut_requires_grad", severity="warning", rule="WG001", file=file, line=line,
            message=f"wp.copy at {file}:{line} ran inside the tape but was not recorded (source or destination has no "
                    ".grad): no gradient flows through it",
            arrays=names, evidence=[u.get("why", "")]))

    # ---------------------------------------------------------------- retain_grad written more than once
    for grp, ws in writers.items():
        rg = [(w, we) for w, we in ws if arrays.get(we["array"], {}).get("retain_grad")]
        if len(ws) < 2 or not rg or all(we.get("accumulate_only") for _, we in ws):
            continue
        w, we = rg[0]
        name = _name(desc, we)
        file, line = _loc(ws[-1][0])
        out[("retain", grp)] = Hazard(
            kind="retain_grad_rewritten", severity="warning", rule="WG018", file=file, line=line,
            message=f"{name} has retain_grad=True and is written by {len(ws)} launches on the tape: retained "
                    "gradients are not consumed, so each write's adjoint adds the same gradient again",
            launches=[x["index"] for x, _ in ws][:10], arrays=[name],
            evidence=[f"written at {', '.join(_site(x) for x, _ in ws[:5])}"])

    # ---------------------------------------------------------------- copies and clones on the tape
    version = _version_tuple(desc.get("warp_version") or "0")
    readers_of: dict[str, list[dict]] = defaultdict(list)
    for d in launches:
        for e in d["arrays"]:
            if e["read"]:
                readers_of[g(e["array"])].append(d)
    for d in launches:
        if d["type"] != "copy":
            continue
        src = next(e for e in d["arrays"] if e["arg"] == "src")
        dst = next(e for e in d["arrays"] if e["arg"] == "dest")
        others = [x for x in readers_of.get(g(src["array"]), []) if x["index"] != d["index"]]
        old = version < (1, 17)
        sev: Severity = "error" if old and others else "info"
        file, line = _loc(d)
        ev = [f"copies {_name(desc, src)} into {_name(desc, dst)}"]
        if old:
            ev.append(f"Warp {desc.get('warp_version')} < 1.17: the copy adjoint overwrites the source gradient "
                      "instead of accumulating, so other readers of the source lose their gradient"
                      if others else f"Warp {desc.get('warp_version')} < 1.17, but the copy is the only reader of its "
                      "source, which is the case old versions get right")
        else:
            ev.append(f"Warp {desc.get('warp_version')} ≥ 1.17 accumulates copy adjoints correctly")
        if others:
            ev.append(f"the source is also read by {', '.join(str(x.get('kernel')) for x in others[:3])}")
        add(("copy", file, line), lambda d=d, sev=sev, file=file, line=line, ev=ev, src=src, dst=dst: Hazard(
            kind="copy_on_tape", severity=sev, rule="WG006" if sev == "error" else None, file=file, line=line,
            message=f"wp.copy/clone recorded on the tape at {_site(d)}",
            launches=[d["index"]], arrays=[_name(desc, src), _name(desc, dst)], evidence=ev))

    for h in out.values():
        h.reference = REFERENCES.get(h.kind)
    return sorted(out.values(), key=lambda h: (_ORDER[h.severity], h.launches[:1] or [10**9]))


def differentiable_dtype(name: str) -> bool:
    """Float scalars, vectors, matrices... (integer and bool arrays never carry gradients)."""
    n = name.lower()
    if n.startswith(("int", "uint", "bool")):
        return False
    if n.startswith(("vec", "mat", "quat", "transform", "spatial")):
        return not n.endswith(("i", "ui", "b", "ub", "s", "us", "l", "ul"))
    return True


def _site_file(d: dict[str, Any], e: dict[str, Any]) -> str | None:
    kd = d.get("kernel_def") or ""
    if e.get("write_lines") and kd:
        return kd.rpartition(":")[0]
    return _loc(d)[0]


def _site_line(d: dict[str, Any], e: dict[str, Any]) -> int | None:
    if e.get("write_lines") and d.get("kernel_def"):
        return e["write_lines"][0]
    return _loc(d)[1]
