"""cifarlab.lab.inside: every activation, one neuron's arithmetic, conv1's filters and Captum's
views, checked against torch.nn.functional on random weights, on a non-tutorial ModelSpec and on
a really trained tiny run (one module-scoped training of 320 images)."""
from __future__ import annotations

import ast
import io
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from cifarlab.core.config import ModelSpec, TrainConfig
from cifarlab.core.data.pipelines import normalize
from cifarlab.core.shapes import trace_spec
from cifarlab.lab import inside as I
from cifarlab.lab.results import prepare_image

CONFIG = TrainConfig(epochs=1, batch_size=32, lr=0.01, pipeline="fast", device="cpu",
                     train_subset=320, seed=5, log_every=10**6)
VARIANT = ModelSpec(channels=(4, 8), kernels=(3, 3), paddings=(1, 1), strides=(2, 1),
                    hidden=(32, 16))


@pytest.fixture(scope="module")
def trained(cifar_data):
    """10 real SGD steps on 320 images: the weights of a finished run."""
    from cifarlab.core.train import train

    return train(CONFIG, cifar_data, evaluate_after=False).model


@pytest.fixture(scope="module")
def nets(trained):
    return {"random": I.random_model(0), "variant": I.random_model(1, VARIANT),
            "trained": trained}


@pytest.fixture(scope="module")
def image(cifar_data):
    return cifar_data.test_x[7]


def by_torch(model, x):
    """The forward pass in plain torch.nn.functional, from the model's weights."""
    out = {"input": x}
    c1 = model.conv1
    out["conv1"] = F.conv2d(x, c1.weight, c1.bias, c1.stride, c1.padding)
    out["relu1"] = F.relu(out["conv1"])
    k = model.pool.kernel_size
    out["pool1"] = F.max_pool2d(out["relu1"], k, k)
    c2 = model.conv2
    out["conv2"] = F.conv2d(out["pool1"], c2.weight, c2.bias, c2.stride, c2.padding)
    out["relu2"] = F.relu(out["conv2"])
    out["pool2"] = F.max_pool2d(out["relu2"], k, k)
    out["flatten"] = out["pool2"].reshape(1, -1)
    out["fc1"] = F.linear(out["flatten"], model.fc1.weight, model.fc1.bias)
    out["relu3"] = F.relu(out["fc1"])
    out["fc2"] = F.linear(out["relu3"], model.fc2.weight, model.fc2.bias)
    out["relu4"] = F.relu(out["fc2"])
    out["fc3"] = F.linear(out["relu4"], model.fc3.weight, model.fc3.bias)
    out["softmax"] = F.softmax(out["fc3"], dim=1)
    return {k: v.detach()[0].numpy() for k, v in out.items()}


# ----------------------------------------------------------------------------- activations

@pytest.mark.parametrize("which", ["random", "variant", "trained"])
def test_every_activation_and_shape_match_pytorch(nets, image, which):
    model = nets[which]
    x = I.to_input(image)
    stages = I.activations(model, x)
    traces = trace_spec(model.spec, (3, 32, 32), 10)
    assert [s.name for s in stages] == [tr.name for tr in traces] + ["softmax"]
    ref = by_torch(model, x)
    for s, tr in zip(stages, traces + [traces[-1]]):
        assert s.shape == tr.out_shape == s.values.shape, s.name
        np.testing.assert_allclose(s.values, ref[s.name], rtol=1e-5, atol=1e-5, err_msg=s.name)
    with torch.no_grad():
        np.testing.assert_allclose(I.stage(stages, "fc3").values, model(x)[0].numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert I.stage(stages, "softmax").values.sum() == pytest.approx(1.0, abs=1e-5)
    if which != "variant":   # the tutorial's shapes, as the issue lists them
        shapes = {s.name: s.shape for s in stages}
        assert shapes["conv1"] == (6, 28, 28) and shapes["pool1"] == (6, 14, 14)
        assert shapes["conv2"] == (16, 10, 10) and shapes["pool2"] == (16, 5, 5)
        assert shapes["flatten"] == (400,) and shapes["fc1"] == (120,)
        assert shapes["fc2"] == (84,) and shapes["fc3"] == (10,)


def test_to_input_is_the_training_normalisation(image):
    x = I.to_input(image)
    assert x.shape == (1, 3, 32, 32) and x.dtype == torch.float32
    assert torch.equal(x, normalize(torch.from_numpy(np.array(image))[None]))
    assert torch.equal(I.to_input(np.ascontiguousarray(image.transpose(1, 2, 0))), x)  # HWC


def test_an_uploaded_picture_goes_through(nets):
    rng = np.random.default_rng(3)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (90, 120, 3), dtype=np.uint8)).save(buf, "PNG")
    prepared = prepare_image(buf.getvalue())          # the Results page's checks
    assert prepared.pixels.shape == (32, 32, 3)
    assert ("resized", {"width": 120, "height": 90, "size": 32}) in prepared.notes
    stages = I.activations(nets["trained"], I.to_input(prepared.pixels))
    assert I.stage(stages, "softmax").shape == (10,)


