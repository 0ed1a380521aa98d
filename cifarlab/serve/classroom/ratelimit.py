"""Join attempts with a wrong or closed class code, slowed down by ``identity.AttemptLimiter``:
per browser (``CLIENT``), per code tried and for everyone together (``OVERALL``), never for a
browser with fewer than ``GUESSING_AFTER`` recent failures, so a student who types the right
code gets in whatever others type, and one typo costs nothing.
"""
from __future__ import annotations

from typing import Callable

from cifarlab.serve.identity import AttemptLimiter, Backoff, Counters

CLIENT = Backoff(free=3, base_s=2.0, cap_s=300.0)
TARGET = Backoff(free=5, base_s=2.0, cap_s=300.0)
OVERALL = Backoff(free=30, base_s=1.0, cap_s=300.0)
GUESSING_AFTER = 2
FORGET_S = 3600.0


def join_limiter(clock: Callable[[], float], counters: Counters) -> AttemptLimiter:
    """The classroom's join limiter; ``clock``: seconds; ``counters``: where the counts live."""
    return AttemptLimiter(CLIENT, TARGET, OVERALL, guessing_after=GUESSING_AFTER, clock=clock,
                          counters=counters, name="class codes")
