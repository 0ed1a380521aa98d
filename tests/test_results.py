"""cifarlab.lab.results: a really trained tiny model, its predictions and mistakes, per-class
accuracy per epoch, classifying real and hostile pictures, run tables and loss curves."""
from __future__ import annotations

import io
import pickle
import struct
import zlib

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from cifarlab.lab import results as R
from cifarlab.lab import runs as RR
from cifarlab.lab.data import upscale
from cifarlab.core.checkpoint import save
from cifarlab.core.config import TrainConfig
from cifarlab.core.evaluate import EvalResult
from cifarlab.errors import CheckpointError, CifarLabError
from cifarlab.serve.store import RunStore
from run_support import CONFIG  # the session's finished run (conftest's ``finished_run``)

@pytest.fixture(scope="module")
def trained(finished_run):
    """200 real SGD steps (2 epochs × 100) with an evaluation after each epoch: the session's
    finished run (tests/run_support.py); its result and every event it sent."""
    return finished_run.result, list(finished_run.train_events)


@pytest.fixture(scope="module")
def ev(trained, cifar_data):
    return R.predictions_for(trained[0].model, cifar_data)


def png_bytes(array: np.ndarray, mode: str | None = None, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array, mode).save(buf, fmt, **kw) if mode else \
        Image.fromarray(array).save(buf, fmt, **kw)
    return buf.getvalue()


# ----------------------------------------------------------------------------- predictions

def test_predictions_cover_the_test_set_and_learned_something(ev, cifar_data):
    assert ev.total == len(cifar_data.test_y) == 10000
    assert ev.probabilities.shape == (10000, 10)
    np.testing.assert_allclose(ev.probabilities.sum(axis=1), 1.0, atol=1e-4)
    assert 0.15 < ev.accuracy < 0.8         # 200 steps: above chance (10 %)
    assert np.asarray(ev.confusion).sum() == 10000


def test_every_mistake_most_confident_first():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.7, 0.3]])
    labels = np.array([0, 0, 0, 1])
    ev = EvalResult(0.25, {}, [], ("a", "b"), probs.argmax(axis=1), probs, labels)
    assert list(R.confused_examples(ev, limit=200)) == [1, 3, 2]


def test_confused_examples_really_are_true_a_predicted_b(ev, cifar_data):
    t, p = R.most_confused_pair(ev.confusion)
    assert t != p and ev.confusion[t][p] > 0
    idx = R.confused_examples(ev, t, p, limit=1000)
    assert len(idx) == ev.confusion[t][p]
    assert (cifar_data.test_y[idx] == t).all()
    assert (ev.predictions[idx] == p).all()
    # most confident first, limited
    top = R.confused_examples(ev, t, p, limit=5)
    assert list(top) == list(idx[:5])
    conf = ev.probabilities[idx, p]
    assert (np.diff(conf) <= 1e-7).all()
    # a pair nobody fell into gives nothing; the diagonal gives correct answers
    right = R.confused_examples(ev, 0, 0, limit=3)
    assert (ev.predictions[right] == 0).all() and (cifar_data.test_y[right] == 0).all()


def test_most_confused_pair_without_mistakes():
    assert R.most_confused_pair([[5, 0], [0, 7]]) == (0, 0)
    assert R.most_confused_pair([[5, 1], [3, 7]]) == (1, 0)


def test_sample_predictions(ev):
    df = R.sample_predictions(ev, n=12, seed=1)
    assert len(df) == 12 and df["index"].is_unique
    row = df.iloc[0]
    assert row["true"] == ev.classes[ev.labels[row["index"]]]
    assert row["predicted"] == ev.classes[ev.predictions[row["index"]]]
    assert row["confidence"] == pytest.approx(ev.probabilities[row["index"]].max())
    assert df["correct"].tolist() == (df["true"] == df["predicted"]).tolist()
    assert R.sample_predictions(ev, n=12, seed=1).equals(df)
    assert not R.sample_predictions(ev, n=12, seed=2)["index"].equals(df["index"])


def test_per_class_by_epoch_from_real_events(trained):
    result, events = trained
    df = R.per_class_by_epoch(events)  # train's Event objects (kind, data)
    assert list(df.columns) == ["epoch", "class", "accuracy"]
    assert sorted(df["epoch"].unique()) == [1, 2]
    assert len(df) == 20
    last = df[df["epoch"] == 2].set_index("class")["accuracy"].to_dict()
    assert last == pytest.approx(result.eval.per_class_accuracy)
    # the epoch summaries themselves (result["epochs"]) work the same
    assert R.per_class_by_epoch(result.summary()["epochs"]).equals(df)
    # a run without per-epoch evaluation: an empty frame with the same columns
    empty = R.per_class_by_epoch([{"epoch": 1, "mean_loss": 2.0}])
    assert empty.empty and list(empty.columns) == ["epoch", "class", "accuracy"]


