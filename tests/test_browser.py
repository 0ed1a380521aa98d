"""Real browser: `streamlit run app.py` driven by the system Chromium through Playwright.

Every page in Portuguese by its sidebar link (in English and Spanish every page is
test_browser_a11y.py's and test_browser_spanish.py's), screenshots kept in test-artifacts/;
the language from the browser, then the person's choice; a server's first request a page; the
conv calculator; one end-to-end training story.
"""
from __future__ import annotations


import pytest

from browser_support import (ARRIVED_JS, LOSS_CHART_LAST_STEP, PHONE_JS, StreamlitServer,
                             check_language_and_links, english_sentences, open_advanced,
                             page_problems, screenshot, wait_idle, wait_on_progress)
from cifarlab import i18n
from cifarlab.serve.store import RunStore
from ui.nav import PAGES

pytestmark = pytest.mark.browser
PAGE_IDS = [pid for pid, _, _ in PAGES]


def page_url(server, pid: str, lang: str) -> str:
    return f"{server.url}/{'' if pid == 'home' else pid}?lang={lang}"


def test_the_browsers_language_first_then_the_persons_choice(server, browser):
    """A pt-BR browser opening the bare address meets Portuguese (on a phone, with Home's own
    switch on the first screen: the sidebar is collapsed there); Home's switch picks English for
    the session, carried in the URL; the sidebar's switch keeps the page it is on."""
    pt, en = i18n.translator("pt"), i18n.translator("en")
    context = browser.new_context(locale="pt-BR", viewport={"width": 1400, "height": 1000})
    try:
        phone = context.new_page()
        phone.set_viewport_size({"width": 390, "height": 844})
        phone.goto(server.url)
        wait_idle(phone)
        main = phone.get_by_test_id("stMain")
        main.get_by_text(pt("home.route_title"), exact=True).wait_for()
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
        main = page.get_by_test_id("stMain")
        main.get_by_test_id("stButtonGroup").get_by_text(i18n.LANGUAGES["en"], exact=True).click()
        page.wait_for_url("**/?*lang=en*", timeout=30_000)
        wait_idle(page)
        main.get_by_text(en("home.route_title"), exact=True).first.wait_for()
        page.reload()                             # the choice, not the browser's, stays
        wait_idle(page)
        main.get_by_text(en("home.route_title"), exact=True).first.wait_for()

        page.goto(page_url(server, "network", "en"))
        wait_idle(page)
        page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
        page.get_by_role("option", name=i18n.LANGUAGES["pt"]).click()
        page.wait_for_url("**/network?*lang=pt*", timeout=30_000)
        wait_idle(page)
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert i18n.t("nav.loss", "pt") in nav
        assert not page_problems(page)
    finally:
        context.close()


def test_every_page_in_portuguese_by_the_sidebar(server, browser):
    """Every page, reached by its sidebar link, in Portuguese: no exception, the document,
    navigation and lesson links in Portuguese, no English sentence of the catalogs (Spanish:
    test_browser_spanish.py's walk; English: test_browser_a11y.py's axe on every page). How
    long a switch takes is bench/bench_page_switch.py's (docs/benchmarks.md section 6)."""
    lang = "pt"
    t, english = i18n.translator(lang), english_sentences(lang)
    assert len(english) > 200                      # the check has something to look for
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
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
        page.goto(page_url(server, "home", lang))
        wait_idle(page)
        check_rendered("home")
        for pid in PAGE_IDS[1:]:
            before = page.locator("h1").first.inner_text()
            page.locator(f'[data-testid="stSidebarNav"] a[href*="/{pid}"]').first.click()
            page.wait_for_function(ARRIVED_JS, arg=before, timeout=60_000)
            wait_idle(page)
            assert pid in page.url
            check_rendered(pid)
    finally:
        page.close()
    assert not found, found


