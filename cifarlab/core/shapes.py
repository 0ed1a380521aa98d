"""The shape trace and nn.Conv2d / nn.MaxPool2d output sizes with their formulas, by arithmetic
alone, following PyTorch (ATen's Pool.h, ConvUtils.h); what PyTorch refuses is a ShapeError."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from cifarlab.core.modelspec import ModelSpec, is_int, spec_layers
from cifarlab.errors import ShapeError

# Outside a traced layer, an error names PyTorch's class; inside one, the layer ("conv2").
CONV, POOL = "Conv2d", "MaxPool2d"
# PyTorch's argument names: the same words in every language, as students write them.
ARGS = ("input_size", "kernel_size", "stride", "padding", "dilation")


def _num(n: int) -> str:
    return f"−{-n}" if n < 0 else str(n)


def _numerator(size: int, kernel: int, padding: int, dilation: int) -> int:
    return size + 2 * padding - dilation * (kernel - 1) - 1


def _inner(size: int, kernel: int, stride: int, padding: int, dilation: int) -> str:
    return f"({size} + 2·{padding} − {dilation}·({kernel} − 1) − 1) / {stride}"


def conv2d_formula(size: int, kernel: int, stride: int = 1, padding: int = 0,
                   dilation: int = 1) -> tuple[str, int, bool]:
    """One dimension of nn.Conv2d: (formula with the numbers in, output size, division exact?);
    an output below 1 is returned (a calculator shows why), a kernel 0 is a ShapeError."""
    _check_args(CONV, size, kernel, stride, padding, dilation)
    n = _numerator(size, kernel, padding, dilation)
    out = n // stride + 1
    formula = f"⌊{_inner(size, kernel, stride, padding, dilation)}⌋ + 1 = {_num(out)}"
    return formula, out, n % stride == 0


def pool2d_formula(size: int, kernel: int, stride: int | None = None, padding: int = 0,
                   dilation: int = 1, ceil_mode: bool = False) -> tuple[str, int, bool]:
    """One dimension of nn.MaxPool2d, as ``conv2d_formula``; in ceil mode with ⌈⌉, and the last
    window dropped (the formula says so) where it would start in the right padding."""
    stride = kernel if stride is None else stride
    _check_args(POOL, size, kernel, stride, padding, dilation)
    if padding > kernel // 2:
        raise ShapeError("shapes.pool_padding", layer=POOL, padding=padding, kernel=kernel,
                         half=kernel // 2, min_kernel=2 * padding)
    if not ceil_mode:   # conv's floor arithmetic
        return conv2d_formula(size, kernel, stride, padding, dilation)
    n = _numerator(size, kernel, padding, dilation)
    out = -(-n // stride) + 1  # ⌈n / s⌉ + 1, also for negative n
    formula = f"⌈{_inner(size, kernel, stride, padding, dilation)}⌉ + 1 = {_num(out)}"
    if (out - 1) * stride >= size + padding:  # last window would start in the right padding
        out -= 1
        formula += (f" − 1 = {_num(out)} "
                    "(the last window would start in the padding, so it is dropped)")
    return formula, out, n % stride == 0


def conv2d_output_size(size, kernel_size, stride=1, padding=0, dilation=1):
    """Output size of nn.Conv2d. Ints give an int; any (h, w) pair gives an (h, w) pair."""
    args = (size, kernel_size, stride, padding, dilation)
    return _as_given(args, _spatial(CONV, conv2d_formula, args)[0])


def pool2d_output_size(size, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Output size of nn.MaxPool2d (stride defaults to kernel_size), as conv2d_output_size."""
    args = (size, kernel_size, kernel_size if stride is None else stride, padding, dilation)
    return _as_given(args, _spatial(POOL, pool2d_formula, args, ceil_mode=bool(ceil_mode))[0])


def _as_given(args: tuple, dims: tuple[int, int]):
    return dims[0] if all(is_int(a) for a in args) else dims


def _spatial(layer: str, formula, args: tuple, **kw) -> tuple[tuple[int, int], str, bool]:
    """((out H, out W), the formula(s), both divisions exact?); ShapeError for an output < 1."""
    (fh, oh, eh), (fw, ow, ew) = (formula(*a, **kw) for a in per_dim(args, layer))
    if min(oh, ow) < 1:
        raise _too_small(layer, args, [oh, ow])
    return (oh, ow), (fh if fh == fw else f"H: {fh}; W: {fw}"), eh and ew


def as_pair(v: Any, arg: str, layer: str = "?") -> tuple[int, int]:
    """An int or an (h, w) pair as (h, w); anything else names ``layer``'s ``arg``."""
    if is_int(v):
        return (v, v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(is_int(x) for x in v):
        return (v[0], v[1])
    raise ShapeError(_code("not_a_pair", arg), layer=layer, arg=arg, value=repr(v))


_WHOLE = r"\s*([-−]?\s*\d+)\s*"
_ONE, _TWO = re.compile(_WHOLE), re.compile(rf"\s*[(\[]{_WHOLE},{_WHOLE}[)\]]\s*")


def parse_size(text: str, arg: str, layer: str = "?") -> int | tuple[int, int]:
    """What a student typed for one argument: "5" -> 5, "(5, 2)" -> (5, 2). A pair needs its
    parentheses ("2,5" is a decimal in es and pt); anything else is ``shapes.not_a_pair``."""
    ints = [int(g.replace("−", "-").replace(" ", ""))
            for m in (_ONE.fullmatch(text), _TWO.fullmatch(text)) if m for g in m.groups()]
    if not ints:
        raise ShapeError(_code("not_a_pair", arg), layer=layer, arg=arg,
                         value=repr(text.strip()))
    return ints[0] if len(ints) == 1 else (ints[0], ints[1])


def _code(what: str, arg: str) -> str:
    """The message for ``arg``: PyTorch's own argument by its name, the input by its words."""
    return f"shapes.input_{what}" if arg == ARGS[0] else f"shapes.{what}"


def per_dim(args: tuple, layer: str = "?") -> list[tuple[int, ...]]:
    """(size, kernel, stride, padding, dilation), each int or pair -> [H args, W args]."""
    pairs = [as_pair(a, n, layer) for a, n in zip(args, ARGS)]
    return [tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)]


