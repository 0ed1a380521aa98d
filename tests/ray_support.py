"""The Ray test cluster: one real local Ray instance per test session, shared by every Ray test.

    from ray_support import ray_cluster  # noqa: F401 - the fixture, in a test module

``ray.init(address="local", num_cpus=2, num_gpus=1)`` bound to 127.0.0.1, no dashboard: two
logical CPUs like the lab machine, and one *logical* GPU (Ray's resource accounting only; no
CUDA needed), on which the fractional-GPU test places runs. Started in pytest's main thread,
which lives as long as the session (a thread that ends would break the connection), and the
SIGTERM handler Ray installs there is put back. Ray's workers get the tests' ``sys.path`` (as
``PYTHONPATH``) so that the test job kinds (``test_jobs:sleepy_job``) import there too.

Without Ray (``pip install -r requirements-ray.txt``) the Ray tests are skipped, except in CI
(``CI`` set), where they must run. Tests that need it are marked ``ray``.
"""
from __future__ import annotations

import os
import signal
import sys

import pytest

CLUSTER = {"num_cpus": 2, "num_gpus": 1}
# Ray gives its node 30 s to register (a constant in ray._private.node); on a machine busy with
# other work it may need longer: the cluster is started again, up to this many times.
STARTS = 3


def import_ray():
    """``ray``, or skip (fail in CI) when it is not installed."""
    try:
        import ray
    except ImportError as err:
        reason = f"Ray is not installed ({err}): pip install -r requirements-ray.txt"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the Ray tests: {reason}")
        pytest.skip(reason)
    return ray


@pytest.fixture(scope="session")
def ray_cluster():
    """The session's local Ray cluster (``ray``, connected); shut down at the end."""
    ray = import_ray()
    if ray.is_initialized():  # someone else's: use it as it is
        yield ray
        return
    before = signal.getsignal(signal.SIGTERM)
    paths = [p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p)]
    # The path reaches the workers through the environment the cluster's processes start
    # with, not a runtime_env: with one, every worker is launched through Ray's setup_worker
    # (another interpreter importing ray first, about 1 CPU-s a worker).
    before_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    try:
        for attempt in range(1, STARTS + 1):
            try:
                ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
                         namespace="cifarlab-tests", log_to_driver=False, **CLUSTER)
                break
            except Exception as err:  # Ray's own: its node did not register in time
                if attempt == STARTS or "timed out during startup" not in str(err):
                    raise
                ray.shutdown()
    finally:
        if before_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before_path
    if signal.getsignal(signal.SIGTERM) is not before:
        signal.signal(signal.SIGTERM, before)
    try:
        yield ray
    finally:
        ray.shutdown()
