"""``Classroom``: every classroom action, each one checking who asks (see the package docstring)."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import time
from typing import Any, Callable, Iterable, Mapping

from cifarlab.core.config import MAX_SEED
from cifarlab.i18n import finite
from cifarlab.serve.classroom import enforce, scoring, tables
from cifarlab.serve.classroom.model import (GOAL_KINDS, BoardRow, ClassError, ClassInfo,
                                            ClassLimits, ExperimentView, Goal, LeaderRow,
                                            Membership, Presenter, StudentView)
from cifarlab.serve.classroom.names import clean_nickname, clean_title, normalize_code
from cifarlab.serve.identity import AttemptLimiter, Backoff, Person
from cifarlab.serve.runs import reason
from cifarlab.serve.store import RunStore, StoreCounters

# Wrong codes slow a browser, a code and everyone down; never a browser that is not guessing.
# A class code gets fewer free tries than AttemptLimiter's default target.
TARGET = Backoff(free=5, base_s=2.0, cap_s=300.0)


class Classroom:
    """Every classroom action on the queue's RunStore (the join limiter counts there too: every
    app server counts the same failures)."""

    def __init__(self, store: RunStore, clock: Callable[[], float] = time.time):
        self.store = store
        self.limiter = AttemptLimiter(target=TARGET, counters=StoreCounters(store, "join"),
                                      clock=clock, name="class codes")

    # -- instructors: classes ----------------------------------------------------------------
    def create_class(self, by: Person, title: str) -> ClassInfo:
        _instructor(by)
        return tables.require_class(self.store, tables.insert_class(self.store, by.id,
                                                                    clean_title(title)))

    def set_open(self, by: Person, code: str, is_open: bool) -> ClassInfo:
        return tables.update(self.store, self.get_class(by, code).code, is_open=int(is_open))

    def my_classes(self, by: Person) -> list[ClassInfo]:
        return tables.classes_by(self.store, _instructor(by).id)

    def get_class(self, by: Person, code: str) -> ClassInfo:
        _instructor(by)
        return tables.require_class(self.store, code)

    def push_preset(self, by: Person, code: str, values: Mapping[str, Any],
                    locked: Iterable[str] = (), expected_version: int | None = None
                    ) -> ClassInfo:
        """``expected_version``: the one the page showed; another edit since: "class.stale"."""
        info = self.get_class(by, code)
        stored, locked = enforce.check_preset(values, locked, info.limits, info.experiment)
        return tables.update_versioned(self.store, info.code, expected_version, preset=stored,
                                       locked=list(locked))

    def set_limits(self, by: Person, code: str, limits: ClassLimits,
                   expected_version: int | None = None) -> ClassInfo:
        """Versioned like ``push_preset``; limits the preset would break are refused."""
        info = self.get_class(by, code)
        limits = enforce.check_limits(limits)
        enforce.check_preset(info.preset, info.locked, limits, info.experiment)
        return tables.update_versioned(self.store, info.code, expected_version,
                                       limits=dataclasses.asdict(limits))

    def set_experiment(self, by: Person, code: str, knob: str | None, values: Any = (),
                       expected_version: int | None = None) -> ClassInfo:
        """The class compares ``values`` of ``knob`` (None: no experiment); versioned like
        ``push_preset``. The picture keeps its runs while the knob stays the same."""
        info = self.get_class(by, code)
        ex, old = None, info.experiment
        if knob is not None:
            ex = enforce.check_experiment(knob, values, info.preset, info.locked, info.limits,
                                          old.since if old and old.knob == knob else None)
        return tables.update_versioned(self.store, info.code, expected_version,
                                       experiment=ex and dataclasses.asdict(ex))

    def experiment(self, viewer: Person, code: str | None = None) -> ExperimentView | None:
        """The experiment's picture (None without one); a student sees their own class's."""
        info = self._viewable(viewer, code)
        ex = info.experiment
        if ex is None:
            return None
        rows = scoring.board(self.store, info.code, viewer, since=ex.since, knob=ex.knob)
        return ExperimentView(ex, tuple(rows))

    # -- instructors: the board --------------------------------------------------------------
    def board(self, by: Person, code: str, limit: int = 200) -> list[BoardRow]:
        return scoring.board(self.store, self.get_class(by, code).code, by, limit=limit)

    def cancel_run(self, by: Person, code: str, run_id: str) -> str:
        """Cancel a run of this class; its status now."""
        info = self.get_class(by, code)
        run = self._class_run(info.code, run_id)
        if run.status == "queued" and self.store.set_status(
                run.id, "cancelled", only_from=["queued"],
                **reason("class.cancelled_by_instructor")):
            return "cancelled"
        if self.store.request_cancel(run.id):
            return "cancelling"
        return self.store.get(run.id).status

    def pin(self, by: Person, code: str, run_id: str) -> ClassInfo:
        """The run on the projector."""
        info = self.get_class(by, code)
        return tables.update(self.store, info.code, pinned=self._class_run(info.code, run_id).id)

    def presenter(self, viewer: Person, code: str | None = None, since_step: int = 0,
                  since_seq: int = 0) -> Presenter | None:
        """The pinned run (None: nothing), its losses and events after ``since_step`` and
        ``since_seq`` (a projector reads on from what it drew); a student sees their class's."""
        info = self._viewable(viewer, code)
        run = None if info.pinned is None else self.store.get(info.pinned)
        if run is None:   # nothing pinned, or the run deleted since
            return None
        steps, losses = self.store.losses(run.id, since_step)
        events = self.store.events(run.id, ("start", "running_loss", "epoch"), since_seq)
        return Presenter(tables.nicknames(self.store, info.code).get(run.owner, "?"), run.status,
                         finite((run.result or {}).get("test_accuracy")),
                         scoring.fraction(run.progress), tuple(steps), tuple(losses),
                         tuple(events), int((run.config or {}).get("log_every") or 2000),
                         run.created_at)

    # -- instructors: the challenge ----------------------------------------------------------
    def open_challenge(self, by: Person, code: str, goal: Goal | Mapping[str, Any]) -> ClassInfo:
        return tables.open_challenge(self.store, self.get_class(by, code).code, _goal(goal), by.id)

    def close_challenge(self, by: Person, code: str) -> ClassInfo:
        """Its private board is revealed to the students."""
        return tables.close_challenge(self.store, self.get_class(by, code).code)

    def leaderboard(self, viewer: Person, code: str | None = None,
                    which: str = "public") -> list[LeaderRow]:
        """A student sees their own class's, its private board once the challenge is closed."""
        info = self._viewable(viewer, code)
        ch = info.challenge
        if ch is None:
            return []
        if which == "private" and ch.is_open and not viewer.instructor:
            raise ClassError("class.private_hidden", field="which")
        return scoring.leaderboard(self.store, info.code, ch, which, viewer)

    # -- students ----------------------------------------------------------------------------
    def join(self, person: Person, code: str, nickname: str, client_key: str) -> Membership:
        """Joining again (another tab) keeps the membership; a guessing browser must wait."""
        _person(person)
        key = str(client_key or person.id)[:128]
        norm = normalize_code(code)
        target = norm or "?"
        wait = self.limiter.wait(key, target)   # > 0 only for a browser that has been guessing
        if wait > 0:
            raise ClassError("class.rate_limited", field="code", seconds=max(1, math.ceil(wait)))
        info = tables.get_class(self.store, norm) if norm else None
        if info is None:
            self.limiter.failed(key, target)
            raise ClassError("class.unknown_code", field="code")
        current = tables.membership(self.store, person.id)
        if current is not None and current.code == info.code:
            self.limiter.succeeded(key)
            return current
        if not info.is_open:
            self.limiter.failed(key, target)
            raise ClassError("class.closed", field="code")
        self.limiter.succeeded(key)
        nick = clean_nickname(nickname)
        return tables.add_member(self.store, info.code, person.id, nick, nick.casefold())

    def leave(self, person: Person) -> bool:
        """Their runs stay on its boards; False when in no class."""
        return tables.leave(self.store, _person(person).id)

    def student_view(self, person: Person) -> StudentView | None:
        member = tables.membership(self.store, _person(person).id)
        if member is None:
            return None
        info = tables.require_class(self.store, member.code)
        # their own class and its public board: no second membership check (leaderboard's)
        rows = (scoring.leaderboard(self.store, info.code, info.challenge, "public", person)
                if info.challenge is not None else [])
        preset, locked = enforce.pushed(info, member.slot)
        return StudentView(member, preset, locked, info.challenge,
                           next((r.rank for r in rows if r.you), None), len(rows), info.version,
                           None if "seed" in locked else own_seed(info.code, person.id),
                           info.experiment)

    # -- checks ------------------------------------------------------------------------------
    def _viewable(self, viewer: Person, code: str | None) -> ClassInfo:
        """The class an instructor names, or the student's own (naming another is refused)."""
        _person(viewer)
        if viewer.instructor:
            return tables.require_class(self.store, code)
        member = tables.membership(self.store, viewer.id)
        if member is None or (code is not None and code != member.code):
            raise ClassError("class.not_member", field="code")
        return tables.require_class(self.store, member.code)

    def _class_run(self, code: str, run_id: str):
        run = self.store.get(run_id)   # a malformed id is refused there
        if run is None or tables.class_of_run(self.store, run_id) != code:
            raise ClassError("class.not_class_run", field="run_id")
        return run


