"""Shared fixtures: the offline CIFAR-10 archive, its decoded data, a tiny image-folder data set."""
import os
from pathlib import Path

import numpy as np
import pytest
try:  # pytest >= 9.2; older ones (the GPU machine's image) read ``item._nodeid``
    from _pytest.nodeid import NodeId
except ImportError:
    NodeId = None

# ../shared/data beside the checkout (see ../shared/data/README.md); never committed here.
ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT.parent / "shared/data/cifar10-jpeg.tar.gz"


# -- tiers ------------------------------------------------------------------------------------
# `make test` runs everything (CI). `make test-unit` (pytest -m "not browser and not integration
# and not slow") is the edit-test loop: it leaves out what reads the real data set, starts
# worker processes, servers or a Ray cluster, drives pages through AppTest, or trains for real.
REAL_DATA = {"cifar_archive", "cifar_data", "cifar_cache_dir", "finished_run"}
PROCESS_MODULES = {"test_jobs", "test_export", "test_upload_bombs", "test_train_eval",
                   "test_results", "test_gpu_lab", "test_cuda", "test_data", "test_data_cache",
                   "test_schema", "test_store", "test_serve_limits", "test_replicas",
                   "test_first_load"}   # (a fresh interpreter per language)


# Under pytest-xdist (``--dist loadgroup``) a group's tests run in one worker. The browser tests
# are one group (one app server and one Chromium): they wait on pages often, so they go beside
# the other worker's CPU-bound tests rather than beside a second browser group; the Ray tests
# are one (one cluster). Every other test goes with its module (its module-scoped fixtures are
# then made once).


@pytest.hookimpl(tryfirst=True)   # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        if item.get_closest_marker("browser"):
            group = "browser"
        else:
            group = "ray" if item.get_closest_marker("ray") else module
        item.add_marker(pytest.mark.xdist_group(group))
        if getattr(config.option, "loadgroup", False) and "@" not in item.nodeid:
            # xdist 3.8 tells the groups to its scheduler by a "@group" suffix on the test's
            # id, written into ``item._nodeid``, which pytest 9.2 no longer reads (its ids
            # are ``NodeId`` objects): without this, loadgroup spread each group over workers
            if NodeId is None:
                item._nodeid = f"{item.nodeid}@{group}"
            else:
                item._id = NodeId.parse(f"{item.nodeid}@{group}")
        if item.get_closest_marker("browser") or item.get_closest_marker("slow"):
            continue
        if (REAL_DATA & set(getattr(item, "fixturenames", ())) or module in PROCESS_MODULES
                or module.startswith("test_pages_") or item.get_closest_marker("ray")):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def components_scanned_once():
    """Each new AppTest's first run scans every installed distribution's metadata for Streamlit
    components (``scan_component_manifests``): 0.3 CPU-s alone with this environment's ~150
    packages, 30 % of what the page tests spent. No package is installed during a test run,
    so each test process scans once; the server (``streamlit run``) scans once at its start
    anyway."""
    import functools

    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:   # an image without Streamlit (the GPU machine's) runs the other tests
        yield
        return

    scan = manifest_scanner.scan_component_manifests
    manifest_scanner.scan_component_manifests = functools.cache(scan)
    yield
    manifest_scanner.scan_component_manifests = scan


@pytest.fixture(scope="session", autouse=True)
def scripts_compiled_once():
    """Each AppTest run compiles app.py and its page afresh (a new ``ScriptCache``: parsed,
    rewritten for Streamlit's magic, compiled), where a server compiles each file once. Here
    the bytecode is kept per process, by the file's path and its size and time (a test may
    write a file again)."""
    try:
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache
        from streamlit.testing.v1 import app_test, local_script_runner
    except ImportError:   # as above
        yield
        return

    compiled: dict[tuple, object] = {}

    class CompiledOnce(ScriptCache):
        def get_bytecode(self, script_path: str):
            stat = os.stat(script_path)
            key = (os.path.abspath(script_path), stat.st_mtime_ns, stat.st_size)
            if key not in compiled:
                compiled[key] = super().get_bytecode(script_path)
            return compiled[key]

    app_test.ScriptCache = local_script_runner.ScriptCache = CompiledOnce
    yield
    app_test.ScriptCache = local_script_runner.ScriptCache = ScriptCache


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """torch in the test process on one thread: under ``make test`` two xdist workers share the
    2-core machine with Chromium and the app server, and torch's default of a thread per core
    spins more than it computes there (docs/benchmarks.md §24). Worker processes set their own
    (the ``worker_threads`` setting); tests about threads set theirs."""
    import sys

    if "torch" in sys.modules:   # only where the collected tests imported it
        import torch

        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def cifar_archive() -> Path:
    """The offline CIFAR-10 (50,000 + 10,000 JPEGs in train/<class>/, test/<class>/)."""
    if not ARCHIVE.is_file():
        reason = (f"the offline CIFAR-10 archive {ARCHIVE} is missing (it lives in "
                  "../shared/data beside the checkout)")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return ARCHIVE


