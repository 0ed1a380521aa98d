"""``Classroom``: every classroom action, each one checking who asks (see the package docstring)."""
from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
import time
from typing import Any, Callable, Iterable, Mapping

# the package's own modules by their paths: the package's __init__ imports this module
import cifarlab.serve.classroom.enforce as enforce
import cifarlab.serve.classroom.scoring as scoring
import cifarlab.serve.classroom.tables as tables
from cifarlab.core.config import MAX_SEED
from cifarlab.i18n import finite
from cifarlab.serve.classroom.model import (BOARDS, GOAL_KINDS, BoardRow, ClassError, ClassInfo,
                                            ClassLimits, ExperimentView, Goal, LeaderRow,
                                            Membership, Presenter, StudentView)
from cifarlab.serve.classroom.names import clean_nickname, clean_title, normalize_code
from cifarlab.serve.identity import AttemptLimiter, Backoff, Person
from cifarlab.serve.runs import reason, validate_run_id
from cifarlab.serve.store import RunStore, StoreCounters

# Join attempts with a wrong or closed code are slowed per browser, per code tried and for
# everyone, never for a browser with fewer than GUESSING_AFTER recent failures: a student who
# types the right code gets in whatever others type, and one typo costs nothing.
CLIENT = Backoff(free=3, base_s=2.0, cap_s=300.0)
TARGET = Backoff(free=5, base_s=2.0, cap_s=300.0)
OVERALL = Backoff(free=30, base_s=1.0, cap_s=300.0)
GUESSING_AFTER = 2
FORGET_S = 3600.0


