"""warpgrad's pytest plugin (entry point `pytest11: warpgrad`): gradient checks as ordinary tests.

It registers the `gradcheck` marker (select or skip gradient tests with `-m gradcheck`), names warpgrad and Warp
in the report header, and lets pytest rewrite the assertions of `warpgrad.testing`, whose failures carry the
headline, the evidence table and the top hypothesis. It imports neither Warp nor the tools at start-up: a test
session that never checks a gradient pays nothing.
"""

from __future__ import annotations

from importlib import metadata

import pytest

pytest.register_assert_rewrite("warpgrad.testing")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gradcheck: checks gradients with warpgrad (runs Warp programs; slow)")


def pytest_report_header(config: pytest.Config) -> str:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    return f"warpgrad {version('warpgrad')} (gradient checks), warp-lang {version('warp-lang')}"
