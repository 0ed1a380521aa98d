"""The shape trace's oracle: a real ``nn.Module`` traced by a forward pass of a zero batch of
one, each leaf module's call recorded, so the tests can hold ``core.shapes``' arithmetic against
what PyTorch itself computes."""
from __future__ import annotations

import torch
import torch.nn as nn

from cifarlab.core.shapes import POOL, as_pair, fmt_size
from cifarlab.core.shapes import LayerTrace, _input_shape, _trace_list
from cifarlab.errors import ShapeError


def _module_kind(m) -> str:
    for cls, kind in ((nn.Conv2d, "conv"), (nn.MaxPool2d, "pool"), (nn.AvgPool2d, "pool"),
                      (nn.ReLU, "relu"), (nn.Flatten, "flatten"), (nn.Linear, "linear"),
                      (nn.BatchNorm2d, "batchnorm")):
        if isinstance(m, cls):
            return kind
    return type(m).__name__.lower()


def _module_layer(m, kind: str) -> dict | None:
    """A layer dict with this module's settings, when our arithmetic covers it (else None)."""
    if kind == "conv" and not isinstance(m.padding, str):
        return {"type": "conv", "out_channels": m.out_channels, "kernel_size": m.kernel_size,
                "stride": m.stride, "padding": m.padding, "dilation": m.dilation}
    if kind == "pool":
        stride = m.stride if m.stride else None  # an empty stride means "= kernel"
        dilation = m.dilation if isinstance(m, nn.MaxPool2d) else 1
        return {"type": "pool", "kernel_size": as_pair(m.kernel_size, "kernel_size", POOL),
                "stride": None if stride is None else as_pair(stride, "stride", POOL),
                "padding": as_pair(m.padding, "padding", POOL),
                "dilation": as_pair(dilation, "dilation", POOL), "ceil_mode": m.ceil_mode}
    return None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


def _shape(x) -> tuple[int, ...]:
    while isinstance(x, (tuple, list)) and x:
        x = x[0]
    return tuple(x.shape[1:]) if hasattr(x, "shape") else ()


def trace_module(module: nn.Module, input_shape=(3, 32, 32)) -> list[LayerTrace]:
    """Run a zero batch of one through the module; record every leaf module call in order
    (a module called twice counts its parameters once). A layer that does not fit raises
    ShapeError naming it, in the shape trace's own words where its arithmetic covers it."""
    shape = _input_shape(input_shape)
    calls = []       # (name, module, in_shape, out_shape)
    current = []     # name and module of the leaf being called, for error messages
    names = {m: n or type(m).__name__.lower() for n, m in module.named_modules()
             if not any(True for _ in m.children())}

    def pre_hook(m, inputs):
        current.append((names[m], m, _shape(inputs)))

    def hook(m, inputs, output):
        calls.append((names[m], m, _shape(inputs), _shape(output)))
        current.pop()

    handles = [m.register_forward_pre_hook(pre_hook) for m in names]
    handles += [m.register_forward_hook(hook) for m in names]
    param = next(module.parameters(), None)
    x = torch.zeros((1, *shape), device=param.device if param is not None else "cpu",
                    dtype=param.dtype if param is not None and param.is_floating_point() else None)
    modes = {m: m.training for m in module.modules()}
    try:
        module.eval()  # no batch-norm statistics updated, no dropout
        with torch.no_grad():
            module(x)
    except Exception as err:
        if not current:
            raise ShapeError("shapes.model_fails", layer="input", shape=fmt_size(shape),
                             detail=_first_line(err)) from err
        name, m, in_shape = current[-1]
        layer = _module_layer(m, _module_kind(m))
        if layer is not None and len(in_shape) == 3:
            _trace_list([{**layer, "name": name}], in_shape)  # raises our plain message
        raise ShapeError("shapes.torch_says", layer=name, detail=_first_line(err)) from err
    finally:
        for m, mode in modes.items():
            m.training = mode
        for h in handles:
            h.remove()

    traces = [LayerTrace("input", "input", shape, shape, 0, "", True)]
    seen = set()
    for name, m, in_shape, out_shape in calls:
        prev = traces[-1].out_shape
        if len(prev) == 3 and len(in_shape) == 1:  # a torch.flatten in forward
            traces.append(LayerTrace("flatten", "flatten", prev, in_shape, 0, "", True))
        params = 0 if m in seen else sum(p.numel() for p in m.parameters())
        seen.add(m)
        kind = _module_kind(m)
        formula, exact = "", True
        layer = _module_layer(m, kind)
        if layer is not None and len(in_shape) == 3:
            t = _trace_list([layer], in_shape)[-1]
            formula, exact = t.formula, t.exact
        traces.append(LayerTrace(name, kind, in_shape, out_shape, params, formula, exact))
    return traces
