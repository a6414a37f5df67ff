"""The warm worker: a run forked from it reports what a fresh harness process reports, and it cleans up.

Real Warp, real processes, the real sandbox (bwrap where it works here).
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warpgrad.tools import reaper, worker
from warpgrad.tools.child_process import _cuda_possible, run_harness
from warpgrad.tools.gradcheck import GradcheckArgs, check
from warpgrad.tools.harness.protocol import HarnessResult, RunConfig
from warpgrad.tools.run_script import RunScriptArgs, run_script

pytestmark = pytest.mark.warp

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "bouncing_chain"


def run(ws: Path, body: str, name: str = "s.py", **kw):
    (ws / name).write_text(body, encoding="utf-8")
    return run_script(RunScriptArgs(script=name, record=False, device="cpu", **kw), ws)


def worker_process(pool: worker.WorkerPool) -> int:
    """The pid (outside the sandbox) of the python process serving the pool's runs."""
    launcher = pool.worker_pid()
    assert launcher is not None
    for pid in reaper.descendants(launcher):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"tools.harness.worker" in cmd and b"reaper.py" not in cmd:
            return pid
    raise AssertionError("no worker process below the launcher")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture
def example(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)
    return ws


def test_a_warm_run_reports_what_a_fresh_process_reports(example):
    cold = run_script(RunScriptArgs(script="train.py", record=False, device="cpu"), example)
    with worker.worker_pool() as pool:
        assert pool is not None
        warm = run_script(RunScriptArgs(script="train.py", record=False, device="cpu"), example)
        again = run_script(RunScriptArgs(script="train.py", record=False, device="cpu"), example)
        assert pool.served == 2 and pool.spawned == 1
    assert cold.ok and warm.ok and again.ok
    assert warm.loss_trajectory == cold.loss_trajectory == again.loss_trajectory
    assert warm.stdout_tail == cold.stdout_tail
    assert warm.model_dump(exclude={"wall_s", "stdout_bytes", "stderr_tail", "stderr_bytes"}) == \
        cold.model_dump(exclude={"wall_s", "stdout_bytes", "stderr_tail", "stderr_bytes"})


def test_gradcheck_through_the_worker_gives_the_fresh_verdict_and_numbers(example):
    args = GradcheckArgs(script="train.py", record=False, directions=2, device="cpu")
    cold = check(args, example)
    with worker.worker_pool() as pool:
        assert pool is not None
        warm = check(args, example)
        assert pool.served >= 3  # the capture run and the FD hubs of both iterations
    assert (warm.passed, warm.signature) == (cold.passed, cold.signature)
    assert [(p.role, p.ad, p.fd) for p in warm.params] == [(p.role, p.ad, p.fd) for p in cold.params]
    assert [(d.ad, d.fd) for d in warm.directions] == [(d.ad, d.fd) for d in cold.directions]
    # A hub forked from the worker forks its evaluations too: all but the capture run came from one.
    assert warm.evaluations_from_hub == warm.evaluations - 1


def test_a_timeout_kills_the_run_and_what_it_started_and_the_worker_serves_on(tmp_path):
    body = ("import subprocess, sys, time\n"
            "subprocess.Popen(['sh', '-c', 'sleep 3; echo alive > escaped.txt'], start_new_session=True)\n"
            "time.sleep(60)\n")
    with worker.worker_pool() as pool:
        assert pool is not None
        # A first run boots the worker: the 2 s run below must not spend its limit waiting for the boot (it would
        # then run fresh, by design, and the worker would not be what is tested).
        assert run(tmp_path, "print('warm')\n").ok
        r = run(tmp_path, body, timeout_s=2)
        assert r.error is not None and r.error.kind == "timeout"
        ok = run(tmp_path, "print('after')\n")
        assert ok.ok and ok.stdout_tail.strip() == "after"
        assert pool.served == 3 and pool.spawned == 1
    time.sleep(4)
    assert not (tmp_path / "escaped.txt").exists()


@pytest.mark.parametrize(("body", "check_result"), [
    ("import os\nprint('bye', flush=True)\nos._exit(3)\n", lambda r: r.returncode == 3),
    ("import ctypes\nctypes.string_at(0)\n", lambda r: r.signal == "SIGSEGV" and r.error.kind == "crashed"),
])
def test_a_crash_in_a_run_is_reported_as_a_fresh_process_reports_it(tmp_path, body, check_result):
    cold = run(tmp_path, body)
    with worker.worker_pool() as pool:
        assert pool is not None
        warm = run(tmp_path, body)
        after = run(tmp_path, "print('fine')\n")
        assert pool.served == 2 and pool.spawned == 1
    assert not warm.ok and check_result(warm)
    assert (warm.returncode, warm.signal, warm.error.kind if warm.error else None) == \
        (cold.returncode, cold.signal, cold.error.kind if cold.error else None)
    assert after.ok


