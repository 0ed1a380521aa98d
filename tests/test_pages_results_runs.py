"""The Results and Runs pages through the real entry point (app.py), in en, es and pt: the empty
state, a finished run seeded into a temporary run store (a real short training, a real
checkpoint), the per-class chart and confusion matrix, a true/predicted pair's images, uploads
(checkpoint, picture), downloads, delete, and another session not seeing the run."""
from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from data_support import pages_queue
from run_support import CONFIG  # the session's finished run (conftest's ``finished_run``)
from synthetic_run import running_row

APP = str(Path(__file__).resolve().parents[1] / "app.py")
SID = "results-owner-0001"
OTHER = "someone-else-0002"
EMPTY = "nobody-runs-0003"
LANGS = list(i18n.LANGUAGES)


@pytest.fixture(scope="module")
def lab(tmp_path_factory, cifar_archive, cifar_cache_dir, finished_run, cifar_data):
    """A fresh CIFARLAB_HOME whose store holds one finished run of SID: the session's real
    short ``train()`` (tests/run_support.py) with its events, losses, result and checkpoint
    recorded as the worker would."""
    home = tmp_path_factory.mktemp("lab-home")
    mp = pytest.MonkeyPatch()
    queue = pages_queue(mp, home, cifar_archive, cifar_cache_dir)
    assert queue.settings.home == home.resolve()
    store = queue.store
    run_id = finished_run.write(store, SID)
    yield {"queue": queue, "store": store, "run_id": run_id, "home": home, "data": cifar_data,
           "result": finished_run.result}
    queue.shutdown()
    mp.undo()


