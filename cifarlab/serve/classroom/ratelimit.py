"""Join attempts with a wrong or closed class code, limited per client and for everyone.

Only failures count: a student who types the right code is never slowed down by their own
earlier typo beyond ``PER_CLIENT_FAILURES`` a ``WINDOW_S``. The global limit caps how fast the
whole world can guess (see ``names``: ~4 million codes); while it is reached, every join waits
(an attack delays a class by a minute; it never finds the code). Kept in the memory of the
serving process (one per ``home``), so a restart forgets it, which costs a guesser nothing
they could not get by waiting a minute.
"""
from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Callable

from cifarlab.serve.classroom.model import ClassError

WINDOW_S = 60.0
PER_CLIENT_FAILURES = 5
GLOBAL_FAILURES = 30


class JoinLimiter:
    """Sliding windows of failed join attempts; ``clock``: seconds (tests pass their own)."""

    def __init__(self, per_client: int = PER_CLIENT_FAILURES, overall: int = GLOBAL_FAILURES,
                 window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.per_client, self.overall, self.window_s = per_client, overall, window_s
        self.clock = clock
        self._lock = threading.Lock()
        self._clients: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()

    def check(self, client_key: str) -> None:
        """ClassError("class.rate_limited") if this client, or everyone, failed too often in
        the last window; its ``seconds`` says when to try again."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            waits = []
            mine = self._clients.get(client_key)
            if mine is not None and len(mine) >= self.per_client:
                waits.append(mine[0] + self.window_s - now)
            if len(self._all) >= self.overall:
                waits.append(self._all[0] + self.window_s - now)
        if waits:
            raise ClassError("class.rate_limited", field="code",
                             seconds=max(1, math.ceil(max(waits))))

    def failed(self, client_key: str) -> None:
        with self._lock:
            now = self.clock()
            self._clients.setdefault(client_key, deque()).append(now)
            self._all.append(now)

    def _expire(self, now: float) -> None:
        cutoff = now - self.window_s
        while self._all and self._all[0] <= cutoff:
            self._all.popleft()
        for key in [k for k, q in self._clients.items() if not q or q[-1] <= cutoff]:
            del self._clients[key]  # every failure of theirs is old: forget the client
        for q in self._clients.values():
            while q and q[0] <= cutoff:
                q.popleft()
