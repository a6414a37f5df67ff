"""The CLI's warm server (cli/warm): the same command gives the same answer through it, it is started on demand
and said out loud, it stops, it interrupts on Ctrl-C, and neither a sandboxed script nor another namespace can
use it. Real processes throughout: the installed `python -m warpgrad`, real sockets, real bwrap."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from warpgrad.cli.warm import client, daemon
from warpgrad.tools.sandbox import detect_isolation

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the warm server is Linux only")

SCRIPT = """\
import os, sys
import warp as wp
wp.config.quiet = True
print("mark", os.environ.get("LC_WGTEST", "-"))
for i in range(3):
    print(f"iter {i} loss {1.0 / (i + 1):.4f}")
sys.exit(int(os.environ.get("LC_WGEXIT", "0")))
"""


@pytest.fixture
def server_env(tmp_path):
    """An environment with the server on and a state folder of its own (short: a socket path has 107 bytes)."""
    state = Path(tempfile.mkdtemp(prefix="wgs-", dir="/tmp"))
    env = {**os.environ, "WARPGRAD_SERVER": "1", "WARPGRAD_KEY_DIR": str(state), "WARPGRAD_SERVER_IDLE_S": "120"}
    env.pop("CI", None)
    (tmp_path / "sim.py").write_text(SCRIPT)
    yield env
    subprocess.run([sys.executable, "-m", "warpgrad", "server", "stop"], env=env, capture_output=True, check=False,
                   timeout=60)
    _wait_gone(env)
    shutil.rmtree(state, ignore_errors=True)


def _cli(env, *args, cwd, timeout=240):
    return subprocess.run([sys.executable, "-m", "warpgrad", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _status(env) -> str:
    return subprocess.run([sys.executable, "-m", "warpgrad", "server", "status"], env=env, capture_output=True,
                          text=True, timeout=60, check=False).stdout


def _wait_up(env, timeout=90) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = _status(env)
        if out.startswith("warm server pid"):
            return out
        time.sleep(0.5)
    raise AssertionError(f"no server came up: {out!r}")


def _wait_gone(env, timeout=30) -> None:
    lock = Path(env["WARPGRAD_KEY_DIR"]) / "server"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = _status(env)
        if out.startswith("no warm server is running") and "starting" not in out:
            return
        time.sleep(0.3)
    raise AssertionError(f"the server did not stop: {out!r} ({sorted(p.name for p in lock.iterdir())})")


def _served(env) -> int:
    out = _status(env)
    return int(out.split(":")[1].split()[0]) if out.startswith("warm server pid") else -1


def _comparable(stdout: str) -> dict:
    doc = json.loads(stdout)
    for k in ("wall_s", "timings"):
        doc.pop(k, None)
    return doc


def test_a_forking_command_starts_the_server_says_so_and_the_next_one_runs_there_with_the_same_answer(server_env,
                                                                                                    tmp_path):
    env = {**server_env, "LC_WGTEST": "first"}
    own = _cli(env, "run", "sim.py", "--json", "--no-record", cwd=tmp_path)
    assert own.returncode == 0, own.stderr
    assert "started a warm server" in own.stderr and "WARPGRAD_SERVER=0" in own.stderr
    _wait_up(env)
    assert _served(env) == 0

    warm = _cli(env, "run", "sim.py", "--json", "--no-record", cwd=tmp_path)
    assert warm.returncode == 0, warm.stderr
    assert "started a warm server" not in warm.stderr
    assert _served(env) == 1
    assert _comparable(warm.stdout) == _comparable(own.stdout)
    assert "mark first" in json.loads(warm.stdout)["stdout_tail"]

    # The caller's environment, exit status and folder, per command (a relative path from a subfolder).
    sub = tmp_path / "sub"
    sub.mkdir()
    argv = ["run", "../sim.py", "--json", "--no-record", "--workspace", ".."]
    exiting = {**env, "LC_WGTEST": "second", "LC_WGEXIT": "4"}
    other = _cli(exiting, *argv, cwd=sub)
    assert _served(env) == 2
    doc = json.loads(other.stdout)
    assert "mark second" in doc["stdout_tail"] and "sys.exit(4)" in doc["error"]["message"]
    alone = _cli({**exiting, "WARPGRAD_SERVER": "0"}, *argv, cwd=sub)
    assert other.returncode == alone.returncode != 0
    assert _comparable(other.stdout) == _comparable(alone.stdout)

    # Not a forking command, or --help: run in the caller's own process, and the server counts nothing.
    assert _cli(env, "run", "--help", cwd=tmp_path).returncode == 0
    assert _cli(env, "server", "status", cwd=tmp_path).returncode == 0
    assert _served(env) == 2


def _without_clocks(x):
    if isinstance(x, dict):
        return {k: _without_clocks(v) for k, v in x.items() if k not in ("timings", "wall_s", "ptr")}
    if isinstance(x, list):
        return [_without_clocks(v) for v in x]
    return x


def test_a_served_diagnose_gives_the_json_of_one_in_its_own_process(server_env, tmp_path):
    ws = tmp_path / "chain"
    shutil.copytree(Path(__file__).resolve().parents[1] / "examples" / "bouncing_chain", ws)
    argv = ["diagnose", "train.py", "--json", "--no-record"]
    own = _cli({**server_env, "WARPGRAD_SERVER": "0"}, *argv, cwd=ws)
    _cli(server_env, "server", "start", cwd=ws)
    _wait_up(server_env)
    served = _cli(server_env, *argv, cwd=ws)
    assert _served(server_env) == 1
    assert own.returncode == served.returncode == 1  # gradients wrong
    assert _without_clocks(json.loads(served.stdout)) == _without_clocks(json.loads(own.stdout))


def test_a_served_command_writes_files_with_the_callers_umask(server_env, tmp_path):
    _cli(server_env, "server", "start", cwd=tmp_path)
    _wait_up(server_env)
    for mask, want in ((0o077, 0o600), (0o022, 0o644)):
        out = tmp_path / f"report-{mask:o}.md"
        r = subprocess.run([sys.executable, "-m", "warpgrad", "diagnose", "sim.py", "--no-record", "--md", str(out)],
                           cwd=tmp_path, env=server_env, capture_output=True, text=True, timeout=240, check=False,
                           umask=mask)
        assert out.is_file(), r.stderr
        assert out.stat().st_mode & 0o777 == want
    assert _served(server_env) == 2


def test_stop_ends_the_server_and_off_means_off(server_env, tmp_path):
    off = _cli({**server_env, "WARPGRAD_SERVER": "0"}, "run", "sim.py", "--json", "--no-record", cwd=tmp_path)
    assert off.returncode == 0 and "warm server" not in off.stderr
    ci = _cli({**server_env, "WARPGRAD_SERVER": "", "CI": "true"}, "run", "sim.py", "--json", "--no-record",
              cwd=tmp_path)
    assert ci.returncode == 0 and "warm server" not in ci.stderr
    assert _status(server_env).startswith("no warm server is running")

    started = _cli(server_env, "server", "start", cwd=tmp_path)
    assert started.stdout.startswith("started the warm server"), started.stdout
    _wait_up(server_env)
    stop = _cli(server_env, "server", "stop", cwd=tmp_path)
    assert "stopping" in stop.stdout
    _wait_gone(server_env)
    assert not client.socket_path_in(server_env).exists()


def test_ctrl_c_in_the_caller_interrupts_the_command_in_the_server(server_env, tmp_path):
    (tmp_path / "slow.py").write_text("import time\nprint('start', flush=True)\ntime.sleep(120)\n")
    _cli(server_env, "server", "start", cwd=tmp_path)
    _wait_up(server_env)
    # As from a shell: Python's SIGINT handler in the caller (a test process may run with SIGINT ignored, which a
    # child inherits, and Python then installs no handler).
    as_from_a_shell = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                       "sys.argv = ['warpgrad', 'run', 'slow.py', '--no-record']; "
                       "runpy.run_module('warpgrad', run_name='__main__')")
    caller = subprocess.Popen([sys.executable, "-c", as_from_a_shell], cwd=tmp_path, env=server_env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 60
    while "1 running" not in _status(server_env):
        assert time.monotonic() < end and caller.poll() is None, "the command never ran in the server"
        time.sleep(0.3)
    time.sleep(1.0)
    caller.send_signal(signal.SIGINT)
    assert caller.wait(timeout=30) == 130
    end = time.monotonic() + 30
    while "0 running" not in _status(server_env):
        assert time.monotonic() < end, "the interrupted command still runs in the server"
        time.sleep(0.3)


def test_a_sandboxed_script_cannot_reach_the_server_socket(server_env, tmp_path):
    if detect_isolation("auto").isolation != "bwrap":
        if os.environ.get("CI"):
            pytest.fail("bwrap must be usable in CI: " + detect_isolation("auto").reason)
        pytest.skip("bwrap unusable here: " + detect_isolation("auto").reason)
    _cli(server_env, "server", "start", cwd=tmp_path)
    _wait_up(server_env)
    sock = client.socket_path_in(server_env)
    assert sock.exists()
    (tmp_path / "probe.py").write_text(
        "import socket, sys\n"
        f"p = {str(sock)!r}\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        "try:\n"
        "    s.connect(p)\n"
        "    print('PROBE connected')\n"
        "except OSError as e:\n"
        "    print('PROBE refused', type(e).__name__)\n")
    r = _cli(server_env, "run", "probe.py", "--json", "--no-record", cwd=tmp_path)
    tail = json.loads(r.stdout)["stdout_tail"]
    assert "PROBE refused FileNotFoundError" in tail, tail


def test_a_peer_in_another_mount_namespace_is_refused(server_env, tmp_path):
    """Even with the socket in reach (bound into the namespace on purpose), the server answers a process of
    another mount namespace with a refusal, never a command."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or detect_isolation("auto").isolation != "bwrap":
        pytest.skip("bwrap unusable here")
    _cli(server_env, "server", "start", cwd=tmp_path)
    _wait_up(server_env)
    folder = str(client.socket_path_in(server_env).parent)
    probe = (
        "import os, socket, sys\n"
        "from warpgrad.cli.warm.wire import CommandRequest, REPLY\n"
        f"s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect({str(client.socket_path_in(server_env))!r})\n"
        "req = CommandRequest(argv=['run', 'sim.py'], cwd=os.getcwd(), env=dict(os.environ), umask=0o022)\n"
        "socket.send_fds(s, [req.model_dump_json().encode()], [0, 1, 2])\n"
        "print(REPLY.validate_json(s.recv(1 << 20)).model_dump_json())\n")
    r = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", folder, folder,
                        "--chdir", str(tmp_path), sys.executable, "-c", probe], env=server_env, capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    reply = json.loads(r.stdout)
    assert reply["kind"] == "refused" and "mount namespace" in reply["reason"]
    assert _served(server_env) == 0


