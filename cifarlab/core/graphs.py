"""The ``fast`` pipeline's whole step as one CUDA graph (launching a small batch's kernels costs
more than running them); eager, with the reason, where it cannot be."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.optim as optim

WARMUP_STEPS = 3   # as PyTorch's examples and make_graphed_callables do

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Note = Callable[[dict], None]


def not_possible(config, device: torch.device) -> tuple[str, dict] | None:
    """Why this run cannot capture its step at all, as (code, params); None when it can try."""
    if device.type != "cuda":
        return "graphs.needs_cuda", {"device": str(device)}
    if config.pipeline != "fast":
        return "graphs.fast_only", {"pipeline": config.pipeline}
    if getattr(config, "schedule", "constant") != "constant":  # replay keeps the captured lr
        return "graphs.schedule", {"schedule": config.schedule}
    return None


def make_step(config, device: torch.device, model: nn.Module, criterion,
              optimizer: optim.Optimizer, eager: Callable, on_note: Note | None = None) -> Step:
    """The step ``train`` calls: ``eager`` (``core.train.train_step``) with its arguments bound,
    or a ``GraphedStep`` over it when ``config.cuda_graphs`` asks and the device allows."""
    note = on_note or (lambda data: None)

    def eager_step(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return eager(model, criterion, optimizer, inputs, labels)

    if not getattr(config, "cuda_graphs", False):
        return eager_step
    why = not_possible(config, device)
    if why is not None:
        note({"status": "eager", "reason": why[0], "params": why[1], "step": 0})
        return eager_step
    return GraphedStep(model, criterion, optimizer, device, config.batch_size, eager_step, note)


def _hyper(optimizer: optim.Optimizer) -> tuple:
    """Every param group's settings (lr, momentum, ...): what the capture baked in."""
    return tuple(tuple(sorted((k, v) for k, v in g.items() if k != "params"
                              and isinstance(v, (int, float, bool, str, type(None)))))
                 for g in optimizer.param_groups)


class GraphedStep:
    """A training step captured once as a CUDA graph and replayed; eager where it must be."""

    def __init__(self, model: nn.Module, criterion, optimizer: optim.Optimizer,
                 device: torch.device, batch_size: int, eager_step: Step, note: Note,
                 warmup: int = WARMUP_STEPS):
        self.model, self.criterion, self.optimizer = model, criterion, optimizer
        self.device, self.batch_size, self.warmup = device, batch_size, warmup
        self.eager_step, self.note = eager_step, note
        self.stream = torch.cuda.Stream(device)   # warm-up and capture, never the default one
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_x = self.static_y = self.static_loss = None
        self.hyper: tuple = ()
        self.failed = False      # capture failed or settings changed: eager from then on
        self.calls = self.warm = 0
        self.short_noted: set[int] = set()

    def __call__(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.failed:
            return self.eager_step(inputs, labels)
        if inputs.shape[0] != self.batch_size:
            n = int(inputs.shape[0])
            if n not in self.short_noted:  # once per size (every epoch's last batch repeats)
                self.short_noted.add(n)
                self._note("eager_batch", "graphs.short_batch", batch=n, full=self.batch_size)
            return self.eager_step(inputs, labels)
        if self.graph is None:
            with torch.cuda.device(self.device):  # cuda:1 while cuda:0 is current, too
                if self.warm < self.warmup:
                    self.warm += 1
                    return self._on_side_stream(inputs, labels)
                if not self._capture(inputs, labels):
                    return self.eager_step(inputs, labels)
        elif _hyper(self.optimizer) != self.hyper:
            self._give_up("graphs.settings_changed")
            return self.eager_step(inputs, labels)
        self.static_x.copy_(inputs)    # the loader's batch into the captured addresses
        self.static_y.copy_(labels)
        self.graph.replay()
        return self.static_loss

    # -- warm-up and capture -------------------------------------------------------------
    def _on_side_stream(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)       # the batch was made on the current stream
        with torch.cuda.stream(self.stream):
            loss = self.eager_step(inputs, labels)
        current.wait_stream(self.stream)       # later work (and reuse of the batch's memory)
        return loss

    def _capture(self, inputs: torch.Tensor, labels: torch.Tensor) -> bool:
        current = torch.cuda.current_stream(self.device)
        graph = torch.cuda.CUDAGraph()
        try:
            self.static_x, self.static_y = torch.empty_like(inputs), torch.empty_like(labels)
            self.stream.wait_stream(current)
            # the outer context restores the current stream even when capture_end raises
            with torch.cuda.stream(self.stream):
                self.optimizer.zero_grad(set_to_none=True)  # grads from the graph's pool
                with torch.cuda.graph(graph, stream=self.stream):
                    loss = self.criterion(self.model(self.static_x), self.static_y)
                    loss.backward()
                    self.optimizer.step()
            current.wait_stream(self.stream)
        except Exception as err:  # noqa: BLE001 - anything at all: the run goes on eagerly, says why
            self.graph = None
            self.static_x = self.static_y = None
            self.optimizer.zero_grad(set_to_none=True)  # what the capture left is no gradient
            self._give_up("graphs.capture_failed",
                          error=f"{type(err).__name__}: {str(err).strip()[:300]}")
            return False
        # nothing ran during capture: the parameters and momentum buffers are as the warm-up
        # left them, and the first replay (the caller's) trains on this batch
        self.graph, self.static_loss, self.hyper = graph, loss.detach(), _hyper(self.optimizer)
        self._note("captured", None, warmup=self.warm, batch=self.batch_size)
        return True

    def _give_up(self, code: str, **params) -> None:
        self.failed = True
        self._note("eager", code, **params)

    def _note(self, status: str, reason: str | None, **params) -> None:
        self.note({"status": status, "reason": reason, "params": params, "step": self.calls})
