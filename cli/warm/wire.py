"""The messages between the CLI and the warm server: one JSON document per SOCK_SEQPACKET message."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter


class CommandRequest(BaseModel):
    """Run `warpgrad ARGV...` as the caller would have; its stdin, stdout and stderr ride along (SCM_RIGHTS)."""

    kind: Literal["command"] = "command"
    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int = Field(ge=0, le=0o777)


class ControlRequest(BaseModel):
    kind: Literal["status", "stop"]


Request = Annotated[CommandRequest | ControlRequest, Field(discriminator="kind")]
REQUEST = TypeAdapter(Request)


class Started(BaseModel):
    """The command runs, in the server's child `pid`."""

    kind: Literal["started"] = "started"
    pid: int


class Exited(BaseModel):
    """The command ended with exit status `code` (128 + N for a signal N, as a shell reports it)."""

    kind: Literal["exited"] = "exited"
    code: int


class Refused(BaseModel):
    """Not run here; the caller runs the command in its own process."""

    kind: Literal["refused"] = "refused"
    reason: str


class Status(BaseModel):
    kind: Literal["status"] = "status"
    pid: int
    python: str
    package: str
    started_s_ago: float
    idle_exit_s: float
    commands_served: int
    running: int
    stopping: bool = False


Reply = Annotated[Started | Exited | Refused | Status, Field(discriminator="kind")]
REPLY = TypeAdapter(Reply)
