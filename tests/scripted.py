"""A scripted stand-in for `anthropic.Anthropic`, for tests and demos that cannot reach the API.

```python
client = ScriptedClient(tool_use("gradcheck", script="train.py"), text("the gradient is fine"))
agent = Agent(client, AgentConfig(), workspace)
```

Each `messages.create` call pops the next scripted reply (a real `anthropic.types.Message`) and keeps
a deep copy of the request, so tests can assert on what the model was sent at that step.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

from anthropic.types import Message

_ids = itertools.count(1)
Reply = Message | Callable[[dict[str, Any]], Message]


def message(
    *blocks: dict[str, Any],
    stop_reason: str | None = None,
    input_tokens: int = 1000,
    output_tokens: int = 100,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> Message:
    """An assistant `Message` from raw content blocks; stop_reason defaults from the blocks."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return Message.model_validate(
        {
            "id": f"msg_scripted_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": list(blocks),
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_creation_input_tokens": cache_creation_input_tokens,
                "cache_read_input_tokens": cache_read_input_tokens,
            },
        }
    )


def tool_use(tool: str, /, *, say: str = "", **input: Any) -> Message:
    """A reply that calls one tool (optionally after a line of text); keyword arguments are its input."""
    blocks = [{"type": "text", "text": say}] if say else []
    blocks.append({"type": "tool_use", "id": f"toolu_scripted_{next(_ids)}", "name": tool, "input": input})
    return message(*blocks)


def tool_uses(*calls: tuple[str, dict[str, Any]]) -> Message:
    """A reply that calls several tools in one turn."""
    return message(
        *({"type": "tool_use", "id": f"toolu_scripted_{next(_ids)}", "name": n, "input": i} for n, i in calls)
    )


def text(s: str) -> Message:
    """A final text answer (stop_reason end_turn)."""
    return message({"type": "text", "text": s})


class ScriptedClient:
    """Replays `replies` in order; a reply may be a callable that builds the Message from the request."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.messages = self

    def create(self, **request: Any) -> Message:
        self.requests.append(copy.deepcopy(request))
        if not self.replies:
            raise AssertionError(f"ScriptedClient ran out of replies after {len(self.requests) - 1} calls")
        reply = self.replies.pop(0)
        return reply(request) if callable(reply) else reply

    def last_tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks the model was sent in the most recent request."""
        last = self.requests[-1]["messages"][-1]["content"]
        return [b for b in last if b.get("type") == "tool_result"]