# --------------------------------------------------------------------------------- neuron

POSITIONS = [(0, 0, 0), (5, 27, 27), (2, 13, 4), (3, 0, 27)]


@pytest.mark.parametrize("which", ["random", "variant", "trained"])
@pytest.mark.parametrize("layer", ["conv1", "conv2"])
def test_one_neuron_by_hand_equals_conv2d(nets, image, which, layer):
    model = nets[which]
    x = I.to_input(image)
    stages = I.activations(model, x)
    ref = by_torch(model, x)
    fmap = ref[layer]
    source = ref["input" if layer == "conv1" else "pool1"]
    conv = getattr(model, layer)
    (k, _), (s, _), (p, _) = conv.kernel_size, conv.stride, conv.padding
    rng = np.random.default_rng(0)
    picks = [(c % fmap.shape[0], min(r, fmap.shape[1] - 1), min(q, fmap.shape[2] - 1))
             for c, r, q in POSITIONS]
    picks += [tuple(int(rng.integers(0, n)) for n in fmap.shape) for _ in range(4)]
    for ch, r, c in picks:
        n = I.neuron(model, x, layer, ch, r, c, stages)
        assert n["output"] == pytest.approx(float(fmap[ch, r, c]), abs=2e-5)
        assert n["torch_output"] == pytest.approx(float(fmap[ch, r, c]), abs=1e-6)
        assert n["match"]
        assert n["sum"] == pytest.approx(float(n["products"].sum()))
        assert n["output"] == pytest.approx(n["sum"] + n["bias"])
        assert n["activated"] == max(0.0, n["output"])
        assert n["bias"] == pytest.approx(float(conv.bias[ch].detach()))
        np.testing.assert_allclose(n["kernel"], conv.weight[ch].detach().numpy(), rtol=1e-7)
        np.testing.assert_allclose(n["products"], n["window"] * n["kernel"])
        assert n["window"].shape == (source.shape[0], k, k)
        padded = np.pad(source, ((0, 0), (p, p), (p, p)))
        np.testing.assert_allclose(n["window"], padded[:, r * s:r * s + k, c * s:c * s + k])
        assert (n["top"], n["left"]) == (r * s - p, c * s - p)
        if layer == "conv1" and p == 0:
            np.testing.assert_allclose(n["window"], source[:, r:r + k, c:c + k])


# -------------------------------------------------------------------------------- filters

def test_initial_weights_are_where_the_run_started(trained):
    start = I.initial_model(CONFIG)
    other = I.initial_model(CONFIG.replace(seed=CONFIG.seed + 1))
    w = trained.conv1.weight.detach()
    moved = float((w - start.conv1.weight.detach()).norm())
    elsewhere = float((w - other.conv1.weight.detach()).norm())
    assert 0 < moved < 0.25 * elsewhere     # 10 small steps from this start, far from another
    # the same weights every time, and nobody else's randomness disturbed
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    again = I.initial_model(CONFIG)
    assert torch.equal(torch.rand(3), expected)
    for a, b in zip(start.parameters(), again.parameters()):
        assert torch.equal(a, b)
    # as core.train builds it: seed, then Net(config.model)
    torch.manual_seed(CONFIG.seed)
    from cifarlab.core.model import Net
    assert torch.equal(Net(CONFIG.model).conv1.weight, start.conv1.weight)