def test_an_edited_preloaded_module_restarts_the_worker(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 1\n", encoding="utf-8")
    body = "import helper\nprint('value', helper.VALUE)\n"
    with worker.worker_pool(preload=["helper"], preload_path=[tmp_path]) as pool:
        assert pool is not None
        assert run(tmp_path, body).stdout_tail.strip() == "value 1"
        (tmp_path / "helper.py").write_text("VALUE = 2\n", encoding="utf-8")
        assert run(tmp_path, body).stdout_tail.strip() == "value 2"
        assert pool.spawned == 2 and pool.served == 2


def test_a_run_without_preload_imports_the_users_modules_fresh(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 1\n", encoding="utf-8")
    body = "import helper\nprint('value', helper.VALUE)\n"
    with worker.worker_pool() as pool:
        assert pool is not None
        assert run(tmp_path, body).stdout_tail.strip() == "value 1"
        (tmp_path / "helper.py").write_text("VALUE = 2\n", encoding="utf-8")
        assert run(tmp_path, body).stdout_tail.strip() == "value 2"
        assert pool.spawned == 1 and pool.served == 2


def test_the_idle_worker_exits_and_is_started_again_on_demand(tmp_path):
    # Idle for 3 s: long enough that the parent's own work after a run (reading the result, removing the
    # run's temp dir and kernel cache) never outlasts it on a loaded machine.
    with worker.worker_pool(idle_s=3.0) as pool:
        assert pool is not None
        assert run(tmp_path, "print(1)\n").ok
        launcher = pool.worker_pid()
        assert launcher is not None
        deadline = time.monotonic() + 20
        while pool.worker_pid() is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pool.worker_pid() is None, "the worker outlived its idle timeout"
        assert run(tmp_path, "print(2)\n").stdout_tail.strip() == "2"
        assert pool.spawned == 2 and pool.served == 2


def test_a_forked_child_uses_the_running_worker_and_never_starts_one(tmp_path):
    (tmp_path / "s.py").write_text("print('from the child')\n", encoding="utf-8")
    cfg = RunConfig(workspace=str(tmp_path), script=str(tmp_path / "s.py"), device="cpu")
    with worker.worker_pool() as pool:
        assert pool is not None
        assert pool.prewarm(tmp_path, device="cpu")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                out = run_harness(cfg, HarnessResult, cwd=tmp_path, device="cpu")
                code = 0 if pool.served == 1 and pool.spawned == 1 and "from the child" in out.process.stdout_tail else 2
            finally:
                os._exit(code)
        os.close(w)
        os.close(r)
        assert os.waitpid(pid, 0)[1] == 0
        assert pool.spawned == 1


def test_runs_the_worker_cannot_take_use_a_fresh_process(tmp_path, monkeypatch):
    (tmp_path / "s.py").write_text("print('ok')\n", encoding="utf-8")
    elsewhere = Path(os.environ.get("TMPDIR", "/tmp")) / f"wg-outside-{os.getpid()}"
    elsewhere.mkdir(exist_ok=True)
    try:
        with worker.worker_pool() as pool:
            assert pool is not None
            cfg = RunConfig(workspace=str(tmp_path), script=str(tmp_path / "s.py"), outdir=str(elsewhere),
                            device="cpu")
            out = run_harness(cfg, HarnessResult, cwd=tmp_path, device="cpu")  # the worker's sandbox cannot write there
            assert out.result is not None and "ok" in out.process.stdout_tail
            assert pool.served == 0
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    monkeypatch.setenv(worker.WORKER_ENV, "0")
    with worker.worker_pool() as pool:
        assert pool is None


def test_fifty_runs_do_not_grow_the_worker(tmp_path):
    with worker.worker_pool() as pool:
        assert pool is not None
        assert run(tmp_path, "import numpy as np\nprint(np.ones(3).sum())\n").ok
        first = rss_kib(worker_process(pool))
        for _ in range(50):
            assert run(tmp_path, "import numpy as np\nprint(np.ones(3).sum())\n").ok
        last = rss_kib(worker_process(pool))
        assert pool.spawned == 1 and pool.served == 51
    assert last - first < 2048, (first, last)


def test_a_forked_run_has_the_users_blas_threads_and_the_fork_refuses_threads():
    code = (
        "import os, sys\n"
        "from warpgrad.tools.harness import forking\n"
        "forking.limit_threads()\n"
        "import numpy as np\n"
        "assert forking.thread_count() == 1, forking.thread_count()\n"
        "pid = forking.fork()\n"
        "if pid == 0:\n"
        "    forking.restore_threads()\n"
        "    ok = os.environ.get('OPENBLAS_NUM_THREADS') == '2' and forking.thread_count() == 2\n"
        "    os._exit(0 if ok else 1)\n"
        "assert os.waitpid(pid, 0)[1] == 0, 'the child did not get its threads back'\n"
        "import threading\n"
        "threading.Thread(target=lambda: __import__('time').sleep(1)).start()\n"
        "try:\n"
        "    forking.fork()\n"
        "except forking.NotForkable:\n"
        "    print('refused')\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "refused"


def workers_for(ws: Path) -> list[int]:
    """Worker processes (anywhere on the machine) booted for workspace `ws`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"tools.harness.worker" in cmd and str(ws).encode() in cmd and b"reaper.py" not in cmd \
                and b"bwrap" not in cmd:
            found.append(int(name))
    return found


@pytest.mark.skipif(_cuda_possible(), reason="the server prewarms a worker for default (GPU) runs: none where CUDA is")
def test_the_mcp_server_runs_tool_calls_through_its_worker_and_takes_it_down_at_exit(tmp_path):
    import anyio
    from mcp import Client, StdioServerParameters

    (tmp_path / "train.py").write_text("print('hello from user code')\n", encoding="utf-8")
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "warpgrad"),
                                   args=["mcp", "--workspace", str(tmp_path)], env=dict(os.environ), cwd=str(tmp_path))

    async def go():
        async with Client(params, read_timeout_seconds=120) as client:
            first = await client.call_tool("run_script", {"script": "train.py", "record": False})
            second = await client.call_tool("run_script", {"script": "train.py", "record": False})
            return first, second, workers_for(tmp_path)

    first, second, during = anyio.run(go)
    for r in (first, second):
        assert not r.is_error, r.content[0].text
        assert r.structured_content["stdout_tail"].strip() == "hello from user code"
    assert len(during) == 1, during
    deadline = time.monotonic() + 20
    while workers_for(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert workers_for(tmp_path) == []


def test_a_worker_that_dies_at_boot_leaves_fresh_processes_and_is_not_restarted_forever(tmp_path):
    (tmp_path / "bad.py").write_text("import os\nos._exit(3)\n", encoding="utf-8")
    with worker.worker_pool(preload=["bad"], preload_path=[tmp_path]) as pool:
        assert pool is not None
        for i in range(worker.MAX_FAILED_WORKERS + 2):
            r = run(tmp_path, f"print({i})\n")
            assert r.ok and r.stdout_tail.strip() == str(i)
        assert pool.served == 0
        assert pool.spawned <= worker.MAX_FAILED_WORKERS + 1


def _runner_cases() -> list:
    """Every test of the fresh-process runner (tests/test_runner.py), with its parameters."""
    import inspect

    import test_runner

    cases = []
    for name, fn in inspect.getmembers(test_runner, inspect.isfunction):
        if not name.startswith("test_"):
            continue
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
        rows = marks[0].args[1] if marks else [()]
        cases += [pytest.param(fn, tuple(row), id=f"{name}[{i}]") for i, row in enumerate(rows)]
    return cases


@pytest.mark.parametrize(("fn", "row"), _runner_cases())
def test_the_runner_tests_hold_through_the_worker(fn, row, tmp_path):
    with worker.worker_pool() as pool:
        assert pool is not None
        fn(tmp_path, *row)
        if "run_process" not in fn.__name__ and "refused" not in fn.__name__ and not _cuda_possible():
            assert pool.served > 0, "the run took the fresh-process path"


def test_a_pool_that_cannot_start_a_worker_runs_fresh_processes(tmp_path):
    with worker.worker_pool() as pool:
        assert pool is not None
        shutil.rmtree(pool.dir / "sock")  # nowhere to bind the socket
        r = run(tmp_path, "print('still runs')\n")
        assert r.ok and r.stdout_tail.strip() == "still runs"
        assert pool.served == 0 and pool.spawned == 0


@pytest.mark.parametrize("users_value", [None, "7"])
def test_a_forked_runs_idle_blas_threads_sleep_and_the_script_sees_the_users_setting(users_value):
    """Every forked run starts its BLAS threads afresh; OpenBLAS's default lets each spin ~0.1 s of CPU before it
    sleeps (a tenth of a gradcheck's CPU over thirty FD evaluations). The harness asks for the shortest spin
    before numpy loads, and gives the script the user's own value of the variable back."""
    code = (
        "import os, time\n"
        "from warpgrad.tools.harness import forking\n"
        "forking.limit_threads()\n"
        "import numpy as np\n"
        "pid = forking.fork()\n"
        "if pid == 0:\n"
        "    forking.restore_threads()\n"
        "    assert forking.thread_count() == 2\n"
        "    t0 = os.times(); time.sleep(0.5); t1 = os.times()\n"
        "    print(round(t1.user + t1.system - t0.user - t0.system, 3), os.environ.get('OPENBLAS_THREAD_TIMEOUT'))\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    env.pop("OPENBLAS_THREAD_TIMEOUT", None)
    if users_value is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = users_value
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    cpu, seen = r.stdout.split()
    assert float(cpu) < 0.02, f"idle BLAS threads used {cpu} s of CPU in 0.5 s"
    assert seen == str(users_value)


def test_a_forked_run_finds_the_workers_booted_heap_frozen(tmp_path):
    """The worker's booted objects (Warp, numpy, the harness) are out of the collector's reach in every run it
    forks, so a run's collections do not copy the shared pages; a fresh process has nothing frozen."""
    body = "import gc\nprint('frozen', gc.get_freeze_count())\n"
    fresh = run(tmp_path, body)
    with worker.worker_pool() as pool:
        assert pool is not None
        warm = run(tmp_path, body)
        assert pool.served == 1
    assert fresh.stdout_tail.strip() == "frozen 0"
    assert int(warm.stdout_tail.split()[-1]) > 10_000, warm.stdout_tail
