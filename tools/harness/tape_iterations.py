"""The tape inspector, reporting every iteration it described rather than only the captured one.

With no iteration named, capture checks the second iteration and the first, and the inspector already
describes (and the localizer already checks) the tapes of both; its result keeps only the second's. When
the FD check then leads with the first iteration (a bug is plain there), `diagnose` needs that tape, and
would otherwise run the script again to get it. This listener adds the descriptions of each iteration
(`by_iteration`, the same shape as the inspector's own result) next to the usual result.
"""

from __future__ import annotations

from .capture import CaptureListener
from .protocol import RecordedTape, TapeInspectReport
from .tape_listener import TapeInspectListener


class TapeIterationsListener(TapeInspectListener):
    def result(self) -> TapeInspectReport:
        out = super().result()
        cap = next((x for x in self.s.listeners if isinstance(x, CaptureListener)), None)
        if cap is None:
            return out
        field = "iteration" if out.scheme == "consume" else "backward_index"
        groups: dict[int, list[RecordedTape]] = {}
        for d in self.descriptions:
            key = getattr(d, field)
            if key is not None:
                groups.setdefault(key, []).append(d)
        out.by_iteration = {str(i): TapeInspectReport(scheme=out.scheme, iteration=i, tapes=ds[:self.max_tapes],
                                                      tapes_in_iteration=len(ds), notes=out.notes)
                            for i, ds in groups.items()}
        return out
