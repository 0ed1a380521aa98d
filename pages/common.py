"""What every page shares: the language, translations, the cached data set, the session id.

Streamlit lives here and in the page files, never in ``cifarlab``. Pages stay thin: widgets,
one call into ``cifarlab``, a plotly figure or a pandas table.

    from pages.common import lang, t, get_data, lesson, show_error
    t = translator()            # in a page: t("nav.home")
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets

import streamlit as st

from cifarlab import i18n
from cifarlab.errors import CifarLabError
from cifarlab.serve import identity
from cifarlab.serve.identity import Person

SESSION_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
log = logging.getLogger("cifarlab.pages")

# Page id -> file, in teaching order. The id is the URL path (the same in every language).
PAGES = [
    ("home", "pages/home.py", ":material/school:"),
    ("tensors", "pages/tensors.py", ":material/view_in_ar:"),
    ("data", "pages/data.py", ":material/photo_library:"),
    ("network", "pages/network.py", ":material/hub:"),
    ("loss", "pages/loss.py", ":material/trending_down:"),
    ("train", "pages/train.py", ":material/model_training:"),
    ("results", "pages/results.py", ":material/insights:"),
    ("inside", "pages/inside.py", ":material/neurology:"),
    ("runs", "pages/runs.py", ":material/compare_arrows:"),
    ("gpu", "pages/gpu.py", ":material/speed:"),
    ("speed", "pages/speed.py", ":material/bolt:"),   # issue 13: what each trick buys
]
# Pages only instructors see: app.py adds them to the navigation for an instructor.
INSTRUCTOR_PAGES = [("classroom", "pages/classroom.py", ":material/groups:")]


# Runs and devices in one chart: the Okabe-Ito palette (told apart with every common colour
# blindness), and a line style per series as a second cue that needs no colour at all.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000",
           "#F0E442"]
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]


def series_style(column: str) -> dict:
    """``px.line`` arguments that give each value of ``column`` its colour and line style."""
    return dict(color=column, line_dash=column, color_discrete_sequence=PALETTE,
                line_dash_sequence=DASHES)


def checked_number(where, label: str, lo, hi, value, *, key: str, step=1, help=None,
                   format=None, disabled: bool = False):
    """A number box that checks its own range and says so in the student's language.

    Streamlit's own ``min_value``/``max_value`` answer in English and keep the previous value,
    so a result computed from it would stay on the screen (stale). Returns the value, or None
    when it is empty or outside ``lo``..``hi`` (the message is shown under the box): the caller
    then shows no result for it."""
    got = where.number_input(label, value=value, step=step, key=key, help=help, format=format,
                             disabled=disabled)
    if got is None or not lo <= got <= hi:
        where.error(t("common.out_of_range", lo=lo, hi=hi))
        return None
    return got


def decimal_box(where, label: str, lo: float, hi: float, value: float, *, key: str,
                help=None) -> float | None:
    """A box for a decimal, written in the student's notation and read with either mark
    (``i18n.parse_decimal``): the browser's number box turns a Spanish "0,5" into 5 without a
    word. Returns the value, or None with our message when it is no number or out of range."""
    if key not in st.session_state:
        st.session_state[key] = i18n.number(float(value), lang())
    got = i18n.parse_decimal(where.text_input(label, key=key, help=help, max_chars=24))
    if got is None or not lo <= got <= hi:
        where.error(t("common.out_of_range", lo=lo, hi=hi))
        return None
    return got


def set_fragment_interval(seconds: float | None) -> bool:
    """Change how often the running fragment polls, from inside it: True if it was asked.

    ``st.fragment(run_every=...)`` fixes the interval when the whole page runs; changing it
    otherwise takes an ``st.rerun()`` of the page, and reruns from inside a polling fragment
    collided with its timer under load (pages froze). The browser keeps one timer per fragment
    and replaces it when told a new interval (an ``auto_rerun`` message, the one run_every
    sends), so this sends that message for the fragment running now. It relies on Streamlit's
    internals (pinned in requirements.txt); without them it does nothing, and the fragment
    keeps the interval the page gave it."""
    if not seconds:
        return False
    try:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        from streamlit.runtime.scriptrunner_utils.script_run_context import (ThreadState,
                                                                              get_script_run_ctx)

        ctx, fragment_id = get_script_run_ctx(), ThreadState.get().fragment_id
    except (ImportError, AttributeError, RuntimeError):
        return False
    if ctx is None or not fragment_id:
        return False
    msg = ForwardMsg()
    msg.auto_rerun.interval = float(seconds)
    msg.auto_rerun.fragment_id = fragment_id
    ctx.enqueue(msg)
    return True


def lesson_links(current: str) -> None:
    """"Previous / next lesson" links under every page, in the syllabus's order (PAGES)."""
    ids = [pid for pid, _, _ in PAGES]
    if current not in ids:
        return
    i = ids.index(current)
    t = i18n.translator(lang())
    st.divider()
    left, right = st.columns(2)
    if i > 0:
        pid, path, icon = PAGES[i - 1]
        left.page_link(path, label=t("nav.previous", page=t(f"nav.{pid}")), icon=icon)
    if i + 1 < len(PAGES):
        pid, path, icon = PAGES[i + 1]
        with right:
            st.page_link(path, label=t("nav.next", page=t(f"nav.{pid}")), icon=icon)


