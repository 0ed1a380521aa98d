"""A run's TensorBoard logs (PyTorch's ``SummaryWriter``), one folder per run; epoch tags use
x = epoch, so runs with different batch sizes line up."""
from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

from cifarlab.core.config import knobs
from cifarlab.core.export.record import RunRecord
from cifarlab.i18n import finite

# SummaryWriter writes about 10,000 scalars a second (its CRC is pure Python): past this many
# steps the step losses are written as bucket means, one point per bucket at its last step.
# TensorBoard's charts keep 1,000 points a tag anyway.
MAX_STEP_POINTS = 50_000


def hparams_of(record: RunRecord) -> dict:
    """Every config field as a TensorBoard hyperparameter (a number, text or a boolean)."""
    c = record.config
    out = {}
    for f in knobs(type(c)):
        value = getattr(c, f.name)
        if f.name == "train_subset":   # None ("all") is no number: the images it used
            value = record.n_train
        out[f.name] = value if isinstance(value, (bool, int, float, str)) else str(value)
    out["model"] = record.network
    return out


def step_points(record: RunRecord) -> list[tuple[int, float]]:
    """(step, loss) for every step, or bucket means past ``MAX_STEP_POINTS`` steps."""
    known = record.step_losses()
    if known is None:
        return []
    steps, losses = known
    if len(steps) <= MAX_STEP_POINTS:
        return list(zip(steps, losses))
    size = math.ceil(len(steps) / MAX_STEP_POINTS)
    return [(steps[min(k + size, len(steps)) - 1], math.fsum(losses[k:k + size]) /
             len(losses[k:k + size])) for k in range(0, len(steps), size)]


def log_files(record: RunRecord) -> dict[str, bytes]:
    """The run's log folder as {relative path: bytes}, its folder named ``record.slug``."""
    from torch.utils.tensorboard import SummaryWriter  # loads tensorboard: only when asked

    results = record.results
    start = record.created_at or time.time()
    total = max(1, int(results.get("steps") or 0) or len(record.losses or ()) or 1)
    seconds = float(results.get("train_seconds") or 0.0)

    def wall(step: float) -> float:
        return start + seconds * step / total

    with tempfile.TemporaryDirectory(prefix="cifarlab-tb-") as tmp:
        folder = Path(tmp) / record.slug
        writer = SummaryWriter(log_dir=str(folder))
        for step, loss in step_points(record):
            writer.add_scalar("step/loss", loss, step, walltime=wall(step))
        epochs = [e for e in results.get("epochs") or [] if isinstance(e, dict)]
        done = 0
        for e in epochs:
            done += int(e.get("steps") or 0)
            n = int(e.get("epoch") or 0)
            if finite(e.get("mean_loss")) is not None:
                writer.add_scalar("epoch/loss", e["mean_loss"], n, walltime=wall(done))
            if finite(e.get("accuracy")) is not None:
                writer.add_scalar("epoch/accuracy", e["accuracy"], n, walltime=wall(done))
        metrics = {}
        if record.accuracy is not None:
            metrics["hparam/accuracy"] = record.accuracy
        if finite(results.get("final_loss")) is not None:
            metrics["hparam/final_loss"] = float(results["final_loss"])
        # run_name ".": the hyperparameters go into this run's own folder, not a new one
        writer.add_hparams(hparams_of(record), metrics, run_name=".",
                           global_step=len(epochs) or None)
        writer.close()
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        stamp = int(start)
        # the writer names its files after the host: the bundle names them after the run
        return {f"{record.slug}/events.out.tfevents.{stamp}.cifarlab.{i}": p.read_bytes()
                for i, p in enumerate(files)}
