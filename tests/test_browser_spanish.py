"""In ?lang=es and ?lang=pt, what a student can get wrong is said in that language, with numbers
in its notation: a knob out of range on the Train page, a file that is no checkpoint on the
Results page, a stride of 0 in the Network page's calculator. No English sentence, no raw
error, nothing stale."""
from __future__ import annotations

import os

import pytest

from browser_support import StreamlitServer, chromium_path, page_problems, wait_idle
from cifarlab import i18n

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    if not path:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: CI must run the browser tests")
        pytest.skip("no Chromium here (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, cifar_archive):
    srv = StreamlitServer(tmp_path_factory.mktemp("lang-home"),
                          env={"CIFARLAB_DATA": str(cifar_archive),
                               "CIFARLAB_MAX_TRAIN_IMAGES": "20000"}).start()
    yield srv
    srv.stop()


def alerts(page) -> list[str]:
    return [e.inner_text().strip() for e in page.query_selector_all('[data-testid="stAlert"]')]


@pytest.mark.parametrize("lang", ["es", "pt"])
def test_bad_input_is_answered_in_the_students_language(server, browser, tmp_path, lang):
    t = i18n.translator(lang)
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    try:
        page.goto(f"{server.url}/train?lang={lang}&sid=lang-student-{lang}-1")
        wait_idle(page)
        for label, value, key, params in (
                (t("common.epochs"), 30, "errors.config.epochs_limit", {"n": 20}),
                (t("common.lr"), 0, "errors.config.lr", {"hi": 10, "default": 0.001}),
                (t("common.train_subset"), 30000, "errors.config.subset_limit", {"n": 20000})):
            box = page.get_by_label(label, exact=True)
            box.fill(str(value))
            box.press("Tab")
            wait_idle(page)
            assert box.input_value() == str(value)        # kept as typed, not clamped
            assert any(t(key, **params) in a for a in alerts(page)), (key, alerts(page))
        assert "20.000" in " ".join(alerts(page))          # numbers in the language's notation
        page.get_by_role("button", name=t("train.start"), exact=True).click()
        wait_idle(page)
        assert any(t("train.config_errors") in a for a in alerts(page))
        assert not page_problems(page)

        not_a_checkpoint = tmp_path / "notes.pth"
        not_a_checkpoint.write_text("this is not a checkpoint")
        page.goto(f"{server.url}/results?lang={lang}&sid=lang-student-{lang}-1")
        wait_idle(page)
        page.get_by_text(t("results.source_upload"), exact=True).click()
        wait_idle(page)
        page.locator('input[type="file"]').first.set_input_files(str(not_a_checkpoint))
        wait_idle(page)
        shown = " ".join(alerts(page))
        assert "notes.pth" in shown and not page_problems(page)
        english = i18n.t("errors.checkpoint.not_readable", "en", name="notes.pth") \
            if "errors.checkpoint.not_readable" in i18n.catalog("en") else None
        if english:
            assert english not in shown
        assert "Traceback" not in shown and "Error:" not in shown

        # the Network page's output-size calculator: a stride of 0 is answered in the
        # student's language, and the last good result is not left on the screen
        page.goto(f"{server.url}/network?lang={lang}&sid=lang-student-{lang}-1")
        wait_idle(page)
        page.get_by_role("tab", name=t("network.calc_title")).click()
        wait_idle(page)
        panel = page.locator('[role="tabpanel"]:not([hidden])')
        assert panel.locator('[data-testid="stMetricValue"]').inner_text().strip() == "28"
        box = panel.get_by_label(t("network.stride"), exact=True)
        box.fill("0")
        box.press("Enter")
        wait_idle(page)
        said = i18n.t("errors.shapes.below_min", lang, layer="Conv2d", arg="stride", lo=1,
                      value="0").replace("`", "")          # shown as code, read as text
        assert any(said in a for a in alerts(page)), alerts(page)
        assert not panel.locator('[data-testid="stMetricValue"]').count()   # nothing stale
        assert t("network.exact") not in panel.inner_text()
        assert not page_problems(page)
    finally:
        page.close()
