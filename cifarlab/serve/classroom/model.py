"""The classroom's records. None holds another person's id: it lets a browser act on their runs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from cifarlab import i18n
from cifarlab.errors import JobError

GOAL_KINDS = ("best_accuracy", "fastest_to")
MAX_VALUES = 8        # an experiment's values: what one picture (and one class) can compare


class ClassError(JobError):
    """A classroom action refused (``errors.class.*``); a refused submit reads the same."""


@dataclass(frozen=True)
class Words:
    """A message's parameter (a knob's label) in the message's language."""

    key: str

    def text(self, lang: str = i18n.DEFAULT) -> str:
        return i18n.t(self.key, lang)


@dataclass(frozen=True)
class ClassLimits:
    """Per-class limits on top of the server's (None: none); ``devices``: ids or kinds."""

    max_epochs: int | None = None
    max_train_images: int | None = None
    devices: tuple[str, ...] | None = None
    max_runs_per_student: int | None = None

    def allows_device(self, device: str) -> bool:   # "cuda:0": listed by id or kind
        return self.devices is None or not {device, device.split(":")[0]}.isdisjoint(self.devices)


@dataclass(frozen=True)
class Goal:
    """``best_accuracy`` in ``max_epochs`` on ``device`` (None: any), or ``fastest_to``
    ``target`` accuracy (0..1) in the fewest training seconds."""

    kind: str
    max_epochs: int | None = None
    device: str | None = None
    target: float | None = None

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
    """The values of one knob the class compares; the picture shows the runs ``since``."""

    knob: str
    values: tuple
    since: float


@dataclass(frozen=True)
class ClassInfo:
    """One class as its instructors see it; ``version``: the ``expected_version`` of an edit."""

    code: str
    title: str
    is_open: bool
    version: int
    preset: Mapping[str, Any]
    locked: tuple[str, ...]
    limits: ClassLimits
    pinned: str | None
    challenge: Challenge | None
    members: int
    experiment: Experiment | None = None


@dataclass(frozen=True)
class Membership:
    code: str
    title: str
    nickname: str
    slot: int        # the order they joined in (0, 1, 2...): their experiment value


@dataclass(frozen=True)
class BoardRow:
    """One run on the class board: the student's ``run_number``-th in the class."""

    nickname: str
    run_number: int
    run_id: str
    status: str
    device: str
    queue_position: int | None      # 1: next on its device
    progress: float | None          # 0..1 of its steps, None before it starts
    steps: tuple[int, ...]
    losses: tuple[float, ...]
    accuracy: float | None
    created_at: float
    value: Any               # the run's value of the experiment's knob
    you: bool                # the viewer's own run (only then a run id, unless an instructor)


@dataclass(frozen=True)
class ExperimentView:
    """The class experiment and its runs."""

    experiment: Experiment
    rows: tuple[BoardRow, ...]


@dataclass(frozen=True)
class Presenter:
    """The pinned run: its step losses and the events its Train page chart draws."""

    nickname: str
    status: str
    accuracy: float | None
    progress: float | None
    steps: tuple[int, ...]
    losses: tuple[float, ...]
    events: tuple[Any, ...]   # start, running_loss, epoch
    log_every: int
    created_at: float         # which run it is, for a projector that reads on from it


@dataclass(frozen=True)
class LeaderRow:
    """One student's best run (their ``run_number``-th in the class); ``score``: the accuracy
    on the board's half, or the seconds (fastest_to)."""

    rank: int
    nickname: str
    score: float
    accuracy: float
    seconds: float | None
    finished_at: float
    you: bool = False
    run_number: int | None = None


@dataclass(frozen=True)
class StudentView:
    """A student's class; ``seed``: their own in it (None when the class locked it)."""

    membership: Membership
    preset: Mapping[str, Any]
    locked: tuple[str, ...]
    challenge: Challenge | None
    rank: int | None
    ranked: int              # students on the public board (``rank`` is there too)
    version: int
    seed: int | None
    experiment: Experiment | None   # its value is in ``preset``

    @property
    def values(self) -> dict[str, Any]:   # what the class sets on the student's Train form
        return dict(self.preset) | ({} if self.seed is None else {"seed": self.seed})
