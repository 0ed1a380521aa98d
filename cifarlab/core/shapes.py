"""The shape of every layer of a network, traced: in and out shapes, parameters, formulas.

A layer list (``core.blocks.spec_layers``) is traced by arithmetic alone
(``core.conv_arithmetic``); a real ``nn.Module`` by a forward pass of a zero batch of one. A
layer PyTorch would refuse raises ``ShapeError`` naming it. torch is imported only to trace a
real module.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from cifarlab.core.blocks import spec_layers
from cifarlab.core.conv_arithmetic import (CONV, POOL, as_pair, conv2d_formula,
                                           conv2d_output_size, fmt_size, per_dim,
                                           pool2d_formula, pool2d_output_size)
from cifarlab.core.modelspec import ModelSpec, is_int
from cifarlab.errors import ShapeError

# The layer arithmetic is part of this module's public face (the Network page calls it here).
__all__ = ["LayerTrace", "trace", "trace_spec", "trace_table", "flat_features", "total_params",
           "conv2d_formula", "pool2d_formula", "conv2d_output_size", "pool2d_output_size"]


@dataclass(frozen=True)
class LayerTrace:
    """One layer call: its name, kind, shapes (batch dimension left out), params and formula."""

    name: str                    # "conv1", "pool", "conv2", "flatten", "fc1", ...
    kind: str                    # "input" | "conv" | "pool" | "relu" | "flatten" | "linear" | other
    in_shape: tuple[int, ...]    # (C, H, W) or (F,)
    out_shape: tuple[int, ...]
    params: int                  # learnable parameters (0 at a module's second call)
    formula: str                 # H formula (and W formula if it differs); "" where none
    exact: bool                  # False when a division in the formula had a remainder


# -----------------------------------------------------------------------------
# tracing a layer list

_KEYS = {
    "conv": {"out_channels", "kernel_size", "stride", "padding", "dilation", "bias"},
    "pool": {"kernel_size", "stride", "padding", "dilation", "ceil_mode"},
    "relu": set(),
    "flatten": set(),
    "linear": {"out_features", "bias"},
    "batchnorm": set(),
}
_PREFIX = {"conv": "conv", "pool": "pool", "relu": "relu", "flatten": "flatten", "linear": "fc",
           "batchnorm": "bn"}


def _positive(layer: dict, key: str) -> int:
    v = layer.get(key)
    if not is_int(v) or v < 1:
        raise ShapeError("shapes.below_min", arg=key, lo=1, value=repr(v))
    return v


def _image(shape: tuple[int, ...], kind: str) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise ShapeError("shapes.needs_image", features=shape[0])
    return shape


def _formula(fn, h_args: tuple, w_args: tuple, **kw) -> tuple[str, bool]:
    """H formula, plus the W formula when it differs; exact only if both divisions are."""
    fh, _, eh = fn(*h_args, **kw)
    fw, _, ew = fn(*w_args, **kw)
    return (fh if fh == fw else f"H: {fh}; W: {fw}"), eh and ew


def _conv(layer: dict, shape: tuple[int, ...]):
    c, h, w = _image(shape, "conv")
    oc = _positive(layer, "out_channels")
    args = ((h, w), layer.get("kernel_size"), layer.get("stride", 1),
            layer.get("padding", 0), layer.get("dilation", 1))
    oh, ow = conv2d_output_size(*args)
    hargs, wargs = per_dim(args, CONV)
    formula, exact = _formula(conv2d_formula, hargs, wargs)
    kh, kw = hargs[1], wargs[1]
    params = oc * c * kh * kw + (oc if layer.get("bias", True) else 0)
    return (oc, oh, ow), params, formula, exact


def _pool(layer: dict, shape: tuple[int, ...]):
    c, h, w = _image(shape, "pool")
    kernel = layer.get("kernel_size")
    stride = layer.get("stride")
    args = ((h, w), kernel, kernel if stride is None else stride,
            layer.get("padding", 0), layer.get("dilation", 1))
    ceil_mode = bool(layer.get("ceil_mode", False))
    oh, ow = pool2d_output_size(*args, ceil_mode=ceil_mode)
    formula, exact = _formula(pool2d_formula, *per_dim(args, POOL), ceil_mode=ceil_mode)
    return (c, oh, ow), 0, formula, exact


def _relu(layer: dict, shape: tuple[int, ...]):
    return shape, 0, "", True


def _flatten(layer: dict, shape: tuple[int, ...]):
    return (math.prod(shape),), 0, "", True


def _linear(layer: dict, shape: tuple[int, ...]):
    if len(shape) != 1:
        raise ShapeError("shapes.needs_flat", shape=fmt_size(shape))
    out = _positive(layer, "out_features")
    return (out,), shape[0] * out + (out if layer.get("bias", True) else 0), "", True


def _batchnorm(layer: dict, shape: tuple[int, ...]):
    # nn.BatchNorm2d keeps the shape and learns 2·C numbers (a weight and a bias a channel)
    c, _, _ = _image(shape, "batchnorm")
    return shape, 2 * c, "", True


_STEPS = {"conv": _conv, "pool": _pool, "relu": _relu, "flatten": _flatten, "linear": _linear,
          "batchnorm": _batchnorm}


def _input_shape(input_shape) -> tuple[int, ...]:
    shape = tuple(input_shape) if isinstance(input_shape, (tuple, list)) else None
    if not shape or len(shape) not in (1, 3) or not all(is_int(x) and x >= 1 for x in shape):
        raise ShapeError("shapes.bad_input", layer="input", value=repr(input_shape))
    return shape


def _trace_list(layers: list[dict], shape: tuple[int, ...]) -> list[LayerTrace]:
    traces = [LayerTrace("input", "input", shape, shape, 0, "", True)]
    counts: dict[str, int] = {}
    for i, layer in enumerate(layers):
        kind = layer.get("type") if isinstance(layer, dict) else None
        if kind not in _STEPS:
            raise ShapeError("shapes.unknown_layer", layer=f"#{i + 1}", position=i + 1,
                             found=repr(layer)[:80], known=", ".join(_STEPS))
        counts[kind] = counts.get(kind, 0) + 1
        n = counts[kind]
        name = layer.get("name") or (
            "flatten" if kind == "flatten" and n == 1 else f"{_PREFIX[kind]}{n}")
        try:
            unknown = set(layer) - _KEYS[kind] - {"type", "name"}
            if unknown:
                raise ShapeError("shapes.unknown_settings", unknown=", ".join(sorted(unknown)),
                                 known=", ".join(sorted(_KEYS[kind])) or "–")
            out, params, formula, exact = _STEPS[kind](layer, shape)
        except ShapeError as err:  # the same problem, now naming this layer
            params = {k: v for k, v in err.params.items() if k != "layer"}
            raise ShapeError(err.code, layer=name, **params) from None
        traces.append(LayerTrace(name, kind, shape, tuple(out), params, formula, exact))
        shape = tuple(out)
    return traces


# -----------------------------------------------------------------------------
# tracing a real nn.Module

def _module_kind(m) -> str:
    import torch.nn as nn
    for cls, kind in ((nn.Conv2d, "conv"), (nn.MaxPool2d, "pool"), (nn.AvgPool2d, "pool"),
                      (nn.ReLU, "relu"), (nn.Flatten, "flatten"), (nn.Linear, "linear"),
                      (nn.BatchNorm2d, "batchnorm")):
        if isinstance(m, cls):
            return kind
    return type(m).__name__.lower()


def _module_layer(m, kind: str) -> dict | None:
    """A layer dict with this module's settings, when our arithmetic covers it (else None)."""
    import torch.nn as nn
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
    """PyTorch's own words (English, as it printed them), one line."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


def _shape(x) -> tuple[int, ...]:
    while isinstance(x, (tuple, list)) and x:
        x = x[0]
    return tuple(x.shape[1:]) if hasattr(x, "shape") else ()


def _trace_module(module, shape: tuple[int, ...]) -> list[LayerTrace]:
    """Run a zero batch of one through the module; record every leaf module call in order."""
    import torch
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
        kind = _module_kind(m)
        layer = _module_layer(m, kind)
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


# -----------------------------------------------------------------------------
# public entry points

def trace(layers, input_shape=(3, 32, 32)) -> list[LayerTrace]:
    """Shapes through a layer list (dicts) or a real nn.Module; the first entry is the input.

    A layer that would produce a size below 1 raises ShapeError naming it ("conv2: ...").
    """
    shape = _input_shape(input_shape)
    if isinstance(layers, (list, tuple)):
        return _trace_list(list(layers), shape)
    import torch.nn as nn
    if not isinstance(layers, nn.Module):
        raise ShapeError("shapes.cannot_trace", layer="layers", kind=type(layers).__name__)
    return _trace_module(layers, shape)


def trace_spec(spec: ModelSpec, input_shape=(3, 32, 32), num_classes: int = 10
               ) -> list[LayerTrace]:
    """trace() of the model a ModelSpec builds: conv1, relu1, pool1, conv2, ..., fc3. Pure
    arithmetic: ``total_params(trace_spec(spec))`` counts a network of any size for free."""
    return trace(spec_layers(spec, num_classes), input_shape)


def flat_features(spec: ModelSpec, input_shape=(3, 32, 32)) -> int:
    """fc1's input size: the length of the flattened conv output (400 for the tutorial)."""
    return next(t for t in trace_spec(spec, input_shape) if t.kind == "flatten").out_shape[0]


def total_params(traces: list[LayerTrace]) -> int:
    """Learnable parameters of a traced model (62006 for the tutorial's Net)."""
    return sum(t.params for t in traces)


def trace_table(traces: list[LayerTrace]) -> list[dict]:
    """Rows for a table: layer, kind, input, output ("6×28×28"), params, formula."""
    return [{"layer": t.name, "kind": t.kind, "input": fmt_size(t.in_shape),
             "output": fmt_size(t.out_shape), "params": t.params, "formula": t.formula}
            for t in traces]