def fmt_size(v: Any) -> str:
    """3 -> "3"; (3, 4) -> "3×4"; (3, 3) -> "3×3"."""
    return "×".join(_num(x) for x in v) if isinstance(v, (tuple, list)) else _num(v)


def _check_args(layer: str, size: int, kernel: int, stride: int, padding: int,
                dilation: int) -> None:
    for arg, v, lo in zip(ARGS, (size, kernel, stride, padding, dilation), (1, 1, 1, 0, 1)):
        if not is_int(v) or v < lo:
            raise ShapeError(_code("below_min", arg), layer=layer, arg=arg, lo=lo, value=repr(v))


def _too_small(layer: str, args: tuple, dims: list[int]) -> ShapeError:
    """The error for an output below 1: the sizes in, the output, the largest kernel that fits."""
    h, w = per_dim(args, layer)
    # the window (d·(k − 1) + 1 pixels) must fit in the padded input (n + 2p pixels)
    kmax = [(n + 2 * p - 1) // d + 1 for n, k, s, p, d in (h, w)]
    if all(is_int(a) for a in args):
        size, kernel, stride, padding, dilation = map(_num, h)
        out, fit = _num(dims[0]), _num(kmax[0])
    else:
        size, kernel = fmt_size((h[0], w[0])), fmt_size((h[1], w[1]))
        stride, padding, dilation = (str(a) if a == b else f"({a}, {b})"
                                     for a, b in zip(h[2:], w[2:]))
        out, fit = fmt_size(dims), fmt_size(kmax)
    code = "shapes.conv_too_small" if layer == CONV else "shapes.pool_too_small"
    return ShapeError(code, layer=layer, size=size, kernel=kernel, stride=stride,
                      padding=padding, dilation=dilation, out=out, fit=fit)


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


# each layer type's settings, and the names it gets by count where they are not its type's
_KEYS = {"conv": {"out_channels", "kernel_size", "stride", "padding", "dilation", "bias"},
         "pool": {"kernel_size", "stride", "padding", "dilation", "ceil_mode"},
         "relu": set(), "flatten": set(), "linear": {"out_features", "bias"}, "batchnorm": set()}
_PREFIX = {"linear": "fc", "batchnorm": "bn"}


def _positive(layer: dict, key: str) -> int:
    v = layer.get(key)
    if not is_int(v) or v < 1:
        raise ShapeError("shapes.below_min", arg=key, lo=1, value=repr(v))
    return v


def _image(shape: tuple[int, ...]) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise ShapeError("shapes.needs_image", features=shape[0])
    return shape


def _conv(layer: dict, shape: tuple[int, ...]):
    c, h, w = _image(shape)
    oc = _positive(layer, "out_channels")
    args = ((h, w), layer.get("kernel_size"), layer.get("stride", 1),
            layer.get("padding", 0), layer.get("dilation", 1))
    (oh, ow), formula, exact = _spatial(CONV, conv2d_formula, args)
    kh, kw = as_pair(args[1], "kernel_size", CONV)
    params = oc * c * kh * kw + (oc if layer.get("bias", True) else 0)
    return (oc, oh, ow), params, formula, exact


def _pool(layer: dict, shape: tuple[int, ...]):
    c, h, w = _image(shape)
    kernel = layer.get("kernel_size")
    stride = layer.get("stride")
    args = ((h, w), kernel, kernel if stride is None else stride,
            layer.get("padding", 0), layer.get("dilation", 1))
    (oh, ow), formula, exact = _spatial(POOL, pool2d_formula, args,
                                        ceil_mode=bool(layer.get("ceil_mode", False)))
    return (c, oh, ow), 0, formula, exact


def _linear(layer: dict, shape: tuple[int, ...]):
    if len(shape) != 1:
        raise ShapeError("shapes.needs_flat", shape=fmt_size(shape))
    out = _positive(layer, "out_features")
    return (out,), shape[0] * out + (out if layer.get("bias", True) else 0), "", True


def _batchnorm(layer: dict, shape: tuple[int, ...]):
    # nn.BatchNorm2d keeps the shape and learns 2·C numbers (a weight and a bias a channel)
    c, _, _ = _image(shape)
    return shape, 2 * c, "", True


_STEPS = {"conv": _conv, "pool": _pool, "relu": lambda layer, shape: (shape, 0, "", True),
          "flatten": lambda layer, shape: ((math.prod(shape),), 0, "", True),
          "linear": _linear, "batchnorm": _batchnorm}


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
            "flatten" if kind == "flatten" and n == 1 else f"{_PREFIX.get(kind, kind)}{n}")
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


def trace(layers, input_shape=(3, 32, 32)) -> list[LayerTrace]:
    """Shapes through a layer list (dicts), the input first; ShapeError naming a misfit."""
    shape = _input_shape(input_shape)
    if not isinstance(layers, (list, tuple)):
        raise ShapeError("shapes.cannot_trace", layer="layers", kind=type(layers).__name__)
    return _trace_list(list(layers), shape)


def trace_spec(spec: ModelSpec, input_shape=(3, 32, 32), num_classes: int = 10
               ) -> list[LayerTrace]:
    """trace() of the model a ModelSpec builds: arithmetic alone, for a network of any size."""
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
