"""Harness listener for the overwrite tracker: attributes each tracker warning to the user's code.

Runs inside the harness subprocess with `wp.config.verify_autograd_array_access` already set (config
`tracker: true`). After every launch and copy it parses the Warp log messages that arrived meanwhile
(the harness's `WarpLog` tags each with the call executing then), looks up the user's name of the
array written and the earlier taped launch that read it, and deduplicates, so a warning repeated in a
loop of 10,000 steps is one record with a count rather than 10,000 log lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import tracker_parse as tracker
from . import hooks, tracker_cache, warp_compat
from .capture import name_of
from .hooks import safe as _safe
from .protocol import OtherWarning, Site, TrackerReport

if TYPE_CHECKING:
    from .main import Session

MAX_DISTINCT = 200


class TrackerListener(hooks.Listener):
    key = "tracker"

    def __init__(self, session: Session) -> None:
        self.s = session
        self.seen = 0
        self.records: dict[tuple, tracker.TrackerRecord] = {}
        self.other: dict[str, int] = {}
        self.last_reader: dict[int, Site] = {}  # id(array) -> the call site of the last taped launch that read it
        self.taped_launches = 0
        self.taped_kernels: set[str] = set()
        self.taped_copies = 0
        self.backward_calls = 0
        self.dropped = 0
        self.log_level_lowered = False
        self.modules: dict[str, bool] = {}  # module launched -> codegen recorded array access (built with the flag)

    # -- iteration numbering shared with capture when it runs
    def _iteration(self) -> int:
        for lst in self.s.listeners:
            if lst.__class__.__name__ == "CaptureListener":
                return int(lst.acct.it)
        return self.backward_calls

    def _drain(self, call) -> None:
        recs = self.s.log.records
        new = recs[self.seen:]
        self.seen = len(recs)
        for entry in new:
            if entry.level != "warning":
                continue
            msg = entry.message
            extra: dict[str, Any] = {"iteration": self._iteration()}
            parsed = tracker.parse_message(msg)
            if parsed is None:
                key = msg.split("\n", 1)[0][:300]
                self.other[key] = self.other.get(key, 0) + 1
                continue
            rec = tracker.record_from(msg, entry.site.model_dump() if entry.site is not None else None, extra)
            if rec is None:
                continue
            k = tracker._key(rec)
            if k in self.records:
                self.records[k].count += 1
                continue
            if len(self.records) >= MAX_DISTINCT:
                self.dropped += 1
                continue
            # Names and the earlier reader are looked up once per distinct record, while the array is alive.
            arr = self._written_array(call, parsed)
            if arr is not None:
                rec.array = name_of(arr)
                rb = self.last_reader.get(id(arr))
                if rb is not None and parsed.kind != "within_kernel":
                    rec.read_by = rb.model_copy()
            self.records[k] = rec

    @staticmethod
    def _written_array(call, parsed: tracker.ParsedWarning):
        if call is None:
            return None
        if isinstance(call, hooks.CopyCall):
            return call.dest if parsed.kind == "copy" else None
        if parsed.kind != "across_launches" or parsed.argument is None:
            return None
        labels = warp_compat.kernel_arg_labels(call.kernel)
        if parsed.argument in labels:
            idx = labels.index(parsed.argument)
            args = call.args
            if idx < len(args):
                return args[idx]
        return None

    def _note_reads(self, call: hooks.LaunchCall) -> None:
        access = warp_compat.kernel_arg_access(call.kernel)
        site = Site(file=call.site.get("file"), line=call.site.get("line"), func=call.site.get("func"),
                    kernel=call.kernel.key)
        for i, arg in enumerate(call.args):
            if i < len(access) and access[i][0]:
                for _, arr in hooks.iter_arrays(arg):
                    self.last_reader[id(arr)] = site

    # -- hooks
    @_safe
    def before_launch(self, call: hooks.LaunchCall) -> None:
        import warp as wp

        if wp.config.log_level > wp.LOG_WARNING:
            # A script that silences warnings (log_level = LOG_ERROR) would silence the tracker too.
            wp.config.log_level = wp.LOG_WARNING
            self.log_level_lowered = True
        if hooks.STATE.current is None:
            self._drain(None)  # messages from outside any call must not be pinned on this one

    @_safe
    def after_launch(self, call: hooks.LaunchCall) -> None:
        self._drain(call)
        mod = getattr(getattr(call.kernel, "module", None), "name", None)
        if mod is not None and not self.modules.get(mod):
            # Codegen sets these flags only when the module is built with the tracker on (warp-facts §6.2); the
            # log's "(compiled)" lines are missing when the script raises wp.config.log_level.
            self.modules[mod] = any(read or written for read, written in warp_compat.kernel_arg_access(call.kernel))
        if call.taped:
            self.taped_launches += 1
            self.taped_kernels.add(call.kernel.key)
            self._note_reads(call)

    @_safe
    def before_copy(self, call: hooks.CopyCall) -> None:
        if hooks.STATE.current is None:
            self._drain(None)

    @_safe
    def after_copy(self, call: hooks.CopyCall) -> None:
        if hooks.STATE.current is not None:
            return  # the gradient copy Warp makes inside a copy
        self._drain(call)
        if call.tape is not None:
            self.taped_copies += 1
            self.last_reader[id(call.src)] = Site(file=call.site.get("file"), line=call.site.get("line"),
                                                  func=call.site.get("func"), kernel="wp.copy")

    @_safe
    def after_backward(self, tape, loss, grads) -> None:
        self._drain(None)
        self.backward_calls += 1
        # Warp clears the read flags of the tape's arrays after backward (1.17+).
        self.last_reader.clear()

    @_safe
    def tape_reset(self, tape) -> None:
        self.last_reader.clear()

    @_safe
    def script_end(self) -> None:
        self._drain(None)

    def result(self) -> TrackerReport:
        self._drain(None)
        return TrackerReport(
            records=list(self.records.values()),
            other_warnings=[OtherWarning(message=m, count=c) for m, c in self.other.items()][:50],
            taped_launches=self.taped_launches,
            taped_kernels=sorted(self.taped_kernels),
            taped_copies=self.taped_copies,
            backward_calls=self.backward_calls,
            dropped=self.dropped,
            modules_launched=sorted(self.modules),
            log_level_lowered=self.log_level_lowered,
            broken=self.broken,
            modules_tracked=sorted(m for m, t in self.modules.items() if t),
            modules_reused=sorted(set(tracker_cache.REUSED)),
        )