@pytest.fixture(scope="session", autouse=True)
def data_cache_of_this_run(tmp_path_factory):
    """$CIFARLAB_CACHE when set (decode once per machine), else one folder for this run, set as
    $CIFARLAB_CACHE for every process the tests start (app servers, the CLI, workers, Ray,
    kernels): the archive is decoded once a run, and nothing is written into the person's own
    ~/.cache/cifarlab (the app's default), where each clone's path made another 180 MB copy."""
    env = os.environ.get("CIFARLAB_CACHE", "").strip()
    if env:
        yield Path(env)
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):   # one for all of this run's xdist workers
        folder = tmp_path_factory.getbasetemp().parent / "cifarlab-cache"
        folder.mkdir(exist_ok=True)             # (the decode takes a lock: one decodes)
    else:
        folder = tmp_path_factory.mktemp("cifarlab-cache")
    os.environ["CIFARLAB_CACHE"] = str(folder)
    yield folder
    os.environ.pop("CIFARLAB_CACHE", None)


@pytest.fixture(scope="session")
def cifar_cache_dir(data_cache_of_this_run) -> Path:
    """Where the decoded data set is cached for this run (see data_cache_of_this_run)."""
    return data_cache_of_this_run


@pytest.fixture(scope="session")
def cifar_data(cifar_archive, cifar_cache_dir):
    """The archive decoded (once per cache) by ``cifarlab.core.data.load``."""
    from cifarlab.core.data import load

    return load(str(cifar_archive), cache_dir=cifar_cache_dir)


@pytest.fixture(scope="session")
def finished_run(cifar_data, tmp_path_factory):
    """One real short training run, trained once per test run (under pytest-xdist one worker
    trains it, the others read what it left); ``.write(store, session)`` puts it into a run
    store as a worker would have left it (tests/run_support.py)."""
    from run_support import shared_finished_run

    if os.environ.get("PYTEST_XDIST_WORKER"):   # the run's folder, beside every worker's
        folder = tmp_path_factory.getbasetemp().parent / "finished-run"
        folder.mkdir(exist_ok=True)
    else:
        folder = tmp_path_factory.mktemp("finished-run")
    return shared_finished_run(cifar_data, folder)


@pytest.fixture
def tiny_folder(tmp_path) -> Path:
    """A small image-folder data set: 3 classes, 4 train + 2 test images each, PNG and JPEG.

    Three images are not 32×32 RGB: train/cat/c_big.png is 40×30 RGB, train/dog/d_gray.png is
    grayscale and test/frog/f_rgba.png is RGBA. Pixels differ per class (cat dark, frog bright).
    """
    from PIL import Image

    root = tmp_path / "tiny"
    rng = np.random.default_rng(1234)
    for split, per_class in (("train", 4), ("test", 2)):
        for c, cls in enumerate(("cat", "dog", "frog")):
            folder = root / split / cls
            folder.mkdir(parents=True)
            for i in range(per_class):
                pixels = rng.integers(0, 120, (32, 32, 3), dtype=np.uint8) + np.uint8(60 * c)
                ext = "jpg" if i == 1 else "png"
                Image.fromarray(pixels).save(folder / f"{cls[0]}{i}.{ext}")
    big = rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)          # H=30, W=40
    Image.fromarray(big).save(root / "train/cat/c_big.png")
    gray = rng.integers(0, 255, (32, 32), dtype=np.uint8)
    Image.fromarray(gray).save(root / "train/dog/d_gray.png")
    rgba = rng.integers(0, 255, (32, 32, 4), dtype=np.uint8)
    Image.fromarray(rgba).save(root / "test/frog/f_rgba.png")
    return root


