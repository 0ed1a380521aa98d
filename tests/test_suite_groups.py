"""The suite's own plumbing: under pytest-xdist's ``--dist loadgroup`` (``make test``) each test
carries its group in its id, where xdist's scheduler reads it (tests/conftest.py)."""


def test_each_test_carries_its_xdist_group(request):
    (group,) = [m.args[0] for m in request.node.iter_markers("xdist_group")]
    assert group == "test_suite_groups"
    if getattr(request.config.option, "loadgroup", False):   # what the scheduler reads
        assert request.node.nodeid.endswith("@test_suite_groups"), request.node.nodeid

