"""A student's session in a real browser: closing the tab loses nothing (the same browser finds
its runs again without a link), another browser is another person, and a damaged ``?sid=``
never locks a session into an error."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from browser_support import page_problems, wait_idle

pytestmark = pytest.mark.browser


def sid_of(page) -> str:
    page.wait_for_function("() => new URLSearchParams(location.search).get('sid')")
    return parse_qs(urlparse(page.url).query)["sid"][0]


def test_the_same_browser_finds_its_session_again_without_a_link(server, browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{server.url}/runs?lang=es")
        wait_idle(page)
        first = sid_of(page)
        page.wait_for_function(f"() => document.cookie.includes('cifarlab_sid={first}')")
        page.close()   # the tab is closed; the student comes back later, without the link
        again = context.new_page()
        again.goto(f"{server.url}/?lang=es")
        wait_idle(again)
        assert sid_of(again) == first
        # "your link" in the sidebar carries the same session to another device
        assert f"sid={first}" in again.get_by_test_id("stSidebar").inner_text()
    finally:
        context.close()
    other = browser.new_context()   # another browser: another person
    try:
        page = other.new_page()
        page.goto(f"{server.url}/?lang=es")
        wait_idle(page)
        assert sid_of(page) != first
    finally:
        other.close()


def test_a_damaged_sid_in_the_link_is_replaced_not_an_error(server, browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{server.url}/runs?lang=pt&sid=abcdefgh1234%0A")
        wait_idle(page)
        assert not page_problems(page)
        sid = sid_of(page)
        assert sid != "abcdefgh1234\n" and "\n" not in sid and len(sid) >= 8
        page.reload()
        wait_idle(page)
        assert not page_problems(page) and sid_of(page) == sid
    finally:
        context.close()
