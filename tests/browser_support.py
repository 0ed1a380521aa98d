"""Real-browser test support: `streamlit run app.py` in a subprocess, driven by the system Chromium.

Playwright's own browser download does not work on the lab machines, so Playwright launches
Debian's Chromium: its headless shell (`/usr/bin/chromium-headless-shell`) where it is
installed, else `/usr/bin/chromium`, or `$CIFARLAB_CHROMIUM`. Screenshots go to
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
# The headless shell is what Playwright itself runs headless: the same Blink and V8 without the
# full browser's windowing layers. The Spanish walk, screenshots included, cost the machine ~20 %
# less CPU in it than in Chromium's own headless mode; a plain walk of the pages, the same
# (docs/benchmarks.md §28).
CHROMIUMS = [os.environ["CIFARLAB_CHROMIUM"]] if os.environ.get("CIFARLAB_CHROMIUM") else [
    "/usr/bin/chromium-headless-shell", "/usr/bin/chromium"]


def chromium_path() -> str | None:
    found = [path for path in CHROMIUMS if Path(path).exists()]
    return found[0] if found else (shutil.which("chromium-headless-shell")
                                   or shutil.which("chromium"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StreamlitServer:
    """`python -m streamlit run app.py` on a free loopback port, with its own run store
    (``home``: its CIFARLAB_HOME)."""

    def __init__(self, home: Path, env: dict | None = None, script: str = "app.py"):
        self.script = script   # server.py: the same app, with the job queue started at once
        self.home = Path(home)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home / "streamlit.log"
        self.env = {**os.environ, "CIFARLAB_HOME": str(home), "PYTHONUNBUFFERED": "1",
                    **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 90) -> StreamlitServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", self.script, "--server.headless", "true",
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
        raise RuntimeError(f"streamlit did not start in {timeout} s: "
                           f"{self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        """SIGTERM to the server alone, as ``docker stop`` sends it: the server stops its own
        workers. Sent to the whole group, it also killed the fork server under a spare worker
        being replaced, and the dispatcher waited out its join's timeout (seconds). Whatever
        is left in the group after the server has gone is killed."""
        import signal

        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- the app server the browser tests share (tests/conftest.py's session fixture ``server``) ------
# One server for every browser test whose environment can be this one: the instructor's
# passphrase configured (the classroom story signs in with it; elsewhere the sidebar shows its
# closed "Instructor sign-in" box), the Train page's image limit lowered (the Spanish walk's
# messages name it), room for a few runs per person (the race test queues two). Its own
# environment only where it must differ: an identity provider (test_browser_oidc.py, which
# replaces the passphrase; its fresh server's very first request is a page) and the replicas
# on PostgreSQL (test_browser_replicas.py).
# Each test's ``browser.new_page()`` starts with no cookies (conftest.SharedContextBrowser), and
# ``new_context()`` is a browser of its own: its own session id and person.
PASSPHRASE = "classroom-passphrase-1"
SHARED_ENV = {"CIFARLAB_MAX_TRAIN_IMAGES": "20000", "CIFARLAB_MAX_PER_OWNER": "10",
              "CIFARLAB_CPU_SLOTS": "1", "CIFARLAB_SPARE_WORKERS": "1"}


def shared_server(home: Path, archive: Path) -> StreamlitServer:
    """The shared app server over ``home``, started (see above)."""
    from cifarlab.serve.identity import hash_passphrase, secrets_line

    secrets = home / "secrets.toml"
    secrets.write_text("[cifarlab]\n" + secrets_line(hash_passphrase(PASSPHRASE, n=2 ** 12))
                       + "\n")
    return StreamlitServer(home, env={"CIFARLAB_DATA": str(archive), **SHARED_ENV,
                                      "STREAMLIT_SECRETS_FILES": str(secrets)},
                           script="server.py").start()   # as hosts run it


# Page conditions are polled every 100 ms, not on every animation frame (Playwright's default):
# a frame-by-frame check makes Chromium produce 60 frames a second and lay out the page for
# `innerText` each time, for as long as a test waits (~10 % of a page walk's CPU, §28).
POLL_MS = 100
# What the page's websocket carries, watched from inside the page (an init script, added to
# every test browser's context by conftest.SharedContextBrowser): when it last asked for a
# rerun (a BackMsg whose field is ``rerun_script``, 11), when a run last ended (a ForwardMsg
# with ``script_finished``, 6) and when anything last came. A rerun asked for and not yet
# ended is a page that is not idle, though nothing on it may show it yet.
WS_WATCH_JS = """(() => {
    const seen = window.__cifarlabWs = {rerun: -1, finished: -1, received: -1};
    const bytes = (d) => d instanceof ArrayBuffer ? new Uint8Array(d)
        : ArrayBuffer.isView(d) ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength) : null;
    const fields = (b) => {   // the top-level field numbers of a protobuf message
        let i = 0;
        const out = [];
        const varint = () => {
            let x = 0, scale = 1, c;
            do {
                c = b[i++];
                x += (c & 0x7f) * scale;
                scale *= 128;
            } while (c & 0x80 && i < b.length);
            return x;
        };
        while (i < b.length) {
            const tag = varint(), wire = tag % 8;
            out.push(Math.floor(tag / 8));
            if (wire === 0) varint();
            else if (wire === 2) i += varint();
            else if (wire === 1) i += 8;
            else if (wire === 5) i += 4;
            else break;
        }
        return out;
    };
    const Native = window.WebSocket;
    window.WebSocket = class extends Native {
        constructor(...args) {
            super(...args);
            this.addEventListener('message', (e) => {
                seen.received = performance.now();
                const b = bytes(e.data);
                if (b && fields(b).includes(6)) seen.finished = seen.received;
            });
        }
        send(data) {
            const b = bytes(data);
            if (b && b.length && b[0] === 0x5a) seen.rerun = performance.now();
            return super.send(data);
        }
    };
})();"""
IDLE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    const running = document.querySelector('[data-testid="stStatusWidget"] button, '
        + '[data-testid="stStatusWidgetRunningIcon"]');
    const skeleton = document.querySelector('[data-testid="stSkeleton"]');
    const stale = document.querySelector('[data-stale="true"]');
    const main = document.querySelector('[data-testid="stMain"], section.main');
    const ws = window.__cifarlabWs;
    const quiet = !ws || (ws.finished >= ws.rerun && performance.now() - ws.received > 100);
    return quiet && app && !running && !skeleton && !stale && main
        && main.innerText.trim().length > 0;
}"""

