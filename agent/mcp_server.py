"""`warpgrad mcp`: the tool registry, the skill and its references served over MCP (stdio).

Every registry tool is listed with its input and output schema and read-only/destructive annotations.
A call answers with the tool's one-screen text (`detail="full"`: the whole record as JSON), a resource
link to the full record (`warpgrad://results/<n>-<tool>`, readable for the rest of the session), and the
record as structured content for programs, fitted to the tool's budget like the text (`detail="full"`:
whole). The skill is the
prompt `warpgrad`; each reference is a resource `warpgrad://references/<name>`. A tool that refuses, crashes, times out or gets bad arguments returns
`is_error` and the server keeps serving. The workspace is fixed when the server starts.

Nothing but protocol reaches stdout: `mcp.server.stdio.stdio_server` points fd 1 at stderr while it
serves (so stray prints, warnings and worker subprocesses' output land on stderr), and the tool
modules are imported only after it has done so.

Start-up is kept to what `initialize` needs (the MCP SDK and this module): the tool modules (numpy,
the registry, every tool's models) load on the first request that needs them (`tools/list`, a tool
call, the prompt or the rendered skill), so a host's handshake does not wait for them.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from mcp import types
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from .. import __version__ as _warpgrad_version
from . import prompt

if TYPE_CHECKING:
    from ..tools.registry import ToolSpec

SERVER_NAME = "warpgrad"
PROMPT_NAME = prompt.SKILL_NAME
REFERENCE_URI = "warpgrad://references/{}"
SKILL_URI = "warpgrad://skill/SKILL.md"
RESULT_URI = "warpgrad://results/"
KEEP_RESULTS = 64
"""Full records kept for `resources/read` (the oldest is dropped first)."""
TOOL_TIMEOUT = 1800.0
"""Backstop for one tool call; the tools' own subprocess timeouts normally end a stuck run first."""
PROGRESS_EVERY = 2.0
INSTRUCTIONS = (
    "warpgrad finds and fixes wrong gradients in NVIDIA Warp programs with finite-difference evidence. "
    f"Get the `{PROMPT_NAME}` prompt for the method; read references through `read_reference` or the "
    "warpgrad://references/ resources. `finish` refuses a claimed fix until the evidence ledger proves it."
)


def _text(s: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=s)]


def mcp_tool(spec: ToolSpec) -> types.Tool:
    """One registry tool as an MCP tool definition."""
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.input_schema(),
        output_schema=spec.output_schema(),
        annotations=types.ToolAnnotations(
            read_only_hint=spec.read_only,
            destructive_hint=not spec.read_only,
            idempotent_hint=spec.read_only,
            open_world_hint=False,
        ),
    )


def _run_tool_bounded(
    tools: dict[str, ToolSpec], name: str, raw: dict[str, Any], workspace: Path, timeout_s: float,
    cancel: threading.Event, warm_worker: bool = False,
) -> tuple[str, bool, str | None]:
    """`run_tool` in a forked child killed at `timeout_s` (raises ToolTimeout).

    Returns (text for the model, is_error, the result model's JSON or None): the result crosses the
    process boundary as the same JSON the structured content is made of, never revalidated.
    """

    from ..tools.forked_call import ToolCrashed, run_bounded
    from ..tools.worker import shared_pool
    from .context import run_tool

    # One warm worker for the session's runs, opened by the first call of a tool that forks its runs from it
    # (its declaration says so: `ToolSpec.forks`; tools/worker.py).
    spec = tools.get(name)
    pool = shared_pool() if warm_worker and spec is not None and spec.forks else None
    if pool is not None:
        # Started here, in the server: the forked tool call below uses the worker but could not keep one alive.
        pool.prewarm(workspace)

    def call() -> tuple[str, bool, str | None]:
        output, is_error, result = run_tool(tools, name, raw, workspace)
        return output, is_error, None if result is None else result.model_dump_json()

    try:
        return run_bounded(call, timeout_s, cancel)
    except ToolCrashed as e:
        return f"tool {name} crashed: {e}", True, None


