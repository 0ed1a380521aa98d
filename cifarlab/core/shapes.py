"""The shape trace: each layer's in/out shape, parameters and formula, by arithmetic alone; a
layer PyTorch would refuse raises ``ShapeError`` naming it."""
from __future__ import annotations

import math
from dataclasses import dataclass

from cifarlab.core.blocks import spec_layers
from cifarlab.core.conv_arithmetic import (CONV, POOL, conv2d_formula, conv2d_output_size,
                                           fmt_size, per_dim, pool2d_formula, pool2d_output_size)
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


def _image(shape: tuple[int, ...]) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise ShapeError("shapes.needs_image", features=shape[0])
    return shape


def _formula(fn, h_args: tuple, w_args: tuple, **kw) -> tuple[str, bool]:
    """H formula, plus the W formula when it differs; exact only if both divisions are."""
    fh, _, eh = fn(*h_args, **kw)
    fw, _, ew = fn(*w_args, **kw)
    return (fh if fh == fw else f"H: {fh}; W: {fw}"), eh and ew


def _conv(layer: dict, shape: tuple[int, ...]):
    c, h, w = _image(shape)
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
    c, h, w = _image(shape)
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
    c, _, _ = _image(shape)
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
# public entry points

def trace(layers, input_shape=(3, 32, 32)) -> list[LayerTrace]:
    """Shapes through a layer list (dicts); the first entry is the input.

    A layer that would produce a size below 1 raises ShapeError naming it ("conv2: ...").
    """
    shape = _input_shape(input_shape)
    if not isinstance(layers, (list, tuple)):
        raise ShapeError("shapes.cannot_trace", layer="layers", kind=type(layers).__name__)
    return _trace_list(list(layers), shape)


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
