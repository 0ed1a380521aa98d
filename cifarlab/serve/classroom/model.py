"""The classroom's records (plain frozen dataclasses) and ``ClassError``. No record carries another
person's id (a ``browser:<session id>`` is what lets a browser act on that person's runs): boards
name nicknames and run numbers; run ids go to instructors and to the viewer's own row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from cifarlab import i18n
from cifarlab.errors import JobError

GOAL_KINDS = ("best_accuracy", "fastest_to")
BOARDS = ("public", "private")
MAX_VALUES = 8        # an experiment's values: what one picture (and one class) can compare


class ClassError(JobError):
    """A classroom action refused (``errors.class.*``); a JobError, so a refused submit reads
    the same. A ``Words`` parameter is written in the message's language (a knob's label)."""


@dataclass(frozen=True)
class Words:
    """A catalog key standing for its text in whichever language a message is written in."""

    key: str

    def text(self, lang: str = i18n.DEFAULT) -> str:
        return i18n.t(self.key, lang)

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True)
class ClassLimits:
    """Per-class limits on top of the server's (None: none). ``devices``: ids or kinds."""

    max_epochs: int | None = None
    max_train_images: int | None = None
    devices: tuple[str, ...] | None = None
    max_runs_per_student: int | None = None

    def allows_device(self, device: str) -> bool:
        """Whether a run resolved to ``device`` ("cuda:0") may run: listed by id or kind."""
        return self.devices is None or not {device, device.split(":")[0]}.isdisjoint(self.devices)


@dataclass(frozen=True)
class Goal:
    """A challenge's goal. ``best_accuracy``: the highest test accuracy, each run with at most
    ``max_epochs`` epochs (None: the class limits) on ``device`` (None: any); ``fastest_to``:
    the shortest training time (``train_seconds``) among runs reaching ``target`` (0..1)."""

    kind: str
    max_epochs: int | None = None
    device: str | None = None
    target: float | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Goal:
        return cls(d.get("kind"), d.get("max_epochs"), d.get("device"), d.get("target"))

    def allows_device(self, device: str) -> bool:
        return self.device is None or self.device in (device, device.split(":")[0])


@dataclass(frozen=True)
class Challenge:
    goal: Goal
    opened_at: float
    closed_at: float | None = None

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


@dataclass(frozen=True)
class Experiment:
    """One knob and the values the class compares; each student trains, locked, with
    ``value_for(slot)`` (round robin by the order they joined in, the same on every visit).
    ``since``: when it was set (the picture shows the runs from then on)."""

    knob: str
    values: tuple
    since: float

    def value_for(self, slot: int) -> Any:
        return self.values[slot % len(self.values)]


@dataclass(frozen=True)
class ClassInfo:
    """One class as its instructors see it. ``version`` grows with every versioned edit: pass
    it back as ``expected_version`` so a stale edit is refused."""

    code: str
    title: str
    created_by: str
    is_open: bool
    version: int
    preset: Mapping[str, Any]
    locked: tuple[str, ...]
    limits: ClassLimits
    pinned: str | None
    challenge: Challenge | None
    members: int
    created_at: float
    experiment: Experiment | None = None


@dataclass(frozen=True)
class Membership:
    code: str
    title: str
    person: str
    nickname: str
    joined_at: float
    slot: int        # the order they joined in (0, 1, 2...): their experiment value


@dataclass(frozen=True)
class BoardRow:
    """One run on the live class board. ``run_number``: the student's n-th run in the class;
    ``queue_position``: 1 = next on its device."""

    nickname: str
    run_number: int
    run_id: str
    status: str
    device: str
    queue_position: int | None
    progress: float | None          # 0..1 of its steps, None before it starts
    steps: tuple[int, ...]
    losses: tuple[float, ...]
    accuracy: float | None
    created_at: float
    value: Any               # the run's value of the experiment's knob (experiment rows)
    you: bool                # the viewer's own run


@dataclass(frozen=True)
class ExperimentView:
    """The class experiment and its runs since it was set (run ids only on the viewer's own
    rows, unless an instructor views). ``assigned``: (nickname, value) for each student."""

    experiment: Experiment
    rows: tuple[BoardRow, ...]
    assigned: tuple[tuple[str, Any], ...]
    yours: Any               # the viewer's own value (None for an instructor)


@dataclass(frozen=True)
class Presenter:
    """The pinned run, large on the projector: the loss as the mean of every ``stride`` steps
    (never each mini-batch's) and the tutorial's running loss at its global steps."""

    nickname: str
    status: str
    steps: tuple[int, ...]
    losses: tuple[float, ...]
    accuracy: float | None
    progress: float | None
    run_id: str | None       # for instructors only
    stride: int
    running_steps: tuple[int, ...]
    running_losses: tuple[float | None, ...]
    log_every: int


@dataclass(frozen=True)
class LeaderRow:
    """One student's best run on a leaderboard. ``score``: the accuracy on that board's half
    or the training seconds (fastest_to). ``person``: on the viewer's own row only;
    ``run_id``: for instructors and on the viewer's own row."""

    rank: int
    nickname: str
    score: float
    accuracy: float
    seconds: float | None
    finished_at: float
    you: bool = False
    person: str | None = None
    run_id: str | None = None
    run_number: int | None = None


@dataclass(frozen=True)
class StudentView:
    """What a student's pages show of their class; ``rank``: on the public board. ``seed``:
    the student's own seed in this class (None when the class locked the seed)."""

    membership: Membership
    preset: Mapping[str, Any]
    locked: tuple[str, ...]
    challenge: Challenge | None
    rank: int | None
    ranked: int              # students on the public board
    version: int
    pinned: bool             # a run is on the projector (``Classroom.presenter``)
    seed: int | None
    experiment: Experiment | None   # its value is in ``preset``

    @property
    def values(self) -> dict[str, Any]:
        """What the class sets on the student's Train form."""
        return dict(self.preset) | ({} if self.seed is None else {"seed": self.seed})

    def locked_reason(self, lang: str = i18n.DEFAULT) -> str:
        return i18n.t("errors.class.locked_reason", lang, title=self.membership.title)
