"""The HTML report in a real browser: headless Chromium renders it, the screenshot is not blank, the numbers on the
page are the ledger's, and the page asks the network for nothing.

CI installs Debian's chromium (.ci/run); there a missing browser is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _need_chromium() -> str:
    if CHROMIUM:
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail("chromium must be installed in CI (.ci/run installs Debian's chromium)")
    pytest.skip("chromium is not installed")


class _Listener:
    """A TCP listener standing in for the browser's proxy: every request it is sent is a network request, and
    its first line names the host (`GET http://host/...`, `CONNECT host:443`). Nothing is answered."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hosts: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.settimeout(2)
            try:
                first = conn.recv(512).split(b"\r\n")[0].decode("latin-1").split()
            except OSError:
                first = []
            conn.close()
            if len(first) >= 2:
                target = first[1].split("://", 1)[-1]
                self.hosts.add(target.split("/", 1)[0].split(":", 1)[0])

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def _chromium(page: Path, proxy_port: int, *mode: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="warpgrad-chromium-")
    try:
        return subprocess.run(
            [_need_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", f"--proxy-server=http://127.0.0.1:{proxy_port}",
             "--proxy-bypass-list=<-loopback>", "--window-size=1200,1800", *mode, page.as_uri()],
            capture_output=True, text=True, timeout=120, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class _Fields(HTMLParser):
    """Text of every element carrying a `data-field` attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self._open: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        self._open.append(dict(attrs).get("data-field"))

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        if self._open and self._open[-1]:
            self.fields[self._open[-1]] = self.fields.get(self._open[-1], "") + data


@pytest.fixture(scope="module")
def ledger_workspace(tmp_path_factory) -> Path:
    """The shipped broken example, diagnosed and run for real: a ledger with checks, a tracker run and a run."""
    ws = tmp_path_factory.mktemp("html") / "bouncing_chain"
    shutil.copytree(ROOT / "examples" / "bouncing_chain", ws)
    for argv in (["diagnose", "train.py", "--json"], ["run", "train.py", "--json"]):
        p = subprocess.run([sys.executable, "-m", "warpgrad", *argv], cwd=ws, capture_output=True, text=True,
                           timeout=600, check=False)
        assert p.returncode in (0, 1), p.stderr[-2000:]
    return ws


# Chromium's own services, which it calls at start-up whatever the page (update and time checks, the account
# service; no flag turns them all off here). Exact host names: a page's request to any other host, a font or a
# script CDN included, still fails the check.
CHROMIUM_SERVICES = {"clients2.google.com", "update.googleapis.com", "accounts.google.com",
                     "optimizationguide-pa.googleapis.com", "safebrowsingohttpgateway.googleapis.com"}


def _page_requests(page: Path, *mode: str) -> tuple[set[str], subprocess.CompletedProcess]:
    """Hosts a page makes the browser ask for: what it asks for beyond Chromium's own services and what it asks
    for on an empty page."""
    blank = page.parent / "_blank.html"
    blank.write_text("<!DOCTYPE html><html><body>blank</body></html>", encoding="utf-8")
    control, listener = _Listener(), _Listener()
    try:
        _chromium(blank, control.port, "--dump-dom")
        result = _chromium(page, listener.port, *mode)
    finally:
        control.close()
        listener.close()
    return listener.hosts - control.hosts - CHROMIUM_SERVICES, result


def test_the_network_check_sees_a_page_that_fetches(tmp_path):
    page = tmp_path / "fetches.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://warpgrad-probe.test/x.png"></body></html>',
                    encoding="utf-8")
    hosts, _ = _page_requests(page, "--dump-dom")
    assert hosts == {"warpgrad-probe.test"}


@pytest.mark.warp
def test_the_report_renders_in_chromium_with_the_ledgers_numbers_and_no_network(ledger_workspace, tmp_path):
    ws = ledger_workspace
    page = tmp_path / "report.html"
    p = subprocess.run([sys.executable, "-m", "warpgrad", "report", "--workspace", str(ws), "--html", str(page)],
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    hosts, dom = _page_requests(page, "--dump-dom")
    shot_hosts, shot = _page_requests(page, f"--screenshot={tmp_path / 'shot.png'}")
    assert dom.returncode == 0 and shot.returncode == 0, dom.stderr[-2000:] + shot.stderr[-2000:]
    assert hosts == set() and shot_hosts == set(), f"the page asked the network for {hosts | shot_hosts}"

    # Not blank: a real share of the screenshot is ink, in more than one colour.
    from PIL import Image

    img = Image.open(tmp_path / "shot.png").convert("RGB")
    colours = img.getcolors(maxcolors=1 << 24) or []
    total = img.width * img.height
    ink = sum(n for n, px in colours if sum(px) < 600)
    assert ink > 0.01 * total
    assert len(colours) > 50

    # Every number the page shows for a check or a run is the ledger's own, spelled as the ledger stores it.
    parser = _Fields()
    parser.feed(dom.stdout)
    records = [json.loads(line) for line in (ws / ".warpgrad" / "ledger.jsonl").read_text().splitlines() if line]
    compared = 0
    for r in records:
        if r["kind"] == "gradcheck":
            for d in r["payload"]["directions"]:
                for name in ("ad", "fd", "band"):
                    assert parser.fields[f"record {r['seq']}/direction {d['direction']}/{name}"] == json.dumps(d[name])
                    compared += 1
        if r["kind"] == "run":
            for i, v in enumerate(r["payload"]["loss_trajectory"]):
                assert parser.fields[f"record {r['seq']}/loss {i}"] == json.dumps(v)
                compared += 1
    assert compared >= 10
    assert "FD check, record " in dom.stdout and "The ledger" in dom.stdout and "The tape" not in dom.stdout


@pytest.mark.warp
def test_diagnose_html_marks_the_hazards_and_collapses_the_launch_list(ledger_workspace, tmp_path):
    page = tmp_path / "diagnose.html"
    p = subprocess.run([sys.executable, "-m", "warpgrad", "diagnose", "train.py", "--no-record", "--html", str(page)],
                       cwd=ledger_workspace, capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 1, p.stderr[-2000:]
    hosts, dom = _page_requests(page, "--dump-dom")
    assert hosts == set()
    html = dom.stdout
    assert 'id="hazards"' in html and "train.py:79" in html  # the overwrite hazard at its line
    rows = html.count("<tr", html.index('id="launches"'), html.index("</table>", html.index('id="launches"')))
    assert 2 <= rows <= 6  # a rollout of 40 steps: one row per call site, not one per launch
    assert "<svg" in html and "<metadata>" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?(https?:)?//""", html)
