"""cifarlab.core.shapes against real PyTorch layers: sizes, errors, formulas and whole-model
traces."""
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from cifarlab.core.config import ModelSpec
from cifarlab.errors import ShapeError
from cifarlab.core.shapes import (LayerTrace, conv2d_formula, conv2d_output_size, flat_features,
                             pool2d_formula, pool2d_output_size, total_params, trace,
                             trace_spec, trace_table)
from shape_support import trace_module

FEW = settings(max_examples=300, deadline=None)


class Net(nn.Module):
    """The tutorial's network, as written there."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class SpecNet(nn.Module):
    """The tutorial's network built from a ModelSpec, written independently of cifarlab."""

    def __init__(self, spec: ModelSpec, flat: int):
        super().__init__()
        (c1, c2), (h1, h2) = spec.scaled_channels(), spec.scaled_hidden()
        self.conv1 = nn.Conv2d(3, c1, spec.kernels[0], spec.strides[0], spec.paddings[0])
        self.pool = nn.MaxPool2d(spec.pool, spec.pool)
        self.conv2 = nn.Conv2d(c1, c2, spec.kernels[1], spec.strides[1], spec.paddings[1])
        self.fc1 = nn.Linear(flat, h1)
        self.fc2 = nn.Linear(h1, h2)
        self.fc3 = nn.Linear(h2, 10)

    def features(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        return torch.flatten(self.pool(F.relu(self.conv2(x))), 1)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(self.features(x))))))


def int_or_pair(lo, hi):
    return st.one_of(st.integers(lo, hi), st.tuples(st.integers(lo, hi), st.integers(lo, hi)))


def pair(v):
    return v if isinstance(v, tuple) else (v, v)


def torch_size(layer, size):
    """Output (h, w) of a real layer on a zero image, or None where PyTorch refuses."""
    try:
        return tuple(layer(torch.zeros(1, 1, *pair(size))).shape[-2:])
    except RuntimeError:
        return None


def check_against(ours, expected, args):
    """ours(): our answer; expected: torch's (h, w) or None; int out iff every arg is an int."""
    if expected is None:
        with pytest.raises(ShapeError):
            ours()
        return
    got = ours()
    if all(isinstance(a, int) for a in args):
        assert isinstance(got, int) and (got, got) == expected
    else:
        assert got == expected


# -----------------------------------------------------------------------------
# single layers against PyTorch

@FEW
@given(size=int_or_pair(1, 64), kernel=int_or_pair(1, 9), stride=int_or_pair(1, 4),
       padding=int_or_pair(0, 4), dilation=int_or_pair(1, 3))
def test_conv2d_output_size_matches_torch(size, kernel, stride, padding, dilation):
    expected = torch_size(nn.Conv2d(1, 1, kernel, stride, padding, dilation), size)
    args = (size, kernel, stride, padding, dilation)
    check_against(lambda: conv2d_output_size(*args), expected, args)
    if expected is not None:  # the per-dimension formula gives the same numbers
        for d in range(2):
            one = [pair(a)[d] for a in args]
            assert conv2d_formula(*one)[1] == expected[d]


@FEW
@given(size=int_or_pair(1, 64), kernel=int_or_pair(1, 6), stride=st.none() | int_or_pair(1, 4),
       padding=int_or_pair(0, 4), dilation=int_or_pair(1, 3), ceil_mode=st.booleans())
def test_pool2d_output_size_matches_torch(size, kernel, stride, padding, dilation, ceil_mode):
    try:
        layer = nn.MaxPool2d(kernel, stride, padding, dilation, ceil_mode=ceil_mode)
        expected = torch_size(layer, size)
    except RuntimeError:
        expected = None
    args = (size, kernel, stride, padding, dilation)
    check_against(lambda: pool2d_output_size(*args, ceil_mode=ceil_mode), expected,
                  [a for a in args if a is not None])
    if expected is not None:
        for d in range(2):
            one = [None if a is None else pair(a)[d] for a in args]
            assert pool2d_formula(*one, ceil_mode=ceil_mode)[1] == expected[d]


def test_int_in_int_out_pair_in_pair_out():
    assert conv2d_output_size(32, 5) == 28
    assert conv2d_output_size((32, 32), 5) == (28, 28)
    assert conv2d_output_size(32, (5, 3), padding=(0, 1)) == (28, 32)
    assert pool2d_output_size(28, 2) == 14  # stride defaults to the kernel
    assert pool2d_output_size(28, (2, 4)) == (14, 7)


def test_too_small_output_raises_a_readable_error():
    with pytest.raises(ShapeError) as err:
        conv2d_output_size(3, 5)
    assert "3 pixels" in str(err.value) and "kernel is 5" in str(err.value)
    assert "at most 3" in str(err.value)  # says how to fix it
    with pytest.raises(ShapeError, match="padding"):
        pool2d_output_size(8, 3, padding=2)  # PyTorch: padding at most half the kernel
    with pytest.raises(ShapeError, match="stride"):
        conv2d_output_size(8, 3, stride=0)


