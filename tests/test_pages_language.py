"""AppTest: the language a person meets, through the real entry point (app.py). A first visit
takes the browser's language (``st.context.locale``, which AppTest seeds through
``AppTest.context``); a language the person names (``?lang=``, the sidebar's switch, Home's own
switch) wins over the browser's for the rest of the session and is kept in their URL; the
browser's alone is not written into any link."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture(autouse=True)
def _env(monkeypatch, cifar_archive, cifar_cache_dir, tmp_path):
    monkeypatch.setenv("CIFARLAB_DATA", str(cifar_archive))
    monkeypatch.setenv("CIFARLAB_CACHE", str(cifar_cache_dir))
    monkeypatch.setenv("CIFARLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CIFARLAB_CONFIG", raising=False)


def visit(locale: str | None, **params) -> AppTest:
    """A first visit to Home from a browser whose language is ``locale``."""
    at = AppTest.from_file(APP, default_timeout=120)   # a hang guard, not a speed bound
    at.context = {"locale": locale}
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown_in(at: AppTest, lang: str) -> None:
    """Home and its switch are in ``lang``."""
    t = i18n.translator(lang)
    assert [h.value for h in at.subheader][0] == t("home.route_title")
    assert at.info[0].value == t("home.start_here")
    assert at.segmented_control(key="home_lang").value == lang


def sidebar_in(at: AppTest, lang: str) -> None:
    """The sidebar's switch shows ``lang``, in ``lang``. (Only after a session's first run:
    AppTest reruns a multipage app's page alone, without app.py and its sidebar.)"""
    box = at.sidebar.selectbox(key="lang_select")
    assert (box.value, box.label) == (lang, i18n.t("sidebar.language", lang))


def resume_link(at: AppTest) -> str:
    return next(c.value for c in at.sidebar.code if c.value.startswith("?sid="))


@pytest.mark.parametrize("locale, lang", [("pt-BR", "pt"), ("es-AR", "es"), ("en-US", "en"),
                                          ("de-DE", "en")])
def test_a_first_visit_takes_the_browsers_language(locale, lang):
    at = visit(locale)
    shown_in(at, lang)
    sidebar_in(at, lang)
    # the browser's language is not the person's choice: no link of theirs carries it
    assert "lang" not in at.query_params and "sid" in at.query_params
    assert "lang=" not in resume_link(at)
    at.run()                                   # and it holds on the next rerun
    shown_in(at, lang)


def test_a_language_named_in_the_url_wins_over_the_browsers():
    at = visit("pt-BR", lang="es")
    shown_in(at, "es")
    sidebar_in(at, "es")
    assert at.query_params["lang"] == "es" and resume_link(at).endswith("&lang=es")


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_homes_switch_wins_over_the_browsers_language_for_the_session(lang):
    at = visit("pt-BR" if lang != "pt" else "es-ES")
    at.segmented_control(key="home_lang").set_value(lang).run()
    assert not at.exception
    shown_in(at, lang)
    assert at.session_state["lang_chosen"] is True   # so the URL carries it (test_browser.py)
    at.run()                                   # the browser's language does not come back
    shown_in(at, lang)
    # clicking the chosen language again (which unselects it) keeps it
    at.segmented_control(key="home_lang").set_value(None).run()
    assert not at.exception
    shown_in(at, lang)


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_the_sidebars_switch_and_homes_follow_each_other(lang):
    at = visit("pt-BR" if lang != "pt" else "en-US")
    at.sidebar.selectbox(key="lang_select").set_value(lang).run()
    assert not at.exception
    shown_in(at, lang)                         # Home's switch shows the sidebar's choice
    assert at.session_state["lang_chosen"] is True and at.session_state["lang"] == lang
