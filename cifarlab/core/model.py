"""The tutorial's network, and a configurable variant of it.

``Net()`` is the tutorial's ``Net`` layer for layer, with the same parameter names
(conv1, pool, conv2, fc1, fc2, fc3), so a ``state_dict`` saved here loads into the tutorial's own
class and back. ``Net(ModelSpec(...))`` changes channels, kernels, padding, stride, pooling,
hidden sizes or width; ``fc1``'s input size then comes from the shape trace instead of the
tutorial's hard-coded ``16 * 5 * 5``.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from cifarlab.core.config import ModelSpec
from cifarlab.core.shapes import flat_features

NUM_CLASSES = 10


class Net(nn.Module):
    def __init__(self, spec: ModelSpec | None = None, num_classes: int = NUM_CLASSES):
        super().__init__()
        spec = spec or ModelSpec()
        self.spec = spec
        c1, c2 = spec.scaled_channels()
        h1, h2 = spec.scaled_hidden()
        self.flat = flat_features(spec)  # raises ShapeError (naming the layer) if it can't fit
        self.conv1 = nn.Conv2d(3, c1, spec.kernels[0], stride=spec.strides[0],
                               padding=spec.paddings[0])
        self.pool = nn.MaxPool2d(spec.pool, spec.pool)
        self.conv2 = nn.Conv2d(c1, c2, spec.kernels[1], stride=spec.strides[1],
                               padding=spec.paddings[1])
        self.fc1 = nn.Linear(self.flat, h1)
        self.fc2 = nn.Linear(h1, h2)
        self.fc3 = nn.Linear(h2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)  # the tutorial's x.view(-1, 16 * 5 * 5), for any spec
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def build_model(spec: ModelSpec | None = None) -> Net:
    return Net(spec)


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
