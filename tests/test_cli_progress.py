"""Long commands show what they are doing and how far along on a terminal, and nothing elsewhere.

Run in a real pseudo-terminal (Python's `pty`): `gradcheck` and `diagnose` name the FD evaluations done out of
planned ("FD at iteration 1: 6/11 evaluations"), `eval` counts cases from the start ("0/1", then "1/1"). With `--json`, or with output to
a pipe, none of it appears (JSON stays parseable, CI logs stay clean).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from programs import write_program

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
FD_COUNT = re.compile(r"FD at iteration \d+: \d+/\d+ evaluations")


def _in_pty(argv: list[str], cwd: Path, timeout_s: float = 600) -> tuple[int, str]:
    """Run `argv` with stdin, stdout and stderr on a pseudo-terminal; returns (exit code, what it showed)."""
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="160", LINES="40")
    for var in ("NO_COLOR", "CI", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(var, None)
    p = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal's other end has closed it
                    break
                if not data:
                    break
                chunks.append(data)
            elif p.poll() is not None:
                break
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    return rc, ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def _warpgrad(*args: str) -> list[str]:
    return [sys.executable, "-m", "warpgrad", *args]


@pytest.mark.warp
def test_gradcheck_on_a_terminal_counts_the_fd_evaluations_and_is_quiet_with_json_or_a_pipe(tmp_path):
    write_program(tmp_path, "healthy_optim")
    rc, shown = _in_pty(_warpgrad("gradcheck", "train.py", "--no-record"), tmp_path)
    assert rc == 0, shown[-3000:]
    assert "capture run: train.py" in shown
    counts = FD_COUNT.findall(shown)
    assert counts, shown[-3000:]
    done = [tuple(map(int, re.search(r"(\d+)/(\d+)", c).groups())) for c in counts]
    assert all(d <= t for d, t in done) and done[0][0] == 0 and max(d for d, _ in done) > 0

    rc, shown = _in_pty(_warpgrad("gradcheck", "train.py", "--no-record", "--json"), tmp_path)
    assert rc == 0 and not FD_COUNT.search(shown) and "capture run" not in shown
    json.loads(shown[shown.index("{"):])  # the terminal shows the JSON document and nothing else

    p = subprocess.run(_warpgrad("gradcheck", "train.py", "--no-record"), cwd=tmp_path, capture_output=True,
                       text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert not FD_COUNT.search(p.stdout + p.stderr) and "capture run" not in p.stdout + p.stderr


@pytest.mark.warp
@pytest.mark.slow
def test_diagnose_on_a_terminal_names_the_stage_and_the_fd_count(tmp_path):
    write_program(tmp_path, "healthy_optim")
    rc, shown = _in_pty(_warpgrad("diagnose", "train.py", "--no-record", "--bisect", "never"), tmp_path)
    assert rc == 0, shown[-3000:]
    assert re.search(r"FD check \(capture and tape, then perturbed runs\): " + FD_COUNT.pattern, shown), shown[-3000:]
    rc, shown = _in_pty(_warpgrad("diagnose", "train.py", "--no-record", "--bisect", "never", "--json"), tmp_path)
    assert rc == 0 and not FD_COUNT.search(shown) and "FD check" not in shown


@pytest.mark.warp
def test_eval_on_a_terminal_counts_the_cases_and_is_quiet_with_json(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    skill = tmp_path / "skill"
    shutil.copytree(Path(__file__).parent / "fixtures" / "published_skill", skill)
    argv = _warpgrad("eval", "--suite", str(skill / "evals"), "--cases", "negative-plotting", "--jobs", "1")
    _, shown = _in_pty([*argv, "--out", str(tmp_path / "a")], tmp_path)
    assert "autopilot: negative-plotting" in shown and re.search(r"\b1/1\b", shown), shown[-3000:]
    assert re.search(r"autopilot: 1 case, 1 at a time.*\b0/1\b", shown), shown[-3000:]  # the count from the start
    _, shown = _in_pty([*argv, "--out", str(tmp_path / "b"), "--json"], tmp_path)
    assert "autopilot: negative-plotting" not in shown and not re.search(r"\b1/1\b", shown)
    json.loads(shown[shown.index("{"):])
