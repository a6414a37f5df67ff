"""Recorded Anthropic Messages API responses served to a real `anthropic.Anthropic` client (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import httpx2

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"
KEY = "sk-ant-api03-test-key-never-recorded"


class ReplayTransport(httpx2.MockTransport):
    """Serves recorded Messages API responses in order and keeps every request it was sent."""

    def __init__(self, *names: str) -> None:
        self.names, self.requests = list(names), []
        super().__init__(self.respond)

    def respond(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        name = self.names.pop(0)
        raw = (FIXTURES / name).read_text(encoding="utf-8")
        if name.endswith(".sse"):
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=raw.encode())
        recorded = json.loads(raw)
        return httpx2.Response(recorded["status_code"], headers=recorded["headers"], json=recorded["body"])

    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests]


def real_client(transport: ReplayTransport) -> anthropic.Anthropic:
    """The real client, its HTTP served by `transport`."""
    return anthropic.Anthropic(api_key=KEY, http_client=httpx2.Client(transport=transport), max_retries=0)
