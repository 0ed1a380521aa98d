"""What a class allows its members to queue: ``check_submit``, called by ``JobQueue.submit``
under its lock, reads the store itself, so it holds whatever a (tampered) browser sends."""
from __future__ import annotations

import dataclasses
import re
import time
from typing import Any, Iterable, Mapping

from cifarlab import i18n
from cifarlab.core.config import TrainConfig, knobs, same, validate
from cifarlab.errors import CifarLabError, ConfigError, Problem
from cifarlab.serve.classroom import tables
from cifarlab.serve.classroom.model import (MAX_VALUES, ClassError, ClassInfo, ClassLimits,
                                            Experiment, Words)
from cifarlab.serve.database import Database

KNOBS = {f.name: f for f in knobs(TrainConfig)}
# between values: ";", spaces, or a comma before a space ("0,01" is a decimal in es and pt)
SEPARATORS = re.compile(r";|\s+|,(?=\s)")


def check_submit(db: Database, owner: str, config: TrainConfig, device: str,
                 n_train: int) -> str | None:
    """Refuse a run that changes a locked knob or breaks the class limits or the open
    challenge's rules; the class code (None: in none). ``device``: resolved from "auto"."""
    member = tables.membership(db, owner)
    if member is None:
        return None
    info = tables.require_class(db, member.code)
    preset, locked = pushed(info, member.slot)
    for name in locked:
        value = preset.get(name, KNOBS[name].default if name in KNOBS else None)
        if not same(getattr(config, name, None), value):
            raise ClassError("class.knob_locked", field=name, knob=knob_words(name),
                             value=value_words(value))
    lim = info.limits
    _within(lim, config.epochs, config.images_per_epoch(n_train), device)
    if lim.max_runs_per_student is not None and \
            tables.runs_used(db, info.code, owner) >= lim.max_runs_per_student:
        raise ClassError("class.limit_runs", field="class", n=lim.max_runs_per_student)
    ch = info.challenge
    if ch is not None and ch.is_open and ch.goal.kind == "best_accuracy":
        if ch.goal.max_epochs is not None and config.epochs > ch.goal.max_epochs:
            raise ClassError("class.challenge_epochs", field="epochs", n=ch.goal.max_epochs)
        if not ch.goal.allows_device(device):
            raise ClassError("class.challenge_device", field="device", device=device,
                             allowed=ch.goal.device)
    return info.code


def _within(limits: ClassLimits, epochs: Any, images: Any, device: str | None) -> None:
    if None not in (limits.max_epochs, epochs) and epochs > limits.max_epochs:
        raise ClassError("class.limit_epochs", field="epochs", n=limits.max_epochs)
    if None not in (limits.max_train_images, images) and images > limits.max_train_images:
        raise ClassError("class.limit_images", field="train_subset", n=limits.max_train_images)
    if device is not None and not limits.allows_device(device):
        raise ClassError("class.limit_device", field="device", device=device,
                         allowed=", ".join(limits.devices or ()))


def knob_words(name: str) -> Words | str:
    """A knob as the student's page labels it, in the message's language."""
    return Words(KNOBS[name].knob.label) if name in KNOBS else name


def value_words(value: Any) -> Any:
    """A pushed value as a message shows it: yes/no for a switch, numbers as numbers."""
    if isinstance(value, bool):
        return Words("common.yes" if value else "common.no")
    return "–" if value is None else value


def check_preset(values: Mapping[str, Any], locked: Iterable[str], limits: ClassLimits,
                 experiment: Experiment | None = None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The values as ``TrainConfig`` stores them (1 -> 1.0), a locked knob without one at its
    default, and the locked names; the ``experiment``'s values must still go with them."""
    locked = tuple(dict.fromkeys(locked or ()))
    unknown = sorted({n for n in (*values, *locked) if n not in KNOBS})
    if unknown:
        raise ConfigError([Problem("config", "config.unknown", {"names": ", ".join(unknown)})])
    problems = validate(dict(values))
    if problems:
        raise ConfigError(problems)
    config = TrainConfig(**dict(values))   # validated: it builds
    stored = {n: getattr(config, n) for n in values}
    device = stored.get("device")
    _within(limits, stored.get("epochs"), stored.get("train_subset"),
            None if device in (None, "auto") else device)
    for n in locked:
        stored.setdefault(n, KNOBS[n].default)
    if experiment is not None:
        check_experiment(experiment.knob, experiment.values, stored, locked, limits)
    return stored, locked


def check_limits(limits: Any) -> ClassLimits:
    """Whole numbers ≥ 1 (or None) and a list of device names; ClassError naming the field."""
    if not isinstance(limits, ClassLimits):
        raise ClassError("class.bad_limits", field="limits")
    for name, v in dataclasses.asdict(limits).items():
        if v is not None and (isinstance(v, str) or not all(
                isinstance(d, str) and d.strip() for d in v) if name == "devices" else
                isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ClassError("class.bad_limit", field=name, name=name)
    return limits


def pushed(info: ClassInfo, slot: int) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The preset and locked knobs of the member in ``slot``: their experiment value (the
    values in turn, by the order members joined) locked."""
    ex = info.experiment
    if ex is None:
        return dict(info.preset), info.locked
    return (dict(info.preset) | {ex.knob: ex.values[slot % len(ex.values)]},
            tuple(dict.fromkeys((*info.locked, ex.knob))))


def check_experiment(knob: Any, values: Any, preset: Mapping[str, Any], locked: Iterable[str],
                     limits: ClassLimits, since: float | None = None) -> Experiment:
    """2 to ``MAX_VALUES`` distinct ``values`` (a list, or text as typed: "0,001; 0.01"), each
    checked with the preset; numbers ascending."""
    f = KNOBS.get(knob) if isinstance(knob, str) else None
    if f is None:
        raise ClassError("class.experiment_knob", field="knob", knob=str(knob)[:40],
                         known=", ".join(KNOBS))
    items = ([v for v in SEPARATORS.split(values) if v] if isinstance(values, str)
             else list(values or ()))
    if not 0 < len(items) <= MAX_VALUES:   # counted before parsing: a long list costs nothing
        raise ClassError("class.experiment_count", field="values", knob=knob_words(knob),
                         n=MAX_VALUES, got=len(items))
    found: list[Any] = []
    for item in items:
        shown = str(item)[:40]
        try:
            value = _parse(f, item)
            stored, _ = check_preset(dict(preset) | {knob: value}, locked, limits)
        except (ValueError, CifarLabError) as err:
            why = err if isinstance(err, CifarLabError) else Problem(
                knob, f.knob.error, {"lo": f.knob.lo, "hi": f.knob.hi, "default": f.default})
            raise ClassError("class.experiment_value", field="values", knob=knob_words(knob),
                             value=shown, why=why) from None
        found.append(stored[knob])
    found = list(dict.fromkeys(found))
    if len(found) < 2:
        raise ClassError("class.experiment_count", field="values", knob=knob_words(knob),
                         n=MAX_VALUES, got=len(found))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in found):
        found.sort()
    return Experiment(knob, tuple(found), time.time() if since is None else since)


def _parse(f: Any, item: Any) -> Any:
    """One typed value as the knob's (ValueError when it is none; a bad choice fails later)."""
    if not isinstance(item, str):
        return item
    number = i18n.parse_decimal(item) if f.knob.kind == "float" else None
    return f.knob.parse(item) if number is None else number
