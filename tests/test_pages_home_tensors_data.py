"""AppTest: the Home, Tensors and Data pages through the real entry point (app.py), in en, es and
pt; the class browser, the batch view and the live measurements (with tiny bounds)."""
from __future__ import annotations

import re

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from ui.nav import PAGES

ROOT = Path(__file__).resolve().parents[1]
LANGS = list(i18n.LANGUAGES)


@pytest.fixture(scope="module")
def app_file(tmp_path_factory) -> str:
    """app.py itself when every page file exists; while other pages are still being written,
    a copy of the app whose missing pages are one-line stubs (the navigation needs them all)."""
    missing = [path for _, path, _ in PAGES if not (ROOT / path).is_file()]
    if not missing:
        return str(ROOT / "app.py")
    tree = tmp_path_factory.mktemp("app")
    shutil.copy(ROOT / "app.py", tree / "app.py")
    shutil.copytree(ROOT / "pages", tree / "pages",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in missing:
        (tree / path).write_text("import streamlit as st\nst.write('stub')\n")
    return str(tree / "app.py")


@pytest.fixture(autouse=True)
def _env(monkeypatch, cifar_archive, cifar_cache_dir, tmp_path):
    monkeypatch.setenv("CIFARLAB_DATA", str(cifar_archive))
    monkeypatch.setenv("CIFARLAB_CACHE", str(cifar_cache_dir))
    monkeypatch.setenv("CIFARLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CIFARLAB_MEASURE_SECONDS", "0.05")


def open_page(app_file: str, page: str, lang: str = "en") -> AppTest:
    at = AppTest.from_file(app_file, default_timeout=90)
    at.query_params["lang"] = lang
    at.run()
    assert not at.exception, at.exception
    if page != "home":
        at.switch_page(f"pages/{page}.py")
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.code]
    parts += [c.value for c in at.caption]
    parts += [h.value for h in [*at.title, *at.header, *at.subheader]]
    return "\n".join(parts)


def plotly_charts(at: AppTest) -> list:
    return at.get("plotly_chart")


# --------------------------------------------------------------------------------------- home

@pytest.mark.parametrize("lang", LANGS)
def test_home_renders_lessons_links_and_facts(app_file, lang):
    at = open_page(app_file, "home", lang)
    body = texts(at)
    t = i18n.translator(lang)
    assert t("home.route_title") in body and t("home.facts_title") in body
    links = at.get("page_link")
    labels = [link.proto.label for link in links]
    # one link per lesson page, in teaching order, with the translated title
    assert labels == [f"{n}. {t(f'nav.{pid}')}" for n, (pid, _, _) in enumerate(PAGES[1:], 1)] \
        + [t("nav.next", page=t("nav.tensors"))]          # and the footer's next lesson
    assert "cifar10-jpeg.tar.gz" in body          # the source's facts name the archive
    import torch

    assert torch.__version__ in body
    metrics = {m.label: m.value for m in at.metric}
    from cifarlab.core import devices

    assert metrics[t("home.metric_cores")] == str(devices.cpu_count())
    assert at.dataframe[0].value.iloc[0, 0] == "cpu"
    assert len(at.image) == 1 and len(at.image[0].value) == 10
    assert len(set(at.image[0].captions)) == 10            # one image of each class


# ------------------------------------------------------------------------------------ tensors

@pytest.mark.parametrize("lang", LANGS)
def test_tensors_renders(app_file, lang):
    at = open_page(app_file, "tensors", lang)
    body = texts(at)
    assert "torch.Size([32, 32])" in body                 # rank 2 is shown first
    assert "torch.Size([4, 3, 32, 32])" in body           # the batch on its device
    assert "device" in body and "torch.float32" in body
    assert len(plotly_charts(at)) == 1
    table = at.dataframe[0].value
    assert list(table.iloc[:, 0]) == [0, 1, 2, 3, 4]


def test_tensors_rank_and_batch_widgets_change_the_tensor(app_file):
    at = open_page(app_file, "tensors")
    at.radio(key="tensors_rank").set_value(4).run()
    at.number_input(key="tensors_batch").set_value(6).run()
    assert not at.exception
    assert "torch.Size([6, 3, 32, 32])" in texts(at)
    at.radio(key="tensors_rank").set_value(0).run()
    assert "torch.Size([])" in texts(at)


