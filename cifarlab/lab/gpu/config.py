"""What a timing sweep measures (``SweepConfig``). No torch: ``bench``'s parser imports it."""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

from cifarlab.core.config import MAX_BATCH, PIPELINES
from cifarlab.core.modelspec import is_int
from cifarlab.errors import ConfigError, Problem

EPOCH_IMAGES = 50_000                 # CIFAR-10's training set: one epoch
TUTORIAL_POINT = ("tutorial", 4, 1)   # pipeline, batch size, width: the tutorial as written
MAX_WIDTH = 16
DEVICE_RE = re.compile(r"^(cpu|mps|cuda:\d+)$")


def _as_tuple(value: Any) -> Any:
    """"4, 16" or [4, 16, 4] -> a tuple without repeats (order kept); anything else as it is."""
    if isinstance(value, str):
        value = tuple(v for v in value.replace(" ", "").split(",") if v)
    if isinstance(value, (list, tuple)):
        value = tuple(dict.fromkeys(value))
    return value


@dataclass(frozen=True)
class SweepConfig:
    """What to measure; ConfigError names every bad field. devices () is every device here."""

    devices: tuple[str, ...] = ()
    batch_sizes: tuple[int, ...] = (4, 16, 64, 256, 1024)
    widths: tuple[int, ...] = (1, 2, 4, 8)
    pipelines: tuple[str, ...] = ("fast", "tutorial")
    steps: int = 50
    warmup: int = 5
    repeats: int = 3
    max_seconds: float | None = 10.0
    num_workers: int = 2
    breakdown: bool = False
    graphed: bool = False

    def __post_init__(self) -> None:
        for name in ("devices", "batch_sizes", "widths", "pipelines"):
            object.__setattr__(self, name, _as_tuple(getattr(self, name)))
        if isinstance(self.devices, tuple) and all(isinstance(d, str) for d in self.devices):
            devs = tuple(dict.fromkeys("cuda:0" if d.strip().lower() == "cuda"
                                       else d.strip().lower() for d in self.devices))
            object.__setattr__(self, "devices", () if "all" in devs else devs)
        if is_int(self.max_seconds):
            object.__setattr__(self, "max_seconds", float(self.max_seconds))
        problems = self.problems()
        if problems:
            raise ConfigError(problems)

    def problems(self) -> list[Problem]:
        out: list[Problem] = []

        def bad(name: str, code: str, ok: bool, **params: Any) -> None:
            if not ok:
                out.append(Problem(name, code, params))

        def ints(v: Any, lo: int, hi: int) -> bool:
            return isinstance(v, tuple) and bool(v) and all(is_int(x) and lo <= x <= hi for x in v)

        bad("devices", "gpu.devices", isinstance(self.devices, tuple) and all(
            isinstance(d, str) and DEVICE_RE.match(d) for d in self.devices))
        bad("batch_sizes", "gpu.batch_sizes", ints(self.batch_sizes, 1, MAX_BATCH), max=MAX_BATCH)
        bad("widths", "gpu.widths", ints(self.widths, 1, MAX_WIDTH), max=MAX_WIDTH)
        bad("pipelines", "gpu.pipelines", isinstance(self.pipelines, tuple) and bool(self.pipelines)
            and all(p in PIPELINES for p in self.pipelines))
        for name, lo, hi in (("steps", 1, 100_000), ("warmup", 0, 10_000), ("repeats", 1, 1000),
                             ("num_workers", 0, 64)):
            bad(name, f"gpu.{name}", ints((getattr(self, name),), lo, hi), max=hi)
        bad("max_seconds", "gpu.max_seconds", self.max_seconds is None or (
            isinstance(self.max_seconds, float) and math.isfinite(self.max_seconds)
            and self.max_seconds > 0))
        bad("breakdown", "gpu.breakdown", isinstance(self.breakdown, bool))
        bad("graphed", "gpu.graphed", isinstance(self.graphed, bool))
        return out

    def resolved_devices(self) -> list[str]:
        """The devices to measure, the cpu first (speed-ups show from the first accelerator)."""
        from cifarlab.core.devices import device_ids, resolve_device

        devices = list(self.devices) or device_ids()
        for d in devices:
            resolve_device(d)
        return sorted(devices, key=lambda d: d != "cpu")

    def points(self, devices: list[str] | None = None) -> list[dict]:
        """``measure_point``'s arguments: the tutorial's point first, the devices innermost."""
        devices = self.resolved_devices() if devices is None else list(devices)
        grid = [TUTORIAL_POINT] + [(p, b, w) for w in self.widths for p in self.pipelines
                                   for b in sorted(self.batch_sizes) if (p, b, w) != TUTORIAL_POINT]
        return [dict(device=d, pipeline=p, batch_size=b, width=w, graphed=g) for p, b, w in grid
                for g in ((False, True) if self.graphed is True and p == "fast" else (False,))
                for d in devices if not g or d.startswith("cuda")]

    def breakdown_passes(self, devices: list[str] | None = None) -> list[dict]:
        """The breakdown passes: each device, pipeline and batch at the smallest width."""
        if not self.breakdown:
            return []
        devices = self.resolved_devices() if devices is None else list(devices)
        return [dict(device=d, pipeline=p, batch_size=b, width=min(self.widths))
                for d in devices for p in self.pipelines for b in sorted(self.batch_sizes)]

    def to_dict(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> SweepConfig:
        d = dict(d or {})
        for retired in ("images", "seed"):   # earlier versions' (a step's time never hung on them)
            d.pop(retired, None)
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError([Problem("config", "gpu.unknown_settings",
                                       {"names": ", ".join(sorted(unknown))})])
        return cls(**d)


def estimate_seconds(config: SweepConfig, devices: list[str] | None = None) -> float | None:
    """The most a sweep should take (a second a point to set up); None without a budget."""
    if config.max_seconds is None:
        return None
    n = len(config.points(devices)) + len(config.breakdown_passes(devices))
    return n * (config.max_seconds + 1.0)


def time_left(config: SweepConfig, points_done: int, elapsed_s: float,
              devices: list[str] | None = None) -> float | None:
    """Seconds a running sweep still needs at its pace so far (None before the first point)."""
    points = len(config.points(devices))
    if points_done <= 0 or elapsed_s <= 0 or points_done >= points:
        return None
    return elapsed_s / points_done * (points - points_done + len(config.breakdown_passes(devices)))


def job_request(config: SweepConfig) -> dict[str, Any]:
    """``submit_job``'s arguments but session and owner: it holds its devices and the CPU."""
    held = ["cpu", *(d for d in config.resolved_devices() if d != "cpu")]
    return {"kind": "timing", "payload": config.to_dict(), "device": held[-1],
            "exclusive": held, "name": "CPU vs GPU timing",
            "estimate_s": estimate_seconds(config)}
