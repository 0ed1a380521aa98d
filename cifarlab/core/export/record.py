"""What an export knows of a run: from the run store (every step's loss) or a checkpoint alone."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import torch

from cifarlab.core.config import TrainConfig
from cifarlab.core.safe_text import one_line
from cifarlab.errors import CifarLabError
from cifarlab.i18n import finite


@dataclass
class RunRecord:
    config: TrainConfig
    state_dict: Mapping[str, torch.Tensor] = field(repr=False)
    classes: tuple[str, ...]
    results: dict = field(default_factory=dict, repr=False)   # TrainResult.summary()'s keys
    losses: Sequence[float] | None = field(default=None, repr=False)  # every step's loss
    steps: Sequence[int] | None = field(default=None, repr=False)     # their step numbers
    env: dict | None = field(default=None, repr=False)       # core.devices.environment()
    run_id: str = ""
    name: str = ""
    created_at: float | None = None

    @classmethod
    def from_checkpoint(cls, ckpt, name: str | None = None) -> RunRecord:
        """A loaded checkpoint's run (``core.checkpoint.load``); ``export.weights_only`` for
        the tutorial's plain state_dict, which holds no run."""
        if ckpt.plain:
            raise export_error("export.weights_only", field="checkpoint",
                               name=Path(name).name if name else "")
        stem = Path(name).stem if name else ""
        results = dict(ckpt.results or {})
        threads = results.get("torch_threads")   # core.train keeps it with the results
        return cls(config=ckpt.config, state_dict=ckpt.state_dict, classes=tuple(ckpt.classes),
                   results=results, name=stem,
                   env={"torch_threads": threads} if isinstance(threads, int) else None)

    @property
    def accuracy(self) -> float | None:
        return finite(self.results.get("test_accuracy"))

    @property
    def n_train(self) -> int:
        """Training images the run used: images per epoch, else its subset, else 50,000."""
        images, done = self.results.get("images"), self.results.get("epochs_done")
        if (finite(images) or 0) > 0 and (finite(done) or 0) > 0:
            return round(images / done)
        return int(self.config.train_subset or 50000)

    @property
    def n_test(self) -> int:
        """Test images the accuracy was measured on (its confusion matrix's total), else 10,000."""
        confusion = self.results.get("confusion")
        try:
            total = int(sum(sum(row) for row in confusion))
        except (TypeError, ValueError):
            total = 0
        return total or 10000

    @property
    def network(self) -> str:
        """``Net()`` for the tutorial's network, else its spec, for settings tables."""
        model = self.config.model
        return "Net()" if model.is_tutorial else str(model.to_dict())

    @property
    def label(self) -> str:
        """The run's name, else ``run <id[:8]>``, else ``run``: for titles."""
        return self.name or (f"run {self.run_id[:8]}" if self.run_id else "run")

    @property
    def slug(self) -> str:
        return run_slug(self.name, self.run_id)

    @property
    def date(self) -> str:
        return time.strftime("%Y-%m-%d", time.localtime(self.created_at or time.time()))

    def step_losses(self) -> tuple[list[int], list[float]] | None:
        """(steps, losses) when every step's loss is known, else None."""
        if self.losses is None or not len(self.losses):
            return None
        losses = [float(v) for v in self.losses]
        steps = list(self.steps) if self.steps is not None else list(range(1, len(losses) + 1))
        return [int(s) for s in steps], losses


def run_slug(name: str | None, run_id: str | None) -> str:
    """A file-name-safe name for a run, unique per run id: ``<name>-<id[:8]>``."""
    words = re.sub(r"[^A-Za-z0-9]+", "-", name or "").strip("-").lower()[:40]
    parts = [p for p in (words, (run_id or "")[:8]) if p]
    return "-".join(parts) or "cifar-run"


def export_error(code: str, field: str = "output", **params) -> CifarLabError:
    """An export's error, each parameter on one line (the command line prints one line)."""
    return CifarLabError(code, field=field, **{k: one_line(v) for k, v in params.items()})
