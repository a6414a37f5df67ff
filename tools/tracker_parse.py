"""Warp's overwrite-tracker warnings (`wp.config.verify_autograd_array_access`), parsed into records.

Warp's text names the kernel and argument but not where the user launched it: an across-launch warning
prints the array's *values* and the kernel's `def` line (warp-facts §2.2), and it repeats once per
offending launch. The harness attaches the launch or copy call site that was executing when each
message arrived (`WarpLog`), and `warpgrad.tools.harness.tracker_listener` adds the user's name for the
array and the earlier launch that read it; this module turns either into deduplicated records.

Pure: no Warp import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

TrackerKind = Literal["within_kernel", "across_launches", "copy"]

_TAIL = r"This may corrupt gradient computation in the backward pass\.?"
_WITHIN = re.compile(
    r"^Array passed to argument (?P<arg>\S+) in kernel (?P<kernel>\S+) at (?P<file>.+):(?P<line>\d+) is being written "
    r"to after it has been read from within the same kernel\.", re.DOTALL)
_WITHIN_BARE = re.compile(r"^Array (?P<values>.*) is being written to after it has been read from within the same "
                          r"kernel\.", re.DOTALL)
_ACROSS = re.compile(
    r"^Array (?P<values>.*) passed to argument (?P<arg>\S+) in kernel (?P<kernel>\S+) at (?P<file>.+):(?P<line>\d+) "
    r"is being written to but has already been read from in a previous launch\.", re.DOTALL)
_COPY = re.compile(
    r"^Array (?P<values>.*) is being written to by (?P<op>.+?) at (?P<file>.+):(?P<line>\d+) but has already been read "
    r"from in a previous launch\.", re.DOTALL)
_BARE = re.compile(r"^Array (?P<values>.*) is being written to but has already been read from in a previous launch\.",
                   re.DOTALL)


class ParsedWarning(BaseModel):
    """One tracker message, as Warp wrote it."""

    kind: TrackerKind
    kernel: str | None = None
    argument: str | None = None
    file: str | None = Field(None, description="The file Warp names: the offending write (within a kernel), the "
                                               "kernel's def (across launches) or the copy call (copy).")
    line: int | None = None
    values: str | None = Field(None, description="The array's contents Warp printed (after the offending write).")
    operation: str | None = None


def parse_message(message: str) -> ParsedWarning | None:
    """Parse one Warp warning; None when it is not an overwrite-tracker message."""
    msg = message.strip()
    msg = msg.removeprefix("Warp UserWarning: ")
    m = _WITHIN.match(msg)
    if m:
        return ParsedWarning(kind="within_kernel", kernel=m["kernel"], argument=m["arg"], file=m["file"],
                             line=int(m["line"]))
    m = _ACROSS.match(msg)
    if m:
        return ParsedWarning(kind="across_launches", kernel=m["kernel"], argument=m["arg"], file=m["file"],
                             line=int(m["line"]), values=m["values"][:300])
    m = _COPY.match(msg)
    if m:
        return ParsedWarning(kind="copy", file=m["file"], line=int(m["line"]), values=m["values"][:300],
                             operation=m["op"])
    m = _WITHIN_BARE.match(msg)
    if m:
        return ParsedWarning(kind="within_kernel", values=m["values"][:300])
    m = _BARE.match(msg)
    if m:
        return ParsedWarning(kind="across_launches", values=m["values"][:300])
    return None


class Site(BaseModel):
    file: str | None = None
    line: int | None = None
    func: str | None = None
    kernel: str | None = None


class TrackerRecord(BaseModel):
    """One distinct overwrite the tracker reported, with how often it fired."""

    kind: TrackerKind = Field(description="within_kernel: an argument written after being read in the same kernel "
                              "(found at codegen, no tape needed); across_launches: a launch on the tape writes an "
                              "array an earlier taped launch read; copy: a wp.copy onto an array read earlier on the tape.")
    kernel: str | None = Field(None, description="The kernel that writes (None for a copy).")
    argument: str | None = Field(None, description="The kernel argument written.")
    array: str | None = Field(None, description="The user's variable name of the array written, where it could be found.")
    file: str | None = Field(None, description="Where to look: the user's launch or copy call (across launches, copy), "
                             "or the offending write statement in the kernel (within a kernel).")
    line: int | None = None
    func: str | None = Field(None, description="The Python function containing the call site.")
    kernel_def: str | None = Field(None, description="file:line Warp printed (the kernel's def line, across launches).")
    read_by: Site | None = Field(None, description="The earlier taped launch that read the array (its call site).")
    triggered_at: Site | None = Field(None, description="For within_kernel: the launch whose module build emitted it.")
    count: int = Field(1, description="How many times Warp printed it (Warp does not deduplicate).")
    first_iteration: int | None = Field(None, description="Training iteration of the first occurrence.")
    values: str | None = Field(None, description="The array contents Warp printed on the first occurrence (truncated).")
    message: str = Field("", description="Warp's first message, truncated.")


def _key(r: TrackerRecord) -> tuple:
    return (r.kind, r.kernel, r.argument, r.file, r.line)


def record_from(message: str, site: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> TrackerRecord | None:
    """Turn one message (plus the call site that was running, and listener extras) into a record."""
    p = parse_message(message)
    if p is None:
        return None
    site = site or {}
    extra = extra or {}
    rec = TrackerRecord(kind=p.kind, kernel=p.kernel or site.get("kernel"), argument=p.argument,
                        values=p.values, message=message.strip()[:500])
    if p.kind == "within_kernel":
        rec.file, rec.line = p.file, p.line
        if site.get("file"):
            rec.triggered_at = Site(file=site.get("file"), line=site.get("line"), func=site.get("func"),
                                    kernel=site.get("kernel"))
    elif p.kind == "across_launches":
        rec.kernel_def = f"{p.file}:{p.line}" if p.file else None
        # Warp names the kernel's def; the launch that was running is the user's call site.
        rec.file, rec.line, rec.func = site.get("file") or p.file, site.get("line") or p.line, site.get("func")
    else:
        rec.kernel = None
        rec.file, rec.line, rec.func = p.file or site.get("file"), p.line or site.get("line"), site.get("func")
    if extra.get("array"):
        rec.array = extra["array"]
    if extra.get("read_by"):
        rec.read_by = Site(**extra["read_by"])
    if extra.get("iteration") is not None:
        rec.first_iteration = extra["iteration"]
    return rec


def dedupe(records: Iterable[TrackerRecord]) -> list[TrackerRecord]:
    """Merge repeats of the same overwrite (same kind, kernel, argument and location), counting them."""
    out: dict[tuple, TrackerRecord] = {}
    for r in records:
        k = _key(r)
        if k in out:
            prev = out[k]
            prev.count += r.count
            prev.array = prev.array or r.array
            prev.read_by = prev.read_by or r.read_by
            if prev.first_iteration is None:
                prev.first_iteration = r.first_iteration
        else:
            out[k] = r.model_copy(deep=True)
    return list(out.values())


def parse_log(warp_log: Iterable[dict[str, Any]]) -> list[TrackerRecord]:
    """Records from the harness's `warp_log` (each entry: level, message, site)."""
    recs = []
    for entry in warp_log:
        if entry.get("level") != "warning":
            continue
        r = record_from(str(entry.get("message", "")), entry.get("site"))
        if r is not None:
            recs.append(r)
    return dedupe(recs)


def is_tracker_message(message: str) -> bool:
    return parse_message(message) is not None


def describe(r: TrackerRecord) -> str:
    """One line for people."""
    where = f"{r.file}:{r.line}" if r.file else "unknown location"
    name = f" ({r.array})" if r.array else ""
    times = f" ×{r.count}" if r.count > 1 else ""
    if r.kind == "within_kernel":
        return f"{where}: kernel {r.kernel} writes argument {r.argument} after reading it in the same kernel{times}"
    if r.kind == "copy":
        return f"{where}: wp.copy overwrites an array{name} an earlier taped launch read{times}"
    by = f" (read earlier by {r.read_by.kernel} at {r.read_by.file}:{r.read_by.line})" if r.read_by else ""
    return f"{where}: launch of {r.kernel} writes argument {r.argument}{name} after an earlier taped launch read it{by}{times}"
