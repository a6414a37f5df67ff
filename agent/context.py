"""What the model is given besides the conversation (skill prompt, tools, references) and how its tool
calls are run (`run_tool`, shared by the chat loop, the MCP server and replay).

The request prefix is laid out for prompt caching: tools first (the last one carries a cache
breakpoint), then the system prompt (the rendered skill, a second breakpoint). Both are identical on
every call of a session, so after the first call they are read from cache at a tenth of the input price.

References (`references/*.md`) are either read on demand through the `read_reference` tool or appended
whole to the cached system block. `references_mode="auto"` picks inline only while all references
together stay under `INLINE_TOKEN_LIMIT` estimated tokens: above that, paying cache reads for text the
model rarely needs on every call costs more than the occasional `read_reference` round trip.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ..tools.registry import ToolError, ToolSpec, load_tools, split_detail
from ..tools.render import READ_BUDGET
from . import prompt

INLINE_TOKEN_LIMIT = 2000
CHARS_PER_TOKEN = 3.5
"""Offline token estimate for English markdown with code (the API tokenizer is not reachable here)."""

# USD per million tokens: (input, output). Cache writes cost 1.25x input, cache reads 0.1x input.
PRICES: dict[str, tuple[float, float]] = {
    "haiku": (1.0, 5.0),
    "sonnet": (3.0, 15.0),
    "opus-4-0": (15.0, 75.0),
    "opus-4-1": (15.0, 75.0),
    "opus-4-2025": (15.0, 75.0),  # claude-opus-4-20250514 (Opus 4.0)
    "opus": (5.0, 25.0),
}
UNKNOWN_PRICE = (15.0, 75.0)
"""Unknown model families are priced at the most expensive known rate, so a cost limit stays safe."""


def price_of(model: str) -> tuple[float, float]:
    """(input, output) USD per million tokens for `model`, by the longest matching family key."""
    hits = [k for k in PRICES if k in model]
    return PRICES[max(hits, key=len)] if hits else UNKNOWN_PRICE


def cost_of(model: str, usage: dict[str, Any]) -> float:
    """USD cost of one response's `usage` (cache tokens priced separately from plain input)."""
    p_in, p_out = price_of(model)
    return (
        usage.get("input_tokens", 0) * p_in
        + (usage.get("cache_creation_input_tokens") or 0) * p_in * 1.25
        + (usage.get("cache_read_input_tokens") or 0) * p_in * 0.1
        + usage.get("output_tokens", 0) * p_out
    ) / 1e6


def estimate_tokens(text: str) -> int:
    return round(len(text) / CHARS_PER_TOKEN)


class ReadReferenceArgs(BaseModel):
    name: str = Field(
        description="Reference name as listed in the skill, e.g. 'quick-checks' or 'quick-checks.md'."
    )


class ReadReferenceResult(BaseModel):
    name: str
    text: str


def _read_reference(args: ReadReferenceArgs, workspace: Path) -> ReadReferenceResult:
    try:
        return ReadReferenceResult(name=args.name, text=prompt.read_reference(args.name))
    except KeyError as e:
        raise ToolError(e.args[0]) from None


READ_REFERENCE = ToolSpec(
    name="read_reference",
    description="Read one of the skill's reference documents (references/*.md) in full. Read the one "
    "the skill points to before acting on a pattern it describes.",
    args=ReadReferenceArgs,
    result=ReadReferenceResult,
    run=_read_reference,
    read_only=True,
    render=lambda r: r.text,
    budget=READ_BUDGET,
)


def agent_tools() -> dict[str, ToolSpec]:
    """The registry's tools plus the agent-layer `read_reference`."""
    return {**load_tools(), READ_REFERENCE.name: READ_REFERENCE}


def references_size() -> dict[str, int]:
    """Estimated tokens per reference document."""
    return {n: estimate_tokens(prompt.read_reference(n)) for n in prompt.reference_names()}


def choose_references_mode(mode: Literal["auto", "tool", "inline"]) -> Literal["tool", "inline"]:
    if mode != "auto":
        return mode
    return "inline" if sum(references_size().values()) <= INLINE_TOKEN_LIMIT else "tool"


def render_skill_for(tools: dict[str, ToolSpec]) -> str:
    """The rendered skill listing exactly `tools`, each with its own docstring's first line."""
    return prompt.render_skill(list(tools), descriptions=prompt.tool_summaries(tools))


def system_blocks(tools: dict[str, ToolSpec], references: Literal["tool", "inline"]) -> list[dict[str, Any]]:
    """The system prompt as one cached text block: the rendered skill (plus the references if inline)."""
    text = render_skill_for(tools)
    if references == "inline":
        text += "".join(
            f"\n\n# Reference: {n}\n\n{prompt.read_reference(n)}" for n in prompt.reference_names()
        )
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def tool_params(tools: dict[str, ToolSpec]) -> list[dict[str, Any]]:
    """Anthropic tool definitions; the last carries the cache breakpoint that covers all of them."""
    params = [spec.anthropic_param() for spec in tools.values()]
    if params:
        params[-1] = {**params[-1], "cache_control": {"type": "ephemeral"}}
    return params


MAX_RESULT_CHARS = 40_000


def invalid_args_message(name: str, e: ValidationError) -> str:
    """A validation error in a form the model can act on: which field, what is wrong, what it sent."""
    problems = "; ".join(
        f"{'.'.join(map(str, err['loc'])) or '(arguments)'}: {err['msg']} (got {err['input']!r})"
        for err in e.errors(include_url=False)
    )
    return f"invalid arguments for {name}: {problems}. Fix them and call {name} again."


def run_tool(
    tools: dict[str, ToolSpec],
    name: str,
    raw: dict[str, Any],
    workspace: Path,
) -> tuple[str, bool, BaseModel | None]:
    """Run a tool call; returns (text for the model, is_error, result model or None).

    The text is the tool's one-screen answer, or its whole record as JSON when the call asks for
    `detail="full"`. Every failure the model can act on becomes an error text rather than an exception:
    refusals (`ToolError`, including a refused `finish`), bad arguments, unknown names, and crashes.
    """
    try:
        if name not in tools:
            raise ToolError(f"unknown tool {name!r}; available: {', '.join(tools)}")
        spec = tools[name]
        own, detail = split_detail(raw)
        try:
            args = spec.args.model_validate(own)
        except ValidationError as e:
            raise ToolError(invalid_args_message(name, e)) from None
        result = spec.call(args, workspace)
        output, is_error = spec.answer(result, detail), False
    except ToolError as e:
        output, is_error, result = str(e), True, None
    except Exception as e:  # noqa: BLE001 -- a crashing tool must not end the session: the model can try another way
        output, is_error, result = f"tool {name} crashed: {type(e).__name__}: {e}", True, None
    if len(output) > MAX_RESULT_CHARS:
        output = output[:MAX_RESULT_CHARS] + f"\n... [{len(output) - MAX_RESULT_CHARS} characters cut]"
    return output, is_error, result