def own_seed(code: str, person_id: str) -> int:
    """A student's seed in a class, the same on every visit (else students who kept the other
    settings would train the very same run); hashed: it tells nothing of the id."""
    digest = hashlib.sha256(f"{code}\n{person_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (MAX_SEED + 1)


def _person(person: Any) -> Person:
    if not isinstance(person, Person):
        raise ClassError("class.no_person", field="person")
    return person


def _instructor(by: Any) -> Person:
    if not _person(by).instructor:
        raise ClassError("class.not_instructor", field="person")
    return by


def _goal(goal: Goal | Mapping[str, Any]) -> Goal:
    g = goal if isinstance(goal, Goal) else Goal(**goal)
    if g.kind not in GOAL_KINDS:
        raise ClassError("class.goal_kind", field="kind", kinds=", ".join(GOAL_KINDS))
    if g.kind == "fastest_to":
        t = g.target
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1:
            raise ClassError("class.goal_target", field="target")
        return Goal("fastest_to", target=float(t))
    n = g.max_epochs
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ClassError("class.goal_epochs", field="max_epochs")
    device = None if g.device in (None, "", "any") else str(g.device).strip().lower()
    return Goal("best_accuracy", max_epochs=n, device=device)


@functools.lru_cache(maxsize=1)
def get_classroom(queue: Any) -> Classroom:
    """The process-wide Classroom on ``queue.store``."""
    return Classroom(queue.store)
