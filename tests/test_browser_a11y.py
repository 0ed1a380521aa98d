"""Accessibility in a real browser (`streamlit run server.py`, the system Chromium,
Playwright), and the browser's one end-to-end training story.

- The English walk: every page by its sidebar link, no exception, the document, navigation and
  lesson links in English, then axe-core (through axe-playwright-python) on each tab with each
  expander open: no violation of impact "serious" or "critical" (moderate and minor ones are
  printed). Spanish and Portuguese: the walks of test_browser_spanish.py and test_browser.py
  (the markup is the language's text in the same elements).
- The training story, in Spanish: a keyboard-only student (Tab, Shift+Tab, Enter, digits) sets
  a small run on the Train page and starts it; it finishes without a reload; axe on the Train
  page showing it; a second run watched live, reloaded, cancelled; the Results page (axe
  again) and the Runs page.
"""
from __future__ import annotations

import re

import pytest

from browser_support import (LOSS_CHART_LAST_STEP, PHONE_JS, POLL_MS, calculator_stride, check_axe,
                             check_language_and_links, go_by_sidebar, open_advanced,
                             page_problems, report, screenshot, wait_idle, wait_on_progress)
from cifarlab import i18n
from cifarlab.serve.store import RunStore
from ui.nav import PAGES

pytestmark = pytest.mark.browser
PAGE_IDS = [pid for pid, _, _ in PAGES]

def page_url(server, pid: str, lang: str, sid: str | None = None) -> str:
    url = f"{server.url}/{'' if pid == 'home' else pid}?lang={lang}"
    return url + (f"&sid={sid}" if sid else "")


def open_expanders(page, scope: str) -> None:
    """Open every closed expander in ``scope`` (one at a time: opening one may rerun nothing,
    but the list of closed ones changes)."""
    for _ in range(20):
        closed = page.locator(f"{scope} details:not([open]) > summary")
        if not closed.count():
            return
        closed.first.click()
        page.wait_for_timeout(300)
    wait_idle(page)


def check_whole_page(page, where: str, found: dict[str, list[str]]) -> None:
    """Each of the page's tabs, with every expander opened (all it shows as it opens is still
    there: one axe pass per tab covers both). Streamlit renders only the tab that shows, so
    each is opened in turn; after the first (axe over the whole page, sidebar included) axe
    reads only the tab's panel: the rest of the page did not change."""
    main = '[data-testid="stMain"]'
    tabs = page.locator(f'{main} [role="tab"]')
    if not tabs.count():
        open_expanders(page, main)
        check_axe(page, f"{where}, expanders open", found)
        return
    panel = f'{main} [role="tabpanel"]:not([hidden])'
    for i in range(tabs.count()):
        if i:
            tabs.nth(i).click()
            wait_idle(page)
        open_expanders(page, panel)
        check_axe(page, f"{where}, tab {i + 1} «{tabs.nth(i).inner_text().strip()}»", found,
                  within=panel if i else None)


def check_conv_calculator(page, t) -> None:
    """The Network page's output-size calculator: the tutorial's 28, then a stride of 2."""
    panel = calculator_stride(page, t, 2)
    page.wait_for_function(
        """() => [...document.querySelectorAll('[role="tabpanel"]:not([hidden]) '
               + '[data-testid="stMetricValue"]')].some(e => e.innerText.trim() === '14')""",
        timeout=30_000, polling=POLL_MS)
    wait_idle(page)
    assert t("network.not_exact") in panel.inner_text()          # (32 − 5) / 2 is not whole
    assert "⌊(32 + 2·0 − 1·(5 − 1) − 1) / 2⌋ + 1 = 14" in panel.inner_text()  # numbers in
    assert not page_problems(page)
    screenshot(page, "en-network-calculator")


def test_every_page_in_english_axe_finds_nothing_serious(server, browser):
    """Every page in English, reached by its sidebar link: no exception, navigation and lesson
    links in English, a screenshot, then axe on each tab with its expanders open; on the
    Network page the conv calculator answers 28, then 14 for a stride of 2."""
    lang = "en"
    t = i18n.translator(lang)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    found: dict[str, list[str]] = {}
    try:
        page.goto(page_url(server, "home", lang))
        wait_idle(page)
        for pid in PAGE_IDS:
            if pid != "home":
                go_by_sidebar(page, pid)
            assert not page_problems(page), pid
            check_language_and_links(page, pid, lang, PAGE_IDS)
            screenshot(page, f"{lang}-{pid}")
            check_whole_page(page, f"{pid} ({lang})", found)
            assert not page_problems(page), pid
            if pid == "network":
                check_conv_calculator(page, t)
    finally:
        page.close()
    assert not found, report(found)


