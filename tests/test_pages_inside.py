"""The Inside the network page through the real entry point (app.py), in en, es and pt: the
tutorial's Net with random weights when the student has no run, then a finished run seeded into
a temporary run store (a real short training and its checkpoint): every activation's shape, one
neuron's arithmetic equal to F.conv2d, the filters before and after, Captum's views for the
predicted and the true class, a misclassified image and an uploaded picture. The page draws
only its open tab (the activations first): a test opens the tab it reads."""
from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from data_support import pages_queue
from page_text import open_tab
from run_support import CONFIG  # the session's finished run (conftest's ``finished_run``)
from cifarlab.core.checkpoint import load as load_checkpoint
from cifarlab.core.config import ModelSpec, TrainConfig
from cifarlab.lab import inside as I
from synthetic_run import running_row

APP = str(Path(__file__).resolve().parents[1] / "app.py")
SID = "inside-owner-0001"
EMPTY = "inside-nobody-0002"
LANGS = list(i18n.LANGUAGES)
# a run of another shape, trained here (the session's finished run is the tutorial's Net)
VARIANT = TrainConfig(epochs=1, batch_size=32, lr=0.02, pipeline="fast", device="cpu",
                      train_subset=320, seed=6, log_every=10**6,
                      model=ModelSpec(channels=(4, 8), kernels=(3, 3), paddings=(1, 1),
                                      hidden=(32, 16)))


@pytest.fixture(scope="module")
def lab(tmp_path_factory, cifar_archive, cifar_cache_dir, finished_run):
    """A fresh CIFARLAB_HOME whose store holds two finished runs of SID: the session's real
    short ``train()`` (tests/run_support.py) and one of another shape."""
    from cifarlab.core.data import load
    from cifarlab.core.train import train

    home = tmp_path_factory.mktemp("inside-home")
    mp = pytest.MonkeyPatch()
    queue = pages_queue(mp, home, cifar_archive, cifar_cache_dir)
    store = queue.store
    data = load(str(cifar_archive), cache_dir=cifar_cache_dir)
    run_id = finished_run.write(store, SID)
    model = load_checkpoint(store.checkpoint_path(run_id), map_location="cpu").model().eval()
    # a second run of another shape: the page follows its ModelSpec, not the tutorial's Net
    variant = running_row(store, SID, VARIANT.to_dict())
    done = train(VARIANT, data, checkpoint_path=store.checkpoint_path(variant))
    store.set_status(variant, "done", only_from=["running"], result=done.summary(),
                     env=done.env)
    yield {"data": data, "model": model, "run_id": run_id, "variant": variant}
    queue.shutdown()
    mp.undo()