# -----------------------------------------------------------------------------
# formulas

def test_conv_formula_text():
    assert conv2d_formula(32, 5, 1, 0, 1) == ("⌊(32 + 2·0 − 1·(5 − 1) − 1) / 1⌋ + 1 = 28", 28, True)
    formula, out, exact = conv2d_formula(32, 4, 3, 1, 2)  # (32 + 2 − 6 − 1) / 3 = 27 / 3
    assert formula == "⌊(32 + 2·1 − 2·(4 − 1) − 1) / 3⌋ + 1 = 10" and out == 10 and exact


def test_formula_not_exact_when_stride_does_not_divide():
    formula, out, exact = conv2d_formula(32, 4, 3, 0, 1)  # 28 / 3 has remainder 1
    assert out == 10 and not exact and formula.endswith("= 10")
    assert not pool2d_formula(5, 2)[2] and pool2d_formula(4, 2)[2]


def test_pool_formula_floor_and_ceil():
    assert pool2d_formula(28, 2) == ("⌊(28 + 2·0 − 1·(2 − 1) − 1) / 2⌋ + 1 = 14", 14, True)
    formula, out, exact = pool2d_formula(5, 2, ceil_mode=True)
    assert formula == "⌈(5 + 2·0 − 1·(2 − 1) − 1) / 2⌉ + 1 = 3" and out == 3 and not exact
    formula, out, _ = pool2d_formula(4, 2, 3, 1, 1, ceil_mode=True)  # last window in the padding
    assert out == 2 == pool2d_output_size(4, 2, 3, 1, ceil_mode=True)
    assert formula.startswith("⌈") and "= 3 − 1 = 2" in formula


# -----------------------------------------------------------------------------
# whole models

def test_tutorial_net_trace_matches_trace_spec():
    net = Net()
    real = trace_module(net)
    spec = trace_spec(ModelSpec())
    assert [t.name for t in real] == ["input", "conv1", "pool", "conv2", "pool", "flatten",
                                      "fc1", "fc2", "fc3"]
    no_relu = [t for t in spec if t.kind != "relu"]
    assert [(t.kind, t.in_shape, t.out_shape, t.params, t.formula) for t in real] == \
           [(t.kind, t.in_shape, t.out_shape, t.params, t.formula) for t in no_relu]
    assert flat_features(ModelSpec()) == 400
    assert next(t for t in spec if t.name == "fc1").params == 48120 == 400 * 120 + 120
    assert total_params(real) == total_params(spec) == 62006 \
        == sum(p.numel() for p in net.parameters())


def test_trace_spec_names_and_formulas():
    spec = trace_spec(ModelSpec())
    assert [t.name for t in spec] == ["input", "conv1", "relu1", "pool1", "conv2", "relu2",
                                      "pool2", "flatten", "fc1", "relu3", "fc2", "relu4", "fc3"]
    assert spec[1] == LayerTrace("conv1", "conv", (3, 32, 32), (6, 28, 28), 456,
                                 "⌊(32 + 2·0 − 1·(5 − 1) − 1) / 1⌋ + 1 = 28", True)
    assert spec[7].out_shape == (400,) and spec[-1].out_shape == (10,)


specs = st.builds(ModelSpec, channels=st.tuples(st.integers(1, 8), st.integers(1, 8)),
                  kernels=st.tuples(st.integers(1, 9), st.integers(1, 9)),
                  paddings=st.tuples(st.integers(0, 4), st.integers(0, 4)),
                  strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
                  pool=st.integers(1, 4), hidden=st.tuples(st.integers(1, 32), st.integers(1, 32)),
                  width=st.integers(1, 2))


@settings(max_examples=60, deadline=None)
@given(spec=specs, size=st.integers(8, 40))
def test_trace_spec_matches_real_modules(spec, size):
    shape = (3, size, size)
    try:
        ours = trace_spec(spec, shape)
    except ShapeError as err:  # then PyTorch must refuse it too
        assert err.layer in ("conv1", "pool1", "conv2", "pool2")
        with pytest.raises(RuntimeError):
            SpecNet(spec, 1).features(torch.zeros(1, *shape))
        return
    net = SpecNet(spec, flat_features(spec, shape))
    real = trace_module(net, shape)
    assert [(t.kind, t.in_shape, t.out_shape, t.params) for t in real] == \
           [(t.kind, t.in_shape, t.out_shape, t.params) for t in ours if t.kind != "relu"]
    assert total_params(ours) == sum(p.numel() for p in net.parameters())
    assert net(torch.zeros(2, *shape)).shape == (2, 10)