def ensure_app_frame() -> None:
    """Make sure this run came through app.py's navigation.

    While a folder called ``pages/`` exists, a fresh server's first script run uses Streamlit's
    legacy folder-based multipage mode (until ``st.navigation`` is first called). A first visit
    straight to a page's URL would then run that page alone: no language switch, file names in
    the sidebar. A page reached that way turns the legacy mode off and reruns through app.py.
    """
    if not st.session_state.get("_app_frame"):
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False
        st.rerun()


def lang() -> str:
    """The current language: the sidebar choice, first taken from ``?lang=`` in the URL (else
    the cookie the sign-in buttons leave: a provider sends the browser back without it)."""
    if "lang" not in st.session_state:
        st.session_state["lang"] = i18n.normalize_lang(
            st.query_params.get("lang") or _cookie(LANG_COOKIE) or i18n.DEFAULT)
    return st.session_state["lang"]


def translator():
    """``t(key, **kwargs)`` in the current language. Name it ``t`` in pages (the catalog test
    scans pages for ``t("...")`` keys). Every page starts with it, so it also checks that the
    page runs inside the app's frame."""
    ensure_app_frame()
    return i18n.translator(lang())


def t(key: str, /, **kwargs) -> str:
    return i18n.t(key, lang(), **kwargs)


def num(value, digits: int | None = None) -> str:
    """A number in the page's language: ``num(50000)`` -> "50.000" in Spanish; None -> "–"."""
    return "–" if value is None else i18n.number(value, lang(), digits)


def pct(fraction, digits: int = 1) -> str:
    """A fraction as a percentage in the page's language: ``pct(0.553)`` -> "55,3 %"."""
    return "–" if fraction is None else i18n.percent(fraction, lang(), digits)


def dur(seconds) -> str:
    """A duration in the page's language: "0,25 s", "3 min 5 s"."""
    return "–" if seconds is None else i18n.duration(seconds, lang())


def localize(fig):
    """A plotly figure whose numbers (ticks, hover, bar labels) use the language's decimal
    and group symbols."""
    fig.update_layout(separators=i18n.separators(lang()))
    return fig


COOKIE = "cifarlab_sid"
COOKIE_DAYS = 180


def _valid(sid) -> bool:
    # fullmatch: "$" alone would also accept a trailing newline ("?sid=<id>%0A")
    return isinstance(sid, str) and SESSION_RE.fullmatch(sid) is not None


def _cookie(name: str) -> str | None:
    try:
        return st.context.cookies.get(name)
    except Exception:  # no browser (AppTest): no cookies
        return None


def _cookie_sid() -> str | None:
    sid = _cookie(COOKIE)
    return sid if _valid(sid) else None


