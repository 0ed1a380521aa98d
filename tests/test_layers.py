"""The house's layers hold: pages -> lab | serve -> core -> errors | i18n (pyproject.toml).

import-linter reads the real import graph; a module that imports upward, an engine module that
imports streamlit, or a page that opens the run store directly fails this test with the chain.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "BROKEN" not in proc.stdout
    assert proc.stdout.count("KEPT") >= 3


def test_every_page_finds_its_engine_by_name():
    # pages/<name>.py <-> cifarlab/lab/<name>.py or cifarlab/lab/<name>/ (common.py is shared
    # widgets; home.py is the welcome page and uses core directly).
    lab = ROOT / "cifarlab" / "lab"
    missing = []
    for page in sorted((ROOT / "pages").glob("*.py")):
        if page.stem in ("__init__", "common", "home"):
            continue
        if not ((lab / f"{page.stem}.py").is_file() or (lab / page.stem / "__init__.py").is_file()):
            missing.append(page.stem)
    assert not missing, f"pages without an engine of the same name in cifarlab/lab: {missing}"


def test_no_module_is_too_long_to_read_in_one_sitting():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "cifarlab").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 450}
    assert not long, f"modules over ~400 lines want splitting: {long}"


def test_pages_read_runs_only_through_the_queues_checked_calls():
    # `queue.store` would skip the session check that every JobQueue call makes
    offenders = [f"{p.name}:{i}" for p in sorted((ROOT / "pages").glob("*.py"))
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if ".store." in line or ".store\n" in line or "store =" in line]
    assert not offenders, offenders
