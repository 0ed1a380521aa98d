"""What the Train page shows, from run-store rows: losses as bucket means, figures memoised."""
from __future__ import annotations

import gc
import math
import sys
from typing import Any, Iterable, Mapping, Sequence

import numpy as np


class LossSeries:
    """Step losses as at most ``max_points`` bucket means, filled incrementally."""

    def __init__(self, max_points: int = 2000):
        self.max_points = max(2, int(max_points) // 2 * 2)  # even: buckets merge in pairs
        self.stride = 1
        self.steps: list[int] = []      # the last step of each full bucket
        self.means: list[float] = []
        self._sum = 0.0                 # the open bucket's (a nan loss makes its mean nan)
        self._count = 0
        self.last_step = 0
        self.count = 0                  # step losses seen

    def add(self, steps: Sequence[int], losses: Sequence[float]) -> None:
        for step, loss in zip(steps, losses):
            step = int(step)
            if step <= self.last_step:
                continue  # already seen (a reread overlap)
            self.last_step = step
            self.count += 1
            self._sum += float(loss)
            self._count += 1
            if self._count == self.stride:
                self._push(step)

    def _push(self, step: int) -> None:
        self.steps.append(step)
        self.means.append(self._sum / self._count)
        self._sum, self._count = 0.0, 0
        if len(self.steps) >= self.max_points:
            self.steps = self.steps[1::2]
            self.means = [(a + b) / 2 for a, b in zip(self.means[0::2], self.means[1::2])]
            self.stride *= 2

    def points(self) -> tuple[list[int], list[float]]:
        """(steps, losses) to plot: the full buckets and the partial one at the end."""
        steps, means = list(self.steps), list(self.means)
        if self._count:
            steps.append(self.last_step)
            means.append(self._sum / self._count)
        return steps, means


class RunView:
    """What the page has read of one run: losses (downsampled), events; ``memo``: its figures."""

    def __init__(self, max_points: int = 600):
        self.series = LossSeries(max_points)
        self.last_seq = 0
        self.start: dict | None = None
        self.running: list[dict] = []
        self.epochs: list[dict] = []
        self.eval: dict | None = None
        self.inside: list[dict] = []          # core/probes.py's samples of each layer
        self.memo: dict[str, tuple[Any, Any]] = {}
        self._stamp: tuple | None = None
        self._stamp_at = -math.inf

    @property
    def last_step(self) -> int:
        return self.series.last_step

    def update(self, events: Any, losses: Any, step: int | None = None) -> bool:
        """Read what is new (losses only when ``step`` says so); True when something came."""
        before = (self.last_seq, self.series.count)
        self.add_events(events(since_seq=self.last_seq))
        if step is None or step > self.last_step:
            self.series.add(*losses(since_step=self.last_step))
        return (self.last_seq, self.series.count) != before

    def add_events(self, events: Iterable[Any]) -> None:
        for ev in events:
            if ev.seq <= self.last_seq:
                continue
            self.last_seq, kind, data = ev.seq, ev.kind, dict(ev.data or {})
            series = {"running_loss": self.running, "epoch": self.epochs, "inside": self.inside}
            if kind in series:
                series[kind].append(data)
            elif kind in ("start", "eval"):
                setattr(self, kind, data)

    @property
    def steps_per_epoch(self) -> int | None:
        spe = (self.start or {}).get("steps_per_epoch")
        return int(spe) if spe else None

    def chart_stamp(self, now: float, every_s: float, final: bool = False) -> tuple:
        """A key that changes when new losses or events came, at most once every ``every_s``
        seconds unless ``final`` (the run is over: draw the last of it at once)."""
        current = (self.series.count, self.last_seq)
        if current != self._stamp and (final or self._stamp is None
                                       or now - self._stamp_at >= every_s):
            self._stamp, self._stamp_at = current, now
        return self._stamp

    def memoized(self, name: str, key: Any, build: Any) -> Any:
        """``build(previous)`` again only when ``key`` changed (``previous``: None at first)."""
        hit = self.memo.get(name)
        if hit is None or hit[0] != key:
            hit = self.memo[name] = (key, build(None if hit is None else hit[1]))
        return hit[1]

    def chart(self) -> dict:
        """Everything the loss chart needs, as numpy arrays: plotly sends them in one piece."""
        steps, losses = self.series.points()
        steps, losses = np.asarray(steps, dtype=np.int32), np.asarray(losses, dtype=np.float32)
        spe = self.steps_per_epoch
        running = self.running if spe else []
        marks, total, val = [], 0, []
        for e in self.epochs:
            total += int(e.get("steps") or 0)
            if e.get("complete", True) and total:
                marks.append(total)
            if e.get("val_loss") is not None and e.get("mean_loss") is not None:
                val.append((total, float(e["mean_loss"]), float(e["val_loss"])))
        return {"steps": steps, "losses": losses, "epoch_marks": marks, "val": val,
                "running_steps": [(int(r["epoch"]) - 1) * spe + int(r["i"]) for r in running],
                "running_losses": [float(r["loss"]) for r in running],
                "stride": self.series.stride, "count": self.series.count}


class RunViews(dict):
    """The runs a session watches, run id -> ``RunView``: the last ``keep`` opened."""

    def __init__(self, keep: int = 4, max_points: int = 600):
        super().__init__()
        self.keep, self.max_points = keep, max_points

    def of(self, run_id: str) -> RunView:
        if run_id not in self:
            for old in list(self)[:max(0, len(self) - self.keep + 1)]:
                self.pop(old, None)
            self[run_id] = RunView(self.max_points)
        return self[run_id]


def progress_info(progress: Mapping[str, Any] | None) -> dict:
    p = dict(progress or {})
    step, total = int(p.get("step") or 0), p.get("total_steps")
    total = int(total) if total else None
    fraction = min(1.0, step / total) if total else 0.0
    return {"fraction": fraction, "step": step, "total": total,
            "images_per_second": float(p.get("images_per_second") or 0.0),
            "elapsed_s": float(p.get("elapsed_s") or 0.0)}


def time_split(epochs: Sequence[Mapping[str, Any]] = (),
               result: Mapping[str, Any] | None = None,
               progress: Mapping[str, Any] | None = None) -> dict | None:
    """Data wait against compute: from the result, else the latest progress, else the epochs."""
    wait = compute = None
    if result and result.get("data_wait_seconds") is not None \
            and result.get("compute_seconds") is not None:
        wait, compute = float(result["data_wait_seconds"]), float(result["compute_seconds"])
    elif progress and progress.get("data_wait_s") is not None \
            and progress.get("elapsed_s") is not None:
        wait = float(progress["data_wait_s"])
        compute = max(0.0, float(progress["elapsed_s"]) - wait)
    elif epochs:
        wait = math.fsum(float(e.get("data_wait_s") or 0.0) for e in epochs)
        compute = math.fsum(float(e.get("compute_s") or 0.0) for e in epochs)
    if wait is None or compute is None:
        return None
    total = wait + compute
    return {"data_wait_s": wait, "compute_s": compute, "total_s": total,
            "data_share": wait / total if total > 0 else 0.0}


def pick_run(runs: Sequence[Any], current: str | None = None) -> str | None:
    """``current`` while among ``runs`` (newest first), else the newest active one, else newest."""
    ids = [r.id for r in runs]
    if current in ids:
        return current
    return next((r.id for r in runs if r.status in ("queued", "running")), ids[0] if ids else None)


def poll_interval(runs: Sequence[Any], active_s: float, idle_s: float | None) -> float | None:
    """``active_s`` while a run is queued or running, else ``idle_s`` (for runs from other tabs)."""
    return active_s if any(r.status in ("queued", "running") for r in runs) else idle_s


def phase(run: Any, view: RunView) -> str:
    """Its status, or while running "starting", "training", "cancelling" or "evaluating"."""
    if run.status != "running":
        return run.status
    if run.cancel_requested:
        return "cancelling"
    prog = progress_info(run.progress)
    if (view.epochs and not view.epochs[-1].get("complete", True)) \
            or (prog["total"] and prog["step"] >= prog["total"]):
        return "evaluating"
    return "training" if prog["total"] else "starting"


_FROZEN_AT: list[int] = []   # how many modules were loaded at the last freeze


def freeze_long_lived() -> bool:
    """``gc.freeze`` when modules came since the last call (True then): Streamlit collects after
    every poll, and a full collection walks torch, pandas and plotly (about 0.1 CPU-second)."""
    n = len(sys.modules)
    if _FROZEN_AT and _FROZEN_AT[-1] == n:
        return False
    gc.collect()
    gc.freeze()
    _FROZEN_AT.append(n)
    return True
