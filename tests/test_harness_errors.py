"""A failure inside warpgrad's own hooks is ours: it never surfaces at the user's line, and the result says so."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from warpgrad.tools.harness.protocol import PROTOCOL_VERSION, RunConfig

pytestmark = pytest.mark.warp


def test_a_listener_that_raises_leaves_the_users_launch_running_and_is_recorded(tmp_path):
    script = tmp_path / "probe_hooks.py"
    script.write_text(textwrap.dedent('''
        import warp as wp
        from warpgrad.tools.harness import hooks

        class Broken(hooks.Listener):
            def before_launch(self, call):
                raise RuntimeError("bug in a warpgrad listener")

        @wp.kernel
        def double(a: wp.array(dtype=float)):
            i = wp.tid()
            a[i] = a[i] * 2.0

        hooks.install()
        b = Broken()
        hooks.add_listener(b)
        a = wp.ones(3, dtype=float)
        wp.launch(double, dim=3, inputs=[a])   # the user's line: must not raise
        wp.launch(double, dim=3, inputs=[a])
        print("values", a.numpy().tolist())
        print("broken", b.broken.splitlines()[0])
    '''))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "values [4.0, 4.0, 4.0]" in out.stdout
    assert "broken before_launch: RuntimeError: bug in a warpgrad listener" in out.stdout


def test_a_listener_that_raises_at_script_end_is_recorded_and_the_result_is_still_written(tmp_path):
    (tmp_path / "bad_listener.py").write_text(textwrap.dedent('''
        from warpgrad.tools.harness import hooks

        class Bad(hooks.Listener):
            key = "bad"

            def __init__(self, session):
                self.s = session

            def script_end(self):
                raise RuntimeError("bug at script_end")

            def result(self):
                return {"seen": True}
    '''))
    (tmp_path / "train.py").write_text("import warp as wp\nprint('loss', 1.0)\n")
    result = tmp_path / "result.json"
    cfg = tmp_path / "cfg.json"
    cfg.write_text(RunConfig(workspace=str(tmp_path), script=str(tmp_path / "train.py"),
                             listeners=["bad_listener:Bad"]).model_dump_json())
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "WARPGRAD_RESULT": str(result)}
    out = subprocess.run([sys.executable, "-m", "warpgrad.tools.harness.main", str(cfg)], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=env, check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads(result.read_text())
    assert data["status"] == "completed"
    assert data["listener_errors"]["bad"].startswith("script_end: RuntimeError: bug at script_end")
    assert "bug at script_end" not in out.stderr  # ours, recorded in the result, never shown as the user's


def _run_harness_main(tmp_path, config_text: str) -> tuple[subprocess.CompletedProcess, dict]:
    cfg, result = tmp_path / "cfg.json", tmp_path / "result.json"
    cfg.write_text(config_text, encoding="utf-8")
    env = {**os.environ, "WARPGRAD_RESULT": str(result)}
    out = subprocess.run([sys.executable, "-m", "warpgrad.tools.harness.main", str(cfg)], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=env, check=False)
    return out, json.loads(result.read_text(encoding="utf-8"))


@pytest.mark.parametrize("version", [PROTOCOL_VERSION + 1, None])
def test_a_config_of_another_protocol_version_is_refused_as_our_error(tmp_path, version):
    (tmp_path / "train.py").write_text("raise SystemExit('the script must not run')\n")
    raw = RunConfig(workspace=str(tmp_path), script=str(tmp_path / "train.py")).model_dump()
    raw["version"] = version
    out, data = _run_harness_main(tmp_path, json.dumps(raw))
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert data["status"] == "harness_error" and data["error"]["kind"] == "harness_failed"
    assert f"protocol version {PROTOCOL_VERSION}" in data["error"]["message"]
    assert "must not run" not in out.stderr


def test_an_invalid_config_is_refused_as_our_error_naming_the_field(tmp_path):
    out, data = _run_harness_main(tmp_path, json.dumps({"version": PROTOCOL_VERSION, "mode": "run",
                                                        "workspace": str(tmp_path), "no_such_option": 1}))
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert data["status"] == "harness_error" and "no_such_option" in data["error"]["message"]
