"""What the Train page shows, computed from run-store rows: pure functions, no Streamlit.

    preset_values("tutorial")                    # the knobs of a preset (core.config.PRESETS)
    problems = check(values, Limits(max_epochs=20, max_train_images=50000), n_train=50000)
    #  -> {"batch_size": Problem("batch_size", "config.batch_data", {"batch": 64, "n": 32})}
    view = RunView(max_points=2000)              # one per run, kept between page reruns
    view.add_losses(*store.losses(run_id, since_step=view.last_step))
    view.add_events(store.events(run_id, since_seq=view.last_seq))
    view.chart()                                 # downsampled step losses, running loss, epochs
    time_split(view.epochs, run.result)          # data wait vs compute
    duration_parts(83.0)                         # [("minutes", 1), ("seconds", 23)]

The loss series is read incrementally (only steps after the last one seen) and kept as bucket
means: at most ``max_points`` points, each the mean of ``stride`` consecutive step losses; when
the buckets fill up, neighbours are merged in pairs and the stride doubles. So a 50,000-step run
costs the page a few kilobytes and a chart of at most ``max_points`` points, whatever its length.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from cifarlab.core import config as C
from cifarlab.errors import Problem

# The schema the Train page draws its knobs from (a test swaps in a subclass with a new field).
CONFIG: type[C.TrainConfig] = C.TrainConfig


def knob_fields(cls: type | None = None) -> tuple[C.KnobField, ...]:
    """The knobs the Train page shows, in the schema's order."""
    return tuple(f for f in C.knobs(cls or CONFIG) if f.knob.widget)


def preset_values(name: str) -> dict[str, Any]:
    """The knobs a preset sets (``core.config.PRESETS``: TrainConfig values)."""
    return C.PRESETS[name].knob_values(preset_only=True)


def matching_preset(values: Mapping[str, Any]) -> str | None:
    """The preset whose knobs all equal ``values``; None when they match none."""
    for name in C.PRESETS:
        if all(_same(values.get(k), v) for k, v in preset_values(name).items()):
            return name
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def check(values: Mapping[str, Any], limits: C.Limits | None = None,
          n_train: int | None = None) -> dict[str, Problem]:
    """Every problem with the Train page's knobs, field -> the first Problem of that field
    (``core.config.validate`` with this server's limits and the size of its data)."""
    names = {f.name for f in C.knobs(CONFIG)}
    values = {k: v for k, v in values.items() if k in names}
    return C.problems_by_field(C.validate(values, limits=limits, n_train=n_train, cls=CONFIG))


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ------------------------------------------------------------------------------- loss series

