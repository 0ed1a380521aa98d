"""Output sizes of nn.Conv2d and nn.MaxPool2d with their formulas, following PyTorch exactly
(aten/src/ATen/native/Pool.h, ConvUtils.h); what PyTorch refuses raises ``ShapeError``."""
from __future__ import annotations

import re
from typing import Any

from cifarlab.core.modelspec import is_int
from cifarlab.errors import ShapeError

# Outside a traced layer, an error names PyTorch's class; inside one, the layer ("conv2").
CONV, POOL = "Conv2d", "MaxPool2d"
# PyTorch's argument names: the same words in every language, as students write them.
ARGS = ("input_size", "kernel_size", "stride", "padding", "dilation")


# -----------------------------------------------------------------------------
# one dimension: the formulas

def _num(n: int) -> str:
    return f"−{-n}" if n < 0 else str(n)


def _numerator(size: int, kernel: int, padding: int, dilation: int) -> int:
    return size + 2 * padding - dilation * (kernel - 1) - 1


def _inner(size: int, kernel: int, stride: int, padding: int, dilation: int) -> str:
    return f"({size} + 2·{padding} − {dilation}·({kernel} − 1) − 1) / {stride}"


def conv2d_formula(size: int, kernel: int, stride: int = 1, padding: int = 0,
                   dilation: int = 1) -> tuple[str, int, bool]:
    """One dimension of nn.Conv2d: (formula with the numbers in, output size, division exact?).

    Does not raise when the output is below 1 (a calculator can show why); the output may then
    be 0 or negative. Arguments that PyTorch refuses outright (kernel 0, ...) raise ShapeError.
    """
    _check_args(CONV, size, kernel, stride, padding, dilation)
    n = _numerator(size, kernel, padding, dilation)
    out = n // stride + 1
    formula = f"⌊{_inner(size, kernel, stride, padding, dilation)}⌋ + 1 = {_num(out)}"
    return formula, out, n % stride == 0


def pool2d_formula(size: int, kernel: int, stride: int | None = None, padding: int = 0,
                   dilation: int = 1, ceil_mode: bool = False) -> tuple[str, int, bool]:
    """One dimension of nn.MaxPool2d: (formula with the numbers in, output size, exact?).

    In ceil mode the formula uses ⌈⌉, and PyTorch drops the last window if it would start in the
    right padding; the formula then says so. Like conv2d_formula it does not raise for an
    output below 1, but does for a padding above half the kernel (PyTorch refuses that always).
    """
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


# -----------------------------------------------------------------------------
# two dimensions: ints or (h, w) pairs

def conv2d_output_size(size, kernel_size, stride=1, padding=0, dilation=1):
    """Output size of nn.Conv2d. Ints give an int; any (h, w) pair gives an (h, w) pair."""
    return _output_size(CONV, conv2d_formula, (size, kernel_size, stride, padding, dilation))


def pool2d_output_size(size, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Output size of nn.MaxPool2d (stride defaults to kernel_size). Ints in, int out;
    pair, pair."""
    stride = kernel_size if stride is None else stride
    return _output_size(POOL, pool2d_formula, (size, kernel_size, stride, padding, dilation),
                        ceil_mode=bool(ceil_mode))


def _output_size(layer: str, formula, args: tuple, **kw):
    dims = [formula(*a, **kw)[1] for a in per_dim(args, layer)]
    if min(dims) < 1:
        raise _too_small(layer, args, dims)
    return dims[0] if all(is_int(a) for a in args) else (dims[0], dims[1])


def as_pair(v: Any, arg: str, layer: str = "?") -> tuple[int, int]:
    """An int or an (h, w) pair as (h, w); anything else names ``layer``'s ``arg``."""
    if is_int(v):
        return (v, v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(is_int(x) for x in v):
        return (v[0], v[1])
    raise ShapeError("shapes.not_a_pair", layer=layer, arg=arg, value=repr(v))


_WHOLE = r"\s*([-−]?\s*\d+)\s*"
_ONE, _TWO = re.compile(_WHOLE), re.compile(rf"\s*[(\[]{_WHOLE},{_WHOLE}[)\]]\s*")


def parse_size(text: str, arg: str, layer: str = "?") -> int | tuple[int, int]:
    """What a student typed for one argument, as nn.Conv2d takes it: "5" -> 5, "(5, 2)" -> (5, 2).
    A rectangle needs its parentheses (as in Python, and so "2,5", a decimal in es and pt, is
    refused rather than read as a pair); anything else raises ``shapes.not_a_pair``."""
    ints = [int(g.replace("−", "-").replace(" ", ""))
            for m in (_ONE.fullmatch(text), _TWO.fullmatch(text)) if m for g in m.groups()]
    if not ints:
        raise ShapeError("shapes.not_a_pair", layer=layer, arg=arg, value=repr(text.strip()))
    return ints[0] if len(ints) == 1 else (ints[0], ints[1])


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
            raise ShapeError("shapes.below_min", layer=layer, arg=arg, lo=lo, value=repr(v))


def _too_small(layer: str, args: tuple, dims: list[int]) -> ShapeError:
    """The error for an output below 1: the sizes in, the output, and the largest kernel that
    would fit (``errors.shapes.conv_too_small`` / ``pool_too_small``)."""
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
