"""Real browser: `streamlit run server.py` driven by the system Chromium through Playwright.

Every page in Portuguese by its sidebar link, from a pt-BR browser's first visit, then the
person's choice of language (in English and Spanish every page is test_browser_a11y.py's and
test_browser_spanish.py's; the training story is test_browser_a11y.py's); screenshots kept in
test-artifacts/.
"""
from __future__ import annotations


import pytest

from browser_support import (check_language_and_links, english_sentences,
                             go_by_sidebar, page_problems, screenshot, wait_idle)
from cifarlab import i18n
from ui.nav import PAGES

pytestmark = pytest.mark.browser
PAGE_IDS = [pid for pid, _, _ in PAGES]


def page_url(server, pid: str, lang: str) -> str:
    return f"{server.url}/{'' if pid == 'home' else pid}?lang={lang}"


def test_portuguese_from_the_browser_on_every_page_then_the_persons_choice(server, browser):
    """A pt-BR browser opening the bare address meets Portuguese (on a phone, with Home's own
    switch on the first screen: the sidebar is collapsed there). Every page, reached by its
    sidebar link, in Portuguese: no exception, the document, navigation and lesson links in
    Portuguese, no English sentence of the catalogs (Spanish: test_browser_spanish.py's walk;
    English: test_browser_a11y.py's). Then the person's choice: the sidebar's switch picks
    Spanish and keeps the page it is on, the document's language follows it and stays on a
    page switch; Home's switch picks English for the session, carried in the URL, and a reload
    keeps it. How long a switch takes is bench/bench_page_switch.py's (docs/benchmarks.md §6)."""
    lang = "pt"
    t, en, english = i18n.translator(lang), i18n.translator("en"), english_sentences(lang)
    assert len(english) > 200                      # the check has something to look for
    context = browser.new_context(locale="pt-BR", viewport={"width": 1400, "height": 1000})
    found = {}

    def check_rendered(pid: str) -> None:
        assert not page_problems(page), pid
        check_language_and_links(page, pid, lang, PAGE_IDS)
        text = page.get_by_test_id("stMain").inner_text() + \
            page.get_by_test_id("stSidebar").inner_text()
        if hits := [s for s in english if s in text]:
            found[pid] = hits[:5]
        if pid == "speed":   # the "what each trick buys" chart, in the language
            assert page.locator('[data-testid="stPlotlyChart"]').count() == 1
            assert t("speed.chart_title") in page.locator(".js-plotly-plot").inner_text()
            assert t("speed.why_tta") in text
        screenshot(page, f"{lang}-{pid}")

    try:
        phone = context.new_page()
        phone.set_viewport_size({"width": 390, "height": 844})
        phone.goto(server.url)
        wait_idle(phone)
        main = phone.get_by_test_id("stMain")
        main.get_by_text(t("home.route_title"), exact=True).wait_for()
        assert phone.evaluate("document.documentElement.lang") == "pt"
        assert "lang=" not in phone.url          # the browser's language is no one's choice
        switch = main.get_by_test_id("stButtonGroup").filter(has_text=i18n.LANGUAGES["es"])
        box = switch.bounding_box()
        assert box and box["y"] + box["height"] <= 844, box   # on the first screen
        assert not page_problems(phone)
        screenshot(phone, "pt-BR-first-visit-home-phone")
        phone.close()

        page = context.new_page()
        page.goto(server.url)
        wait_idle(page)
        check_rendered("home")
        for pid in PAGE_IDS[1:]:
            go_by_sidebar(page, pid)
            check_rendered(pid)

        # the sidebar's switch: Spanish, on the page it is on; and it stays on a page switch
        last = PAGE_IDS[-1]
        page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
        page.get_by_role("option", name=i18n.LANGUAGES["es"]).click()
        page.wait_for_url(f"**/{last}?*lang=es*", timeout=60_000)
        wait_idle(page)
        page.wait_for_function("document.documentElement.lang === 'es'", timeout=60_000)
        assert i18n.t("nav.loss", "es") in page.get_by_test_id("stSidebarNav").inner_text()
        go_by_sidebar(page, "loss")
        assert page.evaluate("document.documentElement.lang") == "es"
        assert "lang=es" in page.url

        # Home's switch: English for the session, in the URL; a reload keeps the choice
        go_by_sidebar(page, "home")
        main = page.get_by_test_id("stMain")
        main.get_by_test_id("stButtonGroup").get_by_text(i18n.LANGUAGES["en"], exact=True).click()
        page.wait_for_url("**/?*lang=en*", timeout=30_000)
        wait_idle(page)
        main.get_by_text(en("home.route_title"), exact=True).first.wait_for()
        page.reload()
        wait_idle(page)
        main.get_by_text(en("home.route_title"), exact=True).first.wait_for()
        assert page.evaluate("document.documentElement.lang") == "en"
        assert not page_problems(page)
    finally:
        context.close()
    assert not found, found