# After a sidebar click (``arg``: the old page's title): the new page's title is there and no
# element of the old page is left.
ARRIVED_JS = f"""(before) => {{
    const h1 = document.querySelector('[data-testid="stMain"] h1');
    return h1 && h1.innerText !== before && ({IDLE_JS})();
}}"""


def go_by_sidebar(page, pid: str, timeout_ms: int = 60_000) -> None:
    """Open page ``pid`` by its sidebar link, as a student does: no reload of the frontend (a
    ``goto`` costs Chromium ~30 % more CPU, docs/benchmarks.md §23)."""
    before = page.locator("h1").first.inner_text()
    links = page.locator('[data-testid="stSidebarNav"] a')
    (links if pid == "home" else links.and_(page.locator(f'a[href*="/{pid}"]'))).first.click()
    page.wait_for_function(ARRIVED_JS, arg=before, timeout=timeout_ms, polling=POLL_MS)
    wait_idle(page)
    assert pid == "home" or f"/{pid}" in page.url, (pid, page.url)


def calculator_stride(page, t, stride: int):
    """On the Network page: open the output-size calculator (it shows the tutorial's 28 for
    conv1), type ``stride`` and press Enter. Returns the calculator's tab panel."""
    page.get_by_role("tab", name=t("network.calc_title")).click()
    wait_idle(page)
    panel = page.locator('[role="tabpanel"]:not([hidden])')
    assert panel.locator('[data-testid="stMetricValue"]').inner_text().strip() == "28"
    box = panel.get_by_label(t("network.stride"), exact=True)
    box.fill(str(stride))
    box.press("Enter")
    return panel