def page(sid: str, lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["lang"] = lang
    at.query_params["sid"] = sid
    at.switch_page("pages/inside.py")
    at.run()
    ok(at)
    return at


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def texts(at: AppTest) -> str:
    parts = []
    for kind in ("markdown", "caption", "info", "success", "error"):
        parts += [str(el.value) for el in getattr(at, kind)]
    return "\n".join(parts)


def arr(value) -> np.ndarray:
    if isinstance(value, dict) and "bdata" in value:
        a = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return a.reshape([int(n) for n in str(shape).split(",")]) if shape else a
    return np.asarray(value)


def shown_numbers(at: AppTest, lang: str) -> list[float]:
    """The bold numbers of the neuron's sum line, read back in the language's notation."""
    line = next(str(m.value) for m in at.markdown
                if str(m.value).count("**") == 8 and "ReLU" in str(m.value))
    group, decimal = (",", ".") if lang == "en" else (".", ",")
    return [float(n.replace(group, "").replace(decimal, "."))
            for n in re.findall(r"\*\*(−?-?[\d.,]+)\*\*", line.replace("−", "-"))]


@pytest.mark.parametrize("lang", LANGS)
def test_without_a_run_the_random_net_is_shown(lab, lang):
    at = page(EMPTY, lang)
    t = i18n.translator(lang)
    assert at.radio(key="inside_source").value == "random"
    # the activations tab alone is drawn: no neuron, no filters, no attributions yet
    keys = {w.key for kind in ("radio", "selectbox", "number_input") for w in getattr(at, kind)}
    assert not keys & {"inside_layer", "inside_channel", "inside_row"}
    assert t("inside.filters_random") not in texts(at)
    body = texts(at)
    for stage in ("conv1", "pool1", "conv2", "pool2", "flatten", "relu3", "relu4", "fc3",
                  "softmax"):
        assert t(f"inside.stage_{stage}", act="ReLU") in body, stage
    for shape in ("6×28×28", "6×14×14", "16×10×10", "16×5×5", "`400`", "`120`", "`84`", "`10`"):
        assert shape in body, shape
    code = [c.value for c in at.code]   # the tutorial's own flatten line, as on Network
    assert "x = x.view(-1, 16 * 5 * 5)" in code and not [c for c in code if "torch.flatten" in c]
    assert len(at.get("plotly_chart")) >= 9
    if lang != "en":
        assert i18n.t("inside.act_intro", "en") not in body
    open_tab(at, t("inside.neuron_title"))
    assert any(t("inside.torch_agrees", value="X", shown="X").split("X")[0] in s.value
               for s in at.success)
    open_tab(at, t("inside.filters_title"))
    assert t("inside.filters_random") in texts(at)
    open_tab(at, t("inside.why_title"))
    ok(at)
    assert [tb for tb in at.table if t("inside.col_class") in tb.value.columns]


def test_a_finished_run_its_neuron_filters_and_reasons(lab):
    data, model = lab["data"], lab["model"]
    at = page(SID, "es")
    assert at.radio(key="inside_source").value == "run"
    at.selectbox(key="inside_run").set_value(lab["run_id"]).run()
    # an image by class: the 3rd cat
    at.selectbox(key="inside_class").set_value(3).run()
    at.number_input(key="inside_nth").set_value(3).run()
    ok(at)
    index = int(np.flatnonzero(data.test_y == 3)[2])
    assert f"#{index}" in texts(at)
    x = I.to_input(data.test_x[index])
    # one neuron of conv2, typed in (the keyboard's way to "click" the map)
    open_tab(at, i18n.t("inside.neuron_title", "es"))
    at.radio(key="inside_layer").set_value("conv2").run()
    at.selectbox(key="inside_channel").set_value(7).run()
    at.number_input(key="inside_row").set_value(3).run()
    at.number_input(key="inside_col").set_value(8).run()
    ok(at)
    with torch.no_grad():
        pool1 = F.max_pool2d(F.relu(F.conv2d(x, model.conv1.weight, model.conv1.bias)), 2)
        want = float(F.conv2d(pool1, model.conv2.weight, model.conv2.bias)[0, 7, 3, 8])
    total, bias, value, relu = shown_numbers(at, "es")
    assert value == pytest.approx(want, abs=1e-4)
    assert total + bias == pytest.approx(value, abs=2e-4) and relu == max(0.0, value)
    assert bias == pytest.approx(float(model.conv2.bias[7].detach()), abs=1e-4)
    assert at.success
    at.radio(key="inside_layer").set_value("conv1").run()   # 6 maps: map 8 no longer exists
    ok(at)
    assert at.selectbox(key="inside_channel").value == 0
    # filters: before (from the run's seed) and after, 6 each
    open_tab(at, i18n.t("inside.filters_title", "es"))
    body = texts(at)
    assert i18n.t("inside.filters_seed", "es", seed=CONFIG.seed) in body
    # a misclassified image, explained for the predicted and the true class
    open_tab(at, i18n.t("inside.why_title", "es"))
    at.radio(key="inside_image_kind").set_value("wrong").run()
    ok(at)
    wrong = at.selectbox(key="inside_wrong").value
    assert int(data.test_y[wrong]) != int(I.stage(I.activations(model, I.to_input(
        data.test_x[wrong])), "softmax").values.argmax())
    t = i18n.translator("es")
    true_name = t(f"classes.{data.classes[int(data.test_y[wrong])]}")
    assert t("inside.summary_true", name=true_name) in texts(at)
    (why,) = [tb.value for tb in at.table if t("inside.col_class") in tb.value.columns]
    assert true_name in set(why[t("inside.col_class")])   # compared with the truth


def test_an_uploaded_picture_is_shrunk_and_said_so(lab):
    at = page(SID, "pt")
    at.radio(key="inside_image_kind").set_value("upload").run()
    ok(at)
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(2).integers(0, 255, (64, 96, 3), np.uint8)).save(
        buf, "PNG")
    at.file_uploader(key="inside_upload").set_value(("foto.png", buf.getvalue(), "image/png"))
    at.run()
    ok(at)
    body = texts(at)
    assert i18n.t("results.note_resized", "pt", width=96, height=64, size=32) in body
    assert i18n.t("results.note_cropped", "pt") in body
    assert i18n.t("inside.your_picture", "pt") in body
    at.file_uploader(key="inside_upload").set_value(("notas.png", b"not a picture", "image/png"))
    at.run()
    assert not at.exception
    assert any(i18n.t("errors.image.not_image", "pt") in e.value for e in at.error)


def test_a_run_of_another_shape_is_shown_with_its_own_shapes(lab):
    at = page(SID, "en")
    at.selectbox(key="inside_run").set_value(lab["variant"]).run()
    ok(at)
    body = texts(at)
    # 3×32×32 → conv1 (k 3, p 1) 4×32×32 → pool 4×16×16 → conv2 8×16×16 → pool 8×8×8 → 512
    for shape in ("4×32×32", "4×16×16", "8×16×16", "8×8×8", "`512`", "`32`", "`16`"):
        assert shape in body, shape
    assert "x = x.view(-1, 8 * 8 * 8)" in [c.value for c in at.code]   # its own sizes
    open_tab(at, i18n.t("inside.neuron_title", "en"))
    at.radio(key="inside_layer").set_value("conv2").run()
    at.number_input(key="inside_row").set_value(0).run()
    at.number_input(key="inside_col").set_value(15).run()
    ok(at)
    assert at.success    # PyTorch agrees, at a corner where the padding's zeros count
    assert i18n.t("inside.row", "en", hi=15) in [el.label for el in at.number_input]
