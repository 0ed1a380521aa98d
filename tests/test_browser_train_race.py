"""The run that trains is the run that was typed: in Chromium, type Epochs 1 and a small subset
and press Train at once, without waiting for the page to settle (the hostile test's race: a
preset selectbox whose value the server had changed fired again and reset every knob). First,
the same page on a phone (390×844) on the session's first visit, the lesson open: Train within
the first two screens, nothing wider than the screen, the preset labels whole, and whole too
at 1400 px (where "O tutorial como e…" was cut)."""
from __future__ import annotations


import pytest

from browser_support import (PHONE_JS, PRESET_LABELS_JS, page_problems, screenshot,
                             wait_idle)
from cifarlab import i18n
from cifarlab.serve.store import RunStore

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_typed_values_are_the_ones_submitted_even_when_train_is_pressed_at_once(server, browser,
                                                                                 lang):
    t = i18n.translator(lang)
    sid = f"race-student-{lang}-01"
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto(f"{server.url}/train?lang={lang}&sid={sid}")
        wait_idle(page)
        phone = page.evaluate(PHONE_JS, t("train.start"))
        screenshot(page, f"{lang}-train-phone")
        assert phone["docWidth"] <= phone["innerWidth"], phone            # no sideways scroll
        assert phone["mainWidth"] <= phone["mainClient"], phone
        assert phone["top"] is not None and phone["top"] <= 2 * 844, phone  # two screens
        labels = page.evaluate(PRESET_LABELS_JS)
        assert labels["count"] == 6 and not labels["cut"], labels
        page.set_viewport_size({"width": 1400, "height": 1000})
        wait_idle(page)
        labels = page.evaluate(PRESET_LABELS_JS)
        assert labels["count"] == 6 and not labels["cut"], labels
        page.get_by_role("button", name=t("train.preset_quick"), exact=True).click()
        wait_idle(page)
        # type and press Train straight away: no waiting between the edits and the click
        for label, value in ((t("common.epochs"), 2), (t("common.train_subset"), 320),
                             (t("common.batch_size"), 32)):
            box = page.get_by_label(label, exact=True)
            box.fill(str(value))
            box.press("Tab")
        page.get_by_role("button", name=t("train.start"), exact=True).click()
        store = RunStore(server.home / "runs.db")
        page.wait_for_function("() => true")  # let the click's rerun begin
        for _ in range(600):                 # a hang guard, not a speed bound
            runs = store.list_runs(session=sid)
            if runs:
                break
            page.wait_for_timeout(100)
        (run,) = runs
        assert (run.config["epochs"], run.config["train_subset"], run.config["batch_size"]) == \
            (2, 320, 32)
        wait_idle(page)
        assert not page_problems(page)
    finally:
        page.close()
