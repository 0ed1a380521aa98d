"""Real-browser test support: `streamlit run app.py` in a subprocess, driven by the system Chromium.

Playwright's own browser download does not work on the lab machines, so Playwright launches
Debian's Chromium (`/usr/bin/chromium`, or `$CIFARLAB_CHROMIUM`). Screenshots go to
`test-artifacts/screenshots/` (kept as CI artefacts).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = os.environ.get("CIFARLAB_CHROMIUM", "/usr/bin/chromium")


def chromium_path() -> str | None:
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StreamlitServer:
    """`python -m streamlit run app.py` on a free loopback port, with its own run store."""

    def __init__(self, home: Path, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home / "streamlit.log"
        self.env = {**os.environ, "CIFARLAB_HOME": str(home), "PYTHONUNBUFFERED": "1",
                    **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 90) -> "StreamlitServer":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.port", str(self.port), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=self.env, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"streamlit did not start in {timeout} s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            import signal
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


IDLE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    const running = document.querySelector('[data-testid="stStatusWidget"] button, '
        + '[data-testid="stStatusWidgetRunningIcon"]');
    const skeleton = document.querySelector('[data-testid="stSkeleton"]');
    const stale = document.querySelector('[data-stale="true"]');
    const main = document.querySelector('[data-testid="stMain"], section.main');
    return app && !running && !skeleton && !stale && main && main.innerText.trim().length > 0;
}"""


def wait_idle(page, timeout_ms: int = 60_000) -> None:
    """Wait until Streamlit has finished running the script: no 'running' status widget, no
    stale elements left from the previous run (a rerun keeps them, marked ``data-stale``,
    until it is done), and that twice in a row a moment apart, since a rerun that a click or
    an Enter asked for may not have begun yet."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.wait_for_timeout(150)
    for _ in range(2):
        page.wait_for_function(IDLE_JS, timeout=timeout_ms)
        page.wait_for_timeout(200)
    page.wait_for_function(IDLE_JS, timeout=timeout_ms)


def page_problems(page) -> list[str]:
    """Exceptions shown on the page (a traceback box), as text."""
    return [el.inner_text()[:500] for el in page.query_selector_all('[data-testid="stException"]')]


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