def session_id() -> str:
    """A stable id for this browser's runs. It rides in the URL (``?sid=``), so a reload, a
    page switch or a second tab with the same link finds the same runs; and in a cookie, so
    the same browser finds them again after the tab was closed. A link from elsewhere
    (``?sid=`` of another device) wins over the cookie. A person signed in through an identity
    provider has one session on every device, from their e-mail (never from the URL)."""
    if "sid" not in st.session_state:
        sid = st.query_params.get("sid", "")
        st.session_state["sid"] = _user_session() or (sid if _valid(sid) else _cookie_sid()
                                                      or secrets.token_urlsafe(12))
    return st.session_state["sid"]


# -- who is asking: sign-in (see README, "Sign-in and instructors") -------------------------
# An identity provider configured in .streamlit/secrets.toml ([auth]: st.login, st.user) names
# the person; else students are this browser and the instructor gives the passphrase whose
# hash is [cifarlab] instructor_passphrase_hash. The role lives in the server's session state,
# never in the URL or a cookie a student could write.
INSTRUCTOR_KEY = "_cifarlab_instructor"   # set only by a right passphrase
NICKNAME_KEY = "nickname"                  # an anonymous student's name for others to see
# One per server process: slows down a browser guessing the passphrase, never one that is
# not guessing (see identity.AttemptLimiter and docs/security.md).
PASSPHRASE_LIMITER = identity.AttemptLimiter(name="instructor passphrase")
LANG_COOKIE = "cifarlab_lang"              # the language across a provider's round trip


def _secrets(name: str):
    """``st.secrets[name]``, or None: no secrets file, no such table, or a broken file."""
    try:
        section = st.secrets.get(name)
    except Exception:
        return None
    return section if hasattr(section, "get") else None


def provider_configured() -> bool:
    """Whether the host configured an identity provider (``[auth]`` in the secrets)."""
    return _secrets("auth") is not None


def passphrase_hash() -> str | None:
    value = (_secrets(identity.SECRETS_TABLE) or {}).get(identity.SECRETS_KEY)
    return value if isinstance(value, str) and value.strip() else None


def _claims() -> dict | None:
    """The signed-in user's ID-token claims, when they carry an e-mail the provider does not
    call unverified (the e-mail is the person here: their runs, their role), else None."""
    try:
        if (st.user.get("is_logged_in") and st.user.get("email")
                and st.user.get("email_verified") is not False):
            return dict(st.user)
    except Exception:  # sign-in not configured, or no script context
        pass
    return None


def _logged_in() -> bool:
    try:
        return bool(st.user.get("is_logged_in"))
    except Exception:
        return False


def signed_in() -> bool:
    """Whether an identity provider names the person (then no session rides in the URL)."""
    return _claims() is not None


def _user_session() -> str | None:
    claims, secret = _claims(), (_secrets("auth") or {}).get("cookie_secret")
    if claims is None or not secret:
        return None
    return identity.user_session(str(claims["email"]), str(secret))


def _browser() -> str:
    return _cookie_sid() or session_id()


def person() -> Person:
    """Who is asking (``cifarlab.serve.identity.Person``): the signed-in user where an identity
    provider is configured ("user:<e-mail>", an instructor when the hosting settings list the
    e-mail or its group); else the instructor who gave the passphrase in this session
    ("instructor:passphrase"); else this browser ("browser:<cookie id>", shared by its tabs;
    else this session's). (The client address is no identity in a classroom behind one NAT.)"""
    claims = _claims()
    if claims is not None:
        from cifarlab.serve.settings import load_settings

        try:
            s = load_settings()
        except CifarLabError as err:
            st.error(err.text(lang()))
            st.stop()
        return identity.signed_in(str(claims["email"]), claims.get("name"),
                                  claims.get(s.groups_claim), instructors=s.instructors,
                                  instructor_group=s.instructor_group)
    nickname = str(st.session_state.get(NICKNAME_KEY) or "")
    if st.session_state.get(INSTRUCTOR_KEY) is True:
        return identity.passphrase_instructor(nickname)
    return identity.anonymous(_browser(), nickname)


def owner_id() -> str:
    """The owner id runs are kept and counted under: ``person().id``."""
    return person().id