def test_a_folder_others_can_enter_is_never_used(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPGRAD_KEY_DIR", str(tmp_path))
    monkeypatch.setenv("WARPGRAD_SERVER", "1")
    assert client.private_dir() == tmp_path / "server"
    (tmp_path / "server").chmod(0o755)
    assert client.private_dir() is None
    assert client.start() is None and client.forward(["run", "x.py"]) is None


def test_the_server_notices_its_own_code_changing(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("x = 1\n")
    st = f.stat()
    sources = {str(f): (st.st_mtime_ns, st.st_size)}
    assert not daemon._changed(sources)
    f.write_text("x = 22\n")
    assert daemon._changed(sources)
    f.unlink()
    assert daemon._changed(sources)


def test_enabled_follows_the_switch_and_ci():
    assert client.enabled({"WARPGRAD_SERVER": "1", "CI": "true"})
    assert not client.enabled({"WARPGRAD_SERVER": "0"})
    assert not client.enabled({"CI": "true"})
    assert client.enabled({})
    assert client.enabled({"CI": "false"})


def test_a_request_that_is_not_one_is_refused_and_the_server_goes_on(server_env, tmp_path):
    _cli(server_env, "server", "start", cwd=tmp_path)
    _wait_up(server_env)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(str(client.socket_path_in(server_env)))
    s.send(b'{"kind": "launch", "argv": []}')
    reply = json.loads(s.recv(1 << 20))
    s.close()
    assert reply["kind"] == "refused" and reply["reason"].startswith("not a request")
    assert _status(server_env).startswith("warm server pid")