def test_first_visit_straight_to_a_page_gets_the_app_frame(browser, tmp_path, cifar_archive):
    """A fresh server whose very first request is a page URL (a link handed out in class)."""
    srv = StreamlitServer(tmp_path, env={"CIFARLAB_DATA": str(cifar_archive)}).start()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(page_url(srv, "network", "es"))
        wait_idle(page)
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        for pid in PAGE_IDS:  # the app's translated navigation, not file names
            assert i18n.t(f"nav.{pid}", "es") in nav
        assert "common" not in nav.lower()
        assert page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').count() >= 1
        assert not page_problems(page)
        screenshot(page, "first-visit-network-es")
    finally:
        page.close()
        srv.stop()


def active_panel(page):
    """The tab panel that is showing (Streamlit keeps the others in the page, hidden)."""
    return page.locator('[role="tabpanel"]:not([hidden])')


def set_number(scope, label: str, value) -> None:
    box = scope.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")


def test_conv_calculator_in_the_browser(server, browser):
    t = i18n.translator("en")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(page_url(server, "network", "en"))
        wait_idle(page)
        page.get_by_role("tab", name=t("network.calc_title")).click()
        panel = active_panel(page)
        result = panel.locator('[data-testid="stMetricValue"]')
        assert result.inner_text().strip() == "28"          # 32 → conv 5×5 → 28, the tutorial's
        set_number(panel, t("network.stride"), 2)
        page.wait_for_function(
            """() => [...document.querySelectorAll('[role="tabpanel"]:not([hidden]) '
                   + '[data-testid="stMetricValue"]')].some(e => e.innerText.trim() === '14')""",
            timeout=30_000)
        wait_idle(page)
        assert t("network.not_exact") in panel.inner_text()      # (32 − 5) / 2 is not whole
        assert "⌊(32 + 2·0 − 1·(5 − 1) − 1) / 2⌋ + 1 = 14" in panel.inner_text()  # numbers in
        assert not page_problems(page)
        screenshot(page, "en-network-calculator")
    finally:
        page.close()


def wait_for_chosen_run(page, t, *parts: str, timeout_ms: int) -> None:
    """Wait until the Train page's run selector shows a run whose label has every part."""
    page.wait_for_function(
        """([label, parts]) => {
            const box = document.querySelector(`input[aria-label="${label}"]`);
            return box && parts.every(p => box.value.includes(p));
        }""", arg=[t("train.choose_run"), list(parts)], timeout=timeout_ms)


def newest_run(server, sid: str):
    """The newest run of session ``sid`` in the server's run store."""
    store = RunStore(server.home / "runs.db")
    runs = store.list_runs(session=sid, kind="train", limit=1)
    return runs[0] if runs else None


def run_progress(server, sid: str):
    """What moves while a run goes on: its status and its step."""
    run = newest_run(server, sid)
    return None if run is None else (run.status, (run.progress or {}).get("step"))


