"""Accessibility in a real browser (`streamlit run app.py`, the system Chromium, Playwright).

- axe-core (through axe-playwright-python) on every page: no violation of impact "serious" or
  "critical" (moderate and minor ones are printed). Here in English, each tab opened and each
  expander in it (each page's first render also: no exception, a screenshot); in Spanish,
  every page as it opens, in the walk of test_browser_spanish.py (which loads each page in
  that language anyway: the markup does not change with the language; Portuguese renders in
  test_browser.py's Portuguese walk, without axe).
- A keyboard-only student (Tab, Shift+Tab, Enter, Space, arrows, digits): sets a small run on
  the Train page, starts it, waits for it to finish and reads its accuracy. The Train and
  Results pages are then checked with axe again, now that they show a run.
- Each page's ``<html lang>``, navigation and previous / next lesson links are in the page's
  language (``browser_support.check_language_and_links``; es and pt in their walks).
"""
from __future__ import annotations

import re

import pytest

from browser_support import (check_axe, check_language_and_links, page_problems,
                             report, screenshot, tall_screenshot, wait_idle)
from cifarlab import i18n
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
    there: one axe pass per tab covers both)."""
    main = '[data-testid="stMain"]'
    tabs = page.locator(f'{main} [role="tab"]')
    if not tabs.count():
        open_expanders(page, main)
        check_axe(page, f"{where}, expanders open", found)
        return
    for i in range(tabs.count()):
        tabs.nth(i).click()
        wait_idle(page)
        open_expanders(page, f'{main} [role="tabpanel"]:not([hidden])')
        check_axe(page, f"{where}, tab {i + 1} «{tabs.nth(i).inner_text().strip()}»", found)


@pytest.mark.parametrize("pid", PAGE_IDS)
def test_axe_finds_nothing_serious(server, browser, pid):
    lang = "en"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    found: dict[str, list[str]] = {}
    try:
        page.goto(page_url(server, pid, lang))
        wait_idle(page)
        assert not page_problems(page)
        check_language_and_links(page, pid, lang, PAGE_IDS)
        screenshot(page, f"{lang}-{pid}")
        check_whole_page(page, f"{pid} ({lang})", found)
        assert not page_problems(page)
    finally:
        page.close()
    assert not found, report(found)


def test_the_document_language_follows_the_language_switch(server, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(page_url(server, "data", "en"))
        wait_idle(page)
        assert page.evaluate("document.documentElement.lang") == "en"
        page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
        page.get_by_role("option", name=i18n.LANGUAGES["es"]).click()
        page.wait_for_url("**/data?*lang=es*", timeout=60_000)
        wait_idle(page)
        page.wait_for_function("document.documentElement.lang === 'es'", timeout=60_000)
        # and it stays on a page switch
        page.locator('[data-testid="stSidebarNav"] a[href*="/loss"]').first.click()
        page.wait_for_url("**/loss?*", timeout=60_000)
        wait_idle(page)
        assert page.evaluate("document.documentElement.lang") == "es"
    finally:
        page.close()


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


@pytest.fixture(scope="module")
def keyboard_run(server, browser):
    """A run set, started and read with the keyboard only, in Spanish. Returns what the page
    showed: {"accuracy": text of the accuracy metric, "sid": the session}."""
    t = i18n.translator(KEYBOARD_LANG)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(page_url(server, "train", KEYBOARD_LANG, KEYBOARD_SID))
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
        screenshot(page, f"{KEYBOARD_LANG}-a11y-keyboard-set")

        start = t("train.start")   # above the section: back up to it
        tab_to(page, lambda f: f["tag"] == "BUTTON" and f["name"].split("\n")[-1].strip() == start,
               f"the button «{start}»", key="Shift+Tab")
        page.keyboard.press("Enter")
        # the page's own progress: "finished" appears once the run is done (a hang guard only)
        page.get_by_text(t("train.finished")).wait_for(timeout=900_000)
        wait_idle(page)
        metric = page.locator('[data-testid="stMetric"]').filter(has_text=t("train.accuracy_final"))
        accuracy = metric.first.locator('[data-testid="stMetricValue"]').inner_text().strip()
        chosen = page.get_by_role("combobox", name=t("train.choose_run"), exact=True).input_value()
        problems = page_problems(page)
        screenshot(page, f"{KEYBOARD_LANG}-a11y-keyboard-done")
    finally:
        page.close()
    return {"accuracy": accuracy, "chosen": chosen, "problems": problems, "sid": KEYBOARD_SID}


@pytest.mark.timeout(1800)
def test_keyboard_only_train_a_run_and_read_its_accuracy(keyboard_run):
    t = i18n.translator(KEYBOARD_LANG)
    assert not keyboard_run["problems"]
    # the run that was trained is the one set by keyboard: 1 epoch, 256 images, batch 32
    assert t("train.run_summary", epochs=1, batch=32, lr=0.001,
             images=i18n.number(256, KEYBOARD_LANG)) in keyboard_run["chosen"], keyboard_run
    value = re.fullmatch(r"(\d+(?:,\d+)?)\s*%", keyboard_run["accuracy"].replace("\u00a0", " "))
    assert value, f"no accuracy in the language's notation: {keyboard_run['accuracy']!r}"
    assert 0 <= float(value.group(1).replace(",", ".")) <= 100


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("lang", ["en"])  # es/pt: the results page below, and the es/pt walk
def test_axe_on_the_train_page_with_a_finished_run(server, browser, keyboard_run, lang):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    found: dict[str, list[str]] = {}
    t = i18n.translator(lang)
    try:
        page.goto(page_url(server, "train", lang, keyboard_run["sid"]))
        wait_idle(page)
        page.get_by_text(t("train.finished")).wait_for(timeout=60_000)
        check_whole_page(page, f"train with a finished run ({lang})", found)
        tall_screenshot(page, f"{lang}-a11y-train-with-run")
    finally:
        page.close()
    assert not found, report(found)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("lang", ["en"])   # the markup is the same in every language
def test_axe_on_the_results_page_with_a_finished_run(server, browser, keyboard_run, lang):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    found: dict[str, list[str]] = {}
    t = i18n.translator(lang)
    try:
        page.goto(page_url(server, "results", lang, keyboard_run["sid"]))
        wait_idle(page)
        page.locator('[data-testid="stMetric"]').filter(
            has_text=t("results.overall_accuracy")).first.wait_for(timeout=120_000)
        wait_idle(page)
        check_whole_page(page, f"results with a finished run ({lang})", found)
        tall_screenshot(page, f"{lang}-a11y-results-with-run")
    finally:
        page.close()
    assert not found, report(found)
