"""The tutorial's network, and a configurable variant of it.

``Net()`` is the tutorial's ``Net`` layer for layer, with the same parameter names, so a
``state_dict`` saved here loads into the tutorial's own class and back. ``Net(ModelSpec(...))``
changes channels, kernels, padding, stride, pooling, hidden sizes or width; ``fc1``'s input size
then comes from the shape trace instead of the hard-coded ``16 * 5 * 5``. The speed lesson's
variants add modules beside the tutorial's (``bn1``…, ``conv3``, ``conv1b``…: a block is conv →
[bn] → relu → [conv → [bn] → relu] → pool), so the tutorial's own Net keeps its keys.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from cifarlab.core.modelspec import ModelSpec
from cifarlab.core.shapes import flat_features

NUM_CLASSES = 10
# the activation knob (TrainConfig.activation): the tutorial's ReLU, or the lab's other two
ACTIVATIONS = {"relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}


class Net(nn.Module):
    def __init__(self, spec: ModelSpec | None = None, num_classes: int = NUM_CLASSES,
                 activation: str = "relu"):
        super().__init__()
        spec = spec or ModelSpec()
        # no weights: the state_dict is the same for every activation
        self.spec, self.activation, self.act = spec, activation, ACTIVATIONS[activation]
        c1, c2 = spec.scaled_channels()
        h1, h2 = spec.scaled_hidden()
        self.flat = flat_features(spec)  # raises ShapeError (naming the layer) if it can't fit
        self.conv1 = nn.Conv2d(3, c1, spec.kernels[0], stride=spec.strides[0],
                               padding=spec.paddings[0])
        self.pool = nn.MaxPool2d(spec.pool, spec.pool)
        self.conv2 = nn.Conv2d(c1, c2, spec.kernels[1], stride=spec.strides[1],
                               padding=spec.paddings[1])
        self.blocks = ["1", "2"] + (["3"] if spec.conv3 else [])
        for i, c in zip(self.blocks, (c1, c2, spec.conv3 * spec.width)):
            self._add_block(i, c, spec)
        self.fc1 = nn.Linear(self.flat, h1)
        self.fc2 = nn.Linear(h1, h2)
        self.fc3 = nn.Linear(h2, num_classes)

    def _add_block(self, i: str, c: int, spec: ModelSpec) -> None:
        """Block ``i``'s modules beyond the tutorial's conv1/conv2, in the order the exported
        script creates them (the same initial weights for a seed)."""
        if i == "3":
            prev = spec.scaled_channels()[1]
            self.conv3 = nn.Conv2d(prev, c, 3, padding=1)
        if spec.batch_norm:
            setattr(self, f"bn{i}", nn.BatchNorm2d(c))
        if spec.block_convs == 2:
            setattr(self, f"conv{i}b", nn.Conv2d(c, c, 3, padding=1))
            if spec.batch_norm:
                setattr(self, f"bn{i}b", nn.BatchNorm2d(c))

    def _block(self, x: torch.Tensor, i: str) -> torch.Tensor:
        for suffix in ("", "b") if self.spec.block_convs == 2 else ("",):
            x = getattr(self, f"conv{i}{suffix}")(x)
            if self.spec.batch_norm:
                x = getattr(self, f"bn{i}{suffix}")(x)
            x = self.act(x)
        return self.pool(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.spec.is_plain:
            for i in self.blocks:
                x = self._block(x, i)
            return self._head(x)
        x = self.pool(self.act(self.conv1(x)))
        x = self.pool(self.act(self.conv2(x)))
        return self._head(x)

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(x, 1)  # the tutorial's x.view(-1, 16 * 5 * 5), for any spec
        x = self.act(self.fc1(x))
        x = self.act(self.fc2(x))
        return self.fc3(x)


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