def test_train_watch_the_loss_cancel_and_read_the_results(server, browser):
    """A short run from the Train page finishes with an accuracy, shown without a reload; the
    Results page reads it; a second run shows its loss chart growing, survives a reload,
    still live, and is cancelled from the page; the Runs page compares the two."""
    t = i18n.translator("en")
    sid = "browser-student-01"
    # a desktop viewport, not a tall one: 2.4 times the height cost Chromium about 40 % more CPU
    # a page load (measured 2026-11-27); the screenshots show one viewport
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    train_url = page_url(server, "train", "en") + f"&sid={sid}"
    try:
        page.goto(train_url)
        wait_idle(page)
        set_number(page, t("common.epochs"), 1)
        wait_idle(page)
        # sized for the test: long enough to train, short enough on a busy machine
        open_advanced(page, t)
        set_number(page, t("common.train_subset"), 2000)
        wait_idle(page)
        page.get_by_text(t("common.pipeline_fast")).click()
        wait_idle(page)
        assert page.get_by_label(t("common.epochs"), exact=True).input_value() == "1"
        assert page.get_by_label(t("common.train_subset"), exact=True).input_value() == "2000"
        page.get_by_role("button", name=t("train.start"), exact=True).click()
        # the new run appears without a reload (the page said "No run yet" before)
        wait_for_chosen_run(page, t, "1 epoch(s)", "2,000 images", timeout_ms=60_000)
        # it finishes, and the page says so by itself: wait as long as the run moves on
        finished = page.get_by_text(t("train.finished"))
        wait_on_progress(finished.is_visible, lambda: run_progress(server, sid), page=page)
        wait_idle(page)
        body = page.locator('[data-testid="stMain"]').inner_text()
        assert t("train.accuracy_final") in body
        assert newest_run(server, sid).status == "done"
        assert not page_problems(page)
        screenshot(page, "en-train-done")
        # on a phone the finished run's view (its epochs table, charts) fits the screen's width
        page.set_viewport_size({"width": 390, "height": 844})
        wait_idle(page)
        phone = page.evaluate(PHONE_JS, t("train.start"))
        assert phone["docWidth"] <= phone["innerWidth"], phone
        assert phone["mainWidth"] <= phone["mainClient"], phone
        page.set_viewport_size({"width": 1400, "height": 1000})
        wait_idle(page)

        # a second run, long enough (2 epochs of 20,000 images, the shared server's limit) to be
        # stopped from the page
        set_number(page, t("common.epochs"), 2)
        wait_idle(page)
        set_number(page, t("common.train_subset"), 20000)
        wait_idle(page)
        page.get_by_role("button", name=t("train.start"), exact=True).click()
        chosen = page.get_by_role("combobox", name=t("train.choose_run"), exact=True)
        wait_for_chosen_run(page, t, "20,000 images", t("status.running"), timeout_ms=90_000)
        # live: the last step on the loss chart grows while the run trains
        first = page.wait_for_function(f"(t) => ({LOSS_CHART_LAST_STEP})(t)",
                                       arg=t("common.loss"), timeout=90_000).json_value()
        page.wait_for_function(f"(t) => ({LOSS_CHART_LAST_STEP})(t) > {first}",
                               arg=t("common.loss"), timeout=90_000)
        screenshot(page, "en-train-running")
        # a reload (the same ?sid= link) finds the run again, still live
        page.reload()
        wait_idle(page)
        assert "20,000 images" in chosen.input_value()
        seen = page.wait_for_function(f"(t) => ({LOSS_CHART_LAST_STEP})(t)", arg=t("common.loss"),
                                      timeout=60_000).json_value()
        page.wait_for_function(f"(t) => ({LOSS_CHART_LAST_STEP})(t) > {seen}",
                               arg=t("common.loss"), timeout=60_000)
        page.get_by_role("button", name=t("train.cancel"), exact=True).click()
        wait_for_chosen_run(page, t, "20,000 images", t("status.cancelled"), timeout_ms=60_000)
        wait_idle(page)
        assert "2 epoch(s)" in chosen.input_value()
        assert not page_problems(page)
        screenshot(page, "en-train-cancelled")

        # the Results page reads the finished run (the newest finished run of this session)
        page.goto(page_url(server, "results", "en") + "&sid=browser-student-01")
        wait_idle(page)
        metric = page.locator('[data-testid="stMetric"]').filter(
            has_text=t("results.overall_accuracy"))
        metric.first.wait_for(timeout=60_000)
        wait_idle(page)
        assert "%" in metric.first.inner_text()
        assert not page_problems(page)
        screenshot(page, "en-results-after-train")

        # the Runs page compares the two: loss curves overlaid, a table of both
        page.goto(page_url(server, "runs", "en") + "&sid=browser-student-01")
        wait_idle(page)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        wait_idle(page)
        traces = page.evaluate("() => Math.max(...[...document.querySelectorAll("
                               "'.js-plotly-plot')].map(el => (el.data || []).length))")
        assert traces >= 2                      # one loss curve per run
        assert not page_problems(page)
        screenshot(page, "en-runs-after-train")
    finally:
        page.close()