def try_passphrase(passphrase: str) -> str | None:
    """Sign this session in as the instructor when ``passphrase`` is right. None on success,
    else the catalog key of what went wrong (its text takes ``seconds`` and ``setting``)."""
    stored = passphrase_hash()
    if stored is None:
        return "identity.no_passphrase"
    try:
        wait = identity.try_passphrase(passphrase, stored, _browser(), PASSPHRASE_LIMITER)
    except identity.IdentityError:
        return "errors.identity.bad_hash"
    if wait is not None:
        return "identity.too_many" if wait > 0 else "identity.wrong_passphrase"
    st.session_state[INSTRUCTOR_KEY] = True
    return None


def sign_in_sidebar() -> None:
    """Sign in / sign out (app.py calls it in the sidebar): the provider's buttons where one
    is configured; else the instructor's passphrase box where a hash is; else nothing."""
    if provider_configured():
        # st.login / st.logout come back to "/" without ?lang=: a cookie keeps the language
        # (a code from i18n.LANGUAGES, safe inside the script)
        st.html(f"<script>document.cookie = '{LANG_COOKIE}={lang()}; path=/; max-age="
                f"{COOKIE_DAYS * 86400}; SameSite=Lax';</script>", unsafe_allow_javascript=True)
        if _claims() is None:
            if _logged_in():   # signed in, but with no (verified) e-mail to be known by
                st.caption(t("identity.no_email"))
                st.button(t("identity.sign_out"), key="identity_sign_out", on_click=st.logout)
                return
            st.button(t("identity.sign_in"), key="identity_sign_in", on_click=st.login,
                      type="primary")
            return
        who = person()
        role = t("identity.role_instructor" if who.instructor else "identity.role_student")
        st.caption(t("identity.signed_in_as", name=who.name, role=role))
        st.button(t("identity.sign_out"), key="identity_sign_out", on_click=st.logout)
    elif st.session_state.get(INSTRUCTOR_KEY) is True:
        st.caption(t("identity.instructor_signed_in"))
        st.button(t("identity.sign_out"), key="identity_sign_out",
                  on_click=lambda: st.session_state.pop(INSTRUCTOR_KEY, None))
    elif passphrase_hash() is not None:
        # Streamlit's "Press Enter to submit form" hint is English only; the button says it
        st.html('<style>.st-key-identity_passphrase [data-testid="InputInstructions"]'
                "{display: none !important}</style>")
        with st.expander(t("identity.instructor_sign_in")), st.form(
                "identity_passphrase_form", clear_on_submit=True, border=False):
            st.text_input(t("identity.passphrase"), type="password",
                          key="identity_passphrase", autocomplete="current-password")
            # a callback, not `if st.form_submit_button(...)`: on a session's first run of "/"
            # Streamlit gives the widgets above st.navigation other ids (another active script
            # hash) than on the next run, which then reads the submitted form as empty; a
            # callback runs under the ids the browser sent
            st.form_submit_button(t("identity.sign_in"), on_click=_passphrase_submitted)
        problem = st.session_state.pop(_PASSPHRASE_PROBLEM, None)
        if problem is not None:
            wait = PASSPHRASE_LIMITER.wait(_browser(), identity.PASSPHRASE_TARGET)
            st.error(t(problem, setting=identity.SECRETS_KEY, seconds=max(1, math.ceil(wait))))


_PASSPHRASE_PROBLEM = "_cifarlab_passphrase_problem"


def _passphrase_submitted() -> None:
    """The Sign in button's callback (before the rerun it asks for: the sidebar then shows
    the signed-in state, or the problem kept for it)."""
    problem = try_passphrase(st.session_state.get("identity_passphrase") or "")
    if problem is not None:
        st.session_state[_PASSPHRASE_PROBLEM] = problem


def remember_session() -> None:
    """Write the session id into this browser's cookie, so that closing the tab loses nothing:
    the next visit without a link finds the same runs. The same element on every run (its
    text changes only with the session id): an element that came on the first run and went on
    the next would shift the page below it, and the browser would build the page's widgets
    anew, throwing away the keyboard focus of the student who just pressed Enter in one."""
    if signed_in():   # the browser's own id stays for after sign-out; the person's is not it
        st.html("<script></script>", unsafe_allow_javascript=True)
        return
    st.html(f"<script>{session_cookie_js(session_id())}</script>", unsafe_allow_javascript=True)


