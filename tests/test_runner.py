"""The sandboxed runner: every way a user script can fail comes back as a structured result."""

import sys
from pathlib import Path

import pytest

from warpgrad.tools.child_process import run_process, strip_warp_chatter
from warpgrad.tools.registry import ToolError
from warpgrad.tools.run_script import RunScriptArgs, run_script

pytestmark = pytest.mark.warp


def run(ws: Path, body: str, name: str = "s.py", **kw):
    (ws / name).write_text(body, encoding="utf-8")
    return run_script(RunScriptArgs(script=name, record=False, **kw), ws)


def test_a_script_runs_like_python_script_py_with_argv_and_its_folder_on_sys_path(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "helper.py").write_text("VALUE = 41\n", encoding="utf-8")
    (tmp_path / "pkg" / "main.py").write_text(
        "import sys, helper\nprint('argv', sys.argv[1:], 'value', helper.VALUE + 1)\n", encoding="utf-8"
    )
    r = run_script(RunScriptArgs(script="pkg/main.py", args=["--n", "3"], record=False), tmp_path)
    assert r.ok, r.error
    assert "argv ['--n', '3'] value 42" in r.stdout_tail
    assert r.warp_version and r.device == "cpu"


def test_warp_chatter_never_reaches_the_users_output(tmp_path):
    r = run(tmp_path, "import warp as wp\nwp.init()\nprint('mine')\n")
    assert r.stdout_tail.strip() == "mine"
    assert "CUDA driver" not in r.stderr_tail
    assert strip_warp_chatter("Warp 1.19.0 initialized:\n   Devices:\nkeep me\n") == "keep me"


def test_a_loss_trajectory_is_parsed_from_what_the_script_prints(tmp_path):
    r = run(tmp_path, "for i in range(4):\n    print(f'iter {i} loss {1.0/(i+1):.4f}')\n")
    assert r.loss_trajectory == [1.0, 0.5, 0.3333, 0.25]
    assert r.trend == "improving"


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ("def f(:\n    pass\n", "syntax_error"),
        ("import definitely_not_a_module_xyz\n", "missing_import"),
        ("raise ValueError('boom')\n", "script_raised"),
        ("import sys\nsys.exit(3)\n", "exit_code"),
        ("import numpy as np\nx = np.ones((1 << 40,), dtype=np.uint8)\n", "out_of_memory"),
    ],
)
def test_each_failure_of_the_script_is_named(tmp_path, body, kind):
    r = run(tmp_path, body, memory_mb=2048)
    assert not r.ok
    assert r.error.kind == kind, r.error


def test_the_syntax_error_names_its_line(tmp_path):
    r = run(tmp_path, "x = 1\ny = (\n")
    assert r.error.kind == "syntax_error" and r.error.line == 2


def test_a_hang_is_killed_at_the_timeout_with_its_children(tmp_path):
    body = "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\ntime.sleep(60)\n"
    r = run(tmp_path, body, timeout_s=3)
    assert r.timed_out and r.error.kind == "timeout"
    assert r.wall_s < 45  # the children sleep 60 s: a hang-catcher (bench/bench_bounded.py)


def test_a_segfault_is_reported_as_a_crash(tmp_path):
    r = run(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert r.error.kind == "crashed" and r.signal == "SIGSEGV"


def test_megabytes_of_output_are_bounded(tmp_path):
    r = run(tmp_path, "import sys\nfor i in range(200000):\n    print('x' * 50)\nprint('the end')\n")
    assert r.ok
    assert r.output_truncated
    assert len(r.stdout_tail) <= 16_000
    assert r.stdout_tail.rstrip().endswith("the end")


def test_a_missing_script_and_a_path_outside_the_workspace_are_refused(tmp_path):
    with pytest.raises(ToolError):
        run_script(RunScriptArgs(script="../elsewhere.py", record=False), tmp_path)
    r = run_script(RunScriptArgs(script="nope.py", record=False), tmp_path)
    assert r.error.kind == "file_not_found"


def test_run_process_reports_a_missing_executable(tmp_path):
    r = run_process(["/no/such/binary"], cwd=tmp_path)
    assert r.returncode == 127 and "could not start" in r.stderr_tail
    r = run_process([sys.executable, "-c", "print('ok')"], cwd=tmp_path)
    assert r.ok and r.stdout_tail.strip() == "ok"


def test_a_diverging_run_validates_against_the_schema_it_advertises(tmp_path):
    # NaN/inf losses travel as null in JSON: the advertised output schema must allow that, or a strict MCP
    # client rejects the one result that shows the divergence.
    import json

    import jsonschema

    from warpgrad.tools.run_script import RunScriptResult

    r = run(tmp_path, "for i, v in enumerate([1.0, 3.5, float('inf'), float('nan')]):\n    print(f'iter {i} loss {v}')\n")
    payload = json.loads(r.model_dump_json())
    assert payload["loss_trajectory"][:2] == [1.0, 3.5] and payload["loss_trajectory"][2:] == [None, None]
    jsonschema.validate(payload, RunScriptResult.model_json_schema(mode="serialization"))


def test_output_and_a_metric_regex_built_to_backtrack_end_within_the_runs_time(tmp_path):
    import time

    body = ("print('loss' + ' ' * 400 + 'x')\n" * 20) + "print('a' * 40 + 'b')\nprint('iter 1 loss 0.5')\n"
    start = time.monotonic()
    r = run(tmp_path, body, timeout_s=30, metric_regex="(a+)+$")
    assert time.monotonic() - start < 120  # a hang-catcher; r.ok says it ended within the run's time
    assert r.ok, r.error
    assert r.loss_trajectory == [0.5]
    assert r.metric_values == [] and r.metric_final is None


def test_a_metric_regex_still_reads_every_value_it_matches(tmp_path):
    r = run(tmp_path, "for i in range(3):\n    print(f'dist: {0.5 / (i + 1):.3f}')\n", metric_regex=r"dist: (\S+)")
    assert r.metric_values == [0.5, 0.25, 0.167] and r.metric_error is None


def test_a_script_that_rewrites_itself_is_recorded_as_the_code_that_ran_and_flagged(tmp_path):
    import hashlib

    (tmp_path / "helper.py").write_text("VALUE = 1\n", encoding="utf-8")
    body = ("import helper\n"
            "print('ran', helper.VALUE)\n"
            "open(__file__, 'w').write('print(\"a different program\")\\n')\n"
            "open(helper.__file__, 'w').write('VALUE = 2\\n')\n")
    original = hashlib.sha256(body.encode()).hexdigest()
    helper = hashlib.sha256(b"VALUE = 1\n").hexdigest()
    r = run(tmp_path, body)
    assert r.ok and "ran 1" in r.stdout_tail, r.error
    assert r.files["s.py"] == original and r.files["helper.py"] == helper
    assert r.files_changed == ["helper.py", "s.py"]
    # A run that changes nothing is not flagged, and its hashes are the files'.
    again = run(tmp_path, "import helper\nprint(helper.VALUE)\n", name="t.py")
    assert again.files_changed == [] and again.files["helper.py"] == hashlib.sha256(b"VALUE = 2\n").hexdigest()
