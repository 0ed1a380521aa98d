"""The layer list of a ModelSpec, batch norm and the speed lesson's other variants included.

``core.shapes.trace`` walks these dicts (``shapes.trace_spec`` is trace ∘ spec_layers). The
order matches ``core.model.Net``: each block is conv → [bn] → relu → [conv → [bn] → relu] →
pool.
"""
from __future__ import annotations

from cifarlab.core.modelspec import ModelSpec


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
