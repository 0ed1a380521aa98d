"""Training: the tutorial's loop with events, cancellation between steps, honest timing (losses
read back in batches, not an ``.item()`` per step) and CPU reproducibility for a fixed seed."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn as nn
import torch.optim as optim

from cifarlab.core import data as data_mod
from cifarlab.core import graphs
from cifarlab.core.data import pipelines
from cifarlab.core.checkpoint import save
from cifarlab.core.config import TrainConfig
from cifarlab.core.devices import device_name, environment, synchronize
from cifarlab.core.evaluate import EvalResult, evaluate, measure_validation, validation_split
from cifarlab.core.model import Net
from cifarlab.core.probes import Probe, probe_every
from cifarlab.core.tricks import make_criterion, make_scheduler
from cifarlab.errors import CheckpointError

FLUSH_SECONDS = 0.25      # how often step losses are read back and sent as an event
FLUSH_MAX_STEPS = 4096    # ... or after this many steps, whichever comes first
WARM_STEPS = 10           # start-up steps (loader workers, first allocations) and 1 % of the
WARM_SHARE = 0.01         # run, left out of the speed that estimates the time left (lab/eta.py)


@dataclass
class Event:
    kind: str   # start | losses | running_loss | progress | inside | epoch | diverged | eval | done
    data: dict


@dataclass
class TrainResult:
    config: TrainConfig
    steps: int
    epochs_done: float
    train_seconds: float
    images: int
    data_wait_seconds: float
    losses: list[float] = field(repr=False)
    running_losses: list[dict] = field(repr=False)
    epochs: list[dict] = field(repr=False)
    eval: EvalResult | None = None
    cancelled: bool = False
    diverged: dict | None = None   # {"step", "loss"}: the loss stopped being a number there
    inside: list = field(default_factory=list, repr=False)   # probe samples, no histograms
    device: str = "cpu"
    device_name: str = ""
    env: dict = field(default_factory=dict, repr=False)
    checkpoint: str | None = None
    model: nn.Module | None = field(default=None, repr=False)
    # why the checkpoint could not be written (a full disk): the results above are still whole
    checkpoint_error: CheckpointError | None = field(default=None, repr=False)

    @property
    def images_per_second(self) -> float:
        return self.images / self.train_seconds if self.train_seconds > 0 else 0.0

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.train_seconds if self.train_seconds > 0 else 0.0

    def summary(self) -> dict:
        """JSON-friendly: what the CLI prints with --json and the run store keeps."""
        return {
            "test_accuracy": self.eval.accuracy if self.eval else None,
            "per_class_accuracy": dict(self.eval.per_class_accuracy) if self.eval else {},
            "confusion": self.eval.confusion if self.eval else None,
            "classes": list(self.eval.classes) if self.eval else None,
            "steps": self.steps,
            "epochs_done": self.epochs_done,
            "images": self.images,
            "train_seconds": self.train_seconds,
            "images_per_second": self.images_per_second,
            "steps_per_second": self.steps_per_second,
            "data_wait_seconds": self.data_wait_seconds,
            "compute_seconds": max(0.0, self.train_seconds - self.data_wait_seconds),
            "eval_seconds": self.eval.seconds if self.eval else None,
            "final_loss": _mean(self.losses[-min(len(self.losses), 200):]) if self.losses else None,
            "epochs": self.epochs,
            "running_losses": self.running_losses,
            "cancelled": self.cancelled,
            "diverged": self.diverged,
            "inside": self.inside,
            "device": self.device,
            "device_name": self.device_name,
            "checkpoint": self.checkpoint,
            "config": self.config.to_dict(),
            "env": self.env,
        }


def make_loader(config: TrainConfig, data, device: torch.device):
    """The input pipeline the config asks for, over the training split less its validation."""
    held, _ = validation_split(config, len(data.train_y))
    subset = config.train_subset if held is None else held
    if config.pipeline == "fast":
        return pipelines.FastLoader(data, "train", config.batch_size, device=device,
                                    shuffle=config.shuffle, seed=config.seed,
                                    subset=subset, augment=config.augment)
    return pipelines.tutorial_loader(data, "train", config.batch_size, config.num_workers,
                                     config.shuffle, config.seed, subset=subset,
                                     pin_memory=device.type == "cuda")


def make_optimizer(config: TrainConfig, model: nn.Module,
                   device: torch.device | None = None) -> optim.Optimizer:
    """The tutorial's SGD. The ``fast`` pipeline uses its fused kernel (the same update rule,
    one kernel instead of one per parameter) where PyTorch has one: the CPU and CUDA."""
    fused = config.pipeline == "fast" and device is not None and device.type in ("cpu", "cuda")
    return optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum,
                     nesterov=config.nesterov, weight_decay=config.weight_decay,
                     **({"fused": True} if fused else {}))


def to_device(inputs: torch.Tensor, labels: torch.Tensor, device: torch.device):
    """A batch on the training device (from pinned memory, asynchronously)."""
    return inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)


def train_step(model: nn.Module, criterion, optimizer: optim.Optimizer,
               inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """One step of the tutorial's loop (the GPU lab times this very step); the loss stays on
    the device (an ``.item()`` per step would wait for it every step)."""
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer.step()
    return loss


def build(config: TrainConfig, data, device: torch.device):
    """What a run trains with, made from its config in the tutorial's order, after seeding:
    (model, criterion, optimizer, loader). The learning-rate finder starts from the same."""
    torch.manual_seed(config.seed)
    model = Net(config.model, num_classes=len(data.classes),
                activation=config.activation).to(device)
    return (model, make_criterion(config), make_optimizer(config, model, device),
            make_loader(config, data, device))


def train(config: TrainConfig | None = None, data=None,
          on_event: Callable[[Event], None] | None = None,
          should_stop: Callable[[], bool] | None = None,
          checkpoint_path=None, evaluate_after: bool = True,
          eval_each_epoch: bool = False, admitted: bool = False) -> TrainResult:
    """Train the config's network on ``data`` (the default source when None). A config nobody
    admitted is checked against this machine and the data first (ConfigError, DeviceError);
    an ``admitted`` one (``JobQueue.submit``'s, placed by ``TrainConfig.on_device``) is not."""
    config = config or TrainConfig()
    data = data if data is not None else data_mod.load()
    n_train = int(len(data.train_y))
    device = torch.device(config.device) if admitted else config.check_runtime(n_train)
    emit = on_event or (lambda event: None)
    stop = should_stop or (lambda: False)

    model, criterion, optimizer, loader = build(config, data, device)
    steps_per_epoch = len(loader)
    total_steps = steps_per_epoch * config.epochs
    scheduler = make_scheduler(config, optimizer, total_steps)
    n_used = config.images_per_epoch(n_train)
    _, val_idx = validation_split(config, n_train)
    dev_name = device_name(device)
    emit(Event("start", {"total_steps": total_steps, "steps_per_epoch": steps_per_epoch,
                         "n_train": n_used, "n_test": int(len(data.test_y)),
                         "device": str(device), "device_name": dev_name,
                         "config": config.to_dict()}
                        | ({} if val_idx is None else {"n_val": len(val_idx)})))
    # cuda_graphs: the step replayed as one CUDA graph where it can be (core/graphs.py); every
    # fallback to eager is an event of kind "graphs" with its reason
    step_fn = graphs.make_step(config, device, model, criterion, optimizer, train_step,
                               lambda note: emit(Event("graphs", note)))
    probe = Probe(model, probe_every(steps_per_epoch))

    losses: list[float] = []
    running: list[dict] = []
    epochs: list[dict] = []
    buf = torch.zeros(FLUSH_MAX_STEPS, device=device)  # step losses stay on the device
    n_buf = 0
    flushed_to = 0
    step = images = 0
    wait = 0.0
    warm_steps = max(WARM_STEPS, int(WARM_SHARE * total_steps))
    steady_from: tuple[int, float] | None = None   # (step, elapsed) where start-up ended
    cancelled = False
    diverged: dict | None = None
    inside: list[dict] = []
    eval_result: EvalResult | None = None

    def flush(now: float) -> None:
        nonlocal n_buf, flushed_to, diverged, steady_from, last_flush
        if n_buf:
            first = len(losses)
            losses.extend(buf[:n_buf].tolist())  # one device->host copy (synchronises)
            n_buf = 0
            # a loss that is no number (lr too high): nothing after it can recover, so stop
            bad = next((i for i, v in enumerate(losses[first:]) if not math.isfinite(v)), None)
            if bad is not None and diverged is None:
                diverged = {"step": first + bad + 1, "loss": str(losses[first + bad])}
        if len(losses) > flushed_to:
            emit(Event("losses", {"steps": list(range(flushed_to + 1, len(losses) + 1)),
                                  "losses": losses[flushed_to:]}))
            flushed_to = len(losses)
        elapsed = now - t_start
        if steady_from is None and step >= warm_steps:
            steady_from = (step, elapsed)
        s0, e0 = steady_from or (None, None)
        emit(Event("progress", {"step": step, "total_steps": total_steps, "elapsed_s": elapsed,
                                "steady_step": s0, "steady_s": e0,
                                "images_per_second": images / elapsed if elapsed > 0 else 0.0,
                                "data_wait_s": wait}))
        last_flush = time.perf_counter()

    model.train()
    synchronize(device)
    t_start = time.perf_counter()
    last_flush = t_start
    for epoch in range(config.epochs):
        epoch_start = time.perf_counter()
        wait_before = wait
        epoch_first, epoch_first_images = step, images
        it = iter(loader)
        for i in range(steps_per_epoch):
            t0 = time.perf_counter()
            inputs, labels = to_device(*next(it), device)
            t1 = time.perf_counter()
            wait += t1 - t0

            loss = step_fn(inputs, labels)
            if scheduler is not None:
                scheduler.step()

            buf[n_buf] = loss.detach()
            n_buf += 1
            step += 1
            images += labels.shape[0]
            if probe.due(step):   # each layer's norms, right after the step (core/probes.py)
                sample = probe.sample(step, inputs)
                emit(Event("inside", sample))
                inside.append({"step": step, "layers": [
                    {k: v for k, v in row.items() if k not in ("hist", "range")}
                    for row in sample["layers"]]})
            if (i + 1) % config.log_every == 0:  # the tutorial's "[epoch, i] loss: x" line
                flush(time.perf_counter())
                value = _mean(losses[-config.log_every:])
                running.append({"epoch": epoch + 1, "i": i + 1, "loss": value})
                emit(Event("running_loss", {"epoch": epoch + 1, "i": i + 1, "loss": value}))
            elif n_buf == FLUSH_MAX_STEPS or t1 - last_flush >= FLUSH_SECONDS:
                flush(t1)
            if diverged is not None:
                break
            if stop():
                cancelled = True
                break
        del it
        flush(time.perf_counter())  # synchronises the device before the epoch's clock is read
        now = time.perf_counter()
        epoch_wait = wait - wait_before
        seconds = now - epoch_start
        epoch_steps = step - epoch_first
        epoch_images = images - epoch_first_images
        summary = {"epoch": epoch + 1, "steps": epoch_steps,
                   "mean_loss": _mean(losses[epoch_first:]) if epoch_steps else None,
                   "seconds": seconds,
                   "images_per_second": epoch_images / seconds if seconds > 0 else 0.0,
                   "data_wait_s": epoch_wait, "compute_s": max(0.0, seconds - epoch_wait),
                   "complete": not (cancelled or diverged)}
        if eval_each_epoch and not (cancelled or diverged):
            eval_result = evaluate(model, data, device, tta=config.tta)
            summary["accuracy"] = eval_result.accuracy
            summary["per_class_accuracy"] = eval_result.per_class_accuracy
            model.train()
        if val_idx is not None and not (cancelled or diverged):
            summary |= measure_validation(model, criterion, data, val_idx, device)
        epochs.append(summary)
        emit(Event("epoch", summary))
        t_start += (time.perf_counter() - now)  # keep the per-epoch evaluation off the clock
        if diverged is not None:
            emit(Event("diverged", diverged | {"lr": config.lr}))
        if cancelled or diverged:
            break
    synchronize(device)
    train_seconds = time.perf_counter() - t_start

    if evaluate_after and not diverged and (eval_result is None or cancelled):
        eval_result = evaluate(model, data, device, tta=config.tta)
    if eval_result is not None:
        emit(Event("eval", eval_result.summary()))

    model_cpu = model.to("cpu").eval()
    result = TrainResult(
        config=config, steps=step, epochs_done=step / steps_per_epoch if steps_per_epoch else 0,
        train_seconds=train_seconds, images=images, data_wait_seconds=wait, losses=losses,
        running_losses=running, epochs=epochs, eval=eval_result, cancelled=cancelled,
        diverged=diverged, inside=inside,
        device=str(device), device_name=dev_name, env=environment(device), model=model_cpu)
    if checkpoint_path is not None:
        try:
            result.checkpoint = str(save(checkpoint_path, model_cpu, config, data.classes,
                                         _checkpoint_results(result)))
        except CheckpointError as err:
            if err.code != "checkpoint.disk_full":
                raise
            result.checkpoint_error = err  # the weights are lost, never the results
    emit(Event("done", {"cancelled": cancelled, "steps": step, "train_seconds": train_seconds,
                        "images_per_second": result.images_per_second,
                        "accuracy": eval_result.accuracy if eval_result else None,
                        "checkpoint": result.checkpoint}))
    return result


def _checkpoint_results(result: TrainResult) -> dict:
    s = result.summary()
    env = s.pop("env", None) or {}
    for key in ("config", "running_losses"):
        s.pop(key, None)
    # the CPU's sums depend on the thread count: an exported notebook sets the run's own
    if isinstance(env.get("torch_threads"), int):
        s["torch_threads"] = env["torch_threads"]
    return s


def _mean(values) -> float:
    values = list(values)
    return math.fsum(values) / len(values) if values else float("nan")
