"""compose.yaml and the proxy's Caddyfile, read as files (Docker does not run on the test
machines): the replicas share one store, one home and one cookie secret, and the proxy keeps a
browser on one replica (session affinity) and sends it to another when that one is down."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")   # PyYAML (Ray's); the compose file is plain YAML

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_two_replicas_share_the_store_the_home_and_the_secrets(compose):
    services = compose["services"]
    assert {"db", "app-a", "app-b", "proxy", "ray-head", "ray-worker"} <= set(services)
    a, b = services["app-a"], services["app-b"]
    assert a == b                                  # the same service twice
    env = a["environment"]
    assert env["CIFARLAB_STORE_URL"].startswith("postgresql://cifarlab:")
    assert env["CIFARLAB_STORE_URL"].endswith("@db:5432/cifarlab")
    assert "STREAMLIT_SERVER_COOKIE_SECRET" in env and env["CIFARLAB_EXECUTOR"] == "ray"
    assert any(v.startswith("cifarlab-var:") for v in a["volumes"])
    assert a["depends_on"]["db"]["condition"] == "service_healthy"
    assert "ports" not in a                        # only the proxy is reached from outside
    db = services["db"]
    assert db["image"].startswith("postgres:15")
    assert db["environment"]["POSTGRES_USER"] == "cifarlab"
    assert set(compose["volumes"]) >= {"cifarlab-db", "cifarlab-var"}


def test_the_proxy_is_sticky_and_fails_over(compose):
    proxy = compose["services"]["proxy"]
    mount = next(v for v in proxy["volumes"] if "Caddyfile" in v)
    caddyfile = (ROOT / mount.split(":")[0]).read_text()
    upstreams = re.search(r"reverse_proxy\s+([^{]+)\{", caddyfile).group(1).split()
    assert upstreams == ["app-a:8501", "app-b:8501"]
    assert re.search(r"^\s*lb_policy cookie \w+$", caddyfile, re.M)
    assert re.search(r"^\s*health_uri /_stcore/health$", caddyfile, re.M)
    assert caddyfile.count("{") == caddyfile.count("}")
