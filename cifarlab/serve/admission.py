"""What a server lets one person queue: each refusal a ``JobError`` with the numbers to say why."""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from cifarlab.core.config import TrainConfig, validate
from cifarlab.errors import CifarLabError, ConfigError, JobError
from cifarlab.serve.settings import Settings
from cifarlab.serve.store import RunStore

BUDGET_WINDOW_S = 3600.0   # the per-person compute budget counts the runs of the last hour


def as_job_error(err: CifarLabError) -> JobError:
    """One of core's errors as a refusal to queue (a ConfigError's code is its first problem's)."""
    return JobError(err.code, field=err.field, **err.params)


def check_config(config: Any, n_train: int, settings: Settings,
                 devices: list[str] | None = None) -> str:
    """THE config check, once, before queueing; the run's device (among ``devices`` if any)."""
    if not isinstance(config, TrainConfig):
        raise JobError("serve.limits.not_a_config", field="config")
    try:
        limits = settings.limits()
        if devices is not None:
            limits = dataclasses.replace(limits, devices=tuple(devices))
        problems = validate(config, limits=limits, n_train=n_train)
        if problems:
            raise ConfigError(problems)
    except CifarLabError as err:
        raise as_job_error(err) from None
    return resolve_device(config.device, devices)


def resolve_device(device: str, placed: list[str] | None) -> str:
    """Where a run goes: among the executor's devices (``placed``), else this machine's."""
    if placed is None:
        from cifarlab.core.devices import resolve_device as resolve  # devices imports torch

        try:
            return str(resolve(device))
        except CifarLabError as err:
            raise as_job_error(err) from None
    want = str(device).strip().lower()
    if want == "auto":
        return next((d for d in placed if d.startswith("cuda")), "cpu")
    if want in placed:
        return want
    raise JobError("config.device_missing", field="device", device=str(device)[:40],
                   present=", ".join(placed))


def check_train(config: TrainConfig, settings: Settings, n_train: int) -> int:
    """Refuse a run bigger than this server's compute budget; returns its image-epochs."""
    images = config.images_per_epoch(n_train)
    needed = images * config.epochs
    # a run one person could never afford is refused as too big, not as "wait a while"
    limit = min(settings.max_image_epochs_per_run, settings.max_image_epochs_per_owner)
    if needed > limit:
        raise JobError("serve.limits.run_image_epochs", field="epochs", needed=needed,
                       limit=limit, images=images, epochs=config.epochs)
    return needed


def check_num_workers(n: Any, settings: Settings) -> None:
    if isinstance(n, int) and not isinstance(n, bool) and n > settings.max_num_workers:
        raise JobError("serve.limits.num_workers", field="num_workers", n=n,
                       limit=settings.max_num_workers)


def check_timing(estimate_s: float | None, settings: Settings) -> None:
    """Refuse a timing estimated over ``max_timing_seconds`` (None: the worker stops it then)."""
    if estimate_s is not None and estimate_s > settings.max_timing_seconds:
        raise JobError("serve.limits.timing_seconds", field="estimate",
                       estimate=math.ceil(estimate_s), limit=round(settings.max_timing_seconds))


def check_owner(store: RunStore, owner: str, needed: int | None, settings: Settings,
                now: float | None = None) -> None:
    """Refuse a run its owner may not queue now: too many active, or over their hour's budget."""
    s = settings
    mine = store.counts(owner=owner)
    active = mine["queued"] + mine["running"]
    if active >= s.max_per_owner:
        raise JobError("serve.limits.per_owner", field="session", n=active, limit=s.max_per_owner)
    if not needed:
        return
    now = time.time() if now is None else now
    runs = store.image_epochs_since(owner, now - BUDGET_WINDOW_S)
    used = sum(n for _, n in runs)
    if used + needed <= s.max_image_epochs_per_owner:
        return
    # when will enough of the window's runs have aged out for this one to fit?
    left = used
    wait = BUDGET_WINDOW_S
    for created, n in runs:
        left -= n
        if left + needed <= s.max_image_epochs_per_owner:
            wait = created + BUDGET_WINDOW_S - now
            break
    raise JobError("serve.limits.owner_image_epochs", field="owner", needed=needed, used=used,
                   limit=s.max_image_epochs_per_owner, minutes=max(1, math.ceil(wait / 60)))


def check_queue_room(store: RunStore, settings: Settings) -> None:
    waiting = store.counts()["queued"]
    if waiting >= settings.max_queue:
        raise JobError("serve.limits.queue_full", n=waiting)
