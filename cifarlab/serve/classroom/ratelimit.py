"""Join attempts with a wrong or closed class code: slowed down per browser, per code tried and
for everyone together, never for a browser that has not been guessing.

``identity.AttemptLimiter`` does the counting (see there): a browser with fewer than
``GUESSING_AFTER`` recent failures is checked at once, so a student who types the right code
gets in whatever classmates or strangers type meanwhile, and one typo costs nothing. A browser
that keeps failing waits (``CLIENT``: 2 s after its third failure, doubling to 5 minutes), and
while many wrong codes are being tried (``OVERALL``: more than 30) every browser that is
guessing waits as well, doubling from 1 s to 5 minutes; failures are forgotten after
``FORGET_S`` without one. The classroom keeps the counters in the run store
(``cifarlab.serve.counters``), so every app server on one store counts the same failures and a
restart forgets none; without a store they live in the serving process's memory.
"""
from __future__ import annotations

import time
from typing import Callable

from cifarlab.serve.identity import AttemptLimiter, Backoff, Counters, MemoryCounters

CLIENT = Backoff(free=3, base_s=2.0, cap_s=300.0)
TARGET = Backoff(free=5, base_s=2.0, cap_s=300.0)
OVERALL = Backoff(free=30, base_s=1.0, cap_s=300.0)
GUESSING_AFTER = 2
FORGET_S = 3600.0


def join_limiter(clock: Callable[[], float] = time.monotonic,
                 counters: Counters | None = None) -> AttemptLimiter:
    """The classroom's join limiter; ``clock``: seconds (tests pass their own); ``counters``:
    where the counts live (default: this process's memory)."""
    return AttemptLimiter(CLIENT, TARGET, OVERALL, guessing_after=GUESSING_AFTER, clock=clock,
                          counters=counters if counters is not None else MemoryCounters(FORGET_S),
                          name="class codes")
