"""User code runs in a sandbox: the whole tree dies at the timeout, no secrets in, none out.

Each test that runs code runs under both isolations: bubblewrap and the subreaper launcher alone.
CI installs bubblewrap (.ci/run); there a bwrap that cannot run is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from warpgrad.tools.child_process import run_harness, run_process
from warpgrad.tools.harness.protocol import HarnessResult, RunConfig
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.run_script import RunScriptArgs, run_script
from warpgrad.tools.sandbox import (
    SandboxPolicy,
    bwrap_argv,
    child_env,
    detect_isolation,
    gpu_devices,
    redact,
)

BWRAP_OK = detect_isolation("auto").isolation == "bwrap"


def _need_bwrap() -> None:
    if BWRAP_OK:
        return
    if os.environ.get("CI"):
        pytest.fail("bwrap must be usable in CI (.ci/run installs bubblewrap): " + detect_isolation("auto").reason)
    pytest.skip("bwrap unusable here: " + detect_isolation("auto").reason)


@pytest.fixture(params=["bwrap", "subreaper"])
def isolation(request, monkeypatch):
    if request.param == "bwrap":
        _need_bwrap()
    monkeypatch.setenv("WARPGRAD_SANDBOX", request.param)
    return request.param


def _alive(marker: str) -> list[int]:
    """Pids of processes whose command line holds `marker`."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def _run(ws: Path, body: str, **kw):
    (ws / "s.py").write_text(body, encoding="utf-8")
    return run_script(RunScriptArgs(script="s.py", record=kw.pop("record", False), **kw), ws)


def test_a_child_started_in_a_new_session_dies_with_the_run(tmp_path, isolation):
    marker = "61.0123"
    r = _run(tmp_path, f"import subprocess\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
             "print('started')\n", timeout_s=10)
    assert r.ok and "started" in r.stdout_tail
    assert r.wall_s < 45, r.wall_s  # was 61 s: the detached sleep held the run open (bench/bench_bounded.py)
    assert _alive(marker) == []


def test_a_double_fork_is_killed_at_the_timeout(tmp_path, isolation):
    marker = "62.0456"
    body = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', '{marker}'])\n"
        "    os._exit(0)\n"
        "time.sleep(60)\n"
    )
    t0 = time.monotonic()
    r = _run(tmp_path, body, timeout_s=2)
    assert r.timed_out and r.error.kind == "timeout"
    assert time.monotonic() - t0 < 45  # the fork sleeps 60 s: a hang-catcher
    assert _alive(marker) == []


def test_run_process_kills_detached_descendants_of_any_command(tmp_path):
    marker = "63.0789"
    script = f"import subprocess\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
    r = run_process([sys.executable, "-c", script], cwd=tmp_path, timeout_s=10)
    assert r.ok and r.isolation == "subreaper" and r.wall_s < 45  # the sleep is 63 s: a hang-catcher
    assert _alive(marker) == []


def test_user_code_sees_no_secrets_and_what_it_prints_is_redacted_before_the_ledger(tmp_path, isolation,
                                                                                    monkeypatch):
    key = "sk-ant-api03-" + "x7" * 20
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789")
    monkeypatch.setenv("WARP_SOMETHING", "kept")
    (tmp_path / "leak.txt").write_text(f"{key}\ntok-0123456789\n", encoding="utf-8")
    body = ("import os, sys\nprint(sorted(k for k in os.environ if 'KEY' in k or 'TOKEN' in k))\n"
            "print('warp var', os.environ.get('WARP_SOMETHING'))\n"
            "print(open('leak.txt').read())\nsys.stderr.write(open('leak.txt').read())\n"
            "raise RuntimeError(open('leak.txt').read())\n")
    r = _run(tmp_path, body, record=True)
    assert "[]" in r.stdout_tail and "warp var kept" in r.stdout_tail
    assert "[REDACTED]" in r.stdout_tail and "[REDACTED]" in r.stderr_tail
    ledger = (tmp_path / ".warpgrad" / "ledger.jsonl").read_text(encoding="utf-8")
    assert key not in ledger and "tok-0123456789" not in ledger and "x7x7x7" not in ledger
    assert Ledger(tmp_path).verify().ok


