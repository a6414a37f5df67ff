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
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

# The records cross the process boundary (the tracker listener writes them): the protocol defines them.
from .harness.protocol import Site, TrackerKind, TrackerRecord, WarpLogRecord

__all__ = ["ParsedWarning", "Site", "TrackerKind", "TrackerRecord", "dedupe", "describe", "is_tracker_message",
           "parse_log", "parse_message", "record_from"]

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


def _key(r: TrackerRecord) -> tuple[str, str | None, str | None, str | None, int | None]:
    return (r.kind, r.kernel, r.argument, r.file, r.line)


def record_from(message: str, site: Mapping[str, Any] | None = None,
                extra: Mapping[str, Any] | None = None) -> TrackerRecord | None:
    """Turn one message (plus the call site that was running, and listener extras) into a record.

    `site` and `extra` are plain mappings: the tracker listener passes them as Warp's log gives them.
    """
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
        rec.read_by = Site.model_validate(extra["read_by"])
    if extra.get("iteration") is not None:
        rec.first_iteration = extra["iteration"]
    return rec


def dedupe(records: Iterable[TrackerRecord]) -> list[TrackerRecord]:
    """Merge repeats of the same overwrite (same kind, kernel, argument and location), counting them."""
    out: dict[tuple[str, str | None, str | None, str | None, int | None], TrackerRecord] = {}
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


def parse_log(warp_log: Iterable[WarpLogRecord]) -> list[TrackerRecord]:
    """Records from the harness's `warp_log`."""
    recs = []
    for entry in warp_log:
        if entry.level != "warning":
            continue
        r = record_from(entry.message, entry.site.model_dump() if entry.site is not None else None)
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
