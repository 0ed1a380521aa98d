"""A ModelSpec's modules and forward steps: the one layout that ``Net`` builds, the export writes
and the shape trace walks. A block is conv → [bn] → relu → [conv → [bn] → relu] → pool."""
from __future__ import annotations

from cifarlab.core.modelspec import ModelSpec


def layout(spec: ModelSpec) -> tuple[list[dict], list[dict]]:
    """(modules, forward): the modules before fc1, in the order ``Net`` creates them (the same
    initial weights from the same seed), and the forward pass's steps, each a conv, its batch
    norm (or None) and whether the block's pool follows."""
    (c1, c2) = spec.scaled_channels()
    modules = [_conv("conv1", 3, c1, spec.kernels[0], spec.strides[0], spec.paddings[0]),
               {"kind": "pool", "name": "pool", "size": spec.pool},
               _conv("conv2", c1, c2, spec.kernels[1], spec.strides[1], spec.paddings[1])]
    blocks = [(1, c1), (2, c2)] + ([(3, spec.conv3 * spec.width)] if spec.conv3 else [])
    forward = []
    for i, ch in blocks:
        if i == 3:
            modules.append(_conv("conv3", c2, ch, 3, 1, 1))
        for suffix in ("", "b")[:spec.block_convs]:
            if suffix:
                modules.append(_conv(f"conv{i}b", ch, ch, 3, 1, 1))
            if spec.batch_norm:
                modules.append({"kind": "bn", "name": f"bn{i}{suffix}", "channels": ch})
            forward.append({"conv": f"conv{i}{suffix}", "pool": False,
                            "bn": f"bn{i}{suffix}" if spec.batch_norm else None})
        forward[-1]["pool"] = True
    return modules, forward


def _conv(name: str, cin: int, cout: int, kernel: int, stride: int, padding: int) -> dict:
    return {"kind": "conv", "name": name, "cin": cin, "cout": cout, "kernel": kernel,
            "stride": stride, "padding": padding}


def spec_layers(spec: ModelSpec, num_classes: int = 10) -> list[dict]:
    """The layers, in call order, of ``core.model.Net(spec)`` (relus included); the tutorial's
    kind of network leaves the convs unnamed (conv1, conv2 by count)."""
    modules, forward = layout(spec)
    convs = {m["name"]: m for m in modules if m["kind"] == "conv"}
    out: list[dict] = []
    for step in forward:
        c = convs[step["conv"]]
        out.append({"type": "conv", "out_channels": c["cout"], "kernel_size": c["kernel"],
                    "stride": c["stride"], "padding": c["padding"], "dilation": 1}
                   | ({} if spec.is_plain else {"name": c["name"]}))
        if step["bn"]:
            out.append({"type": "batchnorm", "name": step["bn"]})
        out.append({"type": "relu"})
        if step["pool"]:
            out.append({"type": "pool", "kernel_size": spec.pool, "stride": spec.pool})
    h1, h2 = spec.scaled_hidden()
    return out + [{"type": "flatten"},
                  {"type": "linear", "out_features": h1}, {"type": "relu"},
                  {"type": "linear", "out_features": h2}, {"type": "relu"},
                  {"type": "linear", "out_features": num_classes}]