def test_filter_patches_are_colour_pictures_of_the_weights(trained):
    w = trained.conv1.weight.detach()
    patches = I.filter_patches(w)
    assert patches.shape == (6, 5, 5, 3) and patches.dtype == np.uint8
    i = np.unravel_index(int(w.abs().argmax()), w.shape)
    assert patches[i[0], i[2], i[3], i[1]] in (0, 255)      # the largest weight: full colour
    zero = I.filter_patches(torch.zeros(2, 3, 5, 5))
    assert (zero == 128).all()                              # zero is mid grey
    rows = I.filter_table(I.initial_model(CONFIG).conv1.weight, w)
    assert len(rows) == 6 and all(r["moved"] > 0 for r in rows)
    assert rows[0]["red"] == pytest.approx(float(w[0, 0].mean()))


# ------------------------------------------------------------------------------- captum

def score(model, x, target):
    with torch.no_grad():
        return float(model(x)[0, target])


def test_saliency_is_the_gradient(trained, image):
    x = I.to_input(image).requires_grad_()
    target = 3
    trained.zero_grad()
    trained(x)[0, target].backward()
    expected = x.grad[0].abs().amax(dim=0).numpy()
    view = I.explain(trained, I.to_input(image), target, "saliency")
    np.testing.assert_allclose(view.heat, expected, rtol=1e-5, atol=1e-7)
    assert view.heat.shape == (32, 32) and not view.signed


def test_gradcam_is_conv2_weighted_by_its_mean_gradient(trained, image):
    x = I.to_input(image)
    target = int(np.argmax(by_torch(trained, x)["fc3"]))
    held = {}
    handle = trained.conv2.register_forward_hook(lambda m, i, o: held.update(a=o))
    try:
        out = trained(x)
        a = held["a"]
        grads = torch.autograd.grad(out[0, target], a)[0]
    finally:
        handle.remove()
    weights = grads.mean(dim=(2, 3), keepdim=True)
    cam = F.relu((weights * a).sum(dim=1))[0].detach().numpy()
    view = I.explain(trained, x, target, "gradcam")
    np.testing.assert_allclose(view.raw[0], cam, rtol=1e-4, atol=1e-6)
    assert view.heat.shape == (32, 32)


def test_occlusion_in_one_batch_equals_one_window_at_a_time(trained, image):
    x = I.to_input(image)
    target = 5
    batched = I.explain(trained, x, target, "occlusion")
    single = I.explain(trained, x, target, "occlusion", per_eval=1)
    np.testing.assert_allclose(batched.raw, single.raw, rtol=1e-4, atol=1e-5)
    # pixel (0, 0) lies only under the first 4×4 square: its value is that square's score drop
    covered = x.clone()
    covered[:, :, :4, :4] = 0
    drop = score(trained, x, target) - score(trained, covered, target)
    assert batched.raw[:, 0, 0] == pytest.approx([drop] * 3, abs=1e-4)
    assert I.occlusion_windows((32, 32)) == 15 * 15


def test_integrated_gradients_add_up_to_the_score_difference(trained, image):
    x = I.to_input(image)
    target = 2
    view = I.explain(trained, x, target, "integrated_gradients")
    total = float(view.raw.sum())
    difference = score(trained, x, target) - score(trained, torch.zeros_like(x), target)
    assert total == pytest.approx(difference, abs=0.05 * abs(difference) + 0.02)
    assert view.signed and view.heat.shape == (32, 32)


def test_every_view_and_its_refusals(trained, image):
    x = I.to_input(image)
    views = {m: I.explain(trained, x, 1, m) for m in I.METHODS}
    assert list(views) == list(I.METHODS)
    for v in views.values():
        assert np.isfinite(v.heat).all() and v.seconds >= 0 and v.target == 1
    b = I.blocks(views["saliency"].heat)
    assert b.shape == (8, 8)
    assert I.strongest(views["saliency"].heat, 4, 3)[0][2] == pytest.approx(float(b.max()))