def test_tutorial_reference_figures():
    ref = R.TUTORIAL_REFERENCE
    assert ref["accuracy"] == 0.54
    assert ref["per_class_ranges"]["bird"] == (0.21, 0.38)
    assert ref["per_class_ranges"]["ship"] == (0.61, 0.81)


# ------------------------------------------------------------------------------ checkpoints

def test_load_run_model_from_the_store(tmp_path, trained, cifar_data, ev):
    store = RunStore(tmp_path / "runs.db")
    run_id = store.create_run("session-abc", "train", CONFIG.to_dict(), "cpu")
    run = store.get(run_id)
    with pytest.raises(CheckpointError, match="no saved model") as info:
        R.load_run_model(store.checkpoint_path(run.id))
    assert info.value.code == "checkpoint.no_saved_model"
    save(store.checkpoint_path(run_id), trained[0].model, CONFIG, cifar_data.classes, {})
    model, ckpt = R.load_run_model(store.checkpoint_path(run.id))
    assert ckpt.config == CONFIG
    again = R.predictions_for(model, cifar_data)
    np.testing.assert_array_equal(again.predictions, ev.predictions)


def test_uploaded_checkpoints(tmp_path, trained, cifar_data):
    model = trained[0].model
    path = save(tmp_path / "ours.pth", model, CONFIG, cifar_data.classes, {})
    m, ckpt = R.load_uploaded_checkpoint(path.read_bytes(), "ours.pth")
    assert not ckpt.plain and ckpt.classes == tuple(cifar_data.classes)
    # the tutorial's own file: a plain state_dict, exactly what state_dict_bytes writes
    plain = RR.state_dict_bytes(ckpt)
    m2, ckpt2 = R.load_uploaded_checkpoint(plain, "cifar_net.pth")
    assert ckpt2.plain
    x = torch.rand(2, 3, 32, 32)
    torch.testing.assert_close(m2(x), m(x))
    # and it loads into the tutorial's own Net
    from tutorial_net import Net as TutorialNet

    net = TutorialNet()
    net.load_state_dict(torch.load(io.BytesIO(plain), weights_only=True))
    torch.testing.assert_close(net(x), m(x))


class _Evil:
    def __reduce__(self):
        return (print, ("this would run code",))


def _zipped_evil() -> bytes:
    buf = io.BytesIO()
    torch.save({"state_dict": _Evil()}, buf)
    return buf.getvalue()


@pytest.mark.parametrize("blob,code,match", [
    (_zipped_evil(), "checkpoint.unsafe", "refused"),
    # a bare pickle is not the zip torch.save writes: refused before any unpickling
    (pickle.dumps({"state_dict": _Evil()}), "checkpoint.not_readable", "not a readable"),
    (b"just some text, not a checkpoint\n", "checkpoint.not_readable",
     "not a readable PyTorch checkpoint"),
    (b"", "checkpoint.empty", "empty"),
])
def test_uploaded_bad_files_are_refused(blob, code, match):
    with pytest.raises(CheckpointError, match=match) as info:
        R.load_uploaded_checkpoint(blob, "bad.pth")
    assert info.value.code == code
    assert "bad.pth" in info.value.text("es") and "bad.pth" in info.value.text("pt")