# -- measured figures -----------------------------------------------------------------------------
# Tests that measure something (the load test) report it through the `figures`
# fixture; the figures are printed at the end of the run (pytest captures a passing test's
# prints) and written to test-artifacts/figures.txt for docs/benchmarks.md. They travel in the
# test's report (user_properties), so that under pytest-xdist the controller prints them too.
_FIGURES: list[str] = []


@pytest.fixture
def figures(request):
    return lambda line: request.node.user_properties.append(("figure", str(line)))


def pytest_runtest_logreport(report):
    if report.when == "teardown":   # the last report: it carries everything the test added
        _FIGURES.extend(value for key, value in report.user_properties if key == "figure")


def pytest_terminal_summary(terminalreporter):
    if not _FIGURES:
        return
    terminalreporter.section("measured figures")
    for line in _FIGURES:
        terminalreporter.write_line(line)
    out = Path(__file__).resolve().parents[1] / "test-artifacts"
    out.mkdir(exist_ok=True)
    (out / "figures.txt").write_text("\n".join(_FIGURES) + "\n")


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium for the browser tests, one per test session. Each ``new_page()`` is a
    new person (cookies cleared: a session id of its own); ``new_context()`` too. Without
    Chromium they are skipped, except in CI (``CI`` set), where they must run."""
    from browser_support import chromium_path, launch_args

    path = chromium_path()
    if not path:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: CI must run the browser tests "
                        "(apt-get install chromium)")
        pytest.skip("no Chromium here (apt-get install chromium, or set CIFARLAB_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=launch_args())
        yield SharedContextBrowser(b)
        b.close()


class SharedContextBrowser:
    """Chromium whose ``new_page()`` opens in one shared context with its cookies cleared
    first: a new person, as with a context of its own, but the Streamlit frontend's scripts come
    from that context's cache. Six page loads cost Chromium 16 CPU-s this way and 25 to 28 in a
    fresh context each (2-core machine, 2026-11-27). ``new_context()`` is Chromium's own: for
    two people at once, a locale, or cookies a test keeps across pages."""

    def __init__(self, browser):
        self._browser, self._shared = browser, None

    def new_context(self, **options):
        """A context whose pages watch their websocket (browser_support.WS_WATCH_JS), so that
        ``wait_idle`` knows when the reruns they asked for have ended."""
        from browser_support import WS_WATCH_JS

        context = self._browser.new_context(**options)
        context.add_init_script(WS_WATCH_JS)
        return context

    def new_page(self, viewport: dict | None = None):
        if self._shared is None:
            self._shared = self.new_context()
        self._shared.clear_cookies()
        page = self._shared.new_page()
        if viewport:
            page.set_viewport_size(viewport)
        return page

    def __getattr__(self, name):
        return getattr(self._browser, name)


@pytest.fixture(scope="session")
def server(browser, tmp_path_factory, cifar_archive):
    """The app server (`streamlit run app.py`) every browser test shares unless it needs an
    environment of its own (browser_support.shared_server says which); one per test session.
    Tests tell their runs apart by session id (each page its own browser context)."""
    from browser_support import shared_server

    srv = shared_server(tmp_path_factory.mktemp("app-home"), cifar_archive)
    yield srv
    srv.stop()


# -- PostgreSQL -------------------------------------------------------------------------------
# One real server per test session (tests/pg_support.py); each test that asks gets a schema of
# its own. Skipped where PostgreSQL is not installed, except in CI, where it must run.
@pytest.fixture(scope="session")
def postgres():
    from pg_support import Postgres, bin_dir

    bins = bin_dir()
    if bins is None:
        reason = "PostgreSQL is not installed here (apt-get install postgresql)"
        if os.environ.get("CI"):
            pytest.fail(reason + ": CI must run the PostgreSQL tests")
        pytest.skip(reason)
    server = Postgres(bins)
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def pg_url(postgres):
    """A fresh schema in the session's PostgreSQL, as a store URL."""
    schema = postgres.new_schema()
    yield postgres.url(schema)
    postgres.drop_schema(schema)


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def store_location(request, tmp_path):
    """Where a test's run store lives, once on each backend: a SQLite file, or a PostgreSQL
    schema (then the checkpoints go to tmp_path/home/checkpoints)."""
    if request.param == "sqlite":
        return tmp_path / "home" / "runs.db"
    return request.getfixturevalue("pg_url")