SESSION_COOKIE_S = 30 * 86400   # renewed on every visit: a month unused and it is gone


def session_cookie_js(sid: str) -> str:
    """The script that stores ``sid`` in this browser's cookie, as strict as a cookie written
    by the page can be: SameSite=Strict (no other site's page or form sends it), Secure over
    https, a month's Max-Age. Not HttpOnly: a page's script cannot set that, and Streamlit
    1.67 sets cookies from the server only on the HTTP response of a page load, before the
    script has chosen the session (and the id rides in the page's URL anyway, see
    docs/security.md)."""
    if not _valid(sid):   # [A-Za-z0-9_-] only, so it is safe inside the script
        raise ValueError("not a session id")
    return (f"document.cookie = '{COOKIE}={sid}; path=/; max-age={SESSION_COOKIE_S}; "
            "SameSite=Strict' + (location.protocol === 'https:' ? '; Secure' : '');")


def resume_link() -> str:
    """This session's own link (relative): open it on another device to see the same runs."""
    return f"?sid={session_id()}&lang={lang()}"


# Streamlit colours code (st.code and fenced code in lessons) with a fixed Prism palette that is
# too light on its code background: 3.8:1 down to 2.6:1, where WCAG AA asks 4.5:1 (axe's
# color-contrast). No theme option reaches it, so the same hues, darker (all >= 4.5:1 on
# #fafbfd and on the sidebar's #F4F6FA), replace it. !important: Streamlit's own rule is as
# specific and comes later.
_CODE_COLOURS = {
    ".token.comment, .token.punctuation, .token.prolog, .token.doctype, .token.cdata": "#555867",
    ".token.attr-name, .token.property, .token.variable": "#15799e",
    ".token.boolean, .token.constant, .token.symbol": "#177233",
    ".token.number, .token.regex": "#246e69",
    ".token.string, .token.char, .token.attr-value": "#158237",
    ".token.operator, .token.entity, .token.decorator, .token.atrule": "#b45309",
    ".token.keyword, .token.tag, .token.function, .token.class-name, .token.selector": "#0068c9",
}
_CODE_CSS = "<style>" + "".join(
    ", ".join(f"code {sel.strip()}" for sel in sels.split(",")) + f" {{color: {colour} !important}}"
    for sels, colour in _CODE_COLOURS.items()) + (
    # Streamlit's "running" indicator carries an English "Stop" button no setting translates;
    # a student has nothing to stop there (training runs have their own Stop): the animated
    # icon stays, the button goes.
    '[data-testid="stStatusWidget"] button {display: none !important}') + "</style>"


def accessible_document(code: str) -> None:
    """What every page needs for assistive technology and is not a widget: the document's
    language (``<html lang>``, which Streamlit fixes at "en": a screen reader would read
    Spanish with English pronunciation) and readable code colours (above)."""
    # code is one of i18n.LANGUAGES (normalised), so it is safe inside the script
    st.html(f"<script>document.documentElement.lang = '{code}';</script>"
            + _uploader_name_script(code), unsafe_allow_javascript=True)
    st.html(_CODE_CSS + _uploader_css(code))


def _uploader_name_script(code: str) -> str:
    """The uploader button's accessible name in the student's language (axe and screen
    readers do not take it from the CSS word below): an aria-label, set on every uploader
    button now and on those a later rerun draws."""
    word = json.dumps(i18n.t("common.upload_button", code))
    return ("<script>(function () {"
            f"window.cifarlabUploadWord = {word};"
            "const name = () => document.querySelectorAll("
            "'[data-testid=\"stFileUploaderDropzone\"] button').forEach(b => {"
            "  if (b.getAttribute('aria-label') !== window.cifarlabUploadWord)"
            "    b.setAttribute('aria-label', window.cifarlabUploadWord); });"
            "name();"
            "if (!window.cifarlabUploadNamer) {"
            "  window.cifarlabUploadNamer = new MutationObserver(name);"
            "  window.cifarlabUploadNamer.observe(document.body, {childList: true, subtree: true});"
            "}})();</script>")


