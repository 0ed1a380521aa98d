"""Who is asking and the sidebar's sign-in; the role lives in session state, not a URL/cookie."""
from __future__ import annotations

import functools
import math

import streamlit as st

from cifarlab.errors import STORE_DOWN_KEY, CifarLabError
from cifarlab.serve import identity
from cifarlab.serve.identity import Person
from ui.language import LANG_COOKIE, lang, t
from ui.session import COOKIE_DAYS, browser_id as _browser, claims as _claims
from ui.session import host_secrets as _secrets

INSTRUCTOR_KEY = "_cifarlab_instructor"   # set only by a right passphrase
NICKNAME_KEY = "nickname"                  # an anonymous student's name for others to see
_PASSPHRASE_PROBLEM = "_cifarlab_passphrase_problem"


@functools.cache   # not kept while the run store cannot be opened (a CifarLabError)
def passphrase_limiter() -> identity.AttemptLimiter:
    """Slows down guessing; counted in the run store, so every app server counts the same."""
    from cifarlab.serve import queue as jobs

    return identity.AttemptLimiter(name="instructor passphrase",
                                   counters=jobs.get_queue().counters("passphrase"))


def passphrase_hash() -> str | None:
    value = (_secrets(identity.SECRETS_TABLE) or {}).get(identity.SECRETS_KEY)
    return value if isinstance(value, str) and value.strip() else None


def person() -> Person:
    """The provider's user, else the passphrase's instructor, else this browser (not its IP)."""
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
    return person().id


def sign_in_sidebar() -> None:
    """The provider's buttons, else the instructor's passphrase box where a hash is set."""
    if _secrets("auth") is not None:   # an identity provider is configured
        # st.login / st.logout come back without ?lang=: a cookie keeps the language (a code)
        st.html(f"<script>document.cookie = '{LANG_COOKIE}={lang()}; path=/; max-age="
                f"{COOKIE_DAYS * 86400}; SameSite=Lax';</script>", unsafe_allow_javascript=True)
        if not st.user.get("is_logged_in"):
            st.button(t("identity.sign_in"), key="identity_sign_in", on_click=st.login,
                      type="primary")
            return
        if _claims() is None:   # signed in, but with no (verified) e-mail to be known by
            st.caption(t("identity.no_email"))
        else:
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
            # a callback: on a first run of "/" the widgets above st.navigation get other ids
            # than on the next run, which would read the submitted form as empty
            st.form_submit_button(t("identity.sign_in"), on_click=_passphrase_submitted)
        problem = st.session_state.pop(_PASSPHRASE_PROBLEM, None)
        if problem is not None:
            key, wait = problem
            st.error(t(key, setting=identity.SECRETS_KEY, seconds=max(1, math.ceil(wait))))


def _passphrase_submitted() -> None:
    """The form's callback: the instructor signed in, else (catalog key, seconds to wait)."""
    ss = st.session_state
    try:
        wait = identity.try_passphrase(ss.get("identity_passphrase") or "", passphrase_hash(),
                                       _browser(), passphrase_limiter())
    except identity.IdentityError:   # the secrets file's hash is damaged
        ss[_PASSPHRASE_PROBLEM] = ("errors.identity.bad_hash", 0)
    except CifarLabError:   # the run store (the counts) cannot be reached just now
        ss[_PASSPHRASE_PROBLEM] = (STORE_DOWN_KEY, 0)
    else:
        if wait is None:
            ss[INSTRUCTOR_KEY] = True
        else:
            ss[_PASSPHRASE_PROBLEM] = ("identity.too_many" if wait > 0
                                       else "identity.wrong_passphrase", wait)
