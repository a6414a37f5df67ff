"""The agent loop: ask the model, run the tools it asks for, repeat until it answers or a limit is hit.

Owned here rather than taken from an SDK tool runner because the loop must see every tool call: it
turns tool failures into `is_error` results the model can act on, asks the person before a file is
changed, counts the budget, and writes the trajectory after every step.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from ..tools.registry import ToolSpec
from .context import (
    READ_REFERENCE,
    agent_tools,
    choose_references_mode,
    cost_of,
    run_tool,
    system_blocks,
    tool_params,
)
from .trajectory import Trajectory, empty_totals

DEFAULT_MODEL = "claude-sonnet-4-6"


def default_model() -> str:
    return os.environ.get("WARPGRAD_MODEL") or DEFAULT_MODEL


class AgentConfig(BaseModel):
    model: str = ""
    """Model name; empty means `$WARPGRAD_MODEL`, else DEFAULT_MODEL."""
    max_tokens: int = 8192
    step_limit: int = 60
    """Most model calls per session (resumed sessions count earlier calls)."""
    cost_limit: float = 5.0
    """Most USD per session, from token usage with cache tokens priced separately."""
    time_limit: float = 3600.0
    """Most wall-clock seconds per run of the loop."""
    references: Literal["auto", "tool", "inline"] = "auto"
    stream: bool = False
    """Stream text deltas to `events.on_text` (needs a client with `messages.stream`)."""

    def model_post_init(self, _: Any) -> None:
        self.model = self.model or default_model()


class LimitsExceeded(Exception):
    """The session ran out of steps, money or time."""


class Submitted(Exception):
    """`finish` accepted: the session is over."""


class Events:
    """What the person at the terminal sees and decides. The default is silent and allows every edit."""

    def on_text(self, delta: str) -> None: ...
    def on_message(self, message: dict[str, Any]) -> None: ...
    def on_tool_start(self, spec: ToolSpec | None, call: dict[str, Any]) -> None: ...
    def on_tool_end(self, spec: ToolSpec | None, call: dict[str, Any], result: dict[str, Any]) -> None: ...

    def confirm(self, spec: ToolSpec, call: dict[str, Any]) -> str | None:
        """None allows the change; a string declines it and is passed to the model as the reason."""
        return None


class Agent:
    def __init__(
        self,
        client: Any,
        config: AgentConfig,
        workspace: Path,
        *,
        tools: dict[str, ToolSpec] | None = None,
        system: list[dict[str, Any]] | str | None = None,
        trajectory: Trajectory | None = None,
        events: Events | None = None,
        messages: list[dict[str, Any]] | None = None,
        totals: dict[str, float] | None = None,
    ) -> None:
        self.client, self.config, self.workspace = client, config, Path(workspace)
        self.events = events or Events()
        self.tools = dict(tools if tools is not None else agent_tools())
        if system is None:
            mode = choose_references_mode(config.references)
            if mode == "inline":
                self.tools.pop(READ_REFERENCE.name, None)
            system = system_blocks(self.tools, mode)
        self.system = system
        self.trajectory = trajectory or Trajectory.new(self.workspace)
        self.messages: list[dict[str, Any]] = messages or []
        self.totals = {**empty_totals(), **(totals or {})}
        self.finished: dict[str, Any] | None = None
        self.trajectory.append(
            {
                "type": "session",
                "model": config.model,
                "workspace": str(self.workspace),
                "config": config.model_dump(),
                "resumed_messages": len(self.messages),
            }
        )

    def run(self, task: str) -> str:
        """Add `task` as the user's turn and loop until the model answers; returns its final text."""
        self.add_user_text(task)
        started, reason = time.monotonic(), "answered"
        try:
            while True:
                self.check_limits(started)
                reply = self.step()
                if reply["stop_reason"] != "tool_use":
                    return "".join(b.get("text", "") for b in reply["content"] if b["type"] == "text")
        except Submitted:
            reason = "finished"
            return json.dumps(self.finished)
        except BaseException as e:
            reason = f"{type(e).__name__}: {e}"
            raise
        finally:
            self.trajectory.append({"type": "end", "reason": reason, "totals": self.totals})

    def check_limits(self, started: float) -> None:
        c, t = self.config, self.totals
        if t["steps"] >= c.step_limit:
            raise LimitsExceeded(f"step limit reached ({c.step_limit} model calls)")
        if t["cost"] >= c.cost_limit:
            raise LimitsExceeded(f"cost limit reached (${t['cost']:.2f} of ${c.cost_limit:.2f})")
        if time.monotonic() - started >= c.time_limit:
            raise LimitsExceeded(f"time limit reached ({c.time_limit:.0f} s)")

    def step(self) -> dict[str, Any]:
        """One model call and the tool calls it asks for; returns the assistant message as recorded."""
        reply = self.query()
        usage = reply.usage.to_dict(mode="json") if hasattr(reply.usage, "to_dict") else dict(reply.usage)
        cost = cost_of(self.config.model, usage)
        self.totals["steps"] += 1
        self.totals["cost"] += cost
        for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            self.totals[k] += usage.get(k) or 0
        content = [b.to_dict(mode="json") for b in reply.content]
        self.add(
            {"role": "assistant", "content": content}, usage=usage, cost=cost, stop_reason=reply.stop_reason
        )
        calls = [b for b in content if b["type"] == "tool_use"]
        if not calls:
            return {"content": content, "stop_reason": reply.stop_reason}
        results: list[dict[str, Any]] = []
        why_not = "Not run: the session was interrupted."
        if reply.stop_reason != "tool_use":  # cut at max_tokens: the last call's input may be truncated
            why_not = (
                f"Not run: your reply stopped at {reply.stop_reason}; call the tool again, more briefly."
            )
            calls_to_run: list[dict[str, Any]] = []
        else:
            calls_to_run = calls
        try:
            for call in calls_to_run:
                results.append(self.execute(call))
        finally:
            # Every tool_use needs a result, or the API rejects the history.
            results += [
                {"type": "tool_result", "tool_use_id": c["id"], "is_error": True, "content": why_not}
                for c in calls[len(results) :]
            ]
            self.add({"role": "user", "content": results})
        if self.finished is not None:
            raise Submitted()
        return {"content": content, "stop_reason": "tool_use"}

    def query(self) -> Any:
        kwargs = {
            "model": self.config.model,
            "max_tokens": self.config.max_tokens,
            "system": self.system,
            "tools": tool_params(self.tools),
            "messages": self._cached(self.messages),
        }
        if self.config.stream and hasattr(self.client.messages, "stream"):
            with self.client.messages.stream(**kwargs) as stream:
                for delta in stream.text_stream:
                    self.events.on_text(delta)
                return stream.get_final_message()
        return self.client.messages.create(**kwargs)

    def execute(self, call: dict[str, Any]) -> dict[str, Any]:
        """Run one tool call (after the person's OK for edits) and record it."""
        spec = self.tools.get(call["name"])
        self.events.on_tool_start(spec, call)
        t0 = time.monotonic()
        # Tools that change the user's program say so in their declaration: the person sees the diff first.
        declined = self.events.confirm(spec, call) if spec is not None and spec.confirm else None
        result = None
        if declined is not None:
            output, is_error = f"The user declined this change. {declined}".strip(), True
        else:
            output, is_error, result = run_tool(self.tools, call["name"], call["input"], self.workspace)
            if call["name"] == "finish" and result is not None:
                self.finished = result.model_dump(mode="json")
        record = {
            "type": "tool_call",
            "id": call["id"],
            "name": call["name"],
            "input": call["input"],
            "output": output,
            # The model reads `output` (one screen); the trajectory keeps the whole record for replay and review.
            "result": None if result is None else result.model_dump(mode="json"),
            "is_error": is_error,
            "declined": declined is not None,
            "seconds": round(time.monotonic() - t0, 3),
        }
        self.trajectory.append(record)
        self.events.on_tool_end(spec, call, record)
        return {"type": "tool_result", "tool_use_id": call["id"], "content": output, "is_error": is_error}

    def add_user_text(self, text: str) -> None:
        if self.messages and self.messages[-1]["role"] == "user":
            # Follow-up right after tool results (a finished or interrupted turn): one user turn, not two.
            self.messages[-1]["content"].append({"type": "text", "text": text})
            self.trajectory.append(
                {"type": "message", "role": "user", "content": [{"type": "text", "text": text}]}
            )
        else:
            self.add({"role": "user", "content": [{"type": "text", "text": text}]})

    def add(self, message: dict[str, Any], **extra: Any) -> None:
        self.messages.append(message)
        self.trajectory.append({"type": "message", **message, **extra})
        self.events.on_message(message)

    @staticmethod
    def _cached(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A copy of `messages` whose last block is a cache breakpoint, so each call reuses the previous
        call's prefix; the stored messages stay unmarked (only 4 breakpoints are allowed per request)."""
        out = [dict(m, content=list(m["content"])) for m in messages]
        if out and out[-1]["content"]:
            out[-1]["content"][-1] = {**out[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}
        return out