def _uploader_css(code: str) -> str:
    """Streamlit's file uploader says "Upload" and "200MB per file" in English, and no setting
    translates them. Its button shows our word instead (its accessible name is set to the
    same word by ``_uploader_name_script``; the hidden English is not read), and the size
    line goes: a file over the limit is answered by our own message, in the student's
    language."""
    word = json.dumps(i18n.t("common.upload_button", code))   # a CSS string, quoted
    zone = '[data-testid="stFileUploaderDropzone"]'
    return ("<style>"
            f'{zone} button [data-testid="stMarkdownContainer"] {{display: none !important}}'
            f"{zone} button span[data-has-shortcut]::after "
            f"{{content: {word}; font-size: 0.875rem}}"
            '[data-testid="stFileUploaderDropzoneInstructions"] {display: none !important}'
            "</style>")


def keep_url_state() -> None:
    """Write the language and session id back into the URL (page switches clear it)."""
    want = {"lang": lang(), "sid": session_id()}
    if signed_in():   # a signed-in person's runs follow the sign-in, not a link
        del want["sid"]
        if "sid" in st.query_params:
            del st.query_params["sid"]
    for key, value in want.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


@st.cache_resource(show_spinner=False, max_entries=2)
def _load_data(source: str | None, cache: str | None):
    """The arguments are only the cache key (``data_setting()``): a changed CIFARLAB_DATA or
    CIFARLAB_CACHE is never served the images of the old one. ``load()`` reads the same
    environment itself, so its messages still say the setting came from CIFARLAB_DATA."""
    from cifarlab.core import data

    return data.load()


def _decode_with_a_progress_bar() -> None:
    """The first visit after installing decodes every image once (tens of seconds on a small
    machine): a progress bar says how far it is, rather than a spinner at the bottom. Done
    outside the cached loader, which then reads the finished cache in well under a second."""
    from cifarlab.core import data

    if data.is_cached():
        return
    bar = st.sidebar.progress(0.0, text=t("common.decoding"))  # in view wherever one scrolls

    def show(line: str) -> None:
        fraction = getattr(line, "fraction", None)
        if fraction is not None:
            bar.progress(fraction, text=t("common.decoding_pct", pct=i18n.percent(fraction,
                                                                                   lang(), 0)))

    data.load(on_progress=show)
    bar.empty()


def data_setting() -> tuple[str | None, str | None]:
    """The environment that chooses the data set and its cache (the key of every data cache)."""
    return os.environ.get("CIFARLAB_DATA"), os.environ.get("CIFARLAB_CACHE")


def get_data():
    """The decoded data set, loaded once per server process and shared read-only by every
    session (memory-mapped). On failure: a clear message on the page, and the page stops."""
    try:
        _decode_with_a_progress_bar()
        with st.spinner(t("common.loading_data")):
            return _load_data(*data_setting())
    except CifarLabError as err:
        st.error(t("errors.data_unavailable", reason=err.text(lang())))
        st.stop()


def queue():
    """The server's job queue (one per process; it starts the scheduler on first use). A bad
    hosting setting (environment variable or cifarlab.toml) is shown as its message."""
    from cifarlab.serve import queue as jobs

    try:
        q = jobs.get_queue()
    except CifarLabError as err:
        st.error(err.text(lang()))
        st.stop()
    notice = q.store_notice()   # the run store was damaged at start and recovered: say so once
    if notice is not None and not st.session_state.get("store_notice_seen"):
        st.session_state["store_notice_seen"] = True
        st.warning(notice.text(lang()), icon=":material/restore:")
    return q


def show_error(err: Exception) -> None:
    """A CifarLabError in the student's language; anything else as one plain sentence (its
    details go to the server's log, never to the page: they can hold server paths)."""
    if isinstance(err, CifarLabError):
        st.error(err.text(lang()))
    else:
        log.error("unexpected error on a page", exc_info=err)
        st.error(t("errors.unexpected_plain"))


def lesson(name: str, with_code: bool = True) -> None:
    """A lesson's text in the current language, with the tutorial's lines it explains."""
    st.markdown(i18n.lesson(name, lang()))
    if with_code:
        try:
            code = i18n.code_snippet(name)
        except KeyError:
            return
        with st.expander(t("lesson.code_title"), expanded=False):
            st.code(code, language="python")
