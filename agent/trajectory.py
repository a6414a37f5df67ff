"""The session record: one JSON object per line in `.warpgrad/sessions/<time>/trajectory.jsonl`.

Every line is flushed as soon as it is written, so a session killed mid-step still leaves a readable
record. Event types:

- `session`: model, workspace, limits (written once per start or resume);
- `message`: one conversation message (`role`, `content`) exactly as sent to the API, with `usage`
  (input/output/cache-creation/cache-read tokens) and `cost` on assistant messages;
- `tool_call`: `id`, `name`, `input`, `output` (the result model as JSON, or the error text),
  `is_error`, `declined`, `seconds`;
- `end`: why the session (or turn) stopped and the running totals.

The API key never reaches this file: the loop never writes request headers, and `append` also blanks
the value of `ANTHROPIC_API_KEY` wherever it appears, in case a tool echoed the environment.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SESSIONS_DIR = Path(".warpgrad") / "sessions"
REDACTED = "[REDACTED]"


class Trajectory:
    """Append-only JSONL writer for one session."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A session killed mid-write leaves a torn last line; start ours on a fresh line after it.
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open("rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    @classmethod
    def new(cls, workspace: Path) -> Trajectory:
        """Start a fresh trajectory under `<workspace>/.warpgrad/sessions/<UTC time>/`."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S_%fZ")
        return cls(Path(workspace) / SESSIONS_DIR / stamp / "trajectory.jsonl")

    @staticmethod
    def latest(workspace: Path) -> Path | None:
        """The most recent trajectory in the workspace, or None when there is none."""
        found = sorted((Path(workspace) / SESSIONS_DIR).glob("*/trajectory.jsonl"))
        return found[-1] if found else None

    def append(self, event: dict[str, Any]) -> None:
        """Write one event and flush it to disk."""
        line = json.dumps(event, default=str, ensure_ascii=False)
        key = os.environ.get("ANTHROPIC_API_KEY", "")
        if len(key) >= 8:  # a short or empty value would blank ordinary text
            line = line.replace(key, REDACTED)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def read_events(path: Path) -> list[dict[str, Any]]:
    """All events of a trajectory; torn lines (a process killed while writing) are skipped."""
    events = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def messages_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation recorded in `events`, repaired so the API accepts it as a prefix.

    A session stopped between the model asking for tools and their results leaves `tool_use` blocks
    without answers; the API rejects that, so each gets an `is_error` result saying it never ran.
    """
    messages: list[dict[str, Any]] = []
    for e in events:
        if e.get("type") != "message":
            continue
        if messages and messages[-1]["role"] == e["role"]:
            # A follow-up typed after tool results was recorded as its own event but sent as one turn.
            messages[-1]["content"] = _blocks(messages[-1]) + _blocks(e)
        else:
            messages.append({"role": e["role"], "content": _blocks(e)})
    if messages and messages[-1]["role"] == "assistant":
        pending = [b for b in _blocks(messages[-1]) if b.get("type") == "tool_use"]
        if pending:
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": b["id"],
                            "is_error": True,
                            "content": "The session stopped before this tool ran; call it again if you still need it.",
                        }
                        for b in pending
                    ],
                }
            )
    return messages


def empty_totals() -> dict[str, float]:
    """Zeroed usage counters: tokens by kind, cost in dollars, model calls."""
    return {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "cost": 0.0, "steps": 0}


def totals_of(events: list[dict[str, Any]]) -> dict[str, float]:
    """Token and cost totals over every assistant message in `events`."""
    totals = empty_totals()
    for e in events:
        if e.get("type") == "message" and e.get("role") == "assistant":
            totals["steps"] += 1
            totals["cost"] += e.get("cost", 0.0)
            for k, v in (e.get("usage") or {}).items():
                if k in totals and isinstance(v, int | float):
                    totals[k] += v
    return totals


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content
