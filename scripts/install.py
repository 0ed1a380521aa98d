"""``python scripts/install.py -r requirements.txt [-r ...]``: pip's pins and sources, installed
by uv (40 s, not 94: docs/benchmarks.md §28), which reads no pip config; without uv, by pip."""
from __future__ import annotations

import os
import subprocess
import sys

UV = "uv==0.13.9"


def pip_config() -> dict[str, str]:
    """pip's settings by name; a PIP_* variable (listed as ``:env:.name``) wins over a file."""
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                             capture_output=True, text=True, check=True).stdout
    found: dict[str, str] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        scope, _, name = key.rpartition(".")
        if scope == ":env:" or name not in found:
            found[name] = value.strip().strip("'\"")
    return found


def uv_arguments(conf: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    args = ["--index-strategy", "unsafe-best-match"]
    for name in ("index-url", "extra-index-url", "find-links", "constraint"):   # uv's names too
        for value in conf.get(name, "").split():
            args += ["--" + name, value]
    env = {"SSL_CERT_FILE": conf["cert"]} if conf.get("cert") else {}
    return args, env


def main(requirements: list[str]) -> int:
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile"]
    # -qq: pip would warn that pip's local indexes hold no uv, which is expected
    if subprocess.run([*pip, "--quiet", UV]).returncode != 0:
        print(f"install: {UV} could not be installed; pip installs instead (slower).",
              file=sys.stderr)
        return subprocess.run([*pip, *requirements]).returncode
    args, env = uv_arguments(pip_config())
    uv = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", sys.executable]
    return subprocess.run([*uv, *args, *requirements], env={**os.environ, **env}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
