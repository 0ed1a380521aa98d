"""The layer list of a ModelSpec, batch norm and the other issue-13 variants included.

    spec_layers(NETS["bn3"])     # conv1, bn1, relu, pool, conv2, bn2, ..., fc3 (dicts)

``core.shapes.trace`` walks these dicts; this module adds the one layer kind it needs beyond
the tutorial's, ``batchnorm`` (shape unchanged; 2·C learnable numbers, weight and bias), so
that ``core/shapes.py`` stays the tutorial's arithmetic. The order matches ``core.model.Net``:
each block is conv → [bn] → relu → [conv → [bn] → relu] → pool.
"""
from __future__ import annotations

from cifarlab.core import shapes
from cifarlab.core.config import ModelSpec
from cifarlab.errors import ShapeError


def _batchnorm(layer: dict, shape: tuple[int, ...]):
    if len(shape) != 3:
        raise ShapeError("shapes.needs_image", features=shape[0])
    return shape, 2 * shape[0], "", True


# batch norm as one more layer kind of the trace (nn.BatchNorm2d keeps the shape)
shapes._STEPS.setdefault("batchnorm", _batchnorm)
shapes._KEYS.setdefault("batchnorm", set())
shapes._PREFIX.setdefault("batchnorm", "bn")


def spec_layers(spec: ModelSpec, num_classes: int = 10) -> list[dict]:
    """The layers, in call order, of ``core.model.Net(spec)`` (relus included)."""
    (c1, c2), (h1, h2) = spec.scaled_channels(), spec.scaled_hidden()
    pool = {"type": "pool", "kernel_size": spec.pool, "stride": spec.pool}
    plain = spec.is_plain

    def conv(name: str, out: int, kernel: int, stride: int, padding: int) -> dict:
        layer = {"type": "conv", "out_channels": out, "kernel_size": kernel, "stride": stride,
                 "padding": padding, "dilation": 1}
        return layer if plain else {**layer, "name": name}

    blocks = [(conv("conv1", c1, spec.kernels[0], spec.strides[0], spec.paddings[0]), "1", c1),
              (conv("conv2", c2, spec.kernels[1], spec.strides[1], spec.paddings[1]), "2", c2)]
    if spec.conv3:
        blocks.append((conv("conv3", spec.conv3 * spec.width, 3, 1, 1), "3",
                       spec.conv3 * spec.width))
    out: list[dict] = []
    for first, i, c in blocks:
        convs = [first] + ([conv(f"conv{i}b", c, 3, 1, 1)] if spec.block_convs == 2 else [])
        for layer, suffix in zip(convs, ("", "b")):
            out.append(layer)
            if spec.batch_norm:
                out.append({"type": "batchnorm", "name": f"bn{i}{suffix}"})
            out.append({"type": "relu"})
        out.append(pool)
    return out + [{"type": "flatten"},
                  {"type": "linear", "out_features": h1}, {"type": "relu"},
                  {"type": "linear", "out_features": h2}, {"type": "relu"},
                  {"type": "linear", "out_features": num_classes}]