def test_the_environment_is_an_allow_list():
    env = child_env({"PATH": "/bin", "HOME": "/h", "AWS_SECRET_ACCESS_KEY": "a", "WARP_API_KEY": "b",
                     "ANTHROPIC_BASE_URL": "c", "GH_TOKEN": "d", "DB_PASSWORD": "e", "RANDOM_VAR": "f",
                     "LC_ALL": "C", "CUDA_VISIBLE_DEVICES": "0"})
    assert env == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "CUDA_VISIBLE_DEVICES": "0"}
    with pytest.raises(ValueError, match="secret"):
        child_env({}, {"X_TOKEN": "t"})
    asked = child_env({"WARPGRAD_PASS_ENV": "DATA_DIR, GH_TOKEN", "DATA_DIR": "/d", "GH_TOKEN": "t", "OTHER": "o"})
    assert asked == {"WARPGRAD_PASS_ENV": "DATA_DIR, GH_TOKEN", "DATA_DIR": "/d"}
    assert redact("a sk-ant-abcdefghijk b ghp_" + "a" * 36 + " c", []) == "a [REDACTED] b [REDACTED] c"
    assert redact("value hunter22 here", ["hunter22"]) == "value [REDACTED] here"


def test_under_bwrap_the_root_is_read_only_the_network_is_gone_and_only_its_own_kernel_cache_is_writable(
        tmp_path, monkeypatch):
    _need_bwrap()
    monkeypatch.setenv("WARPGRAD_SANDBOX", "bwrap")
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("WARP_CACHE_PATH", str(cache))
    monkeypatch.delenv("WARPGRAD_SHARED_KERNEL_CACHE", raising=False)  # the isolation under test
    outside = tmp_path.parent / f"outside-{tmp_path.name}"
    ws = tmp_path / "ws"
    ws.mkdir()
    body = (
        "import json, os, socket, tempfile\n"
        "out = {}\n"
        f"for name, path in [('outside', {str(outside)!r}), ('etc', '/etc/wg-test'), "
        f"('cache', os.path.join({str(cache)!r}, 'probe')), ('ws', 'here.txt'), "
        "('own_cache', os.path.join(os.environ['WARP_CACHE_PATH'], 'probe')), "
        "('tmp', os.path.join(tempfile.gettempdir(), 'x'))]:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        out[name] = 'ok'\n"
        "    except OSError as e:\n"
        "        out[name] = e.strerror\n"
        "out['ifaces'] = sorted(n for _, n in socket.if_nameindex())\n"
        "out['pid'] = os.getpid()\n"
        "print(json.dumps(out))\n"
    )
    r = _run(ws, body)
    assert r.ok, r.error
    out = json.loads(r.stdout_tail.strip().splitlines()[-1])
    assert out["outside"] == "Read-only file system" and out["etc"] == "Read-only file system"
    assert out["own_cache"] == out["ws"] == out["tmp"] == "ok"
    assert out["cache"] == "Read-only file system"  # the user's: what a plain run of theirs loads
    assert out["ifaces"] == ["lo"]
    assert out["pid"] < 10  # a fresh PID namespace
    assert not outside.exists() and (ws / "here.txt").exists()
    monkeypatch.setenv("WARPGRAD_SANDBOX_NETWORK", "1")
    r = _run(ws, body)
    assert json.loads(r.stdout_tail.strip().splitlines()[-1])["ifaces"] != ["lo"]


def test_the_bwrap_command_line_binds_gpu_devices_and_keeps_the_network_only_when_asked(tmp_path):
    dev = tmp_path / "dev"
    (dev / "nvidia-caps").mkdir(parents=True)
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "dxg", "sda"):
        (dev / name).touch()
    found = gpu_devices(dev)
    assert [p.name for p in found] == ["nvidia-caps", "nvidia-uvm", "nvidia0", "nvidiactl", "dxg"]
    ws, cache = tmp_path / "ws", tmp_path / "cache"
    argv = bwrap_argv(SandboxPolicy(workspace=ws, writable=[cache], devices=found), ["python", "x.py"], cwd=ws)
    pairs = list(zip(argv, argv[1:], argv[2:]))
    for d in found:
        assert ("--dev-bind", str(d), str(d)) in pairs
    assert ("--bind", str(ws), str(ws)) in pairs and ("--bind", str(cache), str(cache)) in pairs
    assert argv[:5] == ["bwrap", "--ro-bind", "/", "/", "--dev"]
    assert argv.index("--dev-bind") > argv.index("--dev")  # device binds go on top of the fresh /dev
    assert {"--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session"} <= set(argv)
    assert argv[-3:] == ["--", "python", "x.py"]
    networked = bwrap_argv(SandboxPolicy(workspace=ws, network=True), ["true"], cwd=ws)
    assert "--unshare-net" not in networked and "--unshare-pid" in networked