def wait_idle(page, timeout_ms: int = 180_000) -> None:
    """Wait until Streamlit has finished running the script: every rerun the page asked for
    has ended (WS_WATCH_JS), no 'running' status widget, no stale elements left from the
    previous run (a rerun keeps them, marked ``data-stale``, until it is done), and that
    twice a moment apart. A page without the watcher (a browser made elsewhere) is checked
    three times over 550 ms instead, since a rerun that a click or an Enter asked for may not
    have begun yet. ``timeout_ms``: a hang guard (a page's first run took over 60 s with the
    2 cores shared by other work)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    watched = page.evaluate("() => Boolean(window.__cifarlabWs)")
    page.wait_for_timeout(50 if watched else 150)
    for pause in ((100,) if watched else (200, 200)):
        page.wait_for_function(IDLE_JS, timeout=timeout_ms, polling=POLL_MS)
        page.wait_for_timeout(pause)
    page.wait_for_function(IDLE_JS, timeout=timeout_ms, polling=POLL_MS)


def page_problems(page) -> list[str]:
    """Exceptions shown on the page (a traceback box), as text."""
    return [el.inner_text()[:500] for el in page.query_selector_all('[data-testid="stException"]')]


def open_advanced(page, t) -> None:
    """Open the Train page's Advanced section (closed while its knobs hold the tutorial's
    values; what it holds is not in reach until then)."""
    section = page.get_by_test_id("stExpander").filter(has_text=t("train.advanced"))
    if section.locator("details[open]").count():
        return
    section.locator("summary").first.click()
    wait_idle(page)
    section.locator("details[open]").wait_for(timeout=60_000)


# The phone's view of a page: sideways overflow of the document and of Streamlit's main section
# (it scrolls inside), and where an element's top lies in the scrolled content.
PHONE_JS = """(label) => {
    const main = document.querySelector('[data-testid="stMain"]');
    const doc = document.scrollingElement;
    const button = [...document.querySelectorAll('[data-testid="stMain"] button')]
        .find(b => b.innerText.trim().split('\\n').pop().trim() === label);
    const top = button ? button.getBoundingClientRect().top - main.getBoundingClientRect().top
        + main.scrollTop : null;
    return {docWidth: doc.scrollWidth, mainWidth: main.scrollWidth, mainClient: main.clientWidth,
            innerWidth: window.innerWidth, top: top};
}"""

# The Train page's preset buttons, and the labels among them that are cut (a part of the label
# wider than the box that shows it: an "…").
PRESET_LABELS_JS = """() => {
    const buttons = [...document.querySelectorAll('[class*="st-key-train_preset_"] button')];
    return {count: buttons.length, cut: buttons
        .filter(b => [...b.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1))
        .map(b => b.innerText.trim())};
}"""


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# -- measuring a server (bench/bench_live.py, bench/bench_load.py) ---------------------------------

def cpu_seconds(pid: int, reaped: bool = False) -> float:
    """CPU time (user + system, all threads) a process has used so far, from /proc/<pid>/stat;
    with ``reaped``, also its children's that have ended and been waited for.
    Independent of how busy the machine is, unlike wall time."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the ")" that ends the command name: state is field 3, utime 14, stime 15,
    # cutime 16, cstime 17 (1-based)
    ticks = sum(int(x) for x in fields[11:15 if reaped else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def niced_chromium(folder: Path, niceness: int = 19) -> str:
    """A wrapper that starts Chromium at low priority: in a classroom the browsers run on the
    students' machines, so on a one-machine benchmark they should not take CPU from the server
    and its training workers. Returns the wrapper's path (Playwright's ``executable_path``)."""
    path = chromium_path()
    if not path:
        raise RuntimeError("no Chromium (apt-get install chromium, or set CIFARLAB_CHROMIUM)")
    wrapper = Path(folder) / "chromium-niced"
    wrapper.write_text(f'#!/bin/sh\nexec nice -n {int(niceness)} "{path}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def launch_args() -> list[str]:
    """Chromium's switches for every test browser. Reduced motion, as a person can ask of their
    browser: Streamlit's spinners and transitions then draw no frame after frame while a test
    waits (3 to 8 % less CPU in a page walk, docs/benchmarks.md §28). Nothing a test checks
    moves."""
    return ["--no-sandbox", "--disable-dev-shm-usage", "--force-prefers-reduced-motion"]


# The last step on the Train page's loss chart (0 while there is none); ``lossTitle`` is the
# chart's y-axis title in the page's language. The page sends the steps as a typed array
# (plotly's {dtype, bdata}), which plotly.js decodes into ``_fullData``.
LOSS_CHART_LAST_STEP = """(lossTitle) => {
    for (const el of document.querySelectorAll('.js-plotly-plot')) {
        const title = el.layout && el.layout.yaxis && el.layout.yaxis.title;
        const text = title && (title.text || title);
        const trace = (el._fullData && el._fullData[0]) || (el.data && el.data[0]);
        const xs = trace && trace.x;
        if (text === lossTitle && xs && xs.length) {
            let last = 0;
            for (const x of xs) last = Math.max(last, x);
            return last;
        }
    }
    return 0;
}"""


def wait_on_progress(done, progress, stall_s: float = 120.0, poll_ms: int = 500,
                     page=None) -> None:
    """Wait until ``done()`` is true for as long as ``progress()`` keeps changing (say, a run's
    status and step in the run store): fail only when nothing has moved for ``stall_s``
    seconds, never on a budget for the whole wait, so a slow, busy machine only makes it
    longer. ``page``: a Playwright page whose events keep flowing while this waits."""
    last, moved = progress(), time.monotonic()
    while not done():
        now = progress()
        if now != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved > stall_s:
            raise AssertionError(f"no progress for {stall_s:.0f} s (stuck at {last!r})")
        if page is not None:
            page.wait_for_timeout(poll_ms)
        else:
            time.sleep(poll_ms / 1000)


# ---------------------------------------------------------------- accessibility (axe-core)
GATE = ("serious", "critical")

# Streamlit's own markup that the app cannot change: (CSS selector, which Streamlit element and
# why). Each entry excludes one element (and what is inside it) from axe, never a whole rule.
# Empty today: what axe found in Streamlit's markup at the gated levels was fixable from the app
# (theme colours, the code colours in ui/a11y.py, wrap_lines). Its one finding left, the
# file uploader's drop zone (role="presentation" with tabindex, "presentation-role-conflict"),
# is minor and only printed.
STREAMLIT_OWNED: list[tuple[str, str]] = []



def axe_violations(page, within: str | None = None) -> list[dict]:
    """axe-core's violations on the page as it is now (Streamlit-owned elements excluded),
    or only in what ``within`` (a CSS selector) selects: a tab panel, when the rest of the
    page was checked already (axe over the whole page costs Chromium 1 to 5 CPU-s)."""
    from axe_playwright_python.sync_playwright import Axe

    context = {"exclude": [[sel] for sel, _ in STREAMLIT_OWNED]} if STREAMLIT_OWNED else {}
    if within:
        context["include"] = [[within]]
    return Axe().run(page, context=context or None,
                     options={"resultTypes": ["violations"]}).response["violations"]


def describe(v: dict) -> str:
    targets = [" ".join(n["target"]) if isinstance(n["target"], list) else str(n["target"])
               for n in v["nodes"][:3]]
    more = f" (+{len(v['nodes']) - 3} more)" if len(v["nodes"]) > 3 else ""
    return (f"{v['id']} [{v['impact']}] {v['help']}: {targets}{more}\n"
            f"      e.g. {v['nodes'][0]['html'][:200]}\n      {v['helpUrl']}")


def check_axe(page, where: str, found: dict[str, list[str]], within: str | None = None) -> None:
    """Run axe; gate-level violations go into ``found[where]``, the others are printed."""
    for v in axe_violations(page, within):
        if v["impact"] in GATE:
            found.setdefault(where, []).append(describe(v))
        else:
            print(f"[a11y, not gated] {where}: {describe(v)}")


def tall_screenshot(page, name: str) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its main section, so the
    viewport is made tall first. Only with ``CIFARLAB_TALL_SHOTS=1`` (for a person to look
    at): the resize re-lays out every chart twice, which the checks do not need."""
    if os.environ.get("CIFARLAB_TALL_SHOTS") != "1":
        return
    page.set_viewport_size({"width": 1400, "height": 3600})
    wait_idle(page)
    screenshot(page, name)


def report(found: dict[str, list[str]]) -> str:
    return "serious or critical accessibility violations:\n" + "\n".join(
        f"  {where}:\n    " + "\n    ".join(lines) for where, lines in found.items())


def english_sentences(lang: str) -> list[str]:
    """The English catalog's sentences that read differently in ``lang`` (placeholders and
    markdown left out): none of them may appear on a page shown in ``lang``."""
    from cifarlab import i18n

    theirs = i18n.catalog(lang)
    out = []
    for key, text in i18n.catalog("en").items():
        if not isinstance(text, str) or "{" in text or theirs.get(key) == text:
            continue
        plain = text.replace("**", "").replace("`", "").strip()
        if len(plain) >= 24 and "\n" not in plain:
            out.append(plain)
    return out


def check_language_and_links(page, pid: str, lang: str, page_ids: list[str]) -> None:
    """The document's language is the student's (a screen reader picks its voice by it), and
    the navigation and the page's previous / next lesson links speak it too."""
    from cifarlab import i18n

    assert page.evaluate("document.documentElement.lang") == lang
    t = i18n.translator(lang)
    nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
    assert all(t(f"nav.{other}") in nav for other in page_ids), nav
    links = " | ".join(page.locator('[data-testid="stPageLink"]').all_inner_texts())
    i = page_ids.index(pid)
    if i:
        assert t("nav.previous", page=t(f"nav.{page_ids[i - 1]}")) in links, links
    if i + 1 < len(page_ids):
        assert t("nav.next", page=t(f"nav.{page_ids[i + 1]}")) in links, links