def test_torn_and_oversized_checkpoints(tmp_path, trained, cifar_data):
    good = save(tmp_path / "c.pth", trained[0].model, CONFIG, cifar_data.classes, {}).read_bytes()
    with pytest.raises(CheckpointError, match=r"bad\.pth") as info:
        R.load_uploaded_checkpoint(good[: len(good) // 2], "bad.pth")
    assert info.value.code == "checkpoint.not_readable"
    with pytest.raises(CheckpointError, match="not accepted") as info:
        R.load_uploaded_checkpoint(good, "big.pth", max_bytes=1000)
    assert info.value.code == "checkpoint.file_too_large"


def test_a_model_for_other_classes_is_refused(cifar_data):
    from cifarlab.core.model import Net

    with pytest.raises(CheckpointError, match="3 classes") as info:
        R.predictions_for(Net(num_classes=3), cifar_data)
    assert "3 clases" in info.value.text("es") and "3 classes" in info.value.text("pt")


# ----------------------------------------------------------------------- classify an image

def test_classify_a_real_png(trained, cifar_data, ev):
    model = trained[0].model
    best = int(np.argmax(np.diag(ev.confusion)))       # the class it gets right most often
    i = int(R.confused_examples(ev, best, best, limit=1)[0])
    img = cifar_data.image("test", i)
    ranked = R.classify_prepared(model, R.prepare_image(png_bytes(img)), cifar_data.classes)
    assert ranked[0][0] == cifar_data.classes[best]
    assert sorted(c for c, _ in ranked) == sorted(cifar_data.classes)
    assert sum(p for _, p in ranked) == pytest.approx(1.0, abs=1e-4)
    assert all(a >= b for (_, a), (_, b) in zip(ranked, ranked[1:]))
    # lossless 32×32: exactly the probabilities of the test image itself
    assert ranked[0][1] == pytest.approx(float(ev.probabilities[i, best]), abs=1e-5)


def test_a_large_photo_is_cropped_and_shrunk_with_notes(trained, cifar_data):
    rng = np.random.default_rng(0)
    photo = rng.integers(0, 255, (300, 500, 3), dtype=np.uint8)
    prep = R.prepare_image(png_bytes(photo, fmt="JPEG"))
    assert prep.pixels.shape == (32, 32, 3) and prep.pixels.dtype == np.uint8
    assert ("resized", {"width": 500, "height": 300, "size": 32}) in prep.notes
    codes = [c for c, _ in prep.notes]
    assert "cropped" in codes and "resized" in codes
    assert max(prep.preview.shape[:2]) <= R.PREVIEW_SIZE
    assert len(R.classify_prepared(trained[0].model, prep, cifar_data.classes)) == 10


@pytest.mark.parametrize("make,code", [
    (lambda: png_bytes(np.full((40, 40, 4), [0, 0, 0, 0], np.uint8)), "transparent"),
    (lambda: png_bytes(np.full((40, 40, 4), [10, 200, 30, 255], np.uint8), fmt="TIFF"), None),
    (lambda: _cmyk_jpeg(), None),
    (lambda: png_bytes(np.arange(1600, dtype=np.uint16).reshape(40, 40) * 40), None),
    (lambda: _animated_gif(), None),                                       # its first frame
    (lambda: png_bytes(np.zeros((20, 20), np.uint8)), None),               # grayscale
])
def test_odd_modes_are_converted(make, code):
    prep = R.prepare_image(make())
    assert prep.pixels.shape == (32, 32, 3)
    codes = [c for c, _ in prep.notes]
    if code:
        assert code in codes
    if code == "transparent":  # fully transparent laid over white
        assert (prep.pixels == 255).all()


def test_sixteen_bit_keeps_its_range():
    ramp = (np.linspace(0, 65535, 64 * 64).reshape(64, 64)).astype(np.uint16)
    prep = R.prepare_image(png_bytes(ramp))
    assert prep.pixels.min() < 30 and prep.pixels.max() > 225   # not all white, not all black


def _cmyk_jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("CMYK", (48, 48), (0, 255, 255, 0)).save(buf, "JPEG")  # red
    return buf.getvalue()


def _animated_gif() -> bytes:
    frames = [Image.new("RGB", (32, 32), c) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buf.getvalue()


def _png_claiming(width: int, height: int, depth: int = 8, colour: int = 2) -> bytes:
    """A tiny PNG whose header claims ``width``×``height`` pixels (a decompression bomb's
    shape: the decoder would have to allocate it all)."""
    raw = png_bytes(np.zeros((1, 1, 3), np.uint8))
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    patched = struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return raw[:8] + patched + raw[8 + 25:]


@pytest.mark.parametrize("blob,code", [
    (b"this is a text file, not a picture", "image.not_image"),
    (b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n", "image.not_image"),
    (b"", "image.empty"),
    (_png_claiming(100_000, 100_000), "image.bomb"),         # PIL's own bomb guard
    (_png_claiming(8000, 8000), "image.too_many_pixels"),    # over our 24 MP limit
    (_png_claiming(4800, 4800, depth=16, colour=6), "image.too_much_data"),  # 23 MP × 8 bytes
])
def test_bad_pictures_get_a_clear_message(blob, code):
    with pytest.raises(R.ImageError) as info:
        R.prepare_image(blob)
    assert info.value.code == code
    assert isinstance(info.value, CifarLabError) and str(info.value)
    texts = {lang: info.value.text(lang) for lang in ("en", "es", "pt")}
    assert len(set(texts.values())) == 3 and "{" not in "".join(texts.values())


def test_size_limits_and_torn_images():
    img = png_bytes(np.random.default_rng(2).integers(0, 255, (64, 64, 3), np.uint8))
    with pytest.raises(R.ImageError) as info:
        R.prepare_image(img, max_pixels=1000)
    assert info.value.code == "image.too_many_pixels" and "64×64" in str(info.value)
    assert "64×64" in info.value.text("es") and "64×64" in info.value.text("pt")
    with pytest.raises(R.ImageError) as info:
        R.prepare_image(img, max_bytes=100)
    assert info.value.code == "image.too_big_bytes"
    jpeg = png_bytes(np.random.default_rng(1).integers(0, 255, (200, 200, 3), np.uint8),
                     fmt="JPEG")
    with pytest.raises(R.ImageError) as info:
        R.prepare_image(jpeg[: len(jpeg) // 3])
    assert info.value.code == "image.broken"


def test_upscale_keeps_pixels_sharp():
    chw = np.arange(3 * 2 * 2, dtype=np.uint8).reshape(3, 2, 2)
    out = upscale(chw, 3)
    assert out.shape == (6, 6, 3)
    assert (out[:3, :3] == chw[:, 0, 0]).all()


# ------------------------------------------------------------------------------- run tables

def _store_with_runs(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    ids = []
    for lr, batch in ((0.001, 4), (0.01, 4), (0.01, 64)):
        cfg = TrainConfig(lr=lr, batch_size=batch).to_dict()
        rid = store.create_run("session-abc", "train", cfg, "cpu")
        store.set_status(rid, "running")
        store.set_status(rid, "done", result={"test_accuracy": 0.5, "steps": 100,
                                              "epochs_done": 2.0, "images_per_second": 900.0,
                                              "train_seconds": 3.0, "device": "cpu"})
        ids.append(rid)
    return store, ids


def test_runs_table_and_the_knobs_that_differ(tmp_path):
    store, ids = _store_with_runs(tmp_path)
    runs = store.list_runs("session-abc")
    df = RR.runs_table(runs)
    assert list(df.columns) == list(RR.RUN_COLUMNS) and len(df) == 3
    assert set(df["run"]) == set(ids)
    assert df["accuracy"].tolist() == [50.0] * 3
    assert df["model"].tolist() == ["Net()"] * 3
    assert RR.differing_columns(df) == ["lr", "batch_size"]   # in the schema's order
    same_lr = df[df["lr"] == 0.01]
    assert RR.differing_columns(same_lr) == ["batch_size"]
    assert RR.differing_columns(df.iloc[:1]) == []
    assert RR.steps_per_epoch(runs[0]) == 50


def test_model_label():
    assert RR.model_label(None) == "Net()"
    assert RR.model_label({"width": 2, "channels": [8, 16]}) == "Net(channels=[8, 16], width=2)"
    assert RR.model_label({"bogus": 1}) == "?"


def test_loss_curves(tmp_path):
    store, ids = _store_with_runs(tmp_path)
    store.record(ids[0], steps=list(range(1, 1001)), losses=[2.3 - i / 1000 for i in range(1000)])
    store.record(ids[1], steps=list(range(1, 101)), losses=[2.0] * 50 + [float("nan")] + [1.0] * 49)
    curves = {"a": store.losses(ids[0]), "b": store.losses(ids[1])}
    df = RR.loss_curves(curves)
    assert set(df["run"]) == {"a", "b"}
    assert (df["run"] == "a").sum() == 1000
    assert df[df["run"] == "a"]["x"].iloc[-1] == 1000
    df_e = RR.loss_curves(curves, {"a": 500, "b": 50}, x="epoch", smooth=1)
    assert df_e[df_e["run"] == "a"]["x"].max() == 2.0
    assert df_e[df_e["run"] == "b"]["loss"].isna().sum() == 1      # the NaN stays a gap
    assert RR.loss_curves({"a": ([], [])}).empty
    assert isinstance(df, pd.DataFrame)


def test_a_click_anywhere_in_the_confusion_matrix_names_its_cell():
    names = ["plane", "car", "bird"]
    for i, true in enumerate(names):
        for j, pred in enumerate(names):
            # the marker's point and the heatmap's (no customdata, or a dict of it)
            for point in ({"x": pred, "y": true, "customdata": [i, j, 5]},
                          {"x": pred, "y": true, "z": 5},
                          {"x": pred, "y": true, "customdata": {"0": i}}):
                assert R.picked_cell(point, names) == (i, j)
    assert R.picked_cell({"x": "ship", "y": "car"}, names) is None
