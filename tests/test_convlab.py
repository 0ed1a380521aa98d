"""convlab: convolution and max pooling by hand, compared with PyTorch's own F.conv2d and
F.max_pool2d on many random inputs; the calculator; the edited layer stack and the real error
PyTorch gives for the tutorial's hard-coded 16 * 5 * 5."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from cifarlab.lab import network as convlab
from cifarlab.lab.inside import random_model
from cifarlab.lab.network import figures as NF
from cifarlab.core.config import ModelSpec
from cifarlab.errors import ShapeError
from cifarlab.core.model import Net


def torch_conv(x, k, b, stride=1, padding=0):
    return F.conv2d(torch.tensor(x)[None], torch.tensor(k)[None], torch.tensor([b]),
                    stride=stride, padding=padding)[0, 0].numpy()


# ------------------------------------------------------------------------------- kernels, inputs

def test_named_kernels():
    ks = convlab.named_kernels()
    assert set(ks) >= {"edge", "vertical", "horizontal", "blur", "sharpen", "identity"}
    for name, k in ks.items():
        assert k.shape == (3, 3) and k.dtype == np.float32, name
    assert ks["blur"].sum() == pytest.approx(1.0)
    assert ks["sharpen"].sum() == pytest.approx(1.0)
    assert ks["edge"].sum() == pytest.approx(0.0)      # flat regions give 0
    img = np.random.default_rng(0).random((1, 10, 10), dtype=np.float32)
    np.testing.assert_allclose(convlab.apply_kernel(img, ks["identity"]), img[0, 1:-1, 1:-1],
                               atol=1e-6)


def test_to_input_matches_the_tutorial_transform():
    from cifarlab.core.data.pipelines import normalize

    hwc = np.random.default_rng(1).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    rgb = convlab.to_input(hwc, "rgb")
    want = normalize(torch.from_numpy(hwc.transpose(2, 0, 1).copy())).numpy()
    np.testing.assert_allclose(rgb, want, atol=1e-6)
    gray = convlab.to_input(hwc, "gray")
    assert gray.shape == (1, 32, 32) and 0 <= gray.min() and gray.max() <= 1
    np.testing.assert_allclose(gray[0], hwc.mean(axis=2) / 255, atol=1e-5)


def test_a_net_kernel_is_the_seeded_tutorial_nets_conv1():
    hwc = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    state = torch.random.get_rng_state()
    ex = NF.conv_example(hwc, "net2", seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(3)
    net = Net()
    np.testing.assert_array_equal(ex.kernel, net.conv1.weight[2].detach().numpy())
    assert ex.bias == net.conv1.bias[2].item() and ex.image.shape == (3, 32, 32)
    assert not np.array_equal(ex.kernel, NF.conv_example(hwc, "net2", seed=4).kernel)


# ---------------------------------------------------------------------------- conv vs PyTorch

@pytest.mark.parametrize("trial", range(40))
def test_apply_kernel_matches_f_conv2d(trial):
    rng = np.random.default_rng(trial)
    c = int(rng.integers(1, 4))
    k = int(rng.integers(1, 6))
    stride = int(rng.integers(1, 4))
    padding = int(rng.integers(0, 3))
    h, w = (int(v) for v in rng.integers(k, 20, 2))
    x = rng.standard_normal((c, h, w)).astype(np.float32)
    kern = rng.standard_normal((c, k, k)).astype(np.float32)
    bias = float(rng.standard_normal())
    got = convlab.apply_kernel(x, kern, bias, stride, padding)
    want = torch_conv(x, kern, bias, stride, padding)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(convlab.torch_conv(x, kern, bias, stride, padding), want, atol=1e-6)


def test_a_2d_kernel_is_used_on_every_channel():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 9, 9)).astype(np.float32)
    k = rng.standard_normal((3, 3)).astype(np.float32)
    np.testing.assert_allclose(convlab.apply_kernel(x, k),
                               torch_conv(x, np.stack([k] * 3), 0.0), atol=1e-4)
    with pytest.raises(ShapeError):                       # kernel larger than the image
        convlab.apply_kernel(x, np.ones((12, 12)))


@pytest.mark.parametrize("trial", range(30))
def test_conv_step_matches_f_conv2d_at_every_position_tried(trial):
    rng = np.random.default_rng(100 + trial)
    c, k = int(rng.integers(1, 4)), int(rng.choice([3, 5]))
    stride, padding = int(rng.integers(1, 3)), int(rng.integers(0, 3))
    x = rng.standard_normal((c, 12, 12)).astype(np.float32)
    kern = rng.standard_normal((c, k, k)).astype(np.float32)
    bias = float(rng.standard_normal())
    full = torch_conv(x, kern, bias, stride, padding)
    row, col = (int(rng.integers(0, n)) for n in full.shape)
    s = convlab.conv_step(x, kern, bias, row, col, stride, padding)
    assert s["out_shape"] == full.shape
    assert s["window"].shape == s["products"].shape == (c, k, k)
    np.testing.assert_allclose(s["products"], s["window"] * kern, rtol=1e-5, atol=1e-6)
    assert s["sum"] == pytest.approx(float(s["products"].astype(np.float64).sum()), abs=1e-4)
    assert s["output"] == pytest.approx(s["sum"] + bias)
    assert s["output"] == pytest.approx(float(full[row, col]), abs=1e-4)
    assert s["torch_output"] == pytest.approx(float(full[row, col]), abs=1e-6)
    assert s["match"]
    # the window really is the (padded) pixels under the kernel
    xp = np.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    np.testing.assert_array_equal(
        s["window"], xp[:, row * stride:row * stride + k, col * stride:col * stride + k])


def test_conv_step_on_a_real_net_filter():
    conv1 = random_model(0).conv1
    w, b = conv1.weight.detach().numpy(), conv1.bias.detach().numpy()
    img = convlab.to_input(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8),
                           "rgb")
    s = convlab.conv_step(img, w[2], float(b[2]), 27, 0)
    assert s["out_shape"] == (28, 28) and s["products"].size == 75 and s["match"]


# ------------------------------------------------------------------------- pooling vs PyTorch

@pytest.mark.parametrize("trial", range(40))
def test_maxpool_windows_match_f_max_pool2d(trial):
    rng = np.random.default_rng(200 + trial)
    kernel = int(rng.choice([2, 3]))
    stride = int(rng.integers(1, 4))
    h, w = (int(v) for v in rng.integers(kernel, 16, 2))
    x = rng.standard_normal((h, w)).astype(np.float32)
    res = convlab.maxpool_windows(x, kernel, stride)
    out, idx = F.max_pool2d(torch.tensor(x)[None, None], kernel, stride, return_indices=True)
    out, idx = out[0, 0].numpy(), idx[0, 0].numpy()
    np.testing.assert_array_equal(res["output"], out)
    np.testing.assert_array_equal(res["torch_output"], out)
    assert res["match"] and res["out_shape"] == out.shape and res["in_shape"] == (h, w)
    assert len(res["windows"]) == out.size
    for win in res["windows"]:
        r, c = win["row"], win["col"]
        assert (win["top"], win["left"]) == (r * stride, c * stride)
        assert win["values"].shape == (kernel, kernel)
        ar, ac = win["argmax"]
        assert x[ar, ac] == win["max"] == out[r, c] == win["values"].max()
        assert ar * w + ac == idx[r, c]          # the same position PyTorch picked (no ties)


def test_maxpool_default_stride_ties_and_errors():
    x = np.array([[1, 1, 0, 2], [0, 0, 2, 2], [5, 0, 0, 0], [0, 0, 0, 7]], dtype=np.float32)
    res = convlab.maxpool_windows(x, 2)
    assert res["stride"] == 2 and res["out_shape"] == (2, 2)
    np.testing.assert_array_equal(res["output"], [[1, 2], [5, 7]])
    assert res["windows"][0]["argmax"] == (0, 0)           # first of the tied 1s
    assert [w["argmax"] for w in res["windows"]][1:] == [(0, 3), (2, 0), (3, 3)]
    with pytest.raises(ShapeError):
        convlab.maxpool_windows(np.zeros((2, 2)), 3)


# ----------------------------------------------------------------------------------- calculator

def test_calculator():
    r = convlab.calculator("conv", 32, 5)
    assert (r["output"], r["exact"], r["shape_error"]) == (28, True, None)
    assert r["formula"] == "⌊(32 + 2·0 − 1·(5 − 1) − 1) / 1⌋ + 1 = 28"
    assert convlab.calculator("conv", 32, 3)["output"] == 30
    r = convlab.calculator("conv", 32, 4, padding=0, stride=3)
    assert r["output"] == 10 and not r["exact"] and r["dims"][0]["remainder"] == 1
    assert r["shape_error"] is None
    assert r["output"] == torch.nn.Conv2d(1, 1, 4, stride=3)(torch.zeros(1, 1, 32, 32)).shape[-1]
    r = convlab.calculator("conv", 32, 40)       # the formula shows why; the error says so
    assert r["dims"][0]["output"] == -7 and r["output"] is None
    assert "kernel of at most 32" in str(r["shape_error"]) and r["shown"] == "—"
    r = convlab.calculator("pool", 28, 2, stride=2)
    assert r["output"] == 14 and r["exact"]
    r = convlab.calculator("pool", 32, 2, padding=3, stride=2)
    assert "half the kernel" in str(r["shape_error"])


# ------------------------------------------------------------------------------ layer stacks

def test_analyze_stack_tutorial():
    rep = convlab.analyze_stack(ModelSpec())
    assert rep.ok and rep.flat == 400 and rep.flat_shape == (16, 5, 5)
    assert rep.total_params == 62006
    assert rep.view_error is None and rep.flatten_error is None
    assert [r["output"] for r in rep.rows][:7] == ["3×32×32", "6×28×28", "6×28×28", "6×14×14",
                                                   "16×10×10", "16×10×10", "16×5×5"]


def test_analyze_stack_edited_kernel_gives_576_and_pytorchs_real_messages():
    rep = convlab.analyze_stack(ModelSpec(kernels=(5, 3)))
    assert rep.ok and rep.flat == 576 and rep.flat_shape == (16, 6, 6)
    assert rep.view_error == "RuntimeError: shape '[-1, 400]' is invalid for input of size 2304"
    assert rep.flatten_error == ("RuntimeError: mat1 and mat2 shapes cannot be multiplied "
                                 "(4x576 and 400x120)")
    # The same as the lesson's padding example
    assert convlab.analyze_stack(ModelSpec(paddings=(2, 0))).flatten_error == rep.flatten_error


def test_the_message_is_what_pytorch_really_raises():
    spec = ModelSpec(kernels=(3, 3), hidden=(64, 32))
    msg = convlab.analyze_stack(spec).flatten_error
    net = Net(spec)
    x = torch.zeros(4, 3, 32, 32)
    x = net.pool(F.relu(net.conv2(net.pool(F.relu(net.conv1(x))))))
    with pytest.raises(RuntimeError) as err:
        torch.nn.Linear(400, 64)(torch.flatten(x, 1))
    assert msg == "RuntimeError: " + str(err.value).splitlines()[0]
    assert "(4x576 and 400x64)" in msg


def test_view_with_a_multiple_of_400_passes_the_view_and_fails_at_the_loss():
    spec = ModelSpec(channels=(6, 64))             # 64·5·5 = 1600 = 4 × 400
    assert convlab.analyze_stack(spec).flat == 1600
    msg = convlab.analyze_stack(spec).view_error
    assert "batch_size" in msg and "16" in msg and "4" in msg
    assert msg.startswith("ValueError: ")
    assert "4x1600" in convlab.analyze_stack(spec).flatten_error


def test_a_stack_that_does_not_fit_names_the_layer_without_raising():
    rep = convlab.analyze_stack(ModelSpec(kernels=(5, 15)))
    assert not rep.ok and rep.shape_error.layer == "conv2"
    assert str(rep.shape_error).startswith("conv2:")
    assert rep.flat is None and rep.rows == []
    assert "Kernel size can't be greater than actual input size" in rep.view_error
    rep = convlab.analyze_stack(ModelSpec(kernels=(29, 5), pool=8))   # 4×4 into an 8×8 pool
    assert not rep.ok and rep.shape_error.layer == "pool1", rep.shape_error


def test_the_stack_error_and_the_calculator_speak_the_students_language():
    report = convlab.analyze_stack(ModelSpec(kernels=(5, 15)))
    assert not report.ok and report.shape_error.layer == "conv2"
    assert report.shape_error.text("en") == str(report.shape_error)
    assert report.shape_error.text("es").startswith("conv2: la entrada mide 14×14 píxeles")
    assert report.shape_error.text("pt").startswith("conv2: a entrada tem 14×14 pixels")
    assert convlab.analyze_stack(ModelSpec()).shape_error is None
    res = convlab.calculator("pool", 8, 3, padding=2)
    assert res["shape_error"] and "preenchimento é 2" in res["shape_error"].text("pt")
    assert convlab.calculator("conv", 32, 5)["shape_error"] is None


# ------------------------------------------------------------- the calculator, rectangles typed

@settings(max_examples=60, deadline=None)
@given(h=st.integers(1, 40), w=st.integers(1, 40), kh=st.integers(1, 9), kw=st.integers(1, 9),
       sh=st.integers(1, 4), sw=st.integers(1, 4), p=st.integers(0, 3), pool=st.booleans())
def test_typed_rectangles_give_pytorchs_shape_or_its_refusal(h, w, kh, kw, sh, sw, p, pool):
    layer = (torch.nn.MaxPool2d if pool else torch.nn.Conv2d)
    try:
        module = layer((kh, kw), (sh, sw), p) if pool else layer(1, 1, (kh, kw), (sh, sw), p)
        want = tuple(module(torch.zeros(1, 1, h, w)).shape[-2:])
    except RuntimeError:
        want = None
    r = convlab.calculator("pool" if pool else "conv", f"({h}, {w})", f"[{kh},{kw}]", str(p),
                           f"( {sh} , {sw} )", "1")
    assert r["output"] == want and (r["shape_error"] is None) == (want is not None)
    if want is not None:       # each dimension by its own formula, with the floor
        assert [d["output"] for d in r["dims"]] == list(want) and r["shown"] == "×".join(
            map(str, want))
        assert [d["formula"].endswith(f"= {n}") for d, n in zip(r["dims"], want)] == [True] * 2
    else:
        assert r["shape_error"].text("es") != r["shape_error"].text("en")


@pytest.mark.parametrize("typed, code", [
    ("2.5", "not_a_pair"), ("2,5", "not_a_pair"), ("(5, 2, 1)", "not_a_pair"), ("", "not_a_pair"),
    ("five", "not_a_pair"), ("0", "below_min"), ("-3", "below_min"), ("(5, 0)", "below_min"),
    ("−1", "below_min")])
def test_typed_kernels_pytorch_refuses_are_refused_with_a_reason(typed, code):
    r = convlab.calculator("conv", "32", typed)
    assert r["shape_error"] is not None and r["dims"] == [] and r["output"] is None
    err = r["shape_error"]
    assert err.code == f"shapes.{code}" and "kernel_size" in err.text("pt")


@pytest.mark.parametrize("typed, code", [("-5", "below_min"), ("0", "below_min"),
                                         ("abc", "not_a_pair"), ("(32, x)", "not_a_pair")])
def test_a_bad_input_size_is_named_in_words_not_as_a_pytorch_argument(typed, code):
    err = convlab.calculator("conv", typed, "5")["shape_error"]
    assert err.code == f"shapes.input_{code}"
    words = {"en": "input size", "es": "tamaño de entrada", "pt": "tamanho da entrada"}
    for lang, name in words.items():
        assert name in err.text(lang) and "input_size" not in err.text(lang), err.text(lang)


def test_typed_and_given_arguments_agree_and_keep_their_kind():
    assert convlab.calculator("conv", "32", "5")["output"] == 28
    assert convlab.calculator("conv", " 32 ", "(5, 2)")["output"] == (28, 31)
    assert convlab.calculator("conv", (32, 32), (5, 2))["output"] == (28, 31)
    assert convlab.calculator("conv", "(32, 20)", "(5, 2)")["shown"] == "28×19"
