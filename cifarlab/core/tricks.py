"""The speed lesson's tricks, after KellerJordan/cifar10-airbench (``airbench94.py``). Augmentation
draws on the CPU (the same flips and shifts on every device), then works on the device."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

AUG_SEED_OFFSET = 2   # the augmentation's generator: seed + 2 (the order's is seed itself)
PAD = 2               # translate: up to 2 pixels each way, reflect padding (airbench94)
# onecycle: airbench94's triangle of learning-rate factors: 0.2 at the start, 1 at 23 % of the
# steps, 0.07 at the end, linear in between
START, PEAK_AT, END = 0.2, 0.23, 0.07


def make_criterion(config) -> nn.Module:
    """The tutorial's CrossEntropyLoss, with the config's label smoothing (0: the tutorial's)."""
    return nn.CrossEntropyLoss(label_smoothing=config.label_smoothing)


def onecycle_factor(step: int, total: int) -> float:
    """The learning rate's factor at ``step`` (0-based) of ``total`` steps."""
    peak = int(PEAK_AT * total)
    if step < peak:
        return START + (1.0 - START) * step / peak
    return 1.0 + (END - 1.0) * (step - peak) / max(1, total - peak)


def make_scheduler(config, optimizer: torch.optim.Optimizer, total_steps: int):
    """A LambdaLR stepping ``onecycle_factor`` once per training step; None when constant."""
    if config.schedule != "onecycle":
        return None
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: onecycle_factor(step, total_steps))


class BatchAugment:
    """Random horizontal flips, and (``flip_translate``) 2-pixel shifts, of a float batch."""

    def __init__(self, kind: str, seed: int = 0, device: str | torch.device = "cpu"):
        self.kind = kind
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(int(seed) + AUG_SEED_OFFSET)
        # the latest batch's draw (flips n, shifts n×2 or None): the Data page names it
        self.last_draw: tuple[torch.Tensor, torch.Tensor | None] | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "none":
            return x
        n, c, h, w = x.shape
        flip = torch.rand(n, generator=self.generator) < 0.5
        x = torch.where(flip.to(x.device).view(n, 1, 1, 1), x.flip(3), x)
        if self.kind != "flip_translate":
            self.last_draw = (flip, None)
            return x
        shifts = torch.randint(0, 2 * PAD + 1, (n, 2), generator=self.generator)
        self.last_draw = (flip, shifts)
        rows = (shifts[:, :1] + torch.arange(h)).to(x.device)     # n×h rows of the padded image
        cols = (shifts[:, 1:] + torch.arange(w)).to(x.device)     # n×w columns
        padded = F.pad(x, (PAD, PAD, PAD, PAD), mode="reflect")
        padded = padded.gather(2, rows.view(n, 1, h, 1).expand(n, c, h, w + 2 * PAD))
        return padded.gather(3, cols.view(n, 1, 1, w).expand(n, c, h, w))


def tta_logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Mirror test-time augmentation: the mean of the logits for x and for x mirrored."""
    return 0.5 * model(x) + 0.5 * model(x.flip(3))