def test_captum_stays_out_of_core_and_is_imported_lazily():
    """No module of core imports captum; in the lab engine only function bodies do (it takes
    seconds to import, and only the "why this class" views need it)."""
    root = Path(I.__file__).resolve().parents[2]
    for path in sorted(root.glob("cifarlab/**/*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = set(tree.body)
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "captum" for n in names):
                where = path.relative_to(root).as_posix()
                assert where.startswith("cifarlab/lab/inside/"), where
                assert node not in top_level, f"{where}:{node.lineno} imports captum eagerly"



@pytest.mark.parametrize("activation", ["sigmoid", "tanh"])
def test_a_run_with_another_activation_reads_its_own_code_and_arithmetic(activation):
    """The stages' code lines and a neuron's last step follow the run's activation knob:
    no F.relu shown for a sigmoid network, and the value pooled is sigmoid(value)."""
    from cifarlab.core.model import Net

    torch.manual_seed(0)
    model = Net(activation=activation).eval()
    x = I.to_input(np.random.default_rng(1).integers(0, 255, (32, 32, 3), np.uint8))
    stages = I.activations(model, x)
    code = {"sigmoid": "torch.sigmoid", "tanh": "torch.tanh"}[activation]
    lines = {s.name: s.line for s in stages}
    assert lines["pool1"] == f"x = self.pool({code}(self.conv1(x)))"
    assert lines["relu3"] == f"x = {code}(self.fc1(x))"
    assert not [line for line in lines.values() if "relu" in line]
    assert model.activation == activation
    n = I.neuron(model, x, "conv1", 2, 5, 7, stages)
    fn = {"sigmoid": torch.sigmoid, "tanh": torch.tanh}[activation]
    expected = fn(torch.tensor(n["output"], dtype=torch.float64))
    assert n["activated"] == pytest.approx(float(expected))
    np.testing.assert_allclose(I.stage(stages, "relu1").values[2, 5, 7], n["activated"], atol=1e-5)


def test_a_mosaic_puts_each_tile_under_its_title_with_gaps_between():
    from cifarlab.lab.charts import mosaic

    tiles = np.arange(3 * 2 * 3, dtype=float).reshape(3, 2, 3)
    grid, notes, where = mosaic(tiles, ["a", "b", "c"], per_row=2)
    band = 2   # rows above each row of tiles, for its titles
    assert grid.shape == (2 * (band + 2), 2 * (3 + 1) - 1)
    np.testing.assert_array_equal(grid[band:band + 2, 0:3], tiles[0])
    np.testing.assert_array_equal(grid[band:band + 2, 4:7], tiles[1])
    np.testing.assert_array_equal(grid[2 * band + 2:, 0:3], tiles[2])
    assert np.isnan(grid[:, 3]).all() and np.isnan(grid[:band]).all()
    assert np.isnan(grid[2 * band + 2:, 4:]).all()   # no fourth tile
    assert [n["text"] for n in notes] == ["a", "b", "c"]
    assert (notes[2]["x"], notes[2]["y"]) == (1.0, 2 * band + 2 - band / 2 - 0.5)
    assert list(where[band + 1, 6]) == [2, 1, 2] and list(where[0, 0]) == [0, 0, 0]
    pictures, _, _ = mosaic(np.zeros((2, 2, 2, 3), np.uint8), ["x", "y"], fill=255)
    assert pictures.dtype == np.uint8 and pictures.shape == (band + 2, 5, 3)
    assert (pictures[:, 2] == 255).all() and (pictures[band:, :2] == 0).all()
    # row titles: a line of their own above the tiles' titles, left-aligned
    grid, notes, _ = mosaic(tiles, ["a", "b", "c"], per_row=2, row_titles=["first", "second"])
    assert grid.shape == (2 * (2 * band + 2), 7)
    assert [n["text"] for n in notes] == ["a", "b", "c", "first", "second"]
    assert notes[3]["xanchor"] == "left" and notes[4]["y"] < notes[2]["y"] < 2 * (2 * band + 2)