def test_a_crash_and_an_exit_code_come_through_bwrap_unchanged(tmp_path, isolation):
    r = _run(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert r.error.kind == "crashed" and r.signal == "SIGSEGV"
    r = _run(tmp_path, "import sys\nsys.exit(3)\n")
    assert r.error.kind == "exit_code" and "3" in r.error.message


def test_the_harness_writes_into_the_outdirs_its_config_names_and_their_stderr_files_are_redacted(
        tmp_path, isolation, monkeypatch):
    import shutil
    import tempfile

    key = "sk-ant-api03-" + "q9" * 20
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    (tmp_path / "key.txt").write_text(key, encoding="utf-8")
    out = Path(tempfile.mkdtemp(prefix="warpgrad-test-out-"))
    try:
        err = out / "stderr.txt"
        # A batch evaluation's stderr goes to a file in its outdir, which the FD engine reads back.
        (tmp_path / "s.py").write_text(f"open({str(err)!r}, 'w').write('leaked ' + open('key.txt').read())\n",
                                       encoding="utf-8")
        cfg = RunConfig(workspace=str(tmp_path), script=str(tmp_path / "s.py"), device="cpu", outdir=str(out),
                        stderr=str(err))
        o = run_harness(cfg, HarnessResult, cwd=tmp_path, timeout_s=60, device="cpu")
        assert o.result is not None, o.error
        assert o.process.isolation == isolation and o.result.status == "completed"
        assert err.read_text(encoding="utf-8") == "leaked [REDACTED]"
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_bwrap_required_but_unusable_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPGRAD_SANDBOX", "bwrap")
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    r = run_process([sys.executable, "-c", "pass"], cwd=tmp_path, sandbox=SandboxPolicy(workspace=tmp_path))
    assert r.returncode == 127 and "bwrap isolation was required" in r.stderr_tail


def test_doctor_says_which_isolation_runs_get_and_proves_it_with_a_run(tmp_path, isolation, monkeypatch):
    import subprocess

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-doctor-check-0000")
    r = subprocess.run([sys.executable, "-m", "warpgrad", "doctor", "--json", "--workspace", str(tmp_path)],
                       capture_output=True, text=True, check=False, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["isolation"]["isolation"] == isolation and report["live_check"] == "ok"
    assert "ANTHROPIC_API_KEY" in report["withheld_env"] and "sk-ant-doctor" not in r.stdout


def test_the_ledger_signing_key_is_unreadable_to_user_code_under_bwrap(tmp_path, monkeypatch):
    # A script that could read the key could sign forged records: bwrap hides its folder, and the folder's
    # location is not passed in the environment.
    _need_bwrap()
    monkeypatch.setenv("WARPGRAD_SANDBOX", "bwrap")
    from warpgrad.tools.keys import key_dir
    from warpgrad.tools.ledger import load_key

    load_key(create=True)
    key_file = next(key_dir().iterdir())
    body = (f"import os\nprint('env', os.environ.get('WARPGRAD_KEY_DIR'))\n"
            f"try:\n    open({str(key_file)!r}, 'rb').read()\n    print('READ THE KEY')\n"
            f"except OSError as e:\n    print('refused', type(e).__name__)\n")
    r = _run(tmp_path, body)
    assert "refused" in r.stdout_tail and "READ THE KEY" not in r.stdout_tail, r.stdout_tail
    assert "env None" in r.stdout_tail


def test_a_harness_error_result_becomes_a_harness_failed_run_error(tmp_path):
    from warpgrad.tools.child_process import ProcessResult, parse_result
    from warpgrad.tools.harness.protocol import PROTOCOL_VERSION, harness_error
    from warpgrad.tools.run_script import describe_run

    proc = ProcessResult(argv=["python"], returncode=0)
    for raw in (harness_error("the config was bad"), {"version": -1, "status": "completed"},
                {"version": PROTOCOL_VERSION, "status": "no such status"}):
        run = describe_run(proc, parse_result(raw, HarnessResult), tmp_path, tmp_path / "s.py", [])
        assert run.error is not None and run.error.kind == "harness_failed", raw


def test_under_bwrap_warpgrads_state_is_read_only_and_planted_links_fail(tmp_path, monkeypatch):
    _need_bwrap()
    monkeypatch.setenv("WARPGRAD_SANDBOX", "bwrap")
    ws = tmp_path / "ws"
    ws.mkdir()
    Ledger(ws).append("note", {"text": "before"}, tool="test")
    target = tmp_path / "outside.txt"
    target.write_text("mine\n", encoding="utf-8")
    state = ws / ".warpgrad"
    body = (
        "import json, os, shutil\n"
        "out = {}\n"
        f"target = {str(target)!r}\n"
        "for name, act in [\n"
        "    ('link', lambda: os.symlink(target, '.warpgrad/ledger.torn')),\n"
        "    ('head_tmp', lambda: os.symlink(target, f'.warpgrad/ledger.head.{os.getpid()}.tmp')),\n"
        "    ('append', lambda: open('.warpgrad/ledger.jsonl', 'a').write('{}\\n')),\n"
        "    ('backups', lambda: os.symlink('/tmp', '.warpgrad/backups')),\n"
        "    ('rename', lambda: os.rename('.warpgrad', 'moved')),\n"
        "    ('rmtree', lambda: shutil.rmtree('.warpgrad')),\n"
        "]:\n"
        "    try:\n"
        "        act()\n"
        "        out[name] = 'ok'\n"
        "    except OSError as e:\n"
        "        out[name] = e.strerror\n"
        "print(json.dumps(out))\n"
    )
    before = sorted(p.name for p in state.iterdir())
    r = _run(ws, body)
    out = json.loads(r.stdout_tail.strip().splitlines()[-1])
    assert set(out.values()) <= {"Read-only file system", "Device or resource busy"}, out
    assert sorted(p.name for p in state.iterdir()) == before and not (ws / "moved").exists()
    assert target.read_text(encoding="utf-8") == "mine\n"
    assert Ledger(ws).verify().ok


def test_a_missing_state_folder_is_made_before_the_run_so_a_script_cannot_plant_it(tmp_path, monkeypatch):
    _need_bwrap()
    monkeypatch.setenv("WARPGRAD_SANDBOX", "bwrap")
    r = _run(tmp_path, "import os\nos.symlink('/tmp', '.warpgrad/backups')\n")
    assert not r.ok and "Read-only file system" in r.error.message, r.error
    assert (tmp_path / ".warpgrad").is_dir() and not (tmp_path / ".warpgrad").is_symlink()
    assert list((tmp_path / ".warpgrad").iterdir()) == []


def test_under_bwrap_dev_shm_is_inside_the_memory_cap_and_dev_is_read_only(tmp_path, monkeypatch):
    _need_bwrap()
    monkeypatch.setenv("WARPGRAD_SANDBOX", "bwrap")
    body = (
        "import json\n"
        "out = {}\n"
        "try:\n"
        "    open('/dev/stash', 'w').write('x')\n"
        "    out['dev'] = 'ok'\n"
        "except OSError as e:\n"
        "    out['dev'] = e.strerror\n"
        "chunk, n = b'\\0' * 2**24, 0\n"
        "try:\n"
        "    with open('/dev/shm/big', 'wb') as f:\n"
        "        for _ in range(96):\n"  # 1.5 GiB
        "            f.write(chunk)\n"
        "            f.flush()\n"
        "            n += len(chunk)\n"
        "except OSError as e:\n"
        "    out['shm'] = e.strerror\n"
        "out['written_mib'] = n >> 20\n"
        "print(json.dumps(out))\n"
    )
    r = _run(tmp_path, body, memory_mb=1024)
    assert r.ok, r.error
    out = json.loads(r.stdout_tail.strip().splitlines()[-1])
    assert out["dev"] == "Read-only file system"
    assert out["shm"] == "No space left on device" and out["written_mib"] <= 1024, out
    # The default cap sizes it too: a run with more memory can use /dev/shm (multiprocessing needs it).
    r = _run(tmp_path, "import multiprocessing as mp\nq = mp.Lock()\nopen('/dev/shm/x', 'wb').write(b'0' * 2**20)\n"
             "print('shm ok')\n")
    assert r.ok and "shm ok" in r.stdout_tail, r.error


def test_without_bwrap_a_script_that_kills_its_launcher_leaves_nothing_running(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPGRAD_SANDBOX", "subreaper")
    marker, script_marker = "63.0789", "64.0321"
    body = (
        "import os, signal, subprocess, time\n"
        # A detached child holding the output pipes, then the launcher killed: both would be init's.
        f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    os.execvp('sleep', ['sleep', '{script_marker}'])\n"
        "print('killing', flush=True)\n"
        "os.kill(os.getppid(), signal.SIGKILL)\n"
        "time.sleep(40)\n"
    )
    start = time.monotonic()
    r = _run(tmp_path, body, timeout_s=8)
    assert time.monotonic() - start < 8 + 25, r.wall_s  # no wait on a pipe an escaped process holds (40 s)
    assert not r.ok and "killing" in r.stdout_tail
    time.sleep(0.2)
    assert _alive(marker) == [] and _alive(script_marker) == []
    assert _running_in(tmp_path) == []  # the script itself is gone too


def _running_in(where: Path) -> list[int]:
    """Pids of live processes (not zombies) whose working directory is `where`."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and os.readlink(d / "cwd") == str(where.resolve()):
                found.append(int(d.name))
        except OSError:
            pass
    return found


def test_a_state_folder_that_is_a_link_is_refused_before_anything_runs(tmp_path, monkeypatch):
    _need_bwrap()
    monkeypatch.setenv("WARPGRAD_SANDBOX", "bwrap")
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / ".warpgrad").symlink_to(outside)
    r = _run(ws, "open('ran.txt', 'w').write('x')\n")
    assert not r.ok and ".warpgrad" in r.error.message and "link" in r.error.message, r.error
    assert not (ws / "ran.txt").exists() and list(outside.iterdir()) == []
