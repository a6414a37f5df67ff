"""Regex matching over untrusted text (what a script prints) that cannot freeze warpgrad.

A pattern with nested or adjacent repeats backtracks exponentially (or polynomially) on text built for
it: `(a+)+$` over `"a" * 40 + "b"`, or the loss pattern's `\\s*...\\s*` over `"loss" + " " * 400 + "x"`.
The text comes from user code and the metric regex from the caller, so both are untrusted. Every match
here goes through the `regex` engine (the one `search_code` uses), whose calls take a timeout, over
lines capped at `MAX_LINE_CHARS`, within one deadline per text.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import regex

if TYPE_CHECKING:  # the stubs name them in regex._main only
    from regex._main import Match, Pattern

MAX_LINE_CHARS = 2000  # a progress line is far shorter; past this only the start is read
LINE_TIMEOUT_S = 0.25  # one line; a linear pattern needs microseconds
TEXT_TIMEOUT_S = 2.0  # the whole text


class RegexTimeout(Exception):
    """A pattern ran past its time budget on the text (it backtracks too much)."""


def compile_pattern(pattern: str, flags: int = 0) -> Pattern[str]:
    """`pattern` compiled by the `regex` engine in its `re`-compatible mode.

    Raises:
        regex.error: The pattern does not compile.
    """
    return regex.compile(pattern, regex.VERSION0 | flags)


def capped_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line cut to MAX_LINE_CHARS) for each line of `text`."""
    for n, line in enumerate(text.splitlines(), 1):
        yield n, line[:MAX_LINE_CHARS]


class Budget:
    """One deadline shared by every match over one text."""

    def __init__(self, total_s: float = TEXT_TIMEOUT_S) -> None:
        self.total_s = total_s
        self.deadline = time.monotonic() + total_s

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def left(self) -> float:
        """Seconds a next match may take (at most LINE_TIMEOUT_S).

        Raises:
            RegexTimeout: The text's budget is spent.
        """
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RegexTimeout(f"matching stopped after {self.total_s:.1f} s")
        return min(left, LINE_TIMEOUT_S)


def search(rx: Pattern[str], line: str, budget: Budget, pos: int = 0, endpos: int | None = None
           ) -> Match[str] | None:
    """`rx.search(line)` within the budget.

    Raises:
        RegexTimeout: The match ran past its share of the budget.
    """
    try:
        return rx.search(line, pos, len(line) if endpos is None else endpos, timeout=budget.left())
    except TimeoutError:
        raise RegexTimeout(f"the pattern /{rx.pattern}/ backtracks too much on: {line[:80]!r}...") from None


def finditer(rx: Pattern[str], text: str, budget: Budget) -> Iterator[Match[str]]:
    """Every match of `rx` in `text`, line by line (lines capped), within the budget.

    Raises:
        RegexTimeout: A match ran past its share of the budget.
    """
    for _, line in capped_lines(text):
        pos = 0
        while pos <= len(line):
            m = search(rx, line, budget, pos)
            if m is None:
                break
            yield m
            pos = m.end() if m.end() > m.start() else m.end() + 1  # an empty match must not repeat