class LossSeries:
    """Step losses as at most ``max_points`` bucket means, filled incrementally."""

    def __init__(self, max_points: int = 2000):
        self.max_points = max(2, int(max_points) // 2 * 2)  # even: buckets merge in pairs
        self.stride = 1
        self.steps: list[int] = []      # the last step of each full bucket
        self.means: list[float] = []
        self._sum = 0.0
        self._count = 0
        self._nan = False
        self._last = 0
        self.count = 0                  # step losses seen

    @property
    def last_step(self) -> int:
        return self._last

    def add(self, steps: Sequence[int], losses: Sequence[float]) -> None:
        for step, loss in zip(steps, losses):
            step = int(step)
            if step <= self._last:
                continue  # already seen (a reread overlap)
            self._last = step
            self.count += 1
            loss = float(loss)
            if math.isnan(loss):
                self._nan = True
            else:
                self._sum += loss
            self._count += 1
            if self._count == self.stride:
                self._push(step)

    def _push(self, step: int) -> None:
        self.steps.append(step)
        self.means.append(math.nan if self._nan else self._sum / self._count)
        self._sum, self._count, self._nan = 0.0, 0, False
        if len(self.steps) >= self.max_points:
            self.steps = self.steps[1::2]
            self.means = [(a + b) / 2 for a, b in zip(self.means[0::2], self.means[1::2])]
            self.stride *= 2

    def points(self) -> tuple[list[int], list[float]]:
        """(steps, losses) to plot: the full buckets and the partial one at the end."""
        steps, means = list(self.steps), list(self.means)
        if self._count:
            steps.append(self._last)
            means.append(math.nan if self._nan else self._sum / self._count)
        return steps, means


# ---------------------------------------------------------------------------------- run view

class RunView:
    """What the page has read of one run so far: losses (downsampled) and events."""

    def __init__(self, max_points: int = 2000):
        self.series = LossSeries(max_points)
        self.last_seq = 0
        self.start: dict | None = None
        self.running: list[dict] = []
        self.epochs: list[dict] = []
        self.eval: dict | None = None
        self.done: dict | None = None

    @property
    def last_step(self) -> int:
        return self.series.last_step

    def add_losses(self, steps: Sequence[int], losses: Sequence[float]) -> None:
        self.series.add(steps, losses)

    def add_events(self, events: Iterable[Any]) -> None:
        """Store events (objects with ``seq``, ``kind`` and ``data``, or such dicts)."""
        for ev in events:
            seq, kind, data = _event_fields(ev)
            if seq <= self.last_seq:
                continue
            self.last_seq = seq
            if kind == "start":
                self.start = dict(data)
            elif kind == "running_loss":
                self.running.append(dict(data))
            elif kind == "epoch":
                self.epochs.append(dict(data))
            elif kind == "eval":
                self.eval = dict(data)
            elif kind == "done":
                self.done = dict(data)

    @property
    def steps_per_epoch(self) -> int | None:
        spe = (self.start or {}).get("steps_per_epoch")
        return int(spe) if spe else None

    def chart(self) -> dict:
        """Everything the loss chart needs: step losses (bucket means), the tutorial's running
        loss at its global step, the steps where epochs ended, and the stride."""
        steps, losses = self.series.points()
        spe = self.steps_per_epoch
        running_x, running_y = [], []
        for r in self.running:
            if spe:
                running_x.append((int(r["epoch"]) - 1) * spe + int(r["i"]))
                running_y.append(float(r["loss"]))
        marks, total = [], 0
        for e in self.epochs:
            total += int(e.get("steps") or 0)
            if e.get("complete", True) and total:
                marks.append(total)
        return {"steps": steps, "losses": losses, "running_steps": running_x,
                "running_losses": running_y, "epoch_marks": marks, "stride": self.series.stride,
                "count": self.series.count}


def _event_fields(ev: Any) -> tuple[int, str, dict]:
    if isinstance(ev, Mapping):
        return int(ev["seq"]), str(ev["kind"]), dict(ev.get("data") or {})
    return int(ev.seq), str(ev.kind), dict(ev.data or {})


# ---------------------------------------------------------------------------- small figures

def progress_info(progress: Mapping[str, Any] | None) -> dict:
    """The progress bar's numbers from a run's latest ``progress``: fraction (0..1), step,
    total, eta_s (None when unknown) and images_per_second."""
    p = dict(progress or {})
    step, total = int(p.get("step") or 0), p.get("total_steps")
    total = int(total) if total else None
    fraction = min(1.0, step / total) if total else 0.0
    eta = p.get("eta_s")
    eta = float(eta) if eta is not None and math.isfinite(float(eta)) else None
    return {"fraction": fraction, "step": step, "total": total, "eta_s": eta,
            "images_per_second": float(p.get("images_per_second") or 0.0),
            "elapsed_s": float(p.get("elapsed_s") or 0.0)}


def time_split(epochs: Sequence[Mapping[str, Any]] = (),
               result: Mapping[str, Any] | None = None,
               progress: Mapping[str, Any] | None = None) -> dict | None:
    """How training time split between waiting for data and computing: from the result when
    there is one, else from the latest progress event (live, mid-epoch), else summed over the
    epoch events so far; None before any of them. Returns data_wait_s, compute_s, total_s and
    data_share (0..1)."""
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


def duration_parts(seconds: float | None) -> list[tuple[str, int]]:
    """A duration as (unit, n) pairs for the catalog's units.*: minutes (however many), and
    seconds only under ten minutes. ``[("minutes", 1), ("seconds", 23)]`` for 83 s; [] for
    None or a negative or infinite duration."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return []
    s = int(round(seconds))
    if s >= 600:
        return [("minutes", int(round(seconds / 60)))]
    minutes, secs = divmod(s, 60)
    parts: list[tuple[str, int]] = [("minutes", minutes)] if minutes else []
    if secs or not parts:
        parts.append(("seconds", secs))
    return parts


def per_class_rows(per_class: Mapping[str, float] | None) -> list[tuple[str, float]]:
    """(class, accuracy) pairs in CIFAR-10's label order when the names are known, else as
    given."""
    per_class = dict(per_class or {})
    from cifarlab.core.config import CIFAR10_CLASSES

    ordered = [c for c in CIFAR10_CLASSES if c in per_class]
    ordered += [c for c in per_class if c not in ordered]
    return [(c, float(per_class[c])) for c in ordered]


def pick_run(runs: Sequence[Any], current: str | None = None) -> str | None:
    """Which run to show: ``current`` while it is still among ``runs``, else the newest active
    one, else the newest. ``runs``: newest first, objects with ``id`` and ``status``."""
    ids = [r.id for r in runs]
    if current in ids:
        return current
    for r in runs:
        if r.status in ("queued", "running"):
            return r.id
    return ids[0] if ids else None
