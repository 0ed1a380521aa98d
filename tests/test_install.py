"""scripts/install.py: uv is handed the sources pip is set up with, so it installs what pip
would. The listing is `pip config list`'s own format; a PIP_* variable wins over a file."""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("install", ROOT / "scripts" / "install.py")
install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(install)

LISTING = """:env:.cert='/etc/ssl/certs/ca.crt'
:env:.find-links='/opt/env-wheels'
global.cert='/etc/ssl/certs/other.crt'
global.constraint='/etc/pip/constraints.txt'
global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'
global.find-links='/opt/file-wheels'
"""


def test_pips_sources_become_uvs_options(monkeypatch):
    def listing(cmd, **kwargs):
        assert cmd[-2:] == ["config", "list"]
        return subprocess.CompletedProcess(cmd, 0, stdout=LISTING)

    monkeypatch.setattr(install.subprocess, "run", listing)
    args, env = install.uv_arguments(install.pip_config())
    assert args == ["--index-strategy", "unsafe-best-match",
                    "--extra-index-url", "file:///opt/a/simple",
                    "--extra-index-url", "file:///opt/b/simple",
                    "--find-links", "/opt/env-wheels",            # the variable, not the file
                    "--constraint", "/etc/pip/constraints.txt"]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca.crt"}


def test_no_configuration_means_uvs_defaults():
    assert install.uv_arguments({}) == (["--index-strategy", "unsafe-best-match"], {})


def test_this_pip_reads_as_a_listing():
    """The real `pip config list` of this interpreter parses (whatever it holds here)."""
    assert all("." not in name for name in install.pip_config())   # scopes taken off
