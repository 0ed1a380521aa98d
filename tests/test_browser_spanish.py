"""In ?lang=es, every page reached by its sidebar link, and what a student can get wrong said
in that language, with numbers in its notation: a knob out of range on the Train page, a file
that is no checkpoint on the Results page, a stride of 0 in the Network page's calculator, a
number out of range on the Tensors, Data, Loss and CPU vs GPU pages. On every page: no English
sentence of the catalogs, no raw error, nothing stale. The Inside page is walked in Spanish by
test_browser_inside.py (on a finished run, the same checks); axe runs on every page, each tab
and expander open, in test_browser_a11y.py's English walk (the markup does not change with the
language; the document's language and the links that do are checked here).

Portuguese in Chromium: every page rendered, with the same checks of language, links and
English sentences, in test_browser.py's Portuguese walk; the bad input in Portuguese (and in
English) through AppTest: tests/test_pages_train.py (a knob over the limit, the decimal comma,
Train refused), test_pages_results_runs.py (files refused), test_pages_network_loss.py (the
calculator), test_pages_home_tensors_data.py and test_pages_gpu.py (numbers out of range). The
messages are the same catalog keys in every language; what only a browser shows (the
uploader's own word, focus and Tab) is checked here."""
from __future__ import annotations


import pytest

from browser_support import (calculator_stride, check_language_and_links, english_sentences,
                             go_by_sidebar, open_advanced, page_problems, tall_screenshot,
                             wait_idle)
from cifarlab import i18n
from ui.nav import PAGES

pytestmark = pytest.mark.browser


def alerts(page) -> list[str]:
    return [e.inner_text().strip() for e in page.query_selector_all('[data-testid="stAlert"]')]


def bad_train_values(page, t) -> None:
    """Train: knobs out of range are kept as typed and said why; a decimal with the language's
    comma is read as such; Train with a bad value is refused."""
    for label, value, key, params in (
            (t("common.epochs"), 30, "errors.config.epochs_limit", {"n": 20}),
            (t("common.lr"), 0, "errors.config.lr", {"hi": 10, "default": 0.001}),
            (t("common.train_subset"), 30000, "errors.config.subset_limit", {"n": 20000})):
        if label == t("common.train_subset"):
            open_advanced(page, t)                    # beyond the tutorial's six
        box = page.get_by_label(label, exact=True)
        box.fill(str(value))
        box.press("Tab")
        wait_idle(page)
        assert box.input_value() == str(value)        # kept as typed, not clamped
        assert any(t(key, **params) in a for a in alerts(page)), (key, alerts(page))
    assert "20.000" in " ".join(alerts(page))          # numbers in the language's notation
    # a decimal with the language's comma is read as such (a number box made it 1)
    lr = page.get_by_label(t("common.lr"), exact=True)
    assert lr.input_value() == "0"
    lr.fill("0,01")
    lr.press("Tab")
    wait_idle(page)
    assert lr.input_value() == "0,01"
    assert not any(t("errors.config.lr", hi=10, default=0.001) in a for a in alerts(page))
    lr.fill("0")
    lr.press("Tab")
    wait_idle(page)
    page.get_by_role("button", name=t("train.start"), exact=True).click()
    wait_idle(page)
    assert any(t("train.config_errors") in a for a in alerts(page))


def not_a_checkpoint_uploaded(page, t, lang: str, folder) -> None:
    """Results: the uploader says our word, and a file that is no checkpoint is refused in the
    language, without a traceback."""
    not_a_checkpoint = folder / "notes.pth"
    not_a_checkpoint.write_text("this is not a checkpoint")
    page.get_by_text(t("results.source_upload"), exact=True).click()
    wait_idle(page)
    # Streamlit's own "Upload" and "200MB per file" are not shown: our word is
    zone = page.locator('[data-testid="stFileUploaderDropzone"]').first
    word = zone.locator("button span[data-has-shortcut]").evaluate(
        "e => getComputedStyle(e, '::after').content")
    assert word == f'"{t("common.upload_button")}"'
    assert "Upload" not in zone.inner_text() and "per file" not in zone.inner_text()
    page.locator('input[type="file"]').first.set_input_files(str(not_a_checkpoint))
    wait_idle(page)
    shown = " ".join(alerts(page))
    assert "notes.pth" in shown and not page_problems(page)
    english = i18n.t("errors.checkpoint.not_readable", "en", name="notes.pth") \
        if "errors.checkpoint.not_readable" in i18n.catalog("en") else None
    if english:
        assert english not in shown
    assert "Traceback" not in shown and "Error:" not in shown