# ------------------------------------------------------------------------- keyboard only

KEYBOARD_LANG = "es"
KEYBOARD_SID = "a11y-keyboard-01"

FOCUSED_JS = """() => {
    const e = document.activeElement;
    if (!e || e === document.body) return {name: '', tag: 'BODY', role: '', value: ''};
    let name = e.getAttribute('aria-label') || '';
    if (!name && e.labels && e.labels.length) name = e.labels[0].innerText;
    if (!name) name = e.innerText || '';
    return {name: name.trim(), tag: e.tagName, role: e.getAttribute('role') || '',
            value: e.value === undefined ? '' : String(e.value)};
}"""


def focused(page) -> dict:
    return page.evaluate(FOCUSED_JS)


def tab_to(page, want, what: str, limit: int = 250, key: str = "Tab") -> dict:
    """Press Tab (or ``key``: Shift+Tab goes back) until the focused element matches ``want``
    (a function of the focus info): only the keyboard moves, the DOM is only read (as a
    screen reader would say it)."""
    seen = []
    for _ in range(limit):
        page.keyboard.press(key)
        f = focused(page)
        if want(f):
            return f
        seen.append(f"{f['tag']}:{f['name'][:30]}")
    raise AssertionError(f"{what} cannot be reached with Tab; the focus went through {seen}")


def named(label: str):
    """The focused control's accessible name is ``label`` (Streamlit may add the help's icon
    text after it on a new line)."""
    return lambda f: f["name"].split("\n")[0].strip() == label


def type_number(page, label: str, value: int) -> None:
    """Tab to a number box, type the digits (Tab selects what the box holds, so they replace
    it), Enter to apply: Streamlit reruns."""
    tab_to(page, named(label), f"the number box «{label}»")
    for _ in range(8):   # make sure the old digits go, whether or not Tab selected them
        page.keyboard.press("Backspace")
    page.keyboard.type(str(value))
    page.keyboard.press("Enter")
    wait_idle(page)
    f = focused(page)
    assert named(label)(f), f"the focus left «{label}» after Enter: now on {f}"
    assert f["value"].replace(".", "").replace(",", "") == str(value), (label, f)


def set_number(page, label: str, value) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


def wait_for_chosen_run(page, t, *parts: str, timeout_ms: int) -> None:
    """Wait until the Train page's run selector shows a run whose label has every part."""
    page.wait_for_function(
        """([label, parts]) => {
            const box = document.querySelector(`input[aria-label="${label}"]`);
            return box && parts.every(p => box.value.includes(p));
        }""", arg=[t("train.choose_run"), list(parts)], timeout=timeout_ms,
        polling=POLL_MS)


def run_progress(server, sid: str):
    """What moves while the session's newest run goes on: its status and its step."""
    runs = RunStore(server.home / "runs.db").list_runs(session=sid, kind="train", limit=1)
    return (runs[0].status, (runs[0].progress or {}).get("step")) if runs else None


def loss_steps_grow(page, t, timeout_ms: int) -> None:
    """The last step on the Train page's loss chart grows while the run trains."""
    last = page.wait_for_function(f"(t) => ({LOSS_CHART_LAST_STEP})(t)", arg=t("common.loss"),
                                  timeout=timeout_ms, polling=POLL_MS).json_value()
    page.wait_for_function(f"(t) => ({LOSS_CHART_LAST_STEP})(t) > {last}", arg=t("common.loss"),
                           timeout=timeout_ms, polling=POLL_MS)


