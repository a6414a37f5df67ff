"""A failure inside warpgrad's own hooks is ours: it never surfaces at the user's line, and the result says so."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from warpgrad.tools.child_process import run_harness
from warpgrad.tools.harness.protocol import PROTOCOL_VERSION, HarnessResult, RunConfig

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


def _run_harness(tmp_path, cfg: dict, **env_extra: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    result = tmp_path / "result.json"
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps({"version": PROTOCOL_VERSION, "workspace": str(tmp_path), **cfg}))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "WARPGRAD_RESULT": str(result), **env_extra}
    out = subprocess.run([sys.executable, "-m", "warpgrad.tools.harness.main", str(cfg_path)], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=env, check=False)
    return out, (json.loads(result.read_text()) if result.is_file() else None)


TRAIN = '''
import warp as wp

@wp.kernel
def double(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] * 2.0

a = wp.ones(3, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(double, dim=3, inputs=[a])
wp.copy(wp.zeros(3, dtype=float), a)
print("values", a.numpy().tolist())
'''


@pytest.mark.parametrize("hook", ["launch", "copy"])
def test_an_exception_in_our_own_hook_code_is_ours_not_the_users(tmp_path, hook):
    # A bug in the wrapper itself (outside any listener): injected into our own call-site lookup, which
    # the launch and copy wrappers run before calling Warp.
    (tmp_path / "bug_in_hooks.py").write_text(textwrap.dedent(f'''
        import sys
        from warpgrad.tools.harness import hooks

        original = hooks.call_site

        def call_site(depth=2):
            if sys._getframe(1).f_code.co_name == "_before_{hook}":
                raise RuntimeError("bug in warpgrad's {hook} hook")
            return original(depth + 1)

        class Bug(hooks.Listener):
            key = "bug"

            def __init__(self, session):
                pass

            def result(self):
                return {{}}

        hooks.call_site = call_site
    '''))
    (tmp_path / "train.py").write_text(TRAIN)
    out, data = _run_harness(tmp_path, {"mode": "run", "script": str(tmp_path / "train.py"),
                                        "listeners": ["bug_in_hooks:Bug"]})
    assert out.returncode == 0, out.stderr
    assert "values [2.0, 2.0, 2.0]" in out.stdout  # the user's script ran on, its launch and copy unchanged
    assert data is not None and data["status"] == "completed" and data["error"] is None
    for key in ("run", "bug"):  # no listener saw the call: each one's evidence says it is incomplete
        assert data["listener_errors"][key].startswith(f"hook {hook}: RuntimeError: bug in warpgrad's {hook} hook")
        assert "Traceback" in data["listener_errors"][key]
    assert f"bug in warpgrad's {hook} hook" not in out.stderr


def test_a_device_that_does_not_exist_is_reported_as_the_harness_failing_to_start(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    out, data = _run_harness(tmp_path, {"mode": "run", "script": str(tmp_path / "train.py"), "device": "cuda:7"},
                             CUDA_VISIBLE_DEVICES="")
    assert out.returncode == 70
    assert data is not None, out.stderr
    assert data["status"] == "harness_error"
    err = data["error"]
    assert err["kind"] == "harness_failed" and err["cause"] == "warp_start"
    assert "not of your script" in err["message"] and "cuda:7" in err["message"]
    assert "set_device" in err["harness_traceback"]
    assert "traceback" not in err  # the user's traceback (file/line) is not ours to fill
    assert data["warp_version"]
    assert "values" not in out.stdout  # the script never ran


def test_the_parent_reads_a_failed_start_as_that_failure_not_as_a_protocol_mismatch(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    (tmp_path / "train.py").write_text(TRAIN)
    out = run_harness(RunConfig(workspace=str(tmp_path), script=str(tmp_path / "train.py"), device="cuda:7"),
                      HarnessResult, cwd=tmp_path)
    assert out.result is not None and out.result.status == "harness_error"
    assert out.result.error is not None and out.result.error.cause == "warp_start"
    assert "cuda:7" in out.result.error.message and "protocol version" not in out.result.error.message


def test_a_failing_warp_import_is_reported_as_the_harness_failing_to_start(tmp_path):
    # A workspace module named `warp` shadows the real one (PYTHONPATH): the import fails in boot().
    (tmp_path / "warp").mkdir()
    (tmp_path / "warp" / "__init__.py").write_text("raise ImportError('this warp is broken')\n")
    (tmp_path / "train.py").write_text(TRAIN)
    out, data = _run_harness(tmp_path, {"mode": "run", "script": str(tmp_path / "train.py")})
    assert out.returncode == 70
    assert data is not None, out.stderr
    assert data["status"] == "harness_error" and data["error"]["type"] == "ImportError"
    assert "this warp is broken" in data["error"]["message"]


OLD_WARP_PYTHON = Path(os.environ.get("WARPGRAD_OLD_WARP_VENV", "/work/venv-warp116")) / "bin" / "python"


@pytest.mark.skipif(not OLD_WARP_PYTHON.exists(), reason="no older-Warp venv (set WARPGRAD_OLD_WARP_VENV)")
def test_an_unsupported_warp_is_refused_with_both_versions_named(tmp_path):
    # The older Warp venv of the version-caveat tests has Warp, numpy and pydantic (what the harness imports
    # besides itself, as in any environment warpgrad is installed in): the harness entry point must start
    # there far enough to say why it cannot run.
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "warpgrad").symlink_to(root)
    (tmp_path / "train.py").write_text(TRAIN)
    result = tmp_path / "result.json"
    cfg = tmp_path / "cfg.json"
    cfg.write_text(RunConfig(workspace=str(tmp_path), script=str(tmp_path / "train.py")).model_dump_json())
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "pkg"), "WARPGRAD_RESULT": str(result)}
    out = subprocess.run([str(OLD_WARP_PYTHON), "-m", "warpgrad.tools.harness.main", str(cfg)], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=env, check=False)
    assert out.returncode == 70, out.stderr
    data = json.loads(result.read_text())
    assert data["status"] == "harness_error"
    assert data["error"]["cause"] == "unsupported_warp"
    assert f"warpgrad supports warp-lang 1.19..2.0 (exclusive; warp-lang>=1.19,<2); this is {data['warp_version']}" \
        in data["error"]["message"]
    assert data["warp_version"].startswith("1.1") and not data["warp_version"].startswith("1.19")


def test_the_users_traceback_holds_only_the_users_frames(tmp_path):
    (tmp_path / "train.py").write_text("def f():\n    raise ValueError('boom')\n\n\nf()\n")
    out, data = _run_harness_main(tmp_path, RunConfig(workspace=str(tmp_path), script=str(tmp_path / "train.py"))
                                  .model_dump_json())
    assert data["status"] == "error" and data["error"]["kind"] == "script_raised", out.stderr
    frames = [(Path(f["file"]).name, f["line"], f["func"]) for f in data["error"]["traceback"]]
    assert frames == [("train.py", 5, "<module>"), ("train.py", 2, "f")]  # none of the harness's, wherever it lives
