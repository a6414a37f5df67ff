"""The quantity a workflow run is judged by, when the script prints a metric rather than a loss.

A script that prints `x_T = +0.98724` (a final state, an accuracy, a distance to a target) has no loss
the trajectory parser can find. `MetricSpec` names the quantity (a printed name, or a regex whose first
group is the number) and says which way is better: `lower`, `higher`, or `closer` to a `target`.
`run_script` records the spec and the values it found; the finish gate compares the run before a patch
with the run after it by the same spec (re-reading the earlier run's recorded output when that run was
made before the metric was named).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import regex
from pydantic import BaseModel, Field, model_validator

from .bounded_regex import Budget, RegexTimeout, compile_pattern, finditer

if TYPE_CHECKING:  # the stubs name it in regex._main only
    from regex._main import Pattern

# The same number syntax the loss parser reads (signs, exponents, nan/inf).
NUMBER = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|NaN|Inf|INF)"

Direction = Literal["lower", "higher", "closer"]


class MetricSpec(BaseModel):
    """Which printed quantity a run is judged by, and which way is better."""

    name: str | None = Field(None, description="The name the script prints before the value (`x_T` in `x_T = 0.98`).")
    regex: str | None = Field(None, description="A regex over stdout whose first group (or whole match) is the value.")
    direction: Direction = Field("lower", description="lower, higher, or closer (to `target`) is better.")
    target: float | None = Field(None, description="The value `closer` measures distance to.")

    @model_validator(mode="after")
    def _one_source(self) -> MetricSpec:
        if (self.name is None) == (self.regex is None):
            raise ValueError("a metric needs exactly one of `name` (as printed) or `regex`")
        if self.name is not None and not self.name.strip():
            raise ValueError("the metric name is empty")
        if self.regex is not None:
            try:
                pat = compile_pattern(self.regex)
            except regex.error as e:
                raise ValueError(f"the metric regex does not compile: {e}") from None
            if pat.groups > 1:
                raise ValueError("the metric regex may have at most one group (the value)")
        if self.direction == "closer" and (self.target is None or not math.isfinite(self.target)):
            raise ValueError("direction 'closer' needs a finite `target`")
        if self.direction != "closer" and self.target is not None:
            raise ValueError("`target` only applies to direction 'closer'")
        return self

    def label(self) -> str:
        what = f"metric {self.name}" if self.name else f"metric /{self.regex}/"
        how = f"closer to {self.target!r} is better" if self.direction == "closer" else f"{self.direction} is better"
        return f"{what} ({how})"

    def pattern(self) -> Pattern[str]:
        """The compiled pattern, by the `regex` engine: its matches over a script's output take a timeout."""
        if self.regex is not None:
            return compile_pattern(self.regex)
        # The name, not glued to a longer identifier, an optional "(...)" unit, then = or : and the number
        # (each optional token with its own trailing spaces: adjacent `\s*` repeats backtrack).
        return compile_pattern(rf"(?<![\w.]){regex.escape(str(self.name))}\s*(?:\([^)]*\)\s*)?(?:[:=]\s*)?(?:\[\s*)?"
                               rf"({NUMBER})")

    def scan(self, text: str) -> tuple[list[float], str | None]:
        """Every value of the metric in `text`, in order, and why there are none when the pattern ran out of
        time (a regex that backtracks on this output: then no values at all, never a partial list whose
        "last" value is not the last one printed). Matches are per line, lines capped (`bounded_regex`)."""
        out: list[float] = []
        try:
            for m in finditer(self.pattern(), text, Budget()):
                raw = m.group(1) if m.re.groups else m.group(0)
                try:
                    out.append(float(raw))
                except (TypeError, ValueError):
                    continue
        except RegexTimeout as e:
            return [], f"{self.label()} was not read: {e}"
        return out, None

    def values(self, text: str) -> list[float]:
        """Every value of the metric in `text`, in order (a match that is not a number is skipped; none when
        the pattern runs out of time, see `scan`)."""
        return self.scan(text)[0]

    def badness(self, v: float) -> float:
        """Smaller is better, whatever the direction."""
        if self.direction == "higher":
            return -v
        if self.direction == "closer":
            if self.target is None:  # the model's validator refuses this combination
                raise ValueError("direction 'closer' needs a target")
            return abs(v - self.target)
        return v