def build_server(
    workspace: Path, tools: dict[str, ToolSpec] | None = None, *, tool_timeout: float = TOOL_TIMEOUT,
    warm_worker: bool = False,
) -> Server:
    """An MCP server over `tools` (default: the registry plus `read_reference`) for one workspace.

    `warm_worker`: run the tools' harness runs through a warm worker that lives as long as this process
    (`warpgrad mcp` does; an in-process server in a test leaves its host process alone).

    The default tools are loaded on the first request that needs them, not here (see the module doc).
    """
    workspace = Path(workspace).resolve()
    loaded: list[dict[str, ToolSpec]] = [] if tools is None else [tools]
    records: dict[str, str] = {}
    numbers = itertools.count(1)

    def the_tools() -> dict[str, ToolSpec]:
        if not loaded:
            from .context import agent_tools

            loaded.append(agent_tools())
        return loaded[0]

    def skill_text() -> str:
        from .context import render_skill_for

        return render_skill_for(the_tools())

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[mcp_tool(s) for s in the_tools().values()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        from ..tools.forked_call import ToolTimeout

        tools = the_tools()
        spec, started = tools.get(params.name), time.monotonic()

        async def heartbeat() -> None:
            # The tools run user code for seconds to minutes and report nothing meanwhile; elapsed time
            # at least tells the host the call is alive (a no-op when the client asked for no progress).
            while True:
                await anyio.sleep(PROGRESS_EVERY)
                elapsed = time.monotonic() - started
                try:
                    await ctx.session.report_progress(
                        elapsed, None, f"{params.name}: running for {elapsed:.0f} s"
                    )
                except Exception:  # noqa: BLE001 -- a lost progress notification must not fail the tool call
                    return

        result: Any = None
        async with anyio.create_task_group() as tg:
            if spec is not None and spec.long_running:
                tg.start_soon(heartbeat)
            # The call runs in a forked child that is killed at the timeout: a thread could not be
            # stopped, and a tool that kept running could still write to the ledger afterwards.
            cancel = threading.Event()
            try:
                output, is_error, result = await anyio.to_thread.run_sync(
                    _run_tool_bounded, tools, params.name, params.arguments or {}, workspace, tool_timeout,
                    cancel, warm_worker, abandon_on_cancel=True,
                )
            except ToolTimeout:
                output = (
                    f"{params.name} timed out after {tool_timeout:.0f} s and was stopped; narrow the check "
                    "(fewer iterations, a shrunk repro) and call it again."
                )
                is_error = True
            finally:
                cancel.set()  # a cancelled request kills its tool's process too (a no-op once it is done)
            tg.cancel_scope.cancel()
        if is_error or result is None:
            return types.CallToolResult(content=_text(output), is_error=True)
        uri = f"{RESULT_URI}{next(numbers)}-{params.name}"
        records[uri] = result
        if len(records) > KEEP_RESULTS:
            records.pop(next(iter(records)))
        link = types.ResourceLink(type="resource_link", uri=uri, name=uri.removeprefix(RESULT_URI),
                                  mime_type="application/json",
                                  description=f"the full {params.name} record ({len(result)} characters)")
        # The structured content is fitted to the tool's budget like the text (some hosts show it to the model;
        # the full record was 653k characters on the largest suite program); the link reads the whole record.
        data = json.loads(result)
        if spec is not None:
            data = spec.structured(data, "full" if (params.arguments or {}).get("detail") == "full" else "summary")
        return types.CallToolResult(content=[*_text(output), link], structured_content=data)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=PROMPT_NAME,
                    title="Fix wrong gradients in a Warp program",
                    description="The warpgrad skill: measure the gradient against finite differences, find the "
                    "cause, fix it, and prove the fix.",
                    arguments=[
                        types.PromptArgument(
                            name="script",
                            description="The training script, workspace-relative.",
                            required=False,
                        )
                    ],
                )
            ]
        )

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != PROMPT_NAME:
            raise MCPError(
                types.INVALID_PARAMS, f"unknown prompt {params.name!r}; the one prompt is {PROMPT_NAME!r}"
            )
        text = skill_text()
        script = (params.arguments or {}).get("script")
        if script:
            text += f"\n\nThe program to examine is `{script}` in the workspace {workspace}."
        return types.GetPromptResult(
            description="warpgrad skill",
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))],
        )

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        resources = [
            types.Resource(
                uri=SKILL_URI,
                name="SKILL.md",
                mime_type="text/markdown",
                description="The warpgrad skill, rendered.",
            )
        ]
        resources += [
            types.Resource(
                uri=REFERENCE_URI.format(n),
                name=n,
                mime_type="text/markdown",
                description=f"warpgrad reference: {n}",
            )
            for n in prompt.reference_names()
        ]
        return types.ListResourcesResult(resources=resources)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri in records:
            return types.ReadResourceResult(
                contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=records[uri])]
            )
        if uri.startswith(RESULT_URI):
            raise MCPError(types.INVALID_PARAMS, f"no record {uri} in this session (the oldest are dropped after "
                           f"{KEEP_RESULTS}); call the tool again")
        if uri == SKILL_URI:
            text = skill_text()
        else:
            name = uri.removeprefix(REFERENCE_URI.format(""))
            if uri == name or name not in prompt.reference_names():
                raise MCPError(
                    types.INVALID_PARAMS, f"unknown resource {uri}; list resources to see the references"
                )
            text = prompt.read_reference(name)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)]
        )

    return Server(
        SERVER_NAME,
        version=_warpgrad_version,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


INVALID_REQUEST = -32600


def _bad_message_reply(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error for a line that is not JSON (-32700) or not a JSON-RPC message (-32600)."""
    not_json = isinstance(exc, ValidationError) and any(e["type"] == "json_invalid" for e in exc.errors())
    code, what = (types.PARSE_ERROR, "Parse error: the line is not valid JSON") if not_json else (
        INVALID_REQUEST, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message")
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=what))


async def serve_stdio(workspace: Path, tool_timeout: float = TOOL_TIMEOUT) -> None:
    """Serve over stdin/stdout until the client closes the connection.

    A line that is not a JSON-RPC message gets an error reply with id null, as JSON-RPC 2.0 asks
    (the transport alone would drop it silently and leave the client waiting).
    """
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    async with stdio_server() as (read_stream, write_stream):
        # Tools load on first use, after fd 1 is diverted.
        server = build_server(workspace, tool_timeout=tool_timeout, warm_worker=True)
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def screen() -> None:
            async with send, read_stream:
                async for msg in read_stream:
                    if isinstance(msg, Exception):
                        await write_stream.send(SessionMessage(_bad_message_reply(msg)))
                    else:
                        await send.send(msg)

        async with anyio.create_task_group() as tg:
            tg.start_soon(screen)
            await server.run(receive, write_stream, server.create_initialization_options())