def test_tensors_measurements_yield_charts_and_tables(app_file):
    at = open_page(app_file, "tensors")
    before = len(plotly_charts(at))
    at.select_slider(key="transfer_mb").set_value(1)
    at.select_slider(key="transfer_chunks").set_value(16)
    at.button(key="transfer_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(plotly_charts(at)) == before + 1
    t = i18n.translator("en")
    table = next(d.value for d in at.dataframe if t("tensors.copies_col") in d.value.columns)
    assert [c.split(" (")[0] for c in table[t("tensors.copy_col")]] == [
        t("tensors.transfer_one_big"), t("tensors.transfer_many_small")]
    assert list(table[t("tensors.copies_col")]) == ["1", "16"]
    assert all(float(v.replace(",", "")) > 0 for v in table["GB/s"])

    at.number_input(key="item_steps").set_value(10)
    at.button(key="item_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(plotly_charts(at)) == before + 2       # the transfer chart stays
    calls = [d.value for d in at.dataframe if t("tensors.item_calls_col") in d.value.columns]
    assert calls and list(calls[-1].iloc[:, 1]) == [10, 1]


# --------------------------------------------------------------------------------------- data

@pytest.mark.parametrize("lang", LANGS)
def test_data_renders(app_file, lang):
    at = open_page(app_file, "data", lang)
    t = i18n.translator(lang)
    body = texts(at)
    assert "torch.Size([4, 3, 32, 32])" in body
    # the batch's range beside the code, in the language's notation (1,000 in Spanish)
    dtype_line = next(line for c in at.code for line in c.value.splitlines()
                      if line.startswith("images.dtype"))
    assert f"max {i18n.number(1.0, lang, 3)}" in dtype_line or \
        re.search(r"max \d" + re.escape(i18n.separators(lang)[0]) + r"\d{3}$", dtype_line)
    assert len(plotly_charts(at)) == 2                    # class counts, histograms
    grid = at.image[0]
    assert len(grid.value) == 24
    assert t("data.split_train") in [m.label for m in at.metric]
    ranges = at.dataframe[0].value        # numbers as the language writes them
    low = [i18n.parse_decimal(v.replace("−", "-")) for v in ranges["min"]]
    assert list(ranges["min"]) == [i18n.number(v, lang) for v in (0, 0, -1)] or low[2] >= -1.0


def test_class_browser_changes_images_when_the_class_changes(app_file):
    at = open_page(app_file, "data")
    first = list(at.image[0].captions)
    at.selectbox(key="data_class").set_value(8).run()      # ship
    assert not at.exception
    second = list(at.image[0].captions)
    assert len(second) == 24 and set(first).isdisjoint(second)
    assert i18n.t("classes.ship") in texts(at)
    at.button(key="data_new_sample").click().run()        # same class, other images
    assert list(at.image[0].captions) != second


def test_batch_view_follows_the_batch_size(app_file):
    at = open_page(app_file, "data")
    at.number_input(key="data_batch_size").set_value(8).run()
    assert not at.exception
    body = texts(at)
    assert "torch.Size([8, 3, 32, 32])" in body
    assert "len(trainloader)   # 6250" in body   # as Python prints it, in every language
    labels_line = next(line for line in body.splitlines() if line.startswith("labels"))
    assert labels_line.count(",") == 7


def test_loader_measurement_yields_a_table(app_file):
    at = open_page(app_file, "data")
    at.multiselect(key="loader_workers").set_value([0, 1])
    at.button(key="loader_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    t = i18n.translator("en")
    table = next(d.value for d in at.dataframe
                 if t("common.images_per_second") in d.value.columns)
    assert list(table[t("data.pipeline_col")]) == [t("data.pipeline_tutorial")] * 2 + [
        t("data.pipeline_fast")]
    assert list(table[t("common.num_workers")]) == ["0", "1", "0"]
    assert all(float(v.replace(",", "")) > 0 for v in table[t("common.images_per_second")])


def test_an_unexpected_error_shows_no_details_and_a_student_error_its_language():
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from cifarlab.errors import ConfigError, Problem
        from ui.language import show_error

        st.session_state["lang"] = "es"
        show_error(RuntimeError("/srv/cifarlab/secret/path.db is locked"))
        show_error(ConfigError([Problem("epochs", "config.epochs_limit", {"n": 20})]))

    at = AppTest.from_function(script).run()
    first, second = (e.value for e in at.error)
    assert "/srv" not in first and "RuntimeError" not in first
    assert first == i18n.t("errors.unexpected_plain", "es")
    assert second == i18n.t("errors.config.epochs_limit", "es", n=20)


def test_home_ends_with_a_link_to_the_next_lesson(app_file):
    """Home (app.py draws the links after the page; AppTest's switch_page runs a page without
    that frame, so the other pages' links are checked in the browser: test_browser.py)."""
    page, before, after = "home", None, "tensors"
    at = open_page(app_file, page, "es")
    t = i18n.translator("es")
    labels = [p.proto.label for p in at.get("page_link")]
    previous = [x for x in labels if x.startswith(t("nav.previous", page=""))]
    assert previous == ([t("nav.previous", page=t(f"nav.{before}"))] if before else []), labels
    assert t("nav.next", page=t(f"nav.{after}")) in labels, labels


def _result_shown(at, page: str) -> bool:
    if page == "tensors":
        return "tensors_rank_fig" in {c.key for c in at.get("plotly_chart")}
    return "len(trainloader)   # 12500" in texts(at)


@pytest.mark.parametrize("lang", ["es", "pt"])
@pytest.mark.parametrize("page, key, bad, lo, hi", [("tensors", "tensors_batch", 0, 1, 16),
                                                    ("data", "data_batch_size", 65, 1, 64)])
def test_a_number_out_of_range_says_so_in_the_language_and_leaves_no_stale_result(
        app_file, page, key, bad, lo, hi, lang):
    """Streamlit's own min/max answer in English and keep the old value, so the old result
    stayed on the screen. Our check answers in the student's language and shows no result."""
    at = open_page(app_file, page, lang)
    assert _result_shown(at, page)
    at.number_input(key=key).set_value(bad).run()
    assert not at.exception
    t = i18n.translator(lang)
    assert t("common.out_of_range", lo=lo, hi=hi) in [e.value for e in at.error]
    assert not _result_shown(at, page)                    # nothing stale
    at.number_input(key=key).set_value(4).run()
    assert _result_shown(at, page) and not at.error


def _augment_rows(at: AppTest) -> list:
    return [im for im in at.image if len(im.value) > 1 and len(im.value) < 24]


@pytest.mark.parametrize("lang", LANGS)
def test_augmentation_viewer_shows_each_epochs_draw_in_words(app_file, lang):
    at = open_page(app_file, "data", lang)
    t = i18n.translator(lang)
    rows = _augment_rows(at)
    assert len(rows) == 3 and all(len(r.value) == 1 + 3 for r in rows)   # as stored + 3 epochs
    assert all(list(r.captions)[0] == t("data_aug.original") for r in rows)
    assert all(c.startswith(t("data_aug.epoch", n=1)) for c in (list(r.captions)[1] for r in rows))
    assert t("data_aug.title") in [h.value for h in at.header]
    before = [list(r.captions) for r in rows]
    at.radio(key="data_aug_kind").set_value("flip_translate").run()
    at.button(key="data_aug_new").click().run()
    assert not at.exception
    after = [list(r.captions) for r in _augment_rows(at)]
    assert after != before and any(t("data_aug.not_moved") in " ".join(c) or " px" in " ".join(c)
                                   for c in after)


def test_augmentation_epochs_out_of_range_say_so_and_show_no_stale_draws(app_file):
    at = open_page(app_file, "data", "pt")
    at.number_input(key="data_aug_epochs").set_value(9).run()
    assert not at.exception
    t = i18n.translator("pt")
    assert t("common.out_of_range", lo=1, hi=8) in [e.value for e in at.error]
    assert not _augment_rows(at)
    at.number_input(key="data_aug_epochs").set_value(2).run()
    assert [len(r.value) for r in _augment_rows(at)] == [3, 3, 3]


def test_a_data_set_that_cannot_be_decoded_says_why_and_leaves_no_progress_bar(
        app_file, monkeypatch, tmp_path):
    broken = tmp_path / "cifar.tar.gz"
    broken.write_bytes(b"\x1f\x8b not really a gzip archive")
    monkeypatch.setenv("CIFARLAB_DATA", str(broken))
    monkeypatch.setenv("CIFARLAB_CACHE", str(tmp_path / "cache"))
    at = AppTest.from_file(app_file, default_timeout=90)
    at.query_params["lang"] = "es"
    at.run()
    at.switch_page("pages/data.py")
    at.run()
    assert not at.exception
    t = i18n.translator("es")
    head = t("errors.data_unavailable", reason="").strip()
    assert any(e.value.startswith(head) for e in at.error), [e.value for e in at.error]
    assert not at.get("progress")                      # no bar left saying "0 % done"