def page(name: str, sid: str, lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["lang"] = lang
    at.query_params["sid"] = sid
    at.switch_page(f"pages/{name}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = []
    for kind in ("markdown", "caption", "info", "error", "warning", "success", "subheader"):
        parts += [el.value for el in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def arr(value) -> np.ndarray:
    """A plotly array from a figure's JSON: a list, or plotly 6's typed {dtype, bdata, shape}."""
    if isinstance(value, dict) and "bdata" in value:
        a = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return a.reshape([int(n) for n in str(shape).split(",")]) if shape else a
    return np.asarray(value)


def images(at: AppTest) -> int:
    return sum(len(el.proto.imgs) for el in at.get("image"))


def tr(key: str, lang: str, **kw) -> str:
    return i18n.t(key, lang, **kw)


# ------------------------------------------------------------------------------ empty state

@pytest.mark.parametrize("lang", LANGS)
def test_empty_state_points_to_the_train_page(lab, lang):
    for name in ("results", "runs"):
        at = page(name, EMPTY, lang)
        assert tr(f"{name}.no_runs", lang) in [el.value for el in at.info]
        assert not at.get("plotly_chart")
        links = [el.proto.page for el in at.get("page_link")]
        assert any("train" in link for link in links), links


# --------------------------------------------------------------------------------- results

@pytest.mark.parametrize("lang", LANGS)
def test_results_page_shows_the_run(lab, lang):
    at = page("results", SID, lang)
    assert at.selectbox(key="results_run").value == lab["run_id"]
    specs = charts(at)
    types = [[tr_["type"] for tr_ in s["data"]] for s in specs]
    # per-class bars with the tutorial's ranges, and the confusion matrix heatmap
    per_class = [s for s in specs if any(d.get("name") == tr("results.tutorial_range", lang)
                                         for d in s["data"])]
    assert per_class and len(per_class[0]["data"][0]["x"]) == 10
    assert tr("classes.bird", lang) in per_class[0]["data"][0]["x"]
    assert ["heatmap", "scatter"] in types
    heat = next(s for s in specs if s["data"][0]["type"] == "heatmap")
    assert arr(heat["data"][0]["text"]).sum() == 10000
    # per-class accuracy per epoch: one line per class over epochs 1 and 2
    lines = [s for s in specs if len(s["data"]) == 10 and s["data"][0]["type"] == "scatter"]
    assert lines and sorted(set(arr(lines[0]["data"][0]["x"]).tolist())) == [1, 2]
    acc = lab["result"].eval.accuracy
    assert f"{i18n.number(100 * acc, lang, 1)} %" in [m.value for m in at.metric]   # 13,2 % in es
    assert images(at) >= 16     # the sample grid at least
    # each picture's confidence is a percentage, written as the language writes one
    captions = [im.caption for el in at.get("image") for im in el.proto.imgs]
    sign = "\u00a0%" if lang == "es" else "%"
    assert captions and all(re.search(r"\d" + sign + r"\)?$", c) for c in captions), captions
    assert tr("results.per_class_swings", lang) in texts(at)


def test_choosing_a_pair_shows_those_images(lab):
    at = page("results", SID)
    ev = lab["result"].eval
    conf = np.array(ev.confusion)
    off = conf.copy()
    np.fill_diagonal(off, 0)
    t_i, p_i = np.unravel_index(off.argmax(), off.shape)          # preselected: most confused
    assert at.selectbox(key="results_true").value == t_i
    assert at.selectbox(key="results_pred").value == p_i
    # choose a pair with a known count, different from the first
    np.fill_diagonal(off, -1)
    off[t_i, p_i] = -1
    a, b = np.unravel_index(off.argmax(), off.shape)
    n = int(conf[a, b])
    before = images(at)
    at.selectbox(key="results_true").set_value(int(a))
    at.selectbox(key="results_pred").set_value(int(b)).run()
    assert not at.exception
    names = [i18n.t(f"classes.{c}", "en") for c in ev.classes]
    expected = i18n.t("results.pair_count", "en", n=f"{n:,}", true=names[a],
                      predicted=names[b], shown=min(n, 24))
    assert expected in [m.value for m in at.markdown]
    assert images(at) == before - min(int(conf[t_i, p_i]), 24) + min(n, 24)
    # the diagonal: correct answers
    at.selectbox(key="results_pred").set_value(int(a)).run()
    assert any(m.value.startswith(f"**{int(conf[a, a]):,}**") for m in at.markdown)


def test_classify_your_own_image(lab):
    at = page("results", SID)
    data = lab["data"]
    buf = io.BytesIO()
    Image.fromarray(np.kron(data.image("test", 0), np.ones((4, 4, 1), np.uint8))).save(buf, "PNG")
    at.file_uploader(key="results_image").set_value(("ship.png", buf.getvalue(), "image/png"))
    at.run()
    assert not at.exception
    said = [m.value for m in at.markdown if m.value.startswith("#### ")]
    assert said and "The network says:" in said[0]
    assert i18n.t("results.note_resized", "en", width=128, height=128, size=32) in texts(at)
    # a text file: a clear message, no exception
    at.file_uploader(key="results_image").set_value(("notes.png", b"not a picture", "image/png"))
    at.run()
    assert not at.exception
    assert i18n.t("errors.image.not_image", "en") in [e.value for e in at.error]


def test_upload_a_checkpoint(lab):
    at = page("results", OTHER)      # no runs of its own: uploading still works
    at.radio(key="results_source").set_value("upload").run()
    assert not at.exception and not at.get("plotly_chart")
    at.file_uploader(key="results_ckpt").set_value(
        ("evil.pth", b"\x80\x04K\x01.", "application/octet-stream"))
    at.run()
    assert not at.exception
    assert any("evil.pth" in e.value for e in at.error)
    blob = lab["store"].checkpoint_path(lab["run_id"]).read_bytes()
    at.file_uploader(key="results_ckpt").set_value(("mine.pth", blob, "application/octet-stream"))
    at.run()
    assert not at.exception and not at.error
    assert any(s["data"][0]["type"] == "heatmap" for s in charts(at))


@pytest.mark.parametrize("lang", ["es", "pt"])
def test_refusals_come_in_the_students_language(lab, lang):
    from cifarlab.lab import results as R

    at = page("results", OTHER, lang)
    at.radio(key="results_source").set_value("upload").run()
    # a file over our limit (the uploader lets it through): our message, never a bare 413
    big = bytes(R.MAX_UPLOAD_BYTES + 1)
    at.file_uploader(key="results_ckpt").set_value(("big.pth", big, "application/octet-stream"))
    at.run()
    assert not at.exception
    why = tr("errors.checkpoint.file_too_large", lang, name="big.pth",
             size_mb=len(big) / 2**20, limit_mb=R.MAX_UPLOAD_BYTES / 2**20)
    assert tr("errors.checkpoint_bad", lang, message=why) in [e.value for e in at.error]
    # a picture that is not one, on the page of a run
    at = page("results", SID, lang)
    at.file_uploader(key="results_image").set_value(("notes.png", b"not a picture", "image/png"))
    at.run()
    assert not at.exception
    assert tr("errors.image.not_image", lang) in [e.value for e in at.error]


def test_another_session_does_not_see_the_run(lab):
    at = page("results", OTHER)
    assert i18n.t("results.no_runs", "en") in [el.value for el in at.info]
    at = page("runs", OTHER)
    assert i18n.t("runs.no_runs", "en") in [el.value for el in at.info]
    assert not at.dataframe


# ------------------------------------------------------------------------------------ runs

@pytest.mark.parametrize("lang", LANGS)
def test_runs_page_compares_and_offers_downloads(lab, lang):
    at = page("runs", SID, lang)
    assert at.multiselect(key="runs_compare").value == [lab["run_id"]]
    (table,) = at.dataframe
    df = table.value
    assert len(df) == 1
    assert df[tr("runs.run_col", lang)].iloc[0] == lab["run_id"][:8]
    assert df[tr("common.batch_size", lang)].iloc[0] == 32
    loss = [s for s in charts(at) if s["data"] and s["data"][0]["type"] == "scatter"]
    assert loss and len(arr(loss[0]["data"][0]["x"])) > 10
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == [tr("runs.download_checkpoint", lang), tr("runs.download_state_dict", lang),
                      tr("runs.download_script", lang), tr("bundle.download", lang)]
    assert all(not b.proto.disabled for b in at.get("download_button"))


@pytest.mark.parametrize("lang", LANGS)
def test_no_downloads_until_a_run_has_finished_and_a_disabled_zip_says_why(lab, lang):
    """A run still training (or queued) offers nothing to download, and says why; a finished
    run without a saved model greys out "Take your run home" with the reason beside it."""
    store = lab["store"]
    running = running_row(store, SID, CONFIG.to_dict(), name="still training",
                          worker_pid=os.getpid())   # alive: not an orphan
    # what a worker leaves mid-run: a checkpoint of the epochs so far
    shutil.copy(store.checkpoint_path(lab["run_id"]), store.checkpoint_path(running))
    empty = running_row(store, SID, CONFIG.to_dict(), name="stopped early")
    store.set_status(empty, "cancelled")
    try:
        at = page("runs", SID, lang)
        at.selectbox(key="runs_run").set_value(running).run()
        assert not at.exception
        assert not at.get("download_button")
        assert tr("runs.downloads_wait", lang) in [i.value for i in at.info]
        at.selectbox(key="runs_run").set_value(empty).run()
        assert not at.exception
        buttons = {b.proto.label: b.proto for b in at.get("download_button")}
        why = tr("bundle.unavailable", lang, reason=tr("runs.bundle_no_checkpoint", lang))
        zip_button = buttons[tr("bundle.download", lang)]
        assert zip_button.disabled and zip_button.help == why
        assert why in [c.value for c in at.caption]
        for label in (tr("runs.download_checkpoint", lang), tr("runs.download_state_dict", lang)):
            assert buttons[label].disabled and buttons[label].help == tr("runs.no_checkpoint", lang)
        at.selectbox(key="runs_run").set_value(lab["run_id"]).run()   # finished: all of them
        assert len(at.get("download_button")) == 4
        assert all(not b.proto.disabled and not b.proto.help for b in at.get("download_button"))
        # a run moving on leaves the options' words as they were: Streamlit finds the chosen
        # option by its words, and words the browser drew before would find nothing
        words = at.selectbox(key="runs_run").options
        store.set_status(running, "cancelled")
        at.run()
        assert at.selectbox(key="runs_run").options == words and len(set(words)) == 3
    finally:
        store.set_status(running, "cancelled")
        store.delete_run(running)
        store.delete_run(empty)


def test_runs_table_highlights_the_knob_that_differs(lab):
    store = lab["store"]
    twin = running_row(store, SID, CONFIG.replace(lr=0.05).to_dict())
    store.set_status(twin, "failed", error="The worker process was killed.")
    try:
        at = page("runs", SID)
        at.multiselect(key="runs_compare").set_value([lab["run_id"], twin]).run()
        assert not at.exception
        lr = i18n.t("common.lr", "en")
        assert i18n.t("runs.differences", "en", knobs=f"**{lr}**") in [m.value for m in at.markdown]
        assert len(at.dataframe[0].value) == 2
    finally:
        store.delete_run(twin)


def test_delete_asks_first_and_removes_only_your_run(lab):
    store = lab["store"]
    # a copy of the seeded run, so the other tests keep theirs
    run = store.get(lab["run_id"])
    copy = running_row(store, SID, run.config, name="to delete")
    shutil.copy(store.checkpoint_path(run.id), store.checkpoint_path(copy))
    store.set_status(copy, "done", result=run.result)
    assert store.get(copy).checkpoint

    # someone else cannot delete it: the button is not even offered
    at = page("runs", OTHER)
    assert not at.get("button") or all(b.key != "runs_delete" for b in at.button)

    at = page("runs", SID)
    at.selectbox(key="runs_run").set_value(copy).run()
    at.button(key="runs_delete").click().run()
    assert not at.exception
    assert store.get(copy) is not None            # not yet: it asks first
    assert i18n.t("runs.delete_confirm", "en", name="to delete") in [w.value for w in at.warning]
    at.button(key="runs_delete_yes").click().run()
    assert not at.exception
    assert store.get(copy) is None
    assert not store.checkpoint_path(copy).exists()
    assert store.get(lab["run_id"]) is not None
    assert i18n.t("runs.deleted", "en") in [s.value for s in at.success]


def test_a_run_can_be_named_and_the_name_follows_it(lab):
    """Runs can be named (issue 14): on the Runs page by its owner only; the name replaces the
    id in the lists and the table; a blank name gives the id back."""
    store = lab["store"]
    run = store.get(lab["run_id"])
    twin = running_row(store, SID, run.config)
    store.set_status(twin, "done", result=run.result)
    try:
        at = page("runs", OTHER)                       # not theirs: no name field
        assert not [w for w in at.text_input if w.key == f"runs_name_{twin}"]
        at = page("runs", SID, "es")
        at.selectbox(key="runs_run").set_value(twin).run()
        at.text_input(key=f"runs_name_{twin}").input("  lr   0,01\n primera ").run()
        assert not at.exception
        assert store.get(twin).name == "lr 0,01 primera"
        assert i18n.t("runs.renamed", "es") in [s.value for s in at.success]
        at.run()
        assert "lr 0,01 primera" in at.dataframe[0].value[tr("runs.name_col", "es")].tolist()
        at.text_input(key=f"runs_name_{twin}").input("").run()
        assert store.get(twin).name is None
    finally:
        store.delete_run(twin)


@pytest.mark.parametrize("lang", LANGS)
def test_take_your_run_home_offers_the_zip(lab, lang, monkeypatch):
    """The "Take your run home" button (issue 12) hands over, when clicked, a zip named after the
    run holding its notebook, weights, TensorBoard logs and model card in the student's
    language. The zip is built on click (a deferred download): the test catches the callable
    Streamlit registers and calls it, as a click does."""
    import zipfile

    import streamlit.testing.v1.app_test as app_test
    from streamlit.runtime.media_file_manager import MediaFileManager

    offered = {}

    class Recording(MediaFileManager):
        def add_deferred(self, data_callable, mimetype, coordinates, file_name=None, **kw):
            offered[file_name] = (data_callable, mimetype)
            return super().add_deferred(data_callable, mimetype, coordinates, file_name, **kw)

    monkeypatch.setattr(app_test, "MediaFileManager", Recording)
    at = page("runs", SID, lang)
    (button,) = [b for b in at.get("download_button")
                 if b.proto.label == tr("bundle.download", lang)]
    assert not button.proto.disabled and button.proto.deferred_file_id
    assert tr("bundle.download_caption", lang) in [c.value for c in at.caption]
    top = f"cifarlab-{lab['run_id'][:8]}"
    make, mime = offered[f"{top}.zip"]
    assert mime == "application/zip"
    with zipfile.ZipFile(io.BytesIO(make())) as z:
        names = set(z.namelist())
        card = z.read(f"{top}/README.md").decode("utf-8")
    assert {f"{top}/{top[9:]}.ipynb", f"{top}/cifar_net.pth", f"{top}/README.md"} <= names
    logs = [n for n in names if n.startswith(f"{top}/runs/{top[9:]}/events.out.tfevents.")]
    assert logs
    acc = lab["result"].eval.accuracy
    assert tr("bundle.card.accuracy", lang, acc=acc) in card
    assert tr("bundle.card.file_logs", lang, logs="runs") in card     # every step's loss