def test_bad_stack_names_the_layer():
    with pytest.raises(ShapeError) as err:  # conv2 gets 14×14 and a 15×15 kernel
        trace_spec(ModelSpec(kernels=(5, 15)))
    assert err.value.layer == "conv2" and str(err.value).startswith("conv2: ")
    assert "14×14" in str(err.value) and "15×15" in str(err.value)
    with pytest.raises(ShapeError) as err:  # 32 → 28 → 7 → 3, then a 4×4 pool
        trace_spec(ModelSpec(pool=4))
    assert err.value.layer == "pool2"
    with pytest.raises(ShapeError) as err:  # the real Net on a 12×12 image fails in conv2
        trace_module(Net(), (3, 12, 12))
    assert err.value.layer == "conv2" and "4×4" in str(err.value)


def test_layer_list_errors():
    conv = {"type": "conv", "out_channels": 4, "kernel_size": 3}
    with pytest.raises(ShapeError, match="flatten"):
        trace([{"type": "linear", "out_features": 10}])
    with pytest.raises(ShapeError, match=r"^conv2: "):
        trace([conv, {"type": "flatten"}, conv])
    with pytest.raises(ShapeError, match="unknown"):
        trace([{"type": "dropout"}])
    with pytest.raises(ShapeError, match="kernal_size"):
        trace([{"type": "conv", "out_channels": 4, "kernel_size": 3, "kernal_size": 3}])
    t = trace([{**conv, "name": "stem", "stride": 2, "padding": (1, 0)}], (1, 9, 9))[-1]
    assert t.name == "stem" and t.out_shape == (4, 5, 4) and t.params == 4 * 9 + 4
    assert t.formula.startswith("H: ") and "; W: " in t.formula


def test_module_called_twice_counts_params_once():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten())
            self.fc = nn.Linear(4 * 6 * 6, 4 * 6 * 6)

        def forward(self, x):
            return self.fc(self.fc(self.body(x)))

    net = Twice()
    traces = trace_module(net, (3, 8, 8))
    assert [t.name for t in traces] == ["input", "body.0", "body.1", "body.2", "fc", "fc"]
    assert [t.kind for t in traces[1:4]] == ["conv", "relu", "flatten"]
    assert traces[5].params == 0
    assert total_params(traces) == sum(p.numel() for p in net.parameters())
    assert net.training  # the trace ran in eval mode and put the mode back


def test_trace_table_rows():
    rows = trace_table(trace_spec(ModelSpec()))
    assert rows[1] == {"layer": "conv1", "kind": "conv", "input": "3×32×32", "output": "6×28×28",
                       "params": 456, "formula": "⌊(32 + 2·0 − 1·(5 − 1) − 1) / 1⌋ + 1 = 28"}
    assert rows[7]["output"] == "400"


@pytest.mark.integration   # a process of its own
def test_engine_never_imports_streamlit():
    import subprocess
    import sys
    code = "import sys, cifarlab.core.shapes; assert 'streamlit' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_shape_error_reads_naturally_in_spanish_and_portuguese():
    # the Network page's teaching moment: conv2 gets 14×14 and a 15×15 kernel
    with pytest.raises(ShapeError) as err:
        trace_spec(ModelSpec(kernels=(5, 15)))
    en, es, pt = (err.value.text(lang) for lang in ("en", "es", "pt"))
    assert en == str(err.value)
    assert es.startswith("conv2: la entrada mide 14×14 píxeles, pero el kernel es de 15×15")
    assert "la salida mediría 0×0" in es and "kernel de 14×14 como máximo" in es
    assert pt.startswith("conv2: a entrada tem 14×14 pixels, mas o kernel é de 15×15")
    assert "a saída teria 0×0" in pt and "kernel de no máximo 14×14" in pt
    with pytest.raises(ShapeError) as err:  # a pooling window too large, named as such
        trace_spec(ModelSpec(pool=4))
    assert err.value.text("es").startswith("pool2: la entrada mide 3×3 píxeles, pero la ventana")
    assert err.value.text("pt").startswith("pool2: a entrada tem 3×3 pixels, mas a janela")


def test_every_shape_error_has_its_words_in_every_language():
    from cifarlab import i18n

    cases = [lambda: conv2d_output_size(3, 5), lambda: pool2d_output_size(3, 5),
             lambda: pool2d_output_size(8, 3, padding=2),
             lambda: conv2d_output_size(8, 3, stride=0),
             lambda: conv2d_output_size(8, "3"),
             lambda: trace([{"type": "linear", "out_features": 3}]),
             lambda: trace([{"type": "flatten"},
                            {"type": "conv", "out_channels": 1, "kernel_size": 1}]),
             lambda: trace([{"type": "dropout"}]),
             lambda: trace([{"type": "relu", "inplace": True}]),
             lambda: trace([], (0, 1)), lambda: trace("net"),
             lambda: trace([{"type": "linear", "out_features": 0}], (4,))]
    for case in cases:
        with pytest.raises(ShapeError) as err:
            case()
        texts = {lang: err.value.text(lang) for lang in i18n.LANGUAGES}
        assert err.value.code.startswith("shapes."), err.value.code
        assert len(set(texts.values())) == 3, texts
        assert not re.search(r"\{[a-z_]+(:[^}]*)?\}", "".join(texts.values())), texts
