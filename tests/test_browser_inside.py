"""Inside the network in Chromium, in Spanish, on a finished run seeded into the shared app
server's run store (the session's real short training, run_support.py): a misclassified image
explained, a click on a feature map that picks that neuron (its row and column boxes follow,
the arithmetic agrees with PyTorch), and an uploaded picture shrunk to 32×32 and said so.

Also the Spanish walk's checks for this page (no English sentence of ours, the document's
language, the navigation and lesson links). The other languages: the page renders in Chromium
in English (test_browser_a11y.py, every tab) and Portuguese (test_browser.py's Portuguese
walk); its texts in every language, the mistake explained and the picture shrunk through
AppTest (tests/test_pages_inside.py). What the click does is the same in every language: the
plot's own coordinates, read here."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from browser_support import (POLL_MS, check_language_and_links, english_sentences,
                             page_problems, screenshot, tall_screenshot, wait_idle)
from cifarlab import i18n
from ui.nav import PAGES

pytestmark = pytest.mark.browser
SID = "inside-browser-0001"


@pytest.fixture(scope="module", autouse=True)
def inside_run(server, finished_run):
    """SID's finished run (the session's real short training) in the app server's store."""
    from cifarlab.serve.store import RunStore

    return finished_run.write(RunStore(server.home / "runs.db"), SID)


# The centre of cell (row, col) of the clickable feature map in the visible tab, on screen.
CELL_JS = """([row, col]) => {
    const panel = document.querySelector('[role="tabpanel"]:not([hidden])');
    const plot = [...panel.querySelectorAll('.js-plotly-plot')].find(p => p.data
        && p.data.some(tr => tr.type === 'heatmap') && p.data.some(tr => tr.type === 'scatter'));
    const xa = plot._fullLayout.xaxis, ya = plot._fullLayout.yaxis;
    const box = plot.getBoundingClientRect();
    return [box.left + xa._offset + xa.l2p(col), box.top + ya._offset + ya.l2p(row)];
}"""
MAP_READY_JS = """() => {
    const panel = document.querySelector('[role="tabpanel"]:not([hidden])');
    return panel && [...panel.querySelectorAll('.js-plotly-plot')].some(p => p.data
        && p.data.some(tr => tr.type === 'scatter') && p._fullLayout);
}"""


def alerts(page, kind: str) -> list[str]:
    return [e.inner_text() for e in page.query_selector_all(
        f'[data-testid="stAlertContent{kind}"], [data-testid="stAlert{kind}"]')]


@pytest.mark.parametrize("lang", ["es"])
def test_inside_the_network_in_the_browser(server, browser, tmp_path, lang):
    t = i18n.translator(lang)
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    main = page.locator('[data-testid="stMain"]')
    try:
        page.goto(f"{server.url}/inside?lang={lang}&sid={SID}")
        wait_idle(page, timeout_ms=180_000)
        assert t("nav.inside") in main.inner_text()
        assert t("inside.stage_conv1") in main.inner_text()
        # the Spanish walk's checks (test_browser_spanish.py), for this page
        check_language_and_links(page, "inside", lang, [pid for pid, _, _ in PAGES])
        text = main.inner_text() + page.locator('[data-testid="stSidebar"]').inner_text()
        assert not [s for s in english_sentences(lang) if s in text]

        explain_a_mistake(page, main, t, lang)
        click_a_neuron(page, main, t, lang)
        upload_a_picture(page, main, t, lang, tmp_path)
    finally:
        page.close()


def explain_a_mistake(page, main, t, lang) -> None:
    """A misclassified image: the page names its true class, and explains both classes."""
    page.get_by_text(t("inside.image_wrong"), exact=True).click()
    wait_idle(page, timeout_ms=180_000)
    text = main.inner_text()
    assert t("inside.summary_true", name="X").split("X")[0].replace("**", "") in text
    page.get_by_role("tab", name=t("inside.why_title")).click()
    wait_idle(page)
    panel = page.locator('[role="tabpanel"]:not([hidden])')
    assert t("inside.method_occlusion") in panel.inner_text()
    assert t("inside.true_row", name="X", p="Y").split("X")[0] in panel.inner_text()
    screenshot(page, f"{lang}-inside-why")


def click_a_neuron(page, main, t, lang) -> None:
    """A click on the feature map picks that neuron; the arithmetic agrees with PyTorch."""
    page.get_by_role("tab", name=t("inside.neuron_title")).click()
    wait_idle(page)
    page.wait_for_function(MAP_READY_JS, timeout=60_000, polling=POLL_MS)
    row_box = main.get_by_label(t("inside.row", hi=27), exact=True)
    col_box = main.get_by_label(t("inside.col", hi=27), exact=True)
    row, col = 25, 6
    x, y = page.evaluate(CELL_JS, [row, col])
    page.mouse.click(x, y)
    wait_idle(page)
    assert not page_problems(page), (row, col)
    assert (row_box.input_value(), col_box.input_value()) == (str(row), str(col))
    panel = page.locator('[role="tabpanel"]:not([hidden])')
    assert t("inside.arith_title", layer="conv1", n=1, row=row, col=col) in panel.inner_text()
    agrees = t("inside.torch_agrees", value="X", shown="Y").split("X")[0]
    assert agrees.replace("`", "") in panel.inner_text()
    screenshot(page, f"{lang}-inside-neuron")


def upload_a_picture(page, main, t, lang, tmp_path) -> None:
    """An uploaded picture, shrunk to 32×32 and said so."""
    picture = tmp_path / "photo.png"
    Image.fromarray(np.random.default_rng(5).integers(0, 255, (60, 80, 3), np.uint8)).save(
        picture)
    page.get_by_text(t("inside.image_upload"), exact=True).click()
    wait_idle(page)
    page.locator('input[type="file"]').first.set_input_files(str(picture))
    wait_idle(page, timeout_ms=120_000)
    text = main.inner_text()
    assert t("results.note_resized", width=80, height=60, size=32) in text
    assert t("inside.your_picture") in text
    page.get_by_role("tab", name=t("inside.act_title")).click()
    wait_idle(page)
    assert not page_problems(page)
    screenshot(page, f"{lang}-inside-activations")
    tall_screenshot(page, f"{lang}-inside-activations-tall")
