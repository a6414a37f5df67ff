"""A rule of the finish gate, written the way a linter's rules are: an id and a name, what it requires,
the false outcome it refuses, what satisfies it, the one call that supplies what is missing, and the
function that checks it. Each rule lives in its own module beside that function (`g0NN_<name>.py`);
`catalog.RULES` lists them in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Rule(BaseModel):
    """One validity rule of the gate."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="G001, G002, ...: the tag every refusal of this rule carries.")
    name: str = Field(description="A kebab-case name, shown beside the id.")
    summary: str = Field(description="One line: what the rule requires.")
    refuses: str = Field(description="One line: what it refuses (the README's gate table).")
    why: str = Field(description="The false outcome it prevents.")
    satisfied_by: str = Field(description="What evidence satisfies it.")
    call: str = Field(description="The one call that supplies what is missing.")
    # The check's arguments are what the rule judges (one check record, the fix chain, the ledger's
    # verification), so they differ by rule; the module docstring of each rule says what they are.
    check: Callable[..., Any] = Field(exclude=True, repr=False, description="The function that applies the rule.")

    def refusal(self, text: str) -> str:
        """A missing piece, prefixed with this rule's id and name so the model knows which rule refused."""
        return f"[{self.id} {self.name}] {text}"