@pytest.mark.timeout(1800)
def test_one_training_story_by_keyboard_then_watched_cancelled_and_compared(server, browser):
    """The browser's one end-to-end training story, in Spanish. A keyboard-only student (Tab,
    Shift+Tab, Enter, digits) sets a small run on the Train page (1 epoch, batch 32, 256 images
    from the Advanced section), starts it, and it appears and finishes without a reload, its
    accuracy in the language's notation; axe finds nothing serious on the Train page showing
    it, and on a phone its view fits the screen's width. A second, longer run shows its loss
    chart growing, survives a reload still live, and is cancelled from the page. The Results
    page reads the newest run with a result (axe again), and the Runs page compares the two."""
    lang, sid = KEYBOARD_LANG, KEYBOARD_SID
    t = i18n.translator(lang)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    found: dict[str, list[str]] = {}
    try:
        page.goto(page_url(server, "train", lang, sid))
        wait_idle(page)
        page.locator("body").focus()      # start from the top of the page, as after a load
        type_number(page, t("common.epochs"), 1)
        type_number(page, t("common.batch_size"), 32)
        # the subset is beyond the tutorial's six, in the Advanced section: opened by keyboard
        advanced = t("train.advanced")
        tab_to(page, lambda f: f["tag"] == "SUMMARY" and advanced in f["name"],
               f"the section «{advanced}»")
        page.keyboard.press("Enter")
        wait_idle(page)
        type_number(page, t("common.train_subset"), 256)
        screenshot(page, f"{lang}-a11y-keyboard-set")
        start = t("train.start")   # above the section: back up to it
        tab_to(page, lambda f: f["tag"] == "BUTTON" and f["name"].split("\n")[-1].strip() == start,
               f"the button «{start}»", key="Shift+Tab")
        page.keyboard.press("Enter")
        # the new run appears without a reload (the page said "No run yet" before): the one
        # set by keyboard
        summary = t("train.run_summary", epochs=t("counts.epochs", n=1), batch=32, lr=0.001,
                    images=i18n.number(256, lang))
        wait_for_chosen_run(page, t, summary, timeout_ms=60_000)
        # it finishes, and the page says so by itself: wait as long as the run moves on
        finished = page.get_by_text(t("train.finished"))
        wait_on_progress(finished.is_visible, lambda: run_progress(server, sid), page=page)
        wait_idle(page)
        metric = page.locator('[data-testid="stMetric"]').filter(has_text=t("train.accuracy_final"))
        accuracy = metric.first.locator('[data-testid="stMetricValue"]').inner_text().strip()
        value = re.fullmatch(r"(\d+(?:,\d+)?)\s*%", accuracy.replace("\u00a0", " "))
        assert value, f"no accuracy in the language's notation: {accuracy!r}"
        assert 0 <= float(value.group(1).replace(",", ".")) <= 100
        assert run_progress(server, sid)[0] == "done"
        assert not page_problems(page)
        screenshot(page, f"{lang}-a11y-keyboard-done")
        check_whole_page(page, f"train with a finished run ({lang})", found)
        # on a phone the finished run's view (its epochs table, charts) fits the screen's width
        page.set_viewport_size({"width": 390, "height": 844})
        wait_idle(page)
        phone = page.evaluate(PHONE_JS, t("train.start"))
        assert phone["docWidth"] <= phone["innerWidth"], phone
        assert phone["mainWidth"] <= phone["mainClient"], phone
        page.set_viewport_size({"width": 1400, "height": 1000})
        wait_idle(page)

        # a second run, long enough (2 epochs of 20,000 images, the shared server's limit, the
        # tutorial's batch of 4) to be stopped from the page; its data read in one process
        open_advanced(page, t)
        set_number(page, t("common.epochs"), 2)
        set_number(page, t("common.batch_size"), 4)
        set_number(page, t("common.train_subset"), 20000)
        set_number(page, t("common.num_workers"), 0)
        page.get_by_role("button", name=t("train.start"), exact=True).click()
        chosen = page.get_by_role("combobox", name=t("train.choose_run"), exact=True)
        images = i18n.number(20000, lang)
        wait_for_chosen_run(page, t, images, t("status.running"), timeout_ms=90_000)
        loss_steps_grow(page, t, timeout_ms=90_000)          # live
        screenshot(page, f"{lang}-train-running")
        page.reload()                  # the same ?sid= link finds the run again, still live
        wait_idle(page)
        assert images in chosen.input_value()
        loss_steps_grow(page, t, timeout_ms=60_000)
        page.get_by_role("button", name=t("train.cancel"), exact=True).click()
        wait_for_chosen_run(page, t, images, t("status.cancelled"), timeout_ms=60_000)
        wait_idle(page)
        assert t("train.run_summary", epochs=t("counts.epochs", n=2), batch=4, lr=0.001,
                 images=images) in chosen.input_value()
        assert not page_problems(page)
        screenshot(page, f"{lang}-train-cancelled")

        # the Results page reads the session's newest run with a result: the cancelled one,
        # evaluated as it stood (the page says so)
        go_by_sidebar(page, "results")
        metric = page.locator('[data-testid="stMetric"]').filter(
            has_text=t("results.overall_accuracy"))
        metric.first.wait_for(timeout=120_000)
        wait_idle(page)
        assert "%" in metric.first.inner_text()
        check_whole_page(page, f"results with a finished run ({lang})", found)
        assert not page_problems(page)
        screenshot(page, f"{lang}-results-after-train")

        # the Runs page compares the two: loss curves overlaid, a table of both
        go_by_sidebar(page, "runs")
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        wait_idle(page)
        traces = page.evaluate("() => Math.max(...[...document.querySelectorAll("
                               "'.js-plotly-plot')].map(el => (el.data || []).length))")
        assert traces >= 2                      # one loss curve per run
        assert not page_problems(page)
        screenshot(page, f"{lang}-runs-after-train")
    finally:
        page.close()
    assert not found, report(found)