class Classroom:
    """Every classroom action on the queue's RunStore. The join limiter counts in the store,
    so every app server on it counts the same failures."""

    def __init__(self, store: RunStore, clock: Callable[[], float] = time.time):
        self.store = store
        self.limiter = AttemptLimiter(CLIENT, TARGET, OVERALL, guessing_after=GUESSING_AFTER,
                                      counters=StoreCounters(store, "join", FORGET_S),
                                      clock=clock, name="class codes")

    # -- instructors: classes ----------------------------------------------------------------
    def create_class(self, by: Person, title: str) -> ClassInfo:
        _instructor(by)
        return tables.require_class(self.store, tables.insert_class(self.store, by.id,
                                                                    clean_title(title)))

    def set_open(self, by: Person, code: str, is_open: bool) -> ClassInfo:
        """Open or close a class to new members (its members stay)."""
        info = self.get_class(by, code)
        tables.set_open(self.store, info.code, is_open)
        return tables.require_class(self.store, info.code)

    def my_classes(self, by: Person) -> list[ClassInfo]:
        return tables.classes_by(self.store, _instructor(by).id)

    def get_class(self, by: Person, code: str) -> ClassInfo:
        _instructor(by)
        return tables.require_class(self.store, code)

    def push_preset(self, by: Person, code: str, values: Mapping[str, Any],
                    locked: Iterable[str] = (), expected_version: int | None = None
                    ) -> ClassInfo:
        """Replace the preset and its locked knobs. ``expected_version``: the version the
        instructor's page showed; another edit since -> ClassError("class.stale")."""
        info = self.get_class(by, code)
        stored, locked = enforce.fits(info.experiment, values, locked, info.limits)
        tables.update_versioned(self.store, info.code, expected_version, preset=stored,
                                locked=list(locked))
        return tables.require_class(self.store, info.code)

    def set_limits(self, by: Person, code: str, limits: ClassLimits,
                   expected_version: int | None = None) -> ClassInfo:
        """Versioned like ``push_preset``; limits that the preset would break are refused."""
        info = self.get_class(by, code)
        limits = enforce.check_limits(limits)
        enforce.fits(info.experiment, info.preset, info.locked, limits)
        tables.update_versioned(self.store, info.code, expected_version,
                                limits=dataclasses.asdict(limits))
        return tables.require_class(self.store, info.code)

    def set_experiment(self, by: Person, code: str, knob: str | None, values: Any = (),
                       expected_version: int | None = None) -> ClassInfo:
        """The class compares ``values`` of ``knob`` (None: no experiment); versioned like
        ``push_preset``. The picture keeps its runs while the knob stays the same."""
        info = self.get_class(by, code)
        ex, old = None, info.experiment
        if knob is not None:
            ex = enforce.check_experiment(knob, values, info.preset, info.locked, info.limits,
                                          old.since if old and old.knob == knob else None)
        tables.update_versioned(self.store, info.code, expected_version,
                                experiment=None if ex is None else dataclasses.asdict(ex))
        return tables.require_class(self.store, info.code)

    def experiment(self, viewer: Person, code: str | None = None) -> ExperimentView | None:
        """The class experiment's picture (None without one); a student sees their own
        class's."""
        info = self._viewable(viewer, code)
        ex = info.experiment
        if ex is None:
            return None
        rows = scoring.board(self.store, info.code, tables.nicknames(self.store, info.code),
                             since=ex.since, knob=ex.knob, viewer=viewer.id)
        slots = tables.slots(self.store, info.code)
        member = None if viewer.instructor else tables.membership(self.store, viewer.id)
        return ExperimentView(
            ex, tuple(r if viewer.instructor or r.you else dataclasses.replace(r, run_id="")
                      for r in rows),
            tuple((nick, ex.value_for(slot)) for nick, slot in slots),
            None if member is None else ex.value_for(member.slot))

    # -- instructors: the board --------------------------------------------------------------
    def board(self, by: Person, code: str, limit: int = 200) -> list[BoardRow]:
        """Every run of the class, newest first."""
        info = self.get_class(by, code)
        return scoring.board(self.store, info.code, tables.nicknames(self.store, info.code),
                             limit=limit)

    def cancel_run(self, by: Person, code: str, run_id: str) -> str:
        """Cancel a run of this class (only this class's); returns its status now."""
        info = self.get_class(by, code)
        run = self._class_run(info.code, run_id)
        if run.status == "queued" and self.store.set_status(
                run.id, "cancelled", only_from=["queued"],
                **reason("class.cancelled_by_instructor")):
            return "cancelled"
        if self.store.request_cancel(run.id):
            return "cancelling"
        return self.store.get(run.id).status

    def pin(self, by: Person, code: str, run_id: str | None) -> ClassInfo:
        """Show one run of the class on the projector (None: nothing pinned)."""
        info = self.get_class(by, code)
        if run_id is not None:
            run_id = self._class_run(info.code, run_id).id
        tables.set_pinned(self.store, info.code, run_id)
        return tables.require_class(self.store, info.code)

    def presenter(self, viewer: Person, code: str | None = None) -> Presenter | None:
        """The pinned run (None when nothing is pinned); a student sees their own class's."""
        info = self._viewable(viewer, code)
        if info.pinned is None:
            return None
        run = self.store.get(info.pinned)
        if run is None:
            return None
        stride, steps, losses = scoring.mean_curve(self.store, run.id)
        spe, running = None, []
        for ev in self.store.events(run.id, kinds=("start", "running_loss")):
            if ev.kind == "start":
                spe = int(ev.data.get("steps_per_epoch") or 0) or None
            elif spe is not None:   # the tutorial's line "[epoch, i] loss" at its global step
                running.append(((int(ev.data["epoch"]) - 1) * spe + int(ev.data["i"]),
                                finite(ev.data.get("loss"))))
        nick = tables.nicknames(self.store, info.code).get(run.owner, "?")
        return Presenter(nick, run.status, steps, losses,
                         finite((run.result or {}).get("test_accuracy")),
                         scoring.fraction(run.progress),
                         run.id if viewer.instructor else None, stride,
                         tuple(s for s, _ in running), tuple(v for _, v in running),
                         int((run.config or {}).get("log_every") or 2000))

    # -- instructors: the challenge ----------------------------------------------------------
    def open_challenge(self, by: Person, code: str, goal: Goal | Mapping[str, Any]) -> ClassInfo:
        """While the challenge is open, submits keep its rules."""
        info = self.get_class(by, code)
        tables.open_challenge(self.store, info.code, _goal(goal), by.id)
        return tables.require_class(self.store, info.code)

    def close_challenge(self, by: Person, code: str) -> ClassInfo:
        """Close the open challenge: its private board is revealed to the students."""
        info = self.get_class(by, code)
        tables.close_challenge(self.store, info.code)
        return tables.require_class(self.store, info.code)

    def leaderboard(self, viewer: Person, code: str | None = None,
                    which: str = "public") -> list[LeaderRow]:
        """The challenge's board. A student sees their own class's, and its private board
        only once the challenge is closed."""
        if which not in BOARDS:
            raise ClassError("class.bad_board", field="which", which=str(which)[:20])
        info = self._viewable(viewer, code)
        ch = info.challenge
        if ch is None:
            return []
        if which == "private" and ch.is_open and not viewer.instructor:
            raise ClassError("class.private_hidden", field="which")
        rows = scoring.leaderboard(self.store, info.code, ch, which,
                                   tables.nicknames(self.store, info.code))
        return [dataclasses.replace(r, you=r.person == viewer.id,
                                    person=r.person if r.person == viewer.id else None,
                                    run_id=r.run_id if viewer.instructor or r.person == viewer.id
                                    else None)
                for r in rows]

    def leaderboard_csv(self, by: Person, code: str, which: str = "public") -> str:
        """The board as CSV, for instructors to share with the class."""
        info = self.get_class(by, code)
        rows = self.leaderboard(by, info.code, which)
        return scoring.as_csv(rows, which, info.challenge.goal.kind if info.challenge else "")

    # -- students ----------------------------------------------------------------------------
    def join(self, person: Person, code: str, nickname: str, client_key: str) -> Membership:
        """Join a class under a nickname (leaving any other); joining again (another tab)
        gets the membership they have. A browser that has been guessing codes must wait."""
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

    def membership(self, person: Person) -> Membership | None:
        return tables.membership(self.store, _person(person).id)

    def leave(self, person: Person) -> bool:
        """Leave the class (their runs stay on its boards); False when in none."""
        return tables.leave(self.store, _person(person).id)

    def student_view(self, person: Person) -> StudentView | None:
        """None when the student is in no class."""
        member = self.membership(person)
        if member is None:
            return None
        info = tables.require_class(self.store, member.code)
        rank, ranked = None, 0
        if info.challenge is not None:
            rows = self.leaderboard(person, info.code, "public")
            ranked = len(rows)
            rank = next((r.rank for r in rows if r.you), None)
        preset, locked = enforce.pushed(info, member.slot)
        return StudentView(member, preset, locked, info.challenge,
                           rank, ranked, info.version, info.pinned is not None,
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
        run_id = validate_run_id(run_id)
        run = self.store.get(run_id)
        if run is None or tables.class_of_run(self.store, run_id) != code:
            raise ClassError("class.not_class_run", field="run_id")
        return run


def own_seed(code: str, person_id: str) -> int:
    """A student's own seed in a class, the same on every visit: with one seed, students who
    kept the other settings would all train the very same run. Hashed: it tells nothing of
    the id."""
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
    g = goal if isinstance(goal, Goal) else Goal.from_dict(dict(goal or {}))
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


_CLASSROOM: Classroom | None = None
_LOCK = threading.Lock()


def get_classroom(queue: Any) -> Classroom:
    """The process-wide Classroom on ``queue.store`` (pages: beside ``get_queue()``; the queue
    imports this package, never the other way round)."""
    global _CLASSROOM
    with _LOCK:
        if _CLASSROOM is None or _CLASSROOM.store.where != queue.store.where:
            _CLASSROOM = Classroom(queue.store)
        return _CLASSROOM
