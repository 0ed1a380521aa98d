"""The house's layers hold: pages -> ui -> lab | serve -> core -> errors | i18n (pyproject.toml).

import-linter reads the real import graph; a module that imports upward, an engine module that
imports streamlit, or a page that opens the run store directly fails this test with the chain.
What import-linter cannot see is read here: app.py (a script, no package), the length of every
module and page, and which files are pages.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cifarlab", "pages", "ui", "bench")   # every folder of non-test Python
MAX_MODULE_LINES = 400
MAX_PAGE_LINES = 250


def _py_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return {name.split(".")[0] for name in names}


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "BROKEN" not in proc.stdout
    assert proc.stdout.count("KEPT") >= 5


def test_only_the_app_its_pages_and_their_helpers_import_streamlit():
    # import-linter checks the packages; app.py is a script, read here. (bench/ and tests/
    # drive a server or speak its protocol: they are clients, not the app.)
    offenders = [str(p.relative_to(ROOT)) for p in [ROOT / "app.py"] + _py_files("cifarlab")
                 if "streamlit" in _imported(p)]
    assert offenders == ["app.py"], f"only pages/, ui/ and app.py may import streamlit: {offenders}"
    assert _imported(ROOT / "app.py") <= {"streamlit", "ui", "cifarlab"}   # and no page


def test_every_page_is_in_the_navigation_and_finds_its_engine_by_name():
    # pages/<name>.py <-> cifarlab/lab/<name>.py or cifarlab/lab/<name>/ (home.py is the welcome
    # page and uses core directly); a page's parts live in pages/<name>_parts/, never as pages
    from ui.nav import INSTRUCTOR_PAGES, PAGES

    listed = {path for _, path, _ in PAGES + INSTRUCTOR_PAGES}
    lab = ROOT / "cifarlab" / "lab"
    pages = [p for p in sorted((ROOT / "pages").glob("*.py"))
             if p.stem != "__init__"]
    assert {str(p.relative_to(ROOT)) for p in pages} == listed
    missing = [p.stem for p in pages if p.stem != "home" and not (
        (lab / f"{p.stem}.py").is_file() or (lab / p.stem / "__init__.py").is_file())]
    assert not missing, f"pages without an engine of the same name in cifarlab/lab: {missing}"
    folders = [d.name for d in (ROOT / "pages").iterdir() if d.is_dir() and d.name != "__pycache__"]
    assert all(d.endswith("_parts") and (ROOT / "pages" / f"{d[:-6]}.py").is_file()
               for d in folders), folders


def test_no_module_is_too_long_to_read_in_one_sitting():
    long = {name: n for p in _py_files(*PACKAGES) + [ROOT / "app.py", ROOT / "server.py"]
            if (n := _lines(p)) > MAX_MODULE_LINES and (name := str(p.relative_to(ROOT)))}
    assert not long, f"modules over {MAX_MODULE_LINES} lines want splitting: {long}"


def test_pages_are_thin():
    # widgets -> one call into the page's engine -> draw: a page over 250 lines hides logic
    thick = {name: n for p in _py_files("pages")
             if (n := _lines(p)) > MAX_PAGE_LINES and (name := str(p.relative_to(ROOT)))}
    assert not thick, f"pages over {MAX_PAGE_LINES} lines: move logic into cifarlab/lab: {thick}"


def test_every_chart_on_a_page_has_a_text_alternative_in_every_language():
    # a screen reader reads a chart's ``alt``; axe cannot tell that a plotly chart lacks one
    from cifarlab import i18n

    missing, keys = [], set()
    for p in _py_files("pages", "ui"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "plotly_chart":
                alt = next((k.value for k in node.keywords if k.arg == "alt"), None)
                if alt is None or isinstance(alt, ast.Constant):
                    missing.append(f"{p.relative_to(ROOT)}:{node.lineno}")
                elif (isinstance(alt, ast.Call) and alt.args
                      and isinstance(alt.args[0], ast.Constant)):   # t("a11y.…", …)
                    keys.add(alt.args[0].value)
    assert not missing, f"charts without a translated alt=: {missing}"
    assert len(keys) > 20
    for lang in i18n.LANGUAGES:
        texts = {key: i18n.t(key, lang, knob="X", rank=1, c=1, k=1, n=1, layer="X", h=1, w=1,
                             top=0, left=0) for key in keys}
        assert all(text and text != key for key, text in texts.items()), (lang, texts)
    assert i18n.t("a11y.train_loss_chart", "es") != i18n.t("a11y.train_loss_chart", "en")


def test_pages_read_runs_only_through_the_queues_checked_calls():
    # `queue.store` would skip the session check that every JobQueue call makes
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in _py_files("pages", "ui")
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if ".store." in line or ".store\n" in line or "store =" in line]
    assert not offenders, offenders


def test_the_image_holds_every_package_the_app_imports():
    # a package left out of the Dockerfile's COPY lines is an image that cannot start
    roots = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "tool"]["importlinter"]["root_packages"]
    copied = set(re.findall(r"^COPY (\S+) ", (ROOT / "Dockerfile").read_text(encoding="utf-8"),
                            re.M))
    assert {"app.py", *roots} <= copied, sorted({"app.py", *roots} - copied)


def import_graph(package: str = "cifarlab") -> dict[str, set[str]]:
    """module -> the cifarlab modules it imports, read with ``ast`` from every import statement
    (inside functions and ``if TYPE_CHECKING:`` too: a hidden import is still an arrow).
    ``from a.b import c`` imports ``a.b`` (a package's ``__init__``) and, when ``c`` is a
    module, ``a.b.c`` as well."""
    files = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom):
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                module = (".".join(base[:len(base) - node.level + 1] + [node.module or ""])
                          .rstrip(".") if node.level else node.module)
                if module in files:
                    out.add(module)
                out |= {f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in files}
        graph[name] = out - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_circle_finder_sees_a_package_import_and_a_hidden_one():
    graph = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p"}, "q": {"p"}}
    assert circles(graph) == [["p", "p.a", "p.b"]]
    here = import_graph()
    # `from cifarlab.core import data as data_mod` imports the package core and core.data
    assert {"cifarlab.core", "cifarlab.core.data"} <= here["cifarlab.core.train"]


def test_no_import_circles_in_cifarlab():
    found = circles(import_graph())
    assert not found, f"modules that import each other (directly or around a circle): {found}"
