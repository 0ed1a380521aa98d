"""A student's session in a real browser: closing the tab loses nothing (the same browser finds
its runs again without a link, even when it comes back through a link on another site), the
cookie is as strict as a page can set it, another browser is another person, and a damaged
``?sid=`` never locks a session into an error. The server runs as hosts run it (server.py)."""
from __future__ import annotations

import time
from urllib.parse import parse_qs, urlparse

import pytest

from browser_support import page_problems, wait_idle

pytestmark = pytest.mark.browser


def sid_of(page) -> str:
    page.wait_for_function("() => new URLSearchParams(location.search).get('sid')")
    return parse_qs(urlparse(page.url).query)["sid"][0]


def test_the_same_browser_finds_its_session_again_and_another_browser_is_another_person(
        server, browser):
    """The same browser finds its session again without a link, after the tab is closed and
    when coming back through another site's link: SameSite=Strict keeps the cookie off a
    navigation from another site; the page's own connection (where the app reads it) still
    carries it. Another browser is another person, and a damaged ``?sid=`` in its link is
    replaced, not an error (one context each: a new context loads the frontend cold)."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{server.url}/runs?lang=es")
        wait_idle(page)
        first = sid_of(page)
        page.wait_for_function(f"() => document.cookie.includes('cifarlab_sid={first}')")
        cookie = next(c for c in context.cookies() if c["name"] == "cifarlab_sid")
        assert cookie["sameSite"] == "Strict" and not cookie["secure"]   # http here
        assert 29 * 86400 < cookie["expires"] - time.time() <= 30 * 86400
        page.close()   # the tab is closed; the student comes back later, without the link
        again = context.new_page()
        again.goto(f"{server.url}/?lang=es")
        wait_idle(again)
        assert sid_of(again) == first
        # "your link" in the sidebar carries the same session to another device
        assert f"sid={first}" in again.get_by_test_id("stSidebar").inner_text()
        again.close()
        elsewhere = context.new_page()          # a page of no site of ours (an LMS, a mail)
        elsewhere.set_content(f'<a id="go" href="{server.url}/runs?lang=pt">CIFAR Lab</a>')
        with elsewhere.expect_request(lambda r: r.url.startswith(f"{server.url}/runs")) as nav:
            elsewhere.click("#go")
        assert "cifarlab_sid" not in (nav.value.all_headers().get("cookie") or "")
        wait_idle(elsewhere)
        assert sid_of(elsewhere) == first
    finally:
        context.close()
    other = browser.new_context()   # another browser: another person, whose link is damaged
    try:
        page = other.new_page()
        page.goto(f"{server.url}/runs?lang=pt&sid=abcdefgh1234%0A")
        wait_idle(page)
        assert not page_problems(page)    # a damaged ?sid= is replaced, never an error
        sid = sid_of(page)
        assert sid != "abcdefgh1234\n" and "\n" not in sid and len(sid) >= 8
        assert sid != first
        page.reload()
        wait_idle(page)
        assert not page_problems(page) and sid_of(page) == sid
    finally:
        other.close()
