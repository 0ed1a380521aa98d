"""The tutorial's ``Net`` with the same parameter names, sized by a ModelSpec."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from cifarlab.core.modelspec import ModelSpec, layout
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
        self.flat = flat_features(spec)  # raises ShapeError (naming the layer) if it can't fit
        modules, self.steps = layout(spec)
        for m in modules:   # in the exported script's order: the same initial weights
            setattr(self, m["name"], nn.Conv2d(m["cin"], m["cout"], m["kernel"],
                                               stride=m["stride"], padding=m["padding"])
                    if m["kind"] == "conv" else nn.BatchNorm2d(m["channels"])
                    if m["kind"] == "bn" else nn.MaxPool2d(m["size"], m["size"]))
        h1, h2 = spec.scaled_hidden()
        self.fc1 = nn.Linear(self.flat, h1)
        self.fc2 = nn.Linear(h1, h2)
        self.fc3 = nn.Linear(h2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for step in self.steps:   # the tutorial's: x = self.pool(F.relu(self.conv1(x))), ...
            x = getattr(self, step["conv"])(x)
            if step["bn"]:
                x = getattr(self, step["bn"])(x)
            x = self.act(x)
            if step["pool"]:
                x = self.pool(x)
        x = torch.flatten(x, 1)  # the tutorial's x.view(-1, 16 * 5 * 5), for any spec
        x = self.act(self.fc1(x))
        x = self.act(self.fc2(x))
        return self.fc3(x)


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