def stride_zero(page, t, lang: str) -> None:
    """Network: the output-size calculator answers a stride of 0 in the student's language,
    and the last good result is not left on the screen."""
    panel = calculator_stride(page, t, 0)
    wait_idle(page)
    said = i18n.t("errors.shapes.below_min", lang, layer="Conv2d", arg="stride", lo=1,
                  value="0").replace("`", "")          # shown as code, read as text
    assert any(said in a for a in alerts(page)), alerts(page)
    assert not panel.locator('[data-testid="stMetricValue"]').count()   # nothing stale
    assert t("network.exact") not in panel.inner_text()


# page -> (a number box's label key and params, a bad value, the range it says, what must go)
TAB_FIRST = {"loss": "loss.logits_title"}    # the box sits in this tab
BAD_NUMBERS = {
    "tensors": (("tensors.batch_n", {}), 0, (1, 16), ".st-key-tensors_rank_fig"),
    "data": (("common.batch_size", {}), 65, (1, 64), None),
    "loss": (("loss.image_index", {"n": 9999}), 10_000, (0, 9999), ".st-key-loss_probs"),
    "gpu": (("gpu.repeats", {}), 0, (1, 10), None),
}


@pytest.mark.parametrize("lang", ["es"])
def test_every_page_in_the_students_language_with_bad_input(server, browser, tmp_path, lang):
    """Every page in Spanish, reached by its sidebar link (Inside: test_browser_inside.py): no
    English sentence of ours on it, a document in that language with its navigation and lesson
    links in it, and where it takes input, bad input is answered in the language with no stale
    result (Train, Results, Network: above; a number box out of range: BAD_NUMBERS)."""
    t = i18n.translator(lang)
    english = english_sentences(lang)
    assert len(english) > 200                      # the check has something to look for
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    found: dict[str, list[str]] = {}
    page_ids = [pid for pid, _, _ in PAGES]
    try:
        page.goto(f"{server.url}/?lang={lang}&sid=walk-student-{lang}-1")
        wait_idle(page)
        for pid in page_ids:
            if pid == "inside":
                continue
            if pid != "home":
                go_by_sidebar(page, pid)
            check_language_and_links(page, pid, lang, page_ids)
            tall_screenshot(page, f"{lang}-{pid}")
            page.set_viewport_size({"width": 1400, "height": 1000})
            if pid == "train":
                bad_train_values(page, t)
            elif pid == "results":
                not_a_checkpoint_uploaded(page, t, lang, tmp_path)
            elif pid == "network":
                stride_zero(page, t, lang)
            elif pid in BAD_NUMBERS:
                (key, params), bad, (lo, hi), gone = BAD_NUMBERS[pid]
                main = page.locator('[data-testid="stMain"]')
                if pid in TAB_FIRST:
                    page.get_by_role("tab", name=t(TAB_FIRST[pid])).click()
                    wait_idle(page)
                if gone:
                    assert main.locator(gone).count(), (pid, gone)   # the result, before
                box = main.get_by_label(t(key, **params), exact=True).first
                box.fill(str(bad))
                box.press("Enter")
                wait_idle(page)
                assert any(t("common.out_of_range", lo=lo, hi=hi) in a for a in alerts(page)), \
                    (pid, alerts(page))
                if gone:                                   # no stale result
                    assert not main.locator(gone).count(), pid
            assert not page_problems(page), pid
            text = page.locator('[data-testid="stMain"]').inner_text() + \
                page.locator('[data-testid="stSidebar"]').inner_text()
            hits = [s for s in english if s in text]
            if hits:
                found[pid] = hits[:5]
            if pid == "speed":   # the "what each trick buys" chart, in the language
                assert page.locator('[data-testid="stPlotlyChart"]').count() == 1
                assert t("speed.chart_title") in page.locator(".js-plotly-plot").inner_text()
                assert t("speed.why_tta") in text
    finally:
        page.close()
    assert not found, found
